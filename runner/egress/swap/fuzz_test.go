package swap

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// FuzzScrub checks that Scrub never emits a secret's value, whatever the
// value, the input and the sizes of the reads, and that without a failure
// its output does not depend on those sizes.
func FuzzScrub(f *testing.F) {
	f.Add("ghp_R3alT0ken", []byte("token ghp_R3alT0ken ghp_R3alT0ken"), []byte{1, 2, 3})
	f.Add("fXYZ-overlap", []byte("fXYZ-overlapXYZ-overlap"), []byte{5})
	f.Add("pw/with+chars==", []byte("cHcvd2l0aCtjaGFycz09 pw%2Fwith%2Bchars%3D%3D"), []byte{7, 1})
	f.Add("ab", []byte("aaaaab"), []byte{1})
	f.Fuzz(func(t *testing.T, value string, in []byte, sizes []byte) {
		const sentinel = "gksentinel_0123456789abcdef0123456789abcdef"
		s, err := New([]runner.Secret{{Name: "f", Hosts: []string{"example.com"}, Inject: runner.SecretPlace{Body: true}, Value: runner.NewHidden(value)}},
			map[string]string{"f": sentinel})
		if err != nil {
			return // a value New refuses is never scrubbed
		}
		var sz []int
		for _, b := range sizes {
			sz = append(sz, 1+int(b))
		}
		if len(sz) == 0 {
			sz = []int{1}
		}
		got, err := io.ReadAll(s.Scrub(&chunks{data: bytes.Clone(in), sizes: sz}, []string{"f"}))
		if bytes.Contains(got, []byte(value)) {
			t.Fatalf("Scrub emitted the value (err %v)", err)
		}
		for _, form := range s.secrets[0].forms {
			if bytes.Contains(got, []byte(form)) {
				t.Fatalf("Scrub emitted a form of the value (err %v)", err)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrUnscrubbable) {
				t.Fatalf("Scrub failed with %v", err)
			}
			return
		}
		whole, _ := io.ReadAll(s.Scrub(bytes.NewReader(in), []string{"f"}))
		if !bytes.Equal(got, whole) {
			t.Fatalf("reads of %v: %q; one read: %q", sz, got, whole)
		}
	})
}

// FuzzWatch checks that Watch finds a sentinel wherever it is split.
func FuzzWatch(f *testing.F) {
	f.Add([]byte("abc"), []byte("def"), []byte{3, 1})
	s := newTestSet(f)
	f.Fuzz(func(t *testing.T, before, after []byte, sizes []byte) {
		var sz []int
		for _, b := range sizes {
			sz = append(sz, 1+int(b)%64)
		}
		if len(sz) == 0 {
			sz = []int{1}
		}
		in := append(append(bytes.Clone(before), ghSentinel...), after...)
		_, err := io.ReadAll(s.Watch(&chunks{data: in, sizes: sz}, "example.org"))
		var r *Refusal
		if !errors.As(err, &r) || r.Rule != RuleWrongHost {
			t.Fatalf("Watch = %v, want %s", err, RuleWrongHost)
		}
	})
}
