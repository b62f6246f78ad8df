package docker

import (
	"strings"
	"testing"
)

// FuzzDenyGlob checks the glob matcher never panics and that a pattern
// without wildcards matches exactly the path it names.
func FuzzDenyGlob(f *testing.F) {
	f.Add("**/.env", "a/b/.env")
	f.Add("home/*/.ssh/**", "home/u/.ssh/id")
	f.Add("a/**/b/**/c", "a/x/b/c")
	f.Add("[", "x")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		p, n := splitPath(pattern), splitPath(name)
		if len(p) > 16 || len(n) > 16 {
			return
		}
		got := matchComps(p, n)
		if !strings.ContainsAny(pattern, `*?[\`) {
			if want := strings.Join(p, "/") == strings.Join(n, "/"); got != want {
				t.Fatalf("match(%q, %q) = %v, want %v for a literal pattern", pattern, name, got, want)
			}
		}
	})
}
