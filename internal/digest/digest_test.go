package digest

import "testing"

func TestSHA256(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		if got := SHA256([]byte(tc.in)); got != tc.want {
			t.Errorf("SHA256(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
