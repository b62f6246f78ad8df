package hostpath

import "testing"

// TestAbsoluteIsLexical covers paths whose resolution depends on the host
// (such as /root): only the lexical half of Normalize runs here.
func TestAbsoluteIsLexical(t *testing.T) {
	t.Parallel()
	opts := Options{Home: "/home/dev", Cwd: "/srv/app"}
	tests := []struct {
		name string
		raw  string
		want string
	}{
		{name: "the classic traversal is cleaned before anything is resolved", raw: "/srv/app/../../root/.ssh/id_rsa", want: "/root/.ssh/id_rsa"},
		{name: "a relative traversal climbs out of cwd", raw: "../../etc/shadow", want: "/etc/shadow"},
		{name: "double slashes are one", raw: "//etc//passwd", want: "/etc/passwd"},
		{name: "a leading dot-slash is cwd", raw: "./.env", want: "/srv/app/.env"},
		{name: "tilde climbing to the root stops there", raw: "~/../../../..", want: "/"},
		{name: "tilde-slash alone is home", raw: "~/", want: "/home/dev"},
		{name: "a file named like tilde is relative when quoted as ./", raw: "./~", want: "/srv/app/~"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := absolute(tc.raw, opts)
			if err != nil {
				t.Fatalf("absolute(%q) error = %v", tc.raw, err)
			}
			if got != tc.want {
				t.Errorf("absolute(%q) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}
