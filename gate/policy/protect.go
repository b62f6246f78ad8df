package policy

// ProtectGroup is one named part of the built-in write-protect list: paths
// that no host file tool (Write, Edit, MultiEdit, NotebookEdit) may create,
// change or move into, even inside the workspace, because a program on the
// host (Claude Code itself, git, a shell, an editor) runs code they name.
// Reading them is not affected.
type ProtectGroup struct {
	// Name is how sandbox.fs.write_protect_allow lifts the group.
	Name string
	// Globs are in the syntax of sandbox.fs.deny: a relative glob matches
	// at any depth, case is ignored, and a glob matching a directory
	// covers everything below it.
	Globs []string
	// Why is the reason, in one sentence, shown to the model in a denial.
	Why string
	// Liftable says whether write_protect_allow may name the group. The
	// groups that are not liftable are the boundary of the agent's own
	// configuration and what Anthropic's sandbox runtime (srt) never lifts.
	Liftable bool
	// Within names a group whose globs already cover every path of this
	// one: lifting this group takes effect only with that one lifted too.
	Within string
}

// InstallGroup is the write-protect group of the binaries and files that
// Claude Code's installed managed settings name for gatekeeper; its paths
// are known only at run time.
const InstallGroup = "claude_code_install"

// BuiltinWriteProtect returns the built-in write-protect list, always in
// force unless sandbox.fs.write_protect_allow lifts a liftable group. It
// covers every "mandatory deny" write path of Anthropic's sandbox runtime
// (github.com/anthropic-experimental/sandbox-runtime, src/sandbox/
// sandbox-utils.ts: DANGEROUS_FILES, DANGEROUS_DIRECTORIES, .git/hooks and
// .git/config) and Claude Code's own list of paths it never edits without
// asking (DANGEROUS_DIRECTORIES and its dangerous file names, in the CLI
// that SDK 0.3.330 bundles) as far as they make the agent's host run code;
// sandbox.policy.yaml adds the rest as operator-editable entries.
// docs/SANDBOX.md lists it (a test pins the two). The caller owns the
// returned slice.
func BuiltinWriteProtect() []ProtectGroup {
	return []ProtectGroup{
		{
			Name: "agent_config",
			Globs: []string{
				"**/.claude", "**/.claude.json", "**/.claude.json.*", "**/.mcp.json", "**/.claude-plugin", "**/.config/anthropic",
				"/etc/claude-code", "/Library/Application Support/ClaudeCode",
			},
			Why: "it is Claude Code's own configuration (settings with hooks that run shell commands on the host, " +
				"MCP servers it starts, commands, agents, skills, plugins), which it loads and reloads while the agent runs",
		},
		{
			Name: "agent_memory",
			// Claude Code's memory file names (minified: ["CLAUDE.md"],
			// ["CLAUDE.local.md"],["AGENTS.md"] and the same under .claude/,
			// which agent_config covers), read in every directory from the
			// working directory up and below it as the model reads there.
			Globs:    []string{"**/CLAUDE.md", "**/CLAUDE.local.md", "**/AGENTS.md"},
			Why:      "Claude Code reads it as instructions for every session, and its @path imports bring other files, even ones fs.deny forbids, into the model's context",
			Liftable: true,
		},
		{
			Name:     "git_dir",
			Globs:    []string{"**/.git"},
			Why:      "it is a git directory, or a .git file that points git at another one, whose contents git trusts and runs",
			Liftable: true,
		},
		{
			Name:  "git_hooks",
			Globs: []string{"**/.git/hooks", "**/.git/modules/**/hooks"},
			Why:   "git runs these scripts on commit, checkout, merge and push",
		},
		{
			Name:     "git_config",
			Globs:    []string{"**/.git/config", "**/.git/config.worktree", "**/.git/worktrees/*/config.worktree", "**/.git/modules/**/config"},
			Why:      "git runs the commands its configuration names (core.fsmonitor, core.hooksPath, core.sshCommand, aliases, filter and diff drivers)",
			Liftable: true,
			Within:   "git_dir",
		},
		{
			Name:  "git_user_config",
			Globs: []string{"**/.gitconfig", "**/.config/git"},
			Why:   "it is git's configuration for every repository of a user, and git runs the commands it names",
		},
		{
			Name:  "git_modules",
			Globs: []string{"**/.gitmodules"},
			Why:   "git clones and checks out the submodules it names, and crafted ones have been the way into several git code-execution flaws (CVE-2018-11235, CVE-2024-32002)",
		},
		{
			Name: "shell_config",
			Globs: []string{
				"**/.bashrc", "**/.bash_profile", "**/.bash_login", "**/.bash_logout", "**/.bash_aliases", "**/.profile",
				"**/.zshrc", "**/.zprofile", "**/.zshenv", "**/.zlogin", "**/.zlogout",
				"**/.cshrc", "**/.tcshrc", "**/.kshrc", "**/.config/fish", "**/.inputrc",
			},
			Why: "a shell runs it, as the user, when it next starts (.inputrc binds keys to text the shell then runs)",
		},
		{
			Name:  "ripgrep_config",
			Globs: []string{"**/.ripgreprc"},
			Why:   "ripgrep, the search behind Claude Code's Grep, takes options from it, and its --pre option runs a command on every file searched",
		},
		{
			// Its paths are those the installed managed settings name, which
			// the sidecar reads (gate.Config.Protect): no glob of its own.
			Name: InstallGroup,
			Why: "gatekeeper's Claude Code installation names it: the hook and MCP server binary the CLI runs on every tool call, " +
				"or the token they read, and replacing it would replace the gate",
		},
		{
			Name:     "ide_config",
			Globs:    []string{"**/.vscode", "**/.idea", "**/.zed", "**/.devcontainer", "**/.devcontainer.json", "**/*.code-workspace"},
			Why:      "editors run what it names: tasks that run on opening a folder, interpreters and language servers, dev container commands (initializeCommand runs on the host)",
			Liftable: true,
		},
	}
}
