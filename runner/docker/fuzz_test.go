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
