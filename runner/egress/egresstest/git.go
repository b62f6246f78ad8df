package egresstest

import (
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// GitRepo is a git repository served over smart HTTP by the host's
// `git http-backend` (through net/http/cgi), behind Auth. Serve it with
// TLSServer and clone https://<user>:<password>@<name>/<Name>.git (git
// sends a URL's credentials as Basic auth after the 401 challenge).
type GitRepo struct {
	// Name is the repository's name: its URL path is /<Name>.git.
	Name string
	// Commit is the hash of its one commit, on branch main.
	Commit string
	// Files are the commit's files (path → content).
	Files map[string]string
	// Refused counts requests without the credential.
	Refused atomic.Int64

	h http.Handler
}

// NewGitRepo makes a bare repository called name in a temporary directory
// with one commit of files and returns its server behind auth. It needs
// git on the host (a test fails without it).
func NewGitRepo(t testing.TB, auth Auth, name string, files map[string]string) *GitRepo {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("egresstest: the git fixture needs git on the host: %v", err)
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	root := filepath.Join(dir, "repos")
	// No system or user configuration: the commit is the same whoever runs it.
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_AUTHOR_NAME=egresstest", "GIT_AUTHOR_EMAIL=egresstest@example.invalid", "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z",
		"GIT_COMMITTER_NAME=egresstest", "GIT_COMMITTER_EMAIL=egresstest@example.invalid", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), gitPath, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("egresstest: git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	git(work, "init", "-q", "-b", "main")
	for _, p := range sortedKeys(files) {
		f := filepath.Join(work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(files[p]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(work, "add", "-A")
	git(work, "commit", "-q", "-m", "egresstest: one commit")
	g := &GitRepo{Name: name, Commit: git(work, "rev-parse", "HEAD"), Files: files}
	git(dir, "clone", "-q", "--bare", work, filepath.Join(root, name+".git"))
	g.h = auth.Wrap(&cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + dir},
	}, &g.Refused)
	return g
}

// ServeHTTP serves the repository.
func (g *GitRepo) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.h.ServeHTTP(w, r) }
