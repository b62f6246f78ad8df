package server_test

// Issue 10's gate classes, each through the real sidecar over a real socket
// with the real OPA engine: the write-protect list (sections 1, 1b), Grep
// glob lists (3), process-relative paths (4), operator findings gatekeeper
// cannot read (6), and case and spelling variants of protected names (7).
// Every case asserts the rule that decides.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
)

// shippedPolicy is sandbox.policy.yaml with its workspace at ./ws, where the
// harness makes it.
func shippedPolicy(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../sandbox.policy.yaml")
	must(t, err)
	s := string(b)
	if !strings.Contains(s, "workspace_root: ./workspace\n") {
		t.Fatal("sandbox.policy.yaml: no `workspace_root: ./workspace` line to point at the test's workspace")
	}
	return strings.Replace(s, "workspace_root: ./workspace\n", "workspace_root: ./ws\n", 1)
}

// writeFiles writes files (path relative to dir → content), making their
// directories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

type decideCase struct {
	name, tool string
	input      map[string]any
	decision   string
	rule       string
	reason     string // a part of the reason, or ""
}

func (c *client) check(t *testing.T, q string, tests []decideCase) {
	t.Helper()
	for _, tc := range tests {
		in, err := json.Marshal(tc.input)
		must(t, err)
		r := c.decide(q, tc.tool, string(in), "toolu_sec", "")
		if r["type"] != "decision" || r["decision"] != tc.decision || r["rule"] != tc.rule || !strings.Contains(fmt.Sprint(r["reason"]), tc.reason) {
			t.Errorf("%s: %s %v\n  got %v %v (%v)\n  want %s %s with %q", tc.name, tc.tool, tc.input, r["decision"], r["rule"], r["reason"], tc.decision, tc.rule, tc.reason)
		}
	}
}

func write(path string) map[string]any { return map[string]any{"file_path": path, "content": "x"} }

// TestWriteProtectAgentConfigurationAndCodeRunningFiles: with the shipped
// policy, no host write tool may create or change the files through which
// Claude Code, git, a shell or an editor would run code on the host, even
// inside the workspace; reading them stays allowed (section 1).
func TestWriteProtectAgentConfigurationAndCodeRunningFiles(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: shippedPolicy(t)})
	ws := filepath.Join(h.dir, "ws")
	writeFiles(t, ws, map[string]string{
		".claude/settings.json": "{}", ".mcp.json": "{}", "CLAUDE.md": "# notes", ".git/HEAD": "ref: refs/heads/main",
		".git/config": "[core]", "sub/.git": "gitdir: ../elsewhere", "src/main.py": "print(1)", ".vscode/settings.json": "{}",
	})
	must(t, os.Symlink(".claude", filepath.Join(ws, "cfg")))
	must(t, os.Symlink(filepath.Join(ws, ".git", "hooks"), filepath.Join(ws, "hooks-link")))
	must(t, os.Symlink("hooks-link", filepath.Join(ws, "chain")))
	must(t, os.Symlink("later/.claude", filepath.Join(ws, "not-yet")))
	c := h.connect(t)
	q := c.open("")
	const wp = "host_fs.write_protected"
	edit := func(p string) map[string]any {
		return map[string]any{"file_path": p, "old_string": "a", "new_string": "b"}
	}
	c.check(t, q, []decideCase{
		{"a model-written settings file with a hook", "Write", write(filepath.Join(ws, ".claude/settings.json")), "deny", wp, "agent_config"},
		{"a new local settings file", "Write", write(".claude/settings.local.json"), "deny", wp, "Claude Code's own configuration"},
		{"a slash command", "Write", write(".claude/commands/deploy.md"), "deny", wp, ""},
		{"a subagent", "Write", write(".claude/agents/helper.md"), "deny", wp, ""},
		{"a skill", "Write", write(".claude/skills/x/SKILL.md"), "deny", wp, ""},
		{"a hook script", "Write", write(".claude/hooks/pre.sh"), "deny", wp, ""},
		{"a .claude directory deep in the tree", "Write", write("a/b/.claude/settings.json"), "deny", wp, ""},
		{"an MCP server list", "Edit", edit(".mcp.json"), "deny", wp, "agent_config"},
		{"Claude Code's user state", "Write", write(".claude.json"), "deny", wp, ""},
		{"a memory file with imports", "Write", write("CLAUDE.md"), "deny", wp, "agent_memory"},
		{"a local memory file in a subdirectory", "Write", write("pkg/CLAUDE.local.md"), "deny", wp, "agent_memory"},
		{"a plugin manifest", "Write", write("p/.claude-plugin/plugin.json"), "deny", wp, ""},
		{"a workload-identity profile Claude Code reads at start", "Write", write("h/.config/anthropic/profile.json"), "deny", wp, ""},
		{"MultiEdit of settings", "MultiEdit", map[string]any{"file_path": ".claude/settings.json", "edits": []any{}}, "deny", wp, ""},
		{"NotebookEdit under .claude", "NotebookEdit", map[string]any{"notebook_path": ".claude/n.ipynb", "new_source": "x"}, "deny", wp, ""},
		{"git's config", "Edit", edit(".git/config"), "deny", "host_fs.deny_glob", ".git/config"},
		{"a git hook", "Write", write(".git/hooks/pre-commit"), "deny", wp, "git_hooks"},
		{"git's HEAD", "Write", write(".git/HEAD"), "deny", wp, "git_dir"},
		{"a git object", "Write", write(".git/objects/ab/cdef"), "deny", wp, "git_dir"},
		{"a submodule's hook", "Write", write(".git/modules/lib/hooks/post-checkout"), "deny", wp, "git_hooks"},
		{"a .git file redirecting git", "Write", write("sub/.git"), "deny", wp, "git_dir"},
		{"a new .git file", "Write", write("other/.git"), "deny", wp, "git_dir"},
		{".gitmodules", "Write", write(".gitmodules"), "deny", wp, "git_modules"},
		{"a .gitconfig", "Write", write(".gitconfig"), "deny", wp, "git_user_config"},
		{"git's XDG config", "Write", write(".config/git/config"), "deny", wp, "git_user_config"},
		{".bashrc", "Write", write(".bashrc"), "deny", wp, "shell_config"},
		{".zshenv", "Write", write(".zshenv"), "deny", wp, "shell_config"},
		{"fish's config", "Write", write(".config/fish/config.fish"), "deny", wp, "shell_config"},
		{".ripgreprc", "Write", write(".ripgreprc"), "deny", wp, "ripgrep_config"},
		{"VS Code tasks", "Write", write(".vscode/tasks.json"), "deny", wp, "ide_config"},
		{"IntelliJ's workspace", "Write", write(".idea/workspace.xml"), "deny", wp, "ide_config"},
		{"a dev container", "Write", write(".devcontainer/devcontainer.json"), "deny", wp, "ide_config"},
		{".envrc, from the shipped list", "Write", write(".envrc"), "deny", wp, "sandbox.fs.write_protect"},
		{".npmrc, from the shipped list", "Write", write("web/.npmrc"), "deny", wp, "sandbox.fs.write_protect"},
		{"a husky hook, from the shipped list", "Write", write(".husky/pre-commit"), "deny", wp, "sandbox.fs.write_protect"},
		{"pre-commit's config, from the shipped list", "Write", write(".pre-commit-config.yaml"), "deny", wp, ""},
		{"mise's config, trusted by path, from the shipped list", "Write", write("svc/.mise.toml"), "deny", wp, "sandbox.fs.write_protect"},
		{"a .pth file Python runs at start, from the shipped list", "Write", write(".venv/lib/python3.12/site-packages/x.pth"), "deny", wp, "sandbox.fs.write_protect"},
		{"sitecustomize, from the shipped list", "Write", write("sitecustomize.py"), "deny", wp, "sandbox.fs.write_protect"},
		{"through a link to .claude", "Write", write("cfg/settings.json"), "deny", wp, "resolves to " + filepath.Join(ws, ".claude", "settings.json")},
		{"through a link to .git/hooks", "Write", write("hooks-link/post-merge"), "deny", wp, "git_hooks"},
		{"climbing back into .claude", "Write", write("src/../.claude/settings.json"), "deny", wp, ""},
		{"doubled and dotted slashes", "Write", write(".//./.claude//settings.json"), "deny", wp, ""},
		{"a chain of links into .git/hooks", "Write", write("chain/pre-push"), "deny", wp, "git_hooks"},
		{"a new file under a dangling link to a .claude not made yet", "Write", write("not-yet/settings.json"), "deny", wp, "resolves to " + filepath.Join(ws, "later", ".claude", "settings.json")},
		{"source code stays writable", "Write", write("src/main.py"), "allow", "host_fs.inside_workspace", ""},
		{"a look-alike name stays writable", "Write", write(".claudex/settings.json"), "allow", "host_fs.inside_workspace", ""},
		{"a Makefile stays writable", "Write", write("Makefile"), "allow", "host_fs.inside_workspace", ""},
		{"settings stay readable", "Read", map[string]any{"file_path": ".claude/settings.json"}, "allow", "host_fs.inside_workspace", ""},
		{"the MCP list stays readable", "Read", map[string]any{"file_path": ".mcp.json"}, "allow", "host_fs.inside_workspace", ""},
		{"git's HEAD stays readable", "Read", map[string]any{"file_path": ".git/HEAD"}, "allow", "host_fs.inside_workspace", ""},
		{"a Grep of .claude stays allowed", "Grep", map[string]any{"pattern": "x", "path": ".claude"}, "allow", "host_fs.inside_workspace", ""},
		{"git's config is a secret and stays unreadable", "Read", map[string]any{"file_path": ".git/config"}, "deny", "host_fs.deny_glob", ""},
	})
}

// TestWriteProtectCoversSrtMandatoryDenyPaths replays the write
// expectations of Anthropic's sandbox runtime (srt, test/sandbox/
// mandatory-deny-paths.test.ts, src/sandbox/sandbox-utils.ts) against
// gatekeeper's built-in list alone (a policy with no write_protect of its
// own): every path srt blocks is refused, at the top of the workspace and
// nested (srt's macOS patterns are **/name), and srt's allowGitConfig is
// write_protect_allow: [git_dir, git_config], which still leaves hooks
// protected (section 1b).
func TestWriteProtectCoversSrtMandatoryDenyPaths(t *testing.T) {
	t.Parallel()
	const pol = `version: 1
workspace_root: ./ws
tools:
  allow: [Write, Edit]
sandbox:
  fs: {write_protect_allow: %s}
`
	srtFiles := []string{".gitconfig", ".gitmodules", ".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".profile", ".ripgreprc", ".mcp.json"}
	srtDirs := []string{".vscode/settings.json", ".idea/workspace.xml", ".claude/commands/test.md", ".claude/agents/test-agent.md", ".git/hooks/pre-commit", ".git/config"}
	var cases []decideCase
	for _, base := range []string{"", "nested/deeper/"} {
		for _, p := range append(srtFiles, srtDirs...) {
			cases = append(cases, decideCase{"srt blocks " + base + p, "Write", write(base + p), "deny", "host_fs.write_protected", ""})
		}
	}
	// srt lets these through; gatekeeper is stricter by design: every
	// path under .git, and all of .claude, is write-protected.
	for _, p := range []string{".git/objects/test-obj", ".git/refs/heads/main", ".git/index", ".claude/some-other-file.txt"} {
		cases = append(cases, decideCase{"stricter than srt: " + p, "Write", write(p), "deny", "host_fs.write_protected", ""})
	}
	cases = append(cases, decideCase{"srt and gatekeeper allow a plain file", "Write", write("safe-file.txt"), "allow", "host_fs.inside_workspace", ""})
	h := start(t, options{policy: fmt.Sprintf(pol, "[]")})
	c := h.connect(t)
	c.check(t, c.open(""), cases)

	lifted := start(t, options{policy: fmt.Sprintf(pol, "[git_dir, git_config]")})
	lc := lifted.connect(t)
	lc.check(t, lc.open(""), []decideCase{
		{"with git config lifted, .git/config is writable", "Edit", map[string]any{"file_path": ".git/config", "old_string": "a", "new_string": "b"}, "allow", "host_fs.inside_workspace", ""},
		{"with git config lifted, a nested .git/config is writable", "Write", write("vendor/lib/.git/config"), "allow", "host_fs.inside_workspace", ""},
		{"with git config lifted, hooks stay protected", "Write", write(".git/hooks/pre-commit"), "deny", "host_fs.write_protected", "git_hooks"},
		{"with git config lifted, .gitconfig stays protected", "Write", write(".gitconfig"), "deny", "host_fs.write_protected", "git_user_config"},
		{"with git config lifted, agent configuration stays protected", "Write", write(".claude/settings.json"), "deny", "host_fs.write_protected", "agent_config"},
	})
}

// TestWriteProtectionCannotBeLiftedByAnOverride: a query's sandboxPolicy
// may add write-protect globs but neither drop the operator's nor lift a
// built-in group.
func TestWriteProtectionCannotBeLiftedByAnOverride(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: shippedPolicy(t)})
	c := h.connect(t)
	for _, tc := range []struct{ override, violation string }{
		{`{"fs":{"write_protect_allow":["git_dir"]}}`, `sandbox.fs.write_protect_allow cannot add "git_dir": only the policy file lifts write protection`},
		{`{"fs":{"write_protect":[]}}`, `sandbox.fs.write_protect cannot drop "**/.envrc"`},
		{`{"fs":{"write_protect_allow":["agent_config"]}}`, `"agent_config" cannot be lifted`},
	} {
		r := c.do(`{"type":"open_query","id":"o","sandbox_policy":` + tc.override + `}`)
		v, _ := json.Marshal(r["violations"])
		if r["code"] != "policy_override_rejected" || !strings.Contains(string(v), strings.ReplaceAll(tc.violation, `"`, `\"`)) {
			t.Errorf("override %s: %v, want a violation %q", tc.override, r, tc.violation)
		}
	}
	// Lists in an override replace the base list: keep the shipped entries.
	base, err := policy.Decode("p.yaml", []byte(shippedPolicy(t)), h.dir)
	must(t, err)
	grown, err := json.Marshal(map[string]any{"fs": map[string]any{"write_protect": append(base.Sandbox.FS.WriteProtect, "**/deploy")}})
	must(t, err)
	q := c.open(string(grown))
	c.check(t, q, []decideCase{
		{"an override adds a write-protect glob", "Write", write("deploy/run.sh"), "deny", "host_fs.write_protected", "sandbox.fs.write_protect"},
	})
}

// TestWriteProtectAndDenyIgnoreCaseAndSpelling: on a case-insensitive file
// system (macOS, Windows, ext4 casefold) .CLAUDE and .GIT/config are the
// protected files, and HFS+ and NTFS ignore more than case (section 7).
func TestWriteProtectAndDenyIgnoreCaseAndSpelling(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: shippedPolicy(t)})
	ws := filepath.Join(h.dir, "ws")
	writeFiles(t, ws, map[string]string{"app/.ENV": "KEY=1", "app/main.py": "x"})
	c := h.connect(t)
	q := c.open("")
	const wp = "host_fs.write_protected"
	c.check(t, q, []decideCase{
		{"settings under .CLAUDE", "Write", write(".CLAUDE/settings.json"), "deny", wp, ""},
		{"settings under .Claude with a capital file name", "Write", write(".Claude/Settings.Local.json"), "deny", wp, ""},
		{".MCP.JSON", "Write", write(".MCP.JSON"), "deny", wp, ""},
		{"Claude.md", "Write", write("Claude.md"), "deny", wp, "agent_memory"},
		{".GIT/config", "Write", write(".GIT/config"), "deny", "host_fs.deny_glob", "**/.git/config"},
		{".Git/hooks", "Write", write(".Git/hooks/pre-commit"), "deny", wp, ""},
		{"a dotless i in .gıt", "Write", write(".gıt/hooks/pre-commit"), "deny", wp, ""},
		{"a zero-width non-joiner HFS+ ignores", "Write", write(".g\u200cit/hooks/pre-commit"), "deny", wp, ""},
		{"a trailing dot NTFS ignores", "Write", write(".claude./settings.json"), "deny", wp, ""},
		{"an NTFS stream suffix", "Write", write(".mcp.json::$DATA"), "deny", wp, ""},
		{".BASHRC", "Write", write(".BASHRC"), "deny", wp, "shell_config"},
		{"a ligature ext4 casefold reads as fi", "Write", write(".gitconﬁg"), "deny", wp, "git_user_config"},
		{"a ligature in git's config", "Read", map[string]any{"file_path": ".git/conﬁg"}, "deny", "host_fs.deny_glob", "**/.git/config"},
		{"a ligature in pyright's config", "Write", write("pyrightconﬁg.json"), "deny", wp, "sandbox.fs.write_protect"},
		{"a ligature in fish's config directory", "Write", write(".config/ﬁsh/config.fish"), "deny", wp, "shell_config"},
		{".VSCode", "Write", write(".VSCode/tasks.json"), "deny", wp, "ide_config"},
		{"Read of .ENV", "Read", map[string]any{"file_path": "app/.ENV"}, "deny", "host_fs.deny_glob", `"**/.env"`},
		{"Read of .Env.Local", "Read", map[string]any{"file_path": "app/.Env.Local"}, "deny", "host_fs.deny_glob", `"**/.env.*"`},
		{"Grep of a directory holding .ENV", "Grep", map[string]any{"pattern": "KEY", "path": "app"}, "deny", "host_fs.deny_glob_within", "app/.ENV"},
	})
}

// TestGrepGlobListsAreSplitAsClaudeCodeSplitsThem: Claude Code passes each
// piece of Grep's glob, split on white space and commas, to ripgrep as a
// --glob of its own, so "*.py,.env" reads .env (section 3).
func TestGrepGlobListsAreSplitAsClaudeCodeSplitsThem(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: shippedPolicy(t)})
	writeFiles(t, filepath.Join(h.dir, "ws"), map[string]string{"app/.env": "KEY=1", "app/main.py": "x", "app/README.md": "x"})
	c := h.connect(t)
	q := c.open("")
	grep := func(glob string) map[string]any {
		return map[string]any{"pattern": "KEY", "path": "app", "glob": glob, "output_mode": "content"}
	}
	const within = "host_fs.deny_glob_within"
	c.check(t, q, []decideCase{
		{"a comma list naming .env", "Grep", grep("*.py,.env"), "deny", within, "app/.env"},
		{"a space list naming .env", "Grep", grep("*.py .env"), "deny", within, "app/.env"},
		{"a tab list naming .env", "Grep", grep("*.py\t.env"), "deny", within, "app/.env"},
		{"an ideographic space list naming .env", "Grep", grep("*.py\u3000.env"), "deny", within, "app/.env"},
		{"a no-break space list naming .env", "Grep", grep("*.py\u00a0.env"), "deny", within, "app/.env"},
		{"a byte-order-mark list naming .env", "Grep", grep("*.py\ufeff.env"), "deny", within, "app/.env"},
		{"a list with a wildcard reaching .env", "Grep", grep("*.md, .e*"), "deny", within, "app/.env"},
		{"a list with a negation is assumed to search everything", "Grep", grep("*.py,!*.md"), "deny", within, "app/.env"},
		{"a brace piece beside a comma is assumed to search everything", "Grep", grep("*.{py,md},.env"), "deny", within, "app/.env"},
		{"a list of harmless names is allowed", "Grep", grep("*.py,*.md"), "allow", "host_fs.inside_workspace", ""},
		{"a single harmless name is allowed", "Grep", grep("*.py"), "allow", "host_fs.inside_workspace", ""},
		{"a NEL is not JavaScript white space: one odd name", "Grep", grep("*.py\u0085.env"), "allow", "host_fs.inside_workspace", ""},
		{"a class spelling .env is assumed to search everything", "Grep", grep("*.py,.e[n]v"), "deny", within, "app/.env"},
		{"an escape spelling .env is assumed to search everything", "Grep", grep(`*.py,\.env`), "deny", within, "app/.env"},
		{"only separators is no glob: every file", "Grep", grep(" , "), "deny", within, "app/.env"},
		{"a name in another case is another name to ripgrep", "Grep", grep("*.py,.ENV"), "allow", "host_fs.inside_workspace", ""},
		{"an absolute piece is judged by its directory", "Grep", grep("*.py," + filepath.Join(h.dir, ".ssh") + "/*"), "deny", "host_fs.deny_glob", ".ssh"},
	})
}

// TestProcessRelativePathsAreBadPaths: /proc/self and its kind mean the
// sidecar's process when the sidecar resolves them and the agent's when the
// tool opens them. Here the workspace is the sidecar's own working
// directory, as in the attack: /proc/self/cwd/<file> resolved inside it
// (section 4).
func TestProcessRelativePathsAreBadPaths(t *testing.T) {
	t.Parallel()
	cwd, err := os.Getwd()
	must(t, err)
	pol := strings.Replace(adversarialPolicy, "workspace_root: ./ws\n", "workspace_root: "+cwd+"\n", 1)
	h := start(t, options{policy: pol})
	must(t, os.MkdirAll(filepath.Join(h.dir, "ws2"), 0o755))
	must(t, os.Symlink("/dev/fd", filepath.Join(h.dir, "ws2", "fds")))
	c := h.connect(t)
	q := c.open("")
	const bad = "host_fs.bad_path"
	const why = "the sidecar would resolve it in its own process, not in the agent's"
	c.check(t, q, []decideCase{
		{"the sidecar's cwd, which is the workspace", "Read", map[string]any{"file_path": "/proc/self/cwd/security_test.go"}, "deny", bad, why},
		{"the sidecar's thread cwd", "Read", map[string]any{"file_path": "/proc/thread-self/cwd/security_test.go"}, "deny", bad, "/proc/thread-self"},
		{"the sidecar's root", "Read", map[string]any{"file_path": "/proc/self/root" + cwd + "/security_test.go"}, "deny", bad, "/proc/self"},
		{"a pid's cwd", "Read", map[string]any{"file_path": fmt.Sprintf("/proc/%d/cwd/security_test.go", os.Getpid())}, "deny", bad, fmt.Sprintf("/proc/%d", os.Getpid())},
		{"a thread's cwd", "Read", map[string]any{"file_path": fmt.Sprintf("/proc/%d/task/%d/cwd/x", os.Getpid(), os.Getpid())}, "deny", bad, ""},
		{"an open file descriptor", "Read", map[string]any{"file_path": "/dev/fd/0"}, "deny", bad, "/dev/fd"},
		{"standard input", "Read", map[string]any{"file_path": "/dev/stdin"}, "deny", bad, "/dev/stdin"},
		{"a Write through /proc/self/cwd", "Write", write("/proc/self/cwd/new.txt"), "deny", bad, why},
		{"a relative path climbing into /proc/self", "Read", map[string]any{"file_path": strings.Repeat("../", 30) + "proc/self/cwd/security_test.go"}, "deny", bad, why},
		{"a Grep of /proc/self/cwd", "Grep", map[string]any{"pattern": "x", "path": "/proc/self/cwd"}, "deny", bad, why},
		{"a Glob under /proc/self/cwd", "Glob", map[string]any{"pattern": "/proc/self/cwd/*.go"}, "deny", bad, why},
		{"an LS of /proc/self/fd", "LS", map[string]any{"path": "/proc/self/fd"}, "deny", bad, "/proc/self"},
		{"a pid's root with a doubled slash", "Read", map[string]any{"file_path": "/proc//1/root/etc/hostname"}, "deny", bad, "/proc/1"},
		{"a link elsewhere to /dev/fd", "Read", map[string]any{"file_path": filepath.Join(h.dir, "ws2", "fds", "0")}, "deny", bad, "leads to /dev/fd"},
		{"the workspace itself stays readable", "Read", map[string]any{"file_path": filepath.Join(cwd, "security_test.go")}, "allow", "host_fs.inside_workspace", ""},
	})
}

// TestAFindingGatekeeperCannotReadDenies: an operator rule whose finding is
// only known when it is evaluated, and is not {rule, reason}, denies the
// call instead of dropping out unseen (section 6a). Modules whose findings
// are unreadable as written are refused when they load (cmd tests).
func TestAFindingGatekeeperCannotReadDenies(t *testing.T) {
	t.Parallel()
	h := startWithRego(t, nil, `package gatekeeper

deny contains f if f := input.tool_input.team_finding

allow contains f if f := input.tool_input.team_allow
`)
	c := h.connect(t)
	q := c.open("")
	file := filepath.Join(h.dir, "ws", "a.txt")
	c.check(t, q, []decideCase{
		{"a readable operator deny", "Read", map[string]any{"file_path": file, "team_finding": map[string]any{"rule": "team.x", "reason": "no"}}, "deny", "team.x", "no"},
		{"a string deny", "Read", map[string]any{"file_path": file, "team_finding": "reads are off"}, "deny", "gatekeeper.unreadable_finding", `deny set holds a finding gatekeeper cannot read ("reads are off")`},
		{"a deny without reason", "Read", map[string]any{"file_path": file, "team_finding": map[string]any{"rule": "team.x"}}, "deny", "gatekeeper.unreadable_finding", ""},
		{"an allow of the wrong shape", "Read", map[string]any{"file_path": file, "team_allow": []any{"yes"}}, "deny", "gatekeeper.unreadable_finding", "allow set"},
		{"without the operator's findings the built-ins decide", "Read", map[string]any{"file_path": file}, "allow", "host_fs.inside_workspace", ""},
	})
}

// TestAnOperatorHelperNamedLikeAnOldBuiltinChangesNothing: the attack of
// section 6b, an operator module defining `_in_workspace(_) if true`, which
// Rego merged into the built-in workspace check. The check now lives in
// gatekeeper.core, so the module only defines a helper of its own, and
// Read /etc/passwd stays outside the workspace.
func TestAnOperatorHelperNamedLikeAnOldBuiltinChangesNothing(t *testing.T) {
	t.Parallel()
	h := startWithRego(t, nil, `package gatekeeper

_in_workspace(_) if true

_shown(_) := "somewhere harmless"
`)
	c := h.connect(t)
	c.check(t, c.open(""), []decideCase{
		{"Read /etc/passwd", "Read", map[string]any{"file_path": "/etc/passwd"}, "deny", "host_fs.outside_workspace", "/etc/passwd is outside the workspace"},
	})
}

// TestWriteProtectCoversClaudeCodesOwnDangerousPaths: the CLI bundled with
// Agent SDK 0.3.330 keeps its own lists of paths it never edits without
// asking (in the minified binary: the file names of V0e, the directories
// exported as DANGEROUS_DIRECTORIES, and ".config/git"). The shipped policy
// write-protects every one of them, in the workspace and below it.
func TestWriteProtectCoversClaudeCodesOwnDangerousPaths(t *testing.T) {
	t.Parallel()
	files := []string{".gitconfig", ".gitmodules", ".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".profile", ".zshenv", ".zlogin", ".zlogout",
		".bash_login", ".bash_aliases", ".bash_logout", ".envrc", ".ripgreprc", ".mcp.json", ".claude.json", ".npmrc", ".yarnrc", ".yarnrc.yml",
		".pnp.cjs", ".pnp.loader.mjs", ".pnp.js", ".pnp.data.json", ".pnpmfile.cjs", "bunfig.toml", ".bunfig.toml", ".bazelrc", ".bazelversion",
		".bazeliskrc", ".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml", "lefthook.yaml", ".lefthook.yaml", "gradle-wrapper.properties",
		"maven-wrapper.properties", ".devcontainer.json", "pyrightconfig.json"}
	dirs := []string{".git", ".vscode", ".idea", ".claude", ".husky", ".cargo", ".devcontainer", ".yarn", ".mvn", ".config/git"}
	var cases []decideCase
	for _, base := range []string{"", "pkg/"} {
		for _, f := range files {
			cases = append(cases, decideCase{"Claude Code's file " + base + f, "Write", write(base + f), "deny", "host_fs.write_protected", ""})
		}
		for _, d := range dirs {
			cases = append(cases, decideCase{"Claude Code's directory " + base + d, "Write", write(base + d + "/x"), "deny", "host_fs.write_protected", ""})
		}
	}
	h := start(t, options{policy: shippedPolicy(t)})
	c := h.connect(t)
	c.check(t, c.open(""), cases)
}

// TestWriteProtectCoversEveryMemoryFileClaudeCodeLoads: the CLI bundled
// with Agent SDK 0.3.330 reads as project memory, in every directory from
// the working directory up and in each directory the model reads a file
// of, the names of its list (minified)
//
//	$t=[...Got.map((e)=>[e]),["CLAUDE.md"],["CLAUDE.local.md"],["AGENTS.md"],
//	  [".claude","CLAUDE.md"],[".claude","AGENTS.md"],[".claude","rules"]]
//
// and follows their @path imports. An AGENTS.md the model writes, with
// "@../.env" in it, puts a file fs.deny forbids into the model's context
// at its next Read below it (seen with project settings on: red team,
// issue 10 section 1). Every one of them is write-protected.
func TestWriteProtectCoversEveryMemoryFileClaudeCodeLoads(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: shippedPolicy(t)})
	c := h.connect(t)
	var cases []decideCase
	for _, base := range []string{"", "pkg/sub/"} {
		for _, name := range []string{"CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", ".claude/CLAUDE.md", ".claude/AGENTS.md", ".claude/rules/x.md"} {
			cases = append(cases, decideCase{"memory file " + base + name, "Write", write(base + name), "deny", "host_fs.write_protected", ""})
		}
	}
	cases = append(cases,
		decideCase{"AGENTS.md is agent memory", "Edit", map[string]any{"file_path": "AGENTS.md", "old_string": "", "new_string": "@../.env"}, "deny", "host_fs.write_protected", "agent_memory"},
		decideCase{"AGENTS.md in another case", "Write", write("docs/Agents.MD"), "deny", "host_fs.write_protected", "agent_memory"},
		decideCase{"AGENTS.md stays readable", "Read", map[string]any{"file_path": "AGENTS.md"}, "allow", "host_fs.inside_workspace", ""},
		decideCase{"a look-alike name stays writable", "Write", write("AGENTS.md.txt"), "allow", "host_fs.inside_workspace", ""},
	)
	c.check(t, c.open(""), cases)
}

// TestWriteProtectCoversOtherAgentsConfiguration: with the shipped policy,
// no host write tool may plant the project configuration through which
// another AI coding tool, opened on the project later by the user, starts
// an MCP server or runs a hook or command on the host (Cursor's mcp.json
// and hooks.json, Gemini CLI's and Qwen Code's settings.json, Codex's
// config.toml, Windsurf's hooks.json, Continue's mcpServers, Amazon Q's
// agents, Kiro's hooks, Roo Code's mcp.json, Cline's and Copilot's hooks,
// aider's lint-cmd, opencode's and Crush's configs). Reading them, and
// writing those tools' instruction files, stays allowed.
func TestWriteProtectCoversOtherAgentsConfiguration(t *testing.T) {
	t.Parallel()
	const wp = "host_fs.write_protected"
	paths := map[string]string{ // path written → the shipped glob that refuses it
		".cursor/mcp.json":                  "**/.cursor",
		".cursor/hooks.json":                "**/.cursor",
		".cursor/hooks/before-shell.sh":     "**/.cursor",
		".cursor/environment.json":          "**/.cursor",
		".gemini/settings.json":             "**/.gemini",
		".qwen/settings.json":               "**/.qwen",
		".codex/config.toml":                "**/.codex",
		".windsurf/hooks.json":              "**/.windsurf",
		".continue/mcpServers/x.yaml":       "**/.continue",
		".amazonq/mcp.json":                 "**/.amazonq",
		".amazonq/cli-agents/dev.json":      "**/.amazonq",
		".kiro/settings/mcp.json":           "**/.kiro",
		".kiro/hooks/on-save.kiro.hook":     "**/.kiro",
		".roo/mcp.json":                     "**/.roo",
		".clinerules/hooks/PreToolUse":      "**/.clinerules/hooks",
		".github/hooks/hooks.json":          "**/.github/hooks",
		".aider.conf.yml":                   "**/.aider.conf.yml",
		"opencode.json":                     "**/opencode.json",
		"opencode.jsonc":                    "**/opencode.jsonc",
		".opencode.json":                    "**/.opencode.json",
		".opencode/plugin/x.js":             "**/.opencode",
		"crushrc":                           "**/crushrc",
		".crushrc":                          "**/.crushrc",
		"crush.json":                        "**/crush.json",
		".crush.json":                       "**/.crush.json",
		".Cursor/MCP.json":                  "**/.cursor",
		"pkg/.GEMINI/settings.json":         "**/.gemini",
		"web/.github/hooks/pre-tool.json":   "**/.github/hooks",
		"services/api/.aider.conf.yml":      "**/.aider.conf.yml",
		"services/api/.codex/config.toml":   "**/.codex",
		"services/api/.roo/mcp.json":        "**/.roo",
		"services/api/.windsurf/hooks.json": "**/.windsurf",
	}
	var cases []decideCase
	for p, glob := range paths {
		cases = append(cases, decideCase{"another agent's configuration " + p, "Write", write(p), "deny", wp, fmt.Sprintf("(sandbox.fs.write_protect, pattern %q)", glob)})
	}
	cases = append(cases,
		decideCase{"an Edit that creates Cursor's MCP list", "Edit", map[string]any{"file_path": ".cursor/mcp.json", "old_string": "", "new_string": "{}"}, "deny", wp, ""},
		decideCase{"Cursor's MCP list stays readable", "Read", map[string]any{"file_path": ".cursor/mcp.json"}, "allow", "host_fs.inside_workspace", ""},
		decideCase{"aider's config stays readable", "Read", map[string]any{"file_path": ".aider.conf.yml"}, "allow", "host_fs.inside_workspace", ""},
		decideCase{"Cursor's rules file is instructions, left writable", "Write", write(".cursorrules"), "allow", "host_fs.inside_workspace", ""},
		decideCase{"Windsurf's rules file is instructions, left writable", "Write", write(".windsurfrules"), "allow", "host_fs.inside_workspace", ""},
		decideCase{"GEMINI.md is instructions, left writable", "Write", write("GEMINI.md"), "allow", "host_fs.inside_workspace", ""},
		decideCase{"Copilot's instructions are left writable", "Write", write(".github/copilot-instructions.md"), "allow", "host_fs.inside_workspace", ""},
		decideCase{"a CI workflow is left writable", "Write", write(".github/workflows/ci.yml"), "allow", "host_fs.inside_workspace", ""},
		decideCase{"Cline's rules are left writable", "Write", write(".clinerules/style.md"), "allow", "host_fs.inside_workspace", ""},
		decideCase{"a look-alike of opencode's config stays writable", "Write", write("opencode.json.example"), "allow", "host_fs.inside_workspace", ""},
		decideCase{"a look-alike of Cursor's directory stays writable", "Write", write(".cursor-notes/x.md"), "allow", "host_fs.inside_workspace", ""},
	)
	h := start(t, options{policy: shippedPolicy(t)})
	c := h.connect(t)
	c.check(t, c.open(""), cases)
}
