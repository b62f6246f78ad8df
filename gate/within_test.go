package gate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGrepReadsWhatItSearches: a Grep of a directory is judged by the files
// Claude Code's Grep (ripgrep) would read below it, not only by its root.
func TestGrepReadsWhatItSearches(t *testing.T) {
	t.Parallel()
	pol := strings.Replace(testPolicy, `"~/.*"]`, `"~/.*", "**/.git/hooks/**"]`, 1)
	e := newEnv(t, pol)
	must(t, os.MkdirAll(filepath.Join(e.ws, "app", "lib"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.ws, "app", ".env"), []byte("KEY=1"), 0o600))
	must(t, os.WriteFile(filepath.Join(e.ws, "app", "lib", "a.py"), []byte("x"), 0o644))
	must(t, os.MkdirAll(filepath.Join(e.ws, "repo", ".git", "hooks"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.ws, "repo", ".git", "hooks", "pre-commit"), []byte("x"), 0o755))
	must(t, os.Symlink(filepath.Join(e.ws, "notes.txt"), filepath.Join(e.ws, "src", ".env")))
	must(t, os.MkdirAll(filepath.Join(e.dir, "elsewhere"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.dir, "elsewhere", ".env"), []byte("KEY=2"), 0o600))
	must(t, os.Symlink(filepath.Join(e.dir, "elsewhere"), filepath.Join(e.ws, "repo", "linked")))
	q, err := e.engine(t).OpenQuery(t.Context(), "q", nil)
	must(t, err)
	tests := []struct {
		name     string
		input    map[string]any
		decision string
		rule     string
		reason   string
	}{
		{"the workspace, which holds app/.env", map[string]any{"pattern": "KEY", "path": e.ws}, "deny", "host_fs.deny_glob_within", "would also read " + filepath.Join(e.ws, "app", ".env") + `, which the policy's fs.deny pattern "**/.env"`},
		{"no path: the cwd, the workspace", map[string]any{"pattern": "KEY"}, "deny", "host_fs.deny_glob_within", filepath.Join(e.ws, "app", ".env")},
		{"the directory holding .env", map[string]any{"pattern": "KEY", "path": "app"}, "deny", "host_fs.deny_glob_within", filepath.Join(e.ws, "app", ".env")},
		{"a subdirectory without one", map[string]any{"pattern": "KEY", "path": "app/lib"}, "allow", "host_fs.inside_workspace", ""},
		{"a glob of file names that leaves .env out", map[string]any{"pattern": "KEY", "path": e.ws, "glob": "*.py"}, "allow", "host_fs.inside_workspace", ""},
		{"a glob that takes .env in", map[string]any{"pattern": "KEY", "path": e.ws, "glob": ".env*"}, "deny", "host_fs.deny_glob_within", ".env"},
		{"a glob the sidecar cannot apply is assumed to search everything", map[string]any{"pattern": "KEY", "path": "app", "glob": "{*.py,*.md}"}, "deny", "host_fs.deny_glob_within", ".env"},
		{"a symlink named .env is not followed by the search", map[string]any{"pattern": "KEY", "path": "src"}, "allow", "host_fs.inside_workspace", ""},
		{"a symlinked directory holding .env is not followed either", map[string]any{"pattern": "KEY", "path": "repo"}, "allow", "host_fs.inside_workspace", ""},
		{"a .git directory is skipped without a glob", map[string]any{"pattern": "x", "path": "repo"}, "allow", "host_fs.inside_workspace", ""},
		{"and searched with one", map[string]any{"pattern": "x", "path": "repo", "glob": "*"}, "deny", "host_fs.deny_glob_within", "**/.git/hooks/**"},
		{"a Grep of one file is judged as that file", map[string]any{"pattern": "KEY", "path": "app/lib/a.py"}, "allow", "host_fs.inside_workspace", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := decide(t, q, "Grep", tt.input, nil)
			if d.Decision != tt.decision || d.Rule != tt.rule || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("Grep %v = %s %s %q; want %s %s containing %q", tt.input, d.Decision, d.Rule, d.Reason, tt.decision, tt.rule, tt.reason)
			}
		})
	}
}
