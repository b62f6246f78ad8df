package hostpath_test

import (
	"path/filepath"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
)

// FuzzNormalize checks that Normalize never panics, that what it returns
// is absolute and clean, and that inside the test tree its answer is
// stable: normalizing Abs gives the same Path facts, and Resolved is a
// fixed point.
func FuzzNormalize(f *testing.F) {
	tr := makeTree(f, f.TempDir())
	opts := hostpath.Options{Home: tr.home, Cwd: tr.ws}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := hostpath.Normalize(raw, opts)
		if err != nil {
			return
		}
		if p.Raw != raw {
			t.Errorf("Normalize(%q).Raw = %q", raw, p.Raw)
		}
		for _, s := range []string{p.Abs, p.Resolved} {
			if !filepath.IsAbs(s) || filepath.Clean(s) != s {
				t.Fatalf("Normalize(%q) = %+v: %q is not absolute and clean", raw, p, s)
			}
		}
		if !hostpath.Within(p.Abs, tr.root) {
			return
		}
		again, err := hostpath.Normalize(p.Abs, opts)
		if err != nil || again.Abs != p.Abs || again.Resolved != p.Resolved {
			t.Errorf("Normalize(%q) = %+v, but Normalize(Abs) = %+v, %v", raw, p, again, err)
		}
		if len(p.Resolved) > hostpath.MaxPathBytes || !hostpath.Within(p.Resolved, tr.root) {
			return
		}
		fixed, err := hostpath.Normalize(p.Resolved, opts)
		if err != nil || fixed.Resolved != p.Resolved {
			t.Errorf("Normalize(%q).Resolved = %q, but Normalize(Resolved) = %+v, %v", raw, p.Resolved, fixed, err)
		}
	})
}
