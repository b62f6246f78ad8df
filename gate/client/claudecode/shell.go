package claudecode

// ShellTools returns Claude Code's tools that run a command on the host.
// `gatekeeper claude-code install` denies them in the CLI's managed
// settings, so they leave the model's tool list; @gatekeeper/client's
// SHELL_TOOLS, the TypeScript copy, puts ask rules on them so that a
// skill's `!` lines, which reach only their permission check, do not run.
// Both are pinned to testdata/shell-tools.json. The policy decides them as
// any other tool (the default policy denies Bash through tools.deny).
func ShellTools() []string { return []string{"Bash", "PowerShell"} }
