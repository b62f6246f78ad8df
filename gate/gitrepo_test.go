package gate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepoPolicy allows every write tool, so that only the git repository
// rule can refuse.
const gitRepoPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [Read, Write, Edit, MultiEdit, NotebookEdit, Glob, Grep, LS]
sandbox:
  fs:
    deny: ["~/.ssh/**"]
%s  proc: {timeout: 10s, memory: 256m}
ceilings: {memory: 1g, timeout: 60s, runtimes: [runc, runsc], net_hosts: ["pypi.org"]}
`

// TestWritesThatMakeAGitRepositoryAreRefused builds bare repositories in
// a real workspace, part by part, with every write tool, against the real
// policy: the write that would complete a HEAD, objects and refs beside
// each other (or a HEAD and a commondir), and any write into a directory
// that has them, is refused by host_fs.write_protected_git_repository; the
// same writes elsewhere, in a worktree checked out inside a bare
// repository, and reads, are allowed; lifting git_dir lifts it.
func TestWritesThatMakeAGitRepositoryAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, strings.Replace(gitRepoPolicy, "%s", "", 1))
	q, err := e.engine(t).OpenQuery(t.Context(), "q1", nil)
	must(t, err)
	mk := func(rel string, dir bool) {
		p := filepath.Join(e.ws, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		if dir {
			must(t, os.MkdirAll(p, 0o755))
		} else {
			must(t, os.WriteFile(p, []byte("ref: refs/heads/main\n"), 0o644))
		}
	}
	// Two parts of three, in each combination, and a full one.
	mk("a/objects", true) // a: objects and refs; HEAD is the write that completes it
	mk("a/refs", true)
	mk("b/HEAD", false) // b: HEAD and refs; objects/ completes it
	mk("b/refs/heads", true)
	mk("c/HEAD", false) // c: HEAD and objects; refs/ completes it
	mk("c/objects/pack", true)
	mk("deep/x/y/HEAD", false) // a full one, deep down
	mk("deep/x/y/objects", true)
	mk("deep/x/y/refs", true)
	mk("two/HEAD", false) // two parts only: config here is harmless
	mk("two/objects", true)
	mk("deep/x/y/config", false)
	mk("nb/HEAD", false)
	mk("nb/objects", true)
	mk("nb/refs", true)
	mk("nb/n.ipynb", false)
	// A linked worktree's git directory: HEAD and a commondir naming a
	// directory with objects, refs and the config git then reads.
	mk("wt1/HEAD", false) // commondir completes it
	mk("wt2/commondir", false)
	must(t, os.WriteFile(filepath.Join(e.ws, "wt2/commondir"), []byte("../common\n"), 0o644)) // HEAD completes it
	mk("wt3/HEAD", false)                                                                     // a full one
	mk("wt3/commondir", false)
	mk("common/objects", true) // what commondir names: two parts, no HEAD
	mk("common/refs", true)
	// A bare repository with a worktree checked out inside it (git clone
	// --bare; git worktree add main), and one checked out at its hooks.
	mk("proj.git/HEAD", false)
	mk("proj.git/objects", true)
	mk("proj.git/refs", true)
	mk("proj.git/worktrees/main/HEAD", false)
	mk("proj.git/worktrees/main/commondir", false)
	mk("proj.git/main/.git", false)
	mk("proj.git/main/src/app.py", false)
	mk("proj.git/hooks/.git", false)

	ws := e.ws
	write := func(rel string) map[string]any {
		return map[string]any{"file_path": filepath.Join(ws, rel), "content": "x"}
	}
	edit := func(rel string) map[string]any {
		return map[string]any{"file_path": filepath.Join(ws, rel), "old_string": "ref", "new_string": "x"}
	}
	refused := []struct {
		name  string
		tool  string
		input map[string]any
		repo  string
	}{
		{"HEAD beside objects and refs", "Write", write("a/HEAD"), "a"},
		{"head in another case (a case-insensitive file system opens it)", "Write", write("a/head"), "a"},
		{"a file under objects beside HEAD and refs", "Write", write("b/objects/info/alternates"), "b"},
		{"a file under refs beside HEAD and objects", "Write", write("c/refs/heads/main"), "c"},
		{"config in a repository", "Write", write("deep/x/y/config"), "deep/x/y"},
		{"an edit of config in a repository", "Edit", edit("deep/x/y/config"), "deep/x/y"},
		{"a multi-edit of HEAD in a repository", "MultiEdit", map[string]any{"file_path": filepath.Join(ws, "deep/x/y/HEAD"), "edits": []any{map[string]any{"old_string": "ref", "new_string": "x"}}}, "deep/x/y"},
		{"a hook in a repository", "Write", write("deep/x/y/hooks/post-checkout"), "deep/x/y"},
		{"a notebook in a repository", "NotebookEdit", map[string]any{"notebook_path": filepath.Join(ws, "nb/n.ipynb"), "new_source": "x"}, "nb"},
		{"through .. in the path", "Write", write("src/../deep/x/y/config"), "deep/x/y"},
		{"commondir beside HEAD", "Write", write("wt1/commondir"), "wt1"},
		{"HEAD beside commondir", "Write", write("wt2/HEAD"), "wt2"},
		{"a file in a directory with HEAD and commondir", "Write", write("wt3/config"), "wt3"},
		{"a bare repository's config, with a worktree inside it", "Write", write("proj.git/config"), "proj.git"},
		{"a linked worktree's git directory inside a bare repository", "Write", write("proj.git/worktrees/main/config.worktree"), "proj.git/worktrees/main"},
		{"a hook of a bare repository whose hooks are a checkout", "Write", write("proj.git/hooks/post-checkout"), "proj.git"},
	}
	for _, c := range refused {
		d := decide(t, q, c.tool, c.input, nil)
		if d.Decision != "deny" || d.Rule != "host_fs.write_protected_git_repository" || !strings.Contains(d.Reason, filepath.Join(ws, c.repo)+" would be a git repository") {
			t.Errorf("%s: %s %s: %q", c.name, d.Decision, d.Rule, d.Reason)
		}
	}
	allowed := []struct {
		name  string
		tool  string
		input map[string]any
	}{
		{"config beside two of the three parts", "Write", write("two/config")},
		{"a third part that is not one of the three", "Write", write("two/packed-refs")},
		{"HEAD in a directory of its own", "Write", write("lone/HEAD")},
		{"objects in an ordinary tree", "Write", write("src/objects/model.py")},
		{"a read of a repository's config", "Read", map[string]any{"file_path": filepath.Join(ws, "deep/x/y/config")}},
		{"commondir in a directory of its own", "Write", write("lone/commondir")},
		{"config in what a commondir would name, with no HEAD", "Write", write("common/config")},
		{"a file in a worktree checked out inside a bare repository", "Write", write("proj.git/main/src/app.py")},
		{"a new file deep in that worktree", "Write", write("proj.git/main/a/b/c.txt")},
		{"an edit in that worktree", "Edit", edit("proj.git/main/src/app.py")},
	}
	for _, c := range allowed {
		if d := decide(t, q, c.tool, c.input, nil); d.Decision != "allow" {
			t.Errorf("%s: %s %s: %q", c.name, d.Decision, d.Rule, d.Reason)
		}
	}

	// A symlink to a repository is judged where it leads.
	must(t, os.Symlink(filepath.Join(ws, "deep/x/y"), filepath.Join(ws, "innocent")))
	if d := decide(t, q, "Write", write("innocent/config"), nil); d.Rule != "host_fs.write_protected_git_repository" {
		t.Errorf("through a symlink: %s %s: %q", d.Decision, d.Rule, d.Reason)
	}

	// Lifting git_dir lifts the rule, as it lifts writes into .git.
	lifted := newEnv(t, strings.Replace(gitRepoPolicy, "%s", "    write_protect_allow: [git_dir, git_config]\n", 1))
	must(t, os.MkdirAll(filepath.Join(lifted.ws, "r/objects"), 0o755))
	must(t, os.MkdirAll(filepath.Join(lifted.ws, "r/refs"), 0o755))
	lq, err := lifted.engine(t).OpenQuery(t.Context(), "q1", nil)
	must(t, err)
	if d := decide(t, lq, "Write", map[string]any{"file_path": filepath.Join(lifted.ws, "r/HEAD"), "content": "x"}, nil); d.Decision != "allow" {
		t.Errorf("git_dir lifted: %s %s: %q", d.Decision, d.Rule, d.Reason)
	}
}
