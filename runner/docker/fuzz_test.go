package docker

import (
	"path"
	"strings"
	"testing"
)

// FuzzCleanWorkspacePath checks that every name the workspace accepts stays
// inside /workspace.
func FuzzCleanWorkspacePath(f *testing.F) {
	for _, s := range []string{"main.py", "a/b/c.txt", "../x", "a/../../x", "/etc/passwd", "./y", "a//b", "..", ".", "", "a\x00b", `a\..\b`, "...", "..a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		clean, err := cleanWorkspacePath(name)
		if err != nil {
			return
		}
		if clean == "" || strings.HasPrefix(clean, "/") || clean != path.Clean(clean) {
			t.Fatalf("cleanWorkspacePath(%q) = %q: not a clean relative path", name, clean)
		}
		full := path.Join(workspaceDir, clean)
		if !strings.HasPrefix(full, workspaceDir+"/") {
			t.Fatalf("cleanWorkspacePath(%q) = %q, which lands at %s outside %s", name, clean, full, workspaceDir)
		}
	})
}

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
