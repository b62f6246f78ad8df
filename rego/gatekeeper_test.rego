package gatekeeper_test

import data.gatekeeper

_policy := {
	"tools": {"allow": ["Read", "Write", "Glob", "WebFetch", "mcp__sandboxed_code__run", "TodoWrite"], "deny": ["Bash"], "ask": ["NotebookEdit"]},
	"sandbox": {"net": {"enabled": true, "allow": ["pypi.org", "*.example.com", "api.local:8443"], "deny": ["bad.example.com"]}},
}

_in(tool, extra) := object.union(
	{
		"event": "PreToolUse", "tool_name": tool, "tool_kind": _kind(tool), "tool_input": {}, "tool_use_id": "t1",
		"policy": _policy, "workspace_root": "/srv/app", "deny_globs": _deny_globs, "paths": [],
		"run_languages": ["python", "sh", "node"],
	},
	extra,
)

# _kind is what the sidecar computes (gate pins that it agrees with the sets).
_kind(tool) := "host_fs" if tool in gatekeeper.host_fs_tools
else := "host_net" if tool in gatekeeper.host_net_tools
else := "other"

_path(raw, resolved) := _fact(raw, raw, resolved)

_fact(raw, abs, resolved) := {
	"field": "file_path", "raw": raw, "abs": abs, "resolved": resolved, "error": "",
	"covered": _covered({abs, resolved}),
	"deny_matches": _matches(_covered({abs, resolved})),
}

# _matches is what the sidecar computes: the deny globs matching a covered path.
_matches(covered) := [g | some g in _deny_globs; some c in covered; glob.match(g, ["/"], c)]

_deny_globs := ["/root/.ssh/**", "**/.env", "/root/.*"]

# _covered is what the sidecar computes: the paths and all their ancestors.
_covered(paths) := {a |
	some p in paths
	parts := split(p, "/")
	some n in numbers.range(2, count(parts))
	a := concat("/", array.slice(parts, 0, n))
}

test_unlisted_tool_is_denied if {
	d := gatekeeper.decision with input as _in("Frobnicate", {})
	d.decision == "deny"
	d.rule == "tools.not_allowlisted"
}

test_deny_list_wins if {
	d := gatekeeper.decision with input as _in("Bash", {})
	d == {"decision": "deny", "rule": "tools.deny_list", "reason": "tool \"Bash\" is denied by the gatekeeper policy"}
}

test_case_variant_is_not_the_tool if {
	d := gatekeeper.decision with input as _in("read", {"paths": [_path("/srv/app/a", "/srv/app/a")]})
	d.rule == "tools.not_allowlisted"
}

test_zero_width_name_is_malformed if {
	d := gatekeeper.decision with input as _in("Re\u200bad", {})
	d.rule == "tools.malformed_name"
}

test_trailing_space_name_is_malformed if {
	d := gatekeeper.decision with input as _in("Read ", {})
	d.rule == "tools.malformed_name"
}

test_ask_list_asks if {
	d := gatekeeper.decision with input as _in("NotebookEdit", {"paths": [_path("/srv/app/n.ipynb", "/srv/app/n.ipynb")]})
	d.decision == "ask"
	d.rule == "tools.ask_list"
}

test_plain_allowlisted_tool_is_allowed if {
	d := gatekeeper.decision with input as _in("TodoWrite", {})
	d.decision == "allow"
	d.rule == "tools.allow_list"
}

test_read_inside_workspace_is_allowed if {
	d := gatekeeper.decision with input as _in("Read", {"paths": [_path("/srv/app/notes.txt", "/srv/app/notes.txt")]})
	d.decision == "allow"
	d.rule == "host_fs.inside_workspace"
}

test_read_of_sibling_prefix_is_outside if {
	d := gatekeeper.decision with input as _in("Read", {"paths": [_path("/srv/app2/x", "/srv/app2/x")]})
	d.rule == "host_fs.outside_workspace"
}

test_symlink_out_of_workspace_is_denied if {
	d := gatekeeper.decision with input as _in("Read", {"paths": [_path("/srv/app/link", "/etc/passwd")]})
	d.rule == "host_fs.outside_workspace"
	contains(d.reason, "resolves to /etc/passwd")
}

test_deny_glob_inside_workspace if {
	d := gatekeeper.decision with input as _in("Read", {"paths": [_path("/srv/app/.env", "/srv/app/.env")]})
	d.rule == "host_fs.deny_glob"
}

test_deny_glob_covers_children_of_a_match if {
	d := gatekeeper.decision with input as _in("Read", {"workspace_root": "/root", "paths": [_path("/root/.config/gh/hosts.yml", "/root/.config/gh/hosts.yml")]})
	d.rule == "host_fs.deny_glob"
}

test_deny_glob_checks_the_unresolved_path_too if {
	p := _fact("/srv/app/.env", "/srv/app/.env", "/srv/app/config")
	d := gatekeeper.decision with input as _in("Read", {"paths": [p]})
	d.rule == "host_fs.deny_glob"
}

test_bad_path_is_denied if {
	p := {"field": "file_path", "raw": "a\u0000b", "abs": "", "resolved": "", "covered": [], "deny_matches": [], "error": "path contains a NUL byte"}
	d := gatekeeper.decision with input as _in("Read", {"paths": [p]})
	d.rule == "host_fs.bad_path"
}

test_file_tool_without_path_is_denied if {
	d := gatekeeper.decision with input as _in("Read", {})
	d.rule == "host_fs.no_path"
}

test_sandbox_tool_from_sdk_server_is_allowed if {
	d := gatekeeper.decision with input as _in("mcp__sandboxed_code__run", {"tool_input": {"language": "python", "code": "print(1)"}, "mcp_server": {"name": "sandboxed_code", "source": "sdk"}})
	d.decision == "allow"
}

test_sandbox_tool_from_configured_server_is_denied if {
	d := gatekeeper.decision with input as _in("mcp__sandboxed_code__run", {"tool_input": {"language": "python"}, "mcp_server": {"name": "sandboxed_code", "source": "stdio"}})
	d.rule == "mcp.untrusted_sandboxed_code"
}

test_sandbox_tool_from_attested_gatekeeper_mcp_is_allowed if {
	d := gatekeeper.decision with input as _in("mcp__sandboxed_code__run", {"tool_input": {"language": "python", "code": "print(1)"}, "mcp_server": {"name": "sandboxed_code", "source": "gatekeeper"}})
	d.decision == "allow"
}

test_sandbox_tool_from_a_cli_scope_is_denied if {
	every scope in ["claude-code:enterprise", "claude-code:project", "claude-code:user", "claude-code:local", "claude-code:plugin", "claude-code:dynamic", "claude-code:stdio", "claude-code:sdk", "claude-code:gatekeeper", "claude-code:", "enterprise", "project", "stdio", "unknown"] {
		d := gatekeeper.decision with input as _in("mcp__sandboxed_code__run", {"tool_input": {"language": "python"}, "mcp_server": {"name": "sandboxed_code", "source": scope}})
		d.rule == "mcp.untrusted_sandboxed_code"
	}
}

test_gatekeeper_source_of_another_server_is_not_the_sandbox if {
	d := gatekeeper.decision with input as _in("mcp__other__run", {"tool_input": {"language": "python"}, "mcp_server": {"name": "other", "source": "gatekeeper"}})
	d.rule == "tools.not_allowlisted"
}

test_sandbox_tool_without_provenance_is_denied if {
	d := gatekeeper.decision with input as _in("mcp__sandboxed_code__run", {"tool_input": {"language": "python"}})
	d.rule == "mcp.untrusted_sandboxed_code"
}

test_mcp_name_collision_is_not_the_sandbox_tool if {
	d := gatekeeper.decision with input as _in("mcp__sandboxed_code__run__x", {"mcp_server": {"name": "sandboxed_code", "source": "sdk"}})
	d.rule == "tools.not_allowlisted"
}

test_mcp_server_mismatch_is_denied if {
	d := gatekeeper.decision with input as _in("mcp__sandboxed__code_run", {"mcp_server": {"name": "sandboxed_code", "source": "sdk"}})
	d.rule == "mcp.server_mismatch"
}

test_run_with_unknown_language_is_denied if {
	d := gatekeeper.decision with input as _in("mcp__sandboxed_code__run", {"tool_input": {"language": "ruby"}, "mcp_server": {"name": "sandboxed_code", "source": "sdk"}})
	d.rule == "run.bad_language"
	d.reason == "language \"ruby\" is not one of python, sh, node"
}

test_run_without_language_is_denied if {
	d := gatekeeper.decision with input as _in("mcp__sandboxed_code__run", {"tool_input": {"code": "1"}, "mcp_server": {"name": "sandboxed_code", "source": "sdk"}})
	d.rule == "run.bad_language"
}

test_run_without_run_languages_is_denied if {
	d := gatekeeper.decision with input as object.remove(_in("mcp__sandboxed_code__run", {"tool_input": {"language": "python", "code": "1"}, "mcp_server": {"name": "sandboxed_code", "source": "sdk"}}), ["run_languages"])
	d.rule == "run.bad_language"
}

# The sidecar computes url.allow_matches and url.deny_matches with the egress
# proxy's own matcher (internal/nethost, tested there and through the sidecar
# in gate); these tests pin the rules over those facts.
_url(host, allow, deny) := {"url": {"raw": concat("", ["https://", host, "/"]), "host": host, "port": "443", "allow_matches": allow, "deny_matches": deny, "error": ""}}

test_webfetch_allowlisted_host if {
	d := gatekeeper.decision with input as _in("WebFetch", _url("pypi.org", ["pypi.org"], []))
	d.decision == "allow"
	d.rule == "net.host_allowed"
}

test_webfetch_host_no_allow_pattern_matches if {
	d := gatekeeper.decision with input as _in("WebFetch", _url("example.com", [], []))
	d.rule == "net.host_not_allowed"
}

test_webfetch_deny_beats_allow if {
	d := gatekeeper.decision with input as _in("WebFetch", _url("bad.example.com", ["*.example.com"], ["bad.example.com"]))
	d.rule == "net.host_denied"
	d.reason == "WebFetch of host bad.example.com is forbidden by sandbox.net.deny pattern \"bad.example.com\""
}

test_webfetch_without_match_facts_is_not_allowed if {
	d := gatekeeper.decision with input as _in("WebFetch", {"url": {"raw": "https://pypi.org/", "host": "pypi.org", "port": "443", "error": ""}})
	d.rule == "net.host_not_allowed"
}

_builtin(host, allow, deny, kind, reason) := {"url": object.union(u, {"builtin": [{"block": kind, "reason": reason}]})} if {
	u := _url(host, allow, deny).url
}

test_webfetch_metadata_is_denied_even_when_allowlisted if {
	d := gatekeeper.decision with input as _in("WebFetch", _builtin("169.254.169.254", ["169.254.169.254"], [], "metadata", "host 169.254.169.254 is a cloud metadata endpoint, which no policy can allow"))
	d.decision == "deny"
	d.rule == "net.metadata"
	d.reason == "WebFetch: host 169.254.169.254 is a cloud metadata endpoint, which no policy can allow"
}

test_webfetch_model_vendor_is_denied_even_when_allowlisted if {
	d := gatekeeper.decision with input as _in("WebFetch", _builtin("api.openai.com", ["api.openai.com"], [], "model_vendor", "x"))
	d.rule == "net.model_vendor"
}

test_webfetch_private_address_is_denied if {
	d := gatekeeper.decision with input as _in("WebFetch", _builtin("127.0.0.1", [], [], "private_address", "x"))
	d.rule == "net.private_address"
}

test_webfetch_builtin_block_reports_itself_rather_than_the_allow_list if {
	# net.host_not_allowed would sort first; allowing the host would not help.
	d := gatekeeper.decision with input as _in("WebFetch", _builtin("metadata.google.internal", [], [], "metadata", "x"))
	d.rule == "net.metadata"
}

test_webfetch_builtin_block_of_an_unknown_kind_still_needs_the_allow_list if {
	d := gatekeeper.decision with input as _in("WebFetch", _builtin("example.com", [], [], "new_kind", "x"))
	d.rule == "net.host_not_allowed"
}

test_webfetch_net_deny_is_still_reported_with_a_builtin_block if {
	d := gatekeeper.decision with input as _in("WebFetch", _builtin("api.openai.com", ["api.openai.com"], ["api.openai.com"], "model_vendor", "x"))
	d.decision == "deny"
	d.rule == "net.host_denied"
}

test_webfetch_bad_url if {
	d := gatekeeper.decision with input as _in("WebFetch", {"url": {"raw": "ftp://x", "host": "", "port": "", "allow_matches": [], "deny_matches": [], "error": "not http or https"}})
	d.rule == "net.bad_url"
}

test_webfetch_with_network_disabled if {
	pol := json.patch(_policy, [{"op": "replace", "path": "/sandbox/net/enabled", "value": false}])
	d := gatekeeper.decision with input as _in("WebFetch", object.union({"policy": pol}, _url("pypi.org", ["pypi.org"], [])))
	d.rule == "net.disabled"
}

test_operator_deny_beats_builtin_allow if {
	d := gatekeeper.decision with input as _in("TodoWrite", {})
		with gatekeeper.deny as {{"rule": "team.no_todos", "reason": "todos are off"}}
	d == {"decision": "deny", "rule": "team.no_todos", "reason": "todos are off"}
}

test_ask_beats_allow if {
	d := gatekeeper.decision with input as _in("TodoWrite", {})
		with gatekeeper.ask as {{"rule": "team.confirm", "reason": "confirm"}}
	d.decision == "ask"
}

test_missing_tool_kind_fails_closed if {
	# Without the sidecar's classification no rule allows a host file tool.
	d := gatekeeper.decision with input as object.remove(_in("Read", {"paths": [_path("/srv/app/notes.txt", "/srv/app/notes.txt")]}), ["tool_kind"])
	d.decision == "deny"
	d.rule == "tools.not_allowlisted"
}

test_host_fs_tool_misclassified_as_other_is_not_allowed_unjudged if {
	d := gatekeeper.decision with input as _in("Read", {"tool_kind": "other", "paths": [_path("/etc/passwd", "/etc/passwd")]})
	d.decision == "deny"
}

test_grep_of_a_directory_holding_a_denied_file_is_denied if {
	p := object.union(_path("/srv/app", "/srv/app"), {"deny_within": [{"path": "/srv/app/.env", "glob": "**/.env"}], "within_error": ""})
	d := gatekeeper.decision with input as _in("Grep", {"paths": [p]})
	d.decision == "deny"
	d.rule == "host_fs.deny_glob_within"
	contains(d.reason, "would also read /srv/app/.env")
	contains(d.reason, "\"**/.env\"")
}

test_grep_of_a_clean_directory_is_allowed if {
	p := object.union(_path("/srv/app/src", "/srv/app/src"), {"deny_within": [], "within_error": ""})
	pol := {"tools": {"allow": ["Grep"], "deny": [], "ask": []}, "sandbox": _policy.sandbox}
	d := gatekeeper.decision with input as _in("Grep", {"paths": [p], "policy": pol})
	d.decision == "allow"
	d.rule == "host_fs.inside_workspace"
}

test_grep_of_a_directory_too_large_to_check_is_denied if {
	p := object.union(_path("/srv/app", "/srv/app"), {"deny_within": [], "within_error": "/srv/app holds more than 100000 entries"})
	d := gatekeeper.decision with input as _in("Grep", {"paths": [p]})
	d.decision == "deny"
	d.rule == "host_fs.search_unchecked"
}

# host_fs.outside_workspace writes out `not core.in_workspace(p.resolved)`
# for speed; these pin the two together, on roots with and without a
# trailing slash, the root "/" and a sibling sharing the root's prefix.
# (Without a workspace_root the finding's reason, which names the root, is
# undefined, so the rule finds nothing either way.)
_ws_cases := [
	{"root": "/srv/app", "path": "/srv/app"},
	{"root": "/srv/app", "path": "/srv/app/a/b"},
	{"root": "/srv/app", "path": "/srv/application"},
	{"root": "/srv/app", "path": "/srv"},
	{"root": "/srv/app", "path": "/etc/passwd"},
	{"root": "/srv/app/", "path": "/srv/app"},
	{"root": "/srv/app/", "path": "/srv/app/a"},
	{"root": "/", "path": "/etc/passwd"},
	{"root": "/", "path": "/"},
]

_ws_input(c) := _in("Read", {"paths": [_path(c.path, c.path)], "workspace_root": c.root})

_inside(c) if gatekeeper.core.in_workspace(c.path) with input as _ws_input(c)

_outside_denied(c) if {
	some f in gatekeeper.deny with input as _ws_input(c)
	f.rule == "host_fs.outside_workspace"
}

test_outside_workspace_is_exactly_not_in_workspace if {
	every c in _ws_cases {
		_outcome(c) == _judged(c)
	}
}

_judged(c) := "outside" if _outside_denied(c)
else := "inside"

test_outside_workspace_cases_cover_both_outcomes if {
	{x | some c in _ws_cases; x := _outcome(c)} == {"inside", "outside"}
}

_outcome(c) := "inside" if _inside(c)
else := "outside"

test_readable_is_exactly_a_rule_and_a_reason if {
	gatekeeper.core.readable({"rule": "a", "reason": "b"})
	not gatekeeper.core.readable({"rule": "a"})
	not gatekeeper.core.readable({"rule": "a", "reason": "b", "extra": 1})
	not gatekeeper.core.readable({"rule": "", "reason": "b"})
	not gatekeeper.core.readable({"rule": "a", "reason": 1})
	not gatekeeper.core.readable("a finding")
}
