# gatekeeper: the built-in tool-call policy.
#
# One entry point, data.gatekeeper.decision, returning
#   {"decision": "allow" | "deny" | "ask", "reason": <sentence for the model>, "rule": <rule name>}
# Combination: any deny beats any ask beats any allow; a call that no rule
# allows is denied. Operators add rules to this same package with
# --rego-dir: a `deny contains {...}` there always wins.
#
# input (built by the sidecar, see docs/SANDBOX.md):
#   event          "PreToolUse" | "canUseTool" (the SDK client), "PreToolUse" |
#                  "PermissionRequest" (Claude Code CLI hooks) or "run"
#   tool_name      exact tool name
#   tool_kind      "host_fs" (a tool in host_fs_tools), "host_net" (in
#                  host_net_tools) or "other"; the rules test it rather than
#                  the sets because OPA indexes an equality on input and then
#                  skips the rules of other kinds without evaluating them
#   tool_input     the tool's input object
#   tool_use_id    the SDK's tool use id
#   mcp_server     {"name", "source"} for mcp__ tools, or absent; source is how an
#                  SDK client configured the server ("sdk" = its in-process server),
#                  the scope a Claude Code CLI loaded it from ("enterprise", "project",
#                  ...), or "gatekeeper": the sidecar's own attestation that the CLI
#                  session's sandboxed_code server is `gatekeeper mcp`
#   policy         the query's effective policy (tools, workspace_root, sandbox, ceilings)
#   workspace_root the workspace root with symlinks resolved
#   deny_globs     sandbox.fs.deny with ~ expanded
#   paths          host paths of file tools: [{"field", "raw", "abs", "resolved", "covered", "deny_matches",
#                  "deny_within", "within_error", "error"}] where covered lists abs, resolved and every
#                  ancestor of both, deny_matches the deny_globs that match any of them (glob.match
#                  with "/"), and, for a directory Grep searches, deny_within the files below it that
#                  the search would read and a deny glob matches ([{"path", "glob"}], at most 3) and
#                  within_error why they could not all be checked
#   url            for WebFetch: {"raw", "host", "port", "error"}
package gatekeeper

# Tools that touch the host filesystem; their paths are judged below. The
# sidecar classifies input.tool_kind with these same sets (a test pins it).
host_fs_tools := {"Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep", "LS"}

# Tools that reach the network from the host.
host_net_tools := {"WebFetch", "WebSearch"}

sandbox_tool := "mcp__sandboxed_code__run"

default decision := {
	"decision": "deny",
	"rule": "gatekeeper.no_decision",
	"reason": "gatekeeper could not reach a decision, so the call is denied",
}

decision := _outcome("deny", f) if {
	f := _denies[0]
} else := _outcome("ask", f) if {
	f := _asks[0]
} else := _outcome("allow", f) if {
	f := _allows[0]
} else := {
	"decision": "deny",
	"rule": "tools.not_allowlisted",
	"reason": sprintf("tool %q is not allowlisted by the gatekeeper policy", [input.tool_name]),
}

# Each kind of finding, sorted by rule name so the outcome is stable.
_denies := sort([[f.rule, f.reason] | some f in deny])

_asks := sort([[f.rule, f.reason] | some f in ask])

_allows := sort([[f.rule, f.reason] | some f in allow])

_outcome(kind, f) := {"decision": kind, "rule": f[0], "reason": f[1]}

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
	"reason": sprintf("%s of %s is outside the workspace %s", [input.tool_name, _shown(p), input.workspace_root]),
} if {
	input.tool_kind == "host_fs"
	some p in input.paths
	p.error == ""
	not _in_workspace(p.resolved)
}

# A deny glob is checked against the path as written (abs), where it leads
# (resolved), and every ancestor of both (covered), so a pattern naming a
# directory also covers everything inside it. The sidecar does that
# matching once (deny_matches); a rule of your own can match covered itself.
deny contains {
	"rule": "host_fs.deny_glob",
	"reason": sprintf("%s of %s is forbidden by the policy's fs.deny pattern %q", [input.tool_name, _shown(p), g]),
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
	"reason": sprintf("%s of %s would also read %s, which the policy's fs.deny pattern %q forbids; search a narrower path that does not contain it, or pass a glob of file names (such as *.py) that leaves it out", [input.tool_name, _shown(p), m.path, m.glob]),
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

allow contains {
	"rule": "host_fs.inside_workspace",
	"reason": sprintf("%s of %s is inside the workspace", [input.tool_name, concat(", ", [p.raw | some p in input.paths])]),
} if {
	allowlisted
	input.tool_kind == "host_fs"
	count(input.paths) > 0
}

# _shown names a path as the model wrote it, and where it really leads.
_shown(p) := sprintf("%s (resolves to %s)", [p.raw, p.resolved]) if p.raw != p.resolved
else := p.raw

# _in_workspace is true when path is the workspace root or beneath it; the
# root's prefix is computed once per decision.
_in_workspace(path) if path == input.workspace_root

_in_workspace(path) if startswith(path, _workspace_prefix)

_workspace_prefix := concat("", [trim_suffix(input.workspace_root, "/"), "/"])

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

deny contains {
	"rule": "net.host_denied",
	"reason": sprintf("WebFetch of host %s is forbidden by sandbox.net.deny pattern %q", [input.url.host, pat]),
} if {
	input.tool_name == "WebFetch"
	input.url.error == ""
	some pat in input.policy.sandbox.net.deny
	host_matches(pat, input.url.host, input.url.port)
}

deny contains {
	"rule": "net.host_not_allowed",
	"reason": sprintf("WebFetch of host %s is not in sandbox.net.allow", [input.url.host]),
} if {
	input.tool_name == "WebFetch"
	input.url.error == ""
	not _net_allowed(input.url.host, input.url.port)
}

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

_net_allowed(host, port) if {
	some pat in input.policy.sandbox.net.allow
	host_matches(pat, host, port)
}

# host_matches: "example.com" matches only itself; "*.example.com" matches
# names below example.com but not example.com itself; ":port" narrows to
# that port.
host_matches(pat, host, port) if {
	[ph, pp] := split_host_port(pat)
	_port_ok(pp, port)
	_name_matches(ph, host)
}

_port_ok("", _)

_port_ok(pp, port) if pp == sprintf("%v", [port])

_name_matches(ph, host) if ph == host

_name_matches(ph, host) if {
	startswith(ph, "*.")
	endswith(host, substring(ph, 1, -1))
}

split_host_port(s) := [h, p] if {
	m := regex.find_all_string_submatch_n(`^(\[[^\]]*\]|[^:]*)(?::([0-9]+))?$`, s, 1)
	count(m) == 1
	h := trim(m[0][1], "[]")
	p := m[0][2]
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

# A run must name a language the sandbox has.
deny contains {
	"rule": "run.bad_language",
	"reason": sprintf("language %q is not one of python, sh, node", [input.tool_input.language]),
} if {
	input.tool_name == "mcp__sandboxed_code__run" # sandbox_tool, spelled out so OPA indexes it
	lang := object.get(input.tool_input, "language", "")
	not lang in {"python", "sh", "node"}
}
