# gatekeeper: the built-in tool-call policy.
#
# One entry point, data.gatekeeper.decision, returning
#   {"decision": "allow" | "deny" | "ask", "reason": <sentence for the model>, "rule": <rule name>}
# Combination: any deny beats any ask beats any allow; a call that no rule
# allows is denied. Operators add rules to this same package with
# --rego-dir: a `deny contains {...}` there always wins. A finding that is
# not exactly {"rule", "reason"} denies (gatekeeper.unreadable_finding).
# Helpers operator Rego must not change live in gatekeeper.core
# (core.rego); an operator module may not redefine any rule or function
# of this package but deny, ask and allow (rego/operator.go).
#
# input (built by the sidecar, see docs/SANDBOX.md):
#   event          "PreToolUse" | "canUseTool" (the SDK client), "PreToolUse" |
#                  "PermissionRequest" (Claude Code CLI hooks), "run", "code_call"
#                  (a nested call of sandboxed code: its input in code_calls.rego),
#                  or "http_request" (a request of sandboxed code to an
#                  intercepted host: its input in http_requests.rego)
#   tool_name      exact tool name
#   tool_kind      "host_fs" (a tool in host_fs_tools), "host_net" (in
#                  host_net_tools) or "other"; the rules test it rather than
#                  the sets because OPA indexes an equality on input and then
#                  skips the rules of other kinds without evaluating them
#   tool_input     the tool's input object
#   tool_use_id    the SDK's tool use id
#   mcp_server     {"name", "source"} for mcp__ tools, or absent; source is how an
#                  SDK client configured the server ("sdk" = its in-process server),
#                  the scope a Claude Code CLI loaded it from, prefixed
#                  ("claude-code:enterprise", "claude-code:sdk", ...), or "gatekeeper":
#                  the sidecar's own attestation that the CLI
#                  session's sandboxed_code server is `gatekeeper mcp`
#   agent_id       the subagent making the call (Claude Code's agent_id), absent on
#                  the main thread
#   agent_type     the subagent's type ("general-purpose", ...), or the agent of a
#                  session started with --agent; absent when neither
#   policy         the query's effective policy (tools, workspace_root, sandbox, ceilings,
#                  code_calls)
#   workspace_root the workspace root with symlinks resolved
#   run_languages  the languages a sandboxed run may use (runner.Languages)
#   deny_globs     sandbox.fs.deny with ~ expanded, a relative glob anchored as **/glob
#   write_protect_globs  the built-in write-protect list (less the groups
#                  sandbox.fs.write_protect_allow lifts) and sandbox.fs.write_protect, the same way
#   paths          host paths of file tools: [{"field", "raw", "abs", "resolved", "covered", "deny_matches",
#                  "write_protect_matches", "deny_within", "within_error", "error", "git_repository"}] where covered lists
#                  abs, resolved and every ancestor of both, deny_matches the deny_globs that match any
#                  of them (ignoring case: glob.match(lower(g), ["/"], lower(path)) for ASCII),
#                  write_protect_matches the write-protect globs that do ([{"glob", "entry", "why"}]),
#                  and, for a directory Grep searches, deny_within the files below it that the search
#                  would read and a deny glob matches ([{"path", "glob"}], at most 3), within_error
#                  why they could not all be checked, and, for a write tool, git_repository the
#                  directory above the path that would then hold HEAD with objects and refs, or
#                  HEAD with a commondir (a git repository, bare or not), or ""
#   url            for WebFetch: {"raw", "host", "port", "allow_matches", "deny_matches", "builtin", "error"}
#                  where host is normalized as the egress proxy does, port is the port fetched (an
#                  http URL is fetched over https), allow_matches / deny_matches are the
#                  sandbox.net.allow / .deny patterns that match host and port, and builtin the
#                  built-in block that refuses them whatever the policy says ([] or
#                  [{"block": "metadata" | "model_vendor" | "private_address", "reason"}])
package gatekeeper

import data.gatekeeper.core

# Tools that touch the host filesystem; their paths are judged below. The
# sidecar classifies input.tool_kind with these same sets (a test pins it).
host_fs_tools := {"Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep", "LS"}

# The host file tools that create, change or move files: the write-protect
# list applies to them. (Of the SDK's tool inputs, sdk-tools.d.ts of SDK
# 0.3.330, these are the ones that write a path the model names; Edit with
# an empty old_string creates a file. Artifact's read_asset out_dir,
# EnterWorktree and ExitWorktree also write, and are decided by the tool
# lists alone: see SECURITY.md, Known limits.)
host_fs_write_tools := {"Write", "Edit", "MultiEdit", "NotebookEdit"}

# Tools that reach the network from the host.
host_net_tools := {"WebFetch", "WebSearch"}

sandbox_tool := "mcp__sandboxed_code__run"

default decision := {
	"decision": "deny",
	"rule": "gatekeeper.no_decision",
	"reason": "gatekeeper could not reach a decision, so the call is denied",
}

# The first entry of the first non-empty kind decides (see core.denies);
# the object is written out in each branch, as a call of a helper function
# costs OPA's evaluator more than building it.
decision := {"decision": e[3], "rule": e[1], "reason": e[2]} if {
	e := core.denies[0]
} else := {"decision": e[3], "rule": e[1], "reason": e[2]} if {
	e := core.asks[0]
} else := {"decision": e[3], "rule": e[1], "reason": e[2]} if {
	e := core.allows[0]
} else := {
	"decision": "deny",
	"rule": "tools.not_allowlisted",
	"reason": sprintf("tool %q is not allowlisted by the gatekeeper policy", [input.tool_name]),
}

# --- tool lists ---------------------------------------------------------------

deny contains {
	"rule": "tools.deny_list",
	"reason": sprintf("tool %q is denied by the gatekeeper policy", [input.tool_name]),
} if input.tool_name in input.policy.tools.deny

ask contains {
	"rule": "tools.ask_list",
	"reason": sprintf("tool %q needs a human's approval under the gatekeeper policy", [input.tool_name]),
} if input.tool_name in input.policy.tools.ask

allowlisted if input.tool_name in input.policy.tools.allow

deny contains {
	"rule": "tools.malformed_name",
	"reason": sprintf("tool name %q contains characters no real tool name has (only A-Z a-z 0-9 _ . - are valid)", [input.tool_name]),
} if not regex.match(`^[A-Za-z0-9_.-]+$`, input.tool_name)

allow contains {
	"rule": "tools.allow_list",
	"reason": sprintf("tool %q is allowlisted", [input.tool_name]),
} if {
	allowlisted
	input.tool_kind == "other"
	not input.tool_name in host_fs_tools # belt and braces: kind and sets agree
	not input.tool_name in host_net_tools
}

# --- host file tools -------------------------------------------------------------

deny contains {
	"rule": "host_fs.bad_path",
	"reason": sprintf("%s: %s", [input.tool_name, p.error]),
} if {
	input.tool_kind == "host_fs"
	some p in input.paths
	p.error != ""
}

deny contains {
	"rule": "host_fs.no_path",
	"reason": sprintf("%s names no path gatekeeper can check", [input.tool_name]),
} if {
	input.tool_kind == "host_fs"
	count(input.paths) == 0
}

deny contains {
	"rule": "host_fs.outside_workspace",
	"reason": sprintf("%s of %s is outside the workspace %s", [input.tool_name, core.shown(p), input.workspace_root]),
} if {
	input.tool_kind == "host_fs"
	some p in input.paths
	p.error == ""
	# not core.in_workspace(p.resolved), written out (it is called for every
	# path decided): neither the root nor below it.
	not p.resolved == input.workspace_root
	not startswith(p.resolved, core.workspace_prefix)
}

# A deny glob is checked against the path as written (abs), where it leads
# (resolved), and every ancestor of both (covered), so a pattern naming a
# directory also covers everything inside it. The sidecar does that
# matching once (deny_matches); a rule of your own can match covered itself.
deny contains {
	"rule": "host_fs.deny_glob",
	"reason": sprintf("%s of %s is forbidden by the policy's fs.deny pattern %q", [input.tool_name, core.shown(p), g]),
} if {
	input.tool_kind == "host_fs"
	some p in input.paths
	p.error == ""
	some g in p.deny_matches
}

# A recursive search (Grep) of a directory reads every file below it. For
# such a path the sidecar lists, as deny_within, the files below it that an
# fs.deny glob forbids and the search would read (hidden ones included;
# symbolic links are not followed), and within_error when it could not
# check them all: either refuses the search.
deny contains {
	"rule": "host_fs.deny_glob_within",
	"reason": sprintf("%s of %s would also read %s, which the policy's fs.deny pattern %q forbids; search a narrower path that does not contain it, or pass a glob of file names (such as *.py) that leaves it out", [input.tool_name, core.shown(p), m.path, m.glob]),
} if {
	input.tool_kind == "host_fs"
	some p in input.paths
	p.error == ""
	m := p.deny_within[0]
}

deny contains {
	"rule": "host_fs.search_unchecked",
	"reason": sprintf("%s: %s", [input.tool_name, p.within_error]),
} if {
	input.tool_kind == "host_fs"
	some p in input.paths
	p.within_error != ""
}

# A write tool may not create, change or move into a write-protected path
# (the built-in list and sandbox.fs.write_protect), inside the workspace or
# not; reading it stays allowed. The sidecar matches the globs against the
# covered paths once (write_protect_matches).
deny contains {
	"rule": "host_fs.write_protected",
	"reason": sprintf("%s of %s is refused: the path is write-protected (%s, pattern %q) because %s. Host file tools may read it but never create, change or move into it", [input.tool_name, core.shown(p), m.entry, m.glob, m.why]),
} if {
	input.tool_kind == "host_fs"
	input.tool_name in host_fs_write_tools
	some p in input.paths
	p.error == ""
	m := p.write_protect_matches[0]
}

# A write tool may not complete or change a git repository the .git globs
# do not name: a directory anywhere that holds, once the path is written,
# a HEAD with objects and refs, or a HEAD with a commondir (a linked
# worktree's git directory, whose config is the common directory's)
# (p.git_repository, found by the sidecar as git's
# is_git_directory does). Git takes such a directory for a bare repository
# when a person or a tool runs git inside it, reads its config and runs the
# commands it names (core.fsmonitor and others). Lifted with the git_dir
# group, as writes into .git are.
deny contains {
	"rule": "host_fs.write_protected_git_repository",
	"reason": sprintf("%s of %s is refused: %s would be a git repository (it would hold HEAD with objects and refs, or HEAD with a commondir naming where they are), and git runs the commands a repository's config names (core.fsmonitor, hooks, aliases) when anyone runs git inside it. Host file tools may read it but never create or change a repository's files; put what you write elsewhere", [input.tool_name, core.shown(p), p.git_repository]),
} if {
	input.tool_kind == "host_fs"
	input.tool_name in host_fs_write_tools
	some p in input.paths
	p.error == ""
	p.git_repository != ""
	not _git_dir_lifted
}

_git_dir_lifted if "git_dir" in input.policy.sandbox.fs.write_protect_allow

allow contains {
	"rule": "host_fs.inside_workspace",
	"reason": sprintf("%s of %s is inside the workspace", [input.tool_name, concat(", ", [p.raw | some p in input.paths])]),
} if {
	allowlisted
	input.tool_kind == "host_fs"
	count(input.paths) > 0
}

# --- host network tools -----------------------------------------------------------

deny contains {
	"rule": "net.disabled",
	"reason": sprintf("%s is denied: the sandbox network policy is disabled (sandbox.net.enabled is false)", [input.tool_name]),
} if {
	input.tool_kind == "host_net"
	not input.policy.sandbox.net.enabled
}

deny contains {
	"rule": "net.bad_url",
	"reason": sprintf("WebFetch: %s", [input.url.error]),
} if {
	input.tool_name == "WebFetch"
	input.url.error != ""
}

# The sidecar reads the url as Claude Code's WebFetch does (a WHATWG URL,
# an http URL fetched over https) and normalizes its host with the egress
# proxy's one normalizer (UTS 46, every IPv4 spelling), then matches the net
# patterns itself with the proxy's own functions: url.deny_matches and
# url.allow_matches list the patterns that match (see docs/SANDBOX.md).
deny contains {
	"rule": "net.host_denied",
	"reason": sprintf("WebFetch of host %s is forbidden by sandbox.net.deny pattern %q", [input.url.host, pat]),
} if {
	input.tool_name == "WebFetch"
	input.url.error == ""
	some pat in input.url.deny_matches
}

deny contains {
	"rule": "net.host_not_allowed",
	"reason": sprintf("WebFetch of host %s (port %s) is not in sandbox.net.allow", [input.url.host, input.url.port]),
} if {
	input.tool_name == "WebFetch"
	input.url.error == ""
	not _net_allowed
	count(_builtin_denials) == 0 # a built-in block says more: allowing the host would not help
}

# The built-in blocks: hosts no policy reaches, decided by the egress
# proxy's own tables and functions (internal/nethost.CheckBuiltin), which
# the sidecar applies to the host and port fetched and reports in
# url.builtin: cloud metadata endpoints by name or address (net.metadata),
# model vendor APIs (net.model_vendor), and IP literals in a non-public
# range that sandbox.net.allow does not list literally, or that nothing may
# allow (unspecified, multicast, broadcast: net.private_address). The agent
# process resolves a name itself: a name that resolves to such an address
# is not seen here (the egress proxy, which resolves for sandboxes, refuses
# it there). A test pins these rules to nethost.BlockKinds.
_builtin_rules := {
	"metadata": "net.metadata",
	"model_vendor": "net.model_vendor",
	"private_address": "net.private_address",
}

_builtin_denials contains {
	"rule": _builtin_rules[b.block],
	"reason": sprintf("WebFetch: %s", [b.reason]),
} if {
	input.tool_name == "WebFetch"
	input.url.error == ""
	some b in input.url.builtin
}

deny contains d if some d in _builtin_denials

allow contains {
	"rule": "net.host_allowed",
	"reason": sprintf("WebFetch of host %s is in sandbox.net.allow", [input.url.host]),
} if {
	allowlisted
	input.tool_name == "WebFetch"
	input.policy.sandbox.net.enabled
}

allow contains {
	"rule": "net.search_allowed",
	"reason": "WebSearch is allowlisted and the network policy is enabled",
} if {
	allowlisted
	input.tool_name == "WebSearch"
	input.policy.sandbox.net.enabled
}

# Without the sidecar's allow_matches (a hand-made input) nothing is allowed.
_net_allowed if {
	some _ in input.url.allow_matches
}

# --- MCP provenance ------------------------------------------------------------------

# The sandbox tool is trusted only from gatekeeper's own in-process server.
deny contains {
	"rule": "mcp.untrusted_sandboxed_code",
	"reason": sprintf("%s is only trusted from gatekeeper's in-process SDK server; this call comes from %s", [sandbox_tool, _provenance]),
} if {
	input.tool_name == "mcp__sandboxed_code__run" # sandbox_tool, spelled out so OPA indexes it
	not _trusted_sandbox_server
}

_trusted_sandbox_server if {
	input.mcp_server.name == "sandboxed_code"
	input.mcp_server.source in trusted_sandbox_sources
}

# The sources of gatekeeper's own sandbox server; the sidecar pins "gatekeeper"
# to gate.SourceGatekeeper with a test.
trusted_sandbox_sources := {"sdk", "gatekeeper"}

_provenance := sprintf("MCP server %q (source %q)", [input.mcp_server.name, input.mcp_server.source]) if input.mcp_server
else := "an unknown MCP server"

# An MCP tool must come from the server its name claims.
deny contains {
	"rule": "mcp.server_mismatch",
	"reason": sprintf("tool %q does not belong to MCP server %q", [input.tool_name, input.mcp_server.name]),
} if {
	input.mcp_server
	not startswith(input.tool_name, concat("", ["mcp__", input.mcp_server.name, "__"]))
}

# --- sandboxed runs ----------------------------------------------------------------

# A run must name a language the sandbox has: input.run_languages, which the
# sidecar fills from the runner's one list. Without it (a hand-made input)
# every language is refused.
deny contains {
	"rule": "run.bad_language",
	"reason": sprintf("language %q is not one of %s", [lang, _run_languages]),
} if {
	input.tool_name == "mcp__sandboxed_code__run" # sandbox_tool, spelled out so OPA indexes it
	lang := object.get(input.tool_input, "language", "")
	not lang in {l | some l in input.run_languages}
}

_run_languages := concat(", ", input.run_languages) if is_array(input.run_languages)
else := "the sandbox's languages (none given)"
