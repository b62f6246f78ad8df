package code_calls_test

import data.gatekeeper

_policy := {
	"tools": {"allow": ["mcp__crm__get_customer"], "deny": ["mcp__crm__drop_table"], "ask": ["mcp__crm__send_mail"]},
	"code_calls": {"callable": {"crm": ["get_*", "send_mail", "drop_table"]}},
}

# _call is the sidecar's input for a nested call of tool on server crm,
# with the callable globs that match it.
_call(tool, matches, extra) := object.union(
	{
		"event": "code_call", "tool_name": concat("", ["mcp__crm__", tool]), "tool_kind": "code_call",
		"tool_input": {"id": "c-1"}, "tool_use_id": "toolu_run", "policy": _policy, "workspace_root": "/srv/app",
		"deny_globs": [], "paths": [], "run_languages": ["python"],
		"mcp_server": {"name": "crm", "source": "policy"},
		"code_call": {
			"run_id": "run_1", "query_id": "q_1", "tool_use_id": "toolu_run", "server": "crm", "tool": tool,
			"arguments": {"id": "c-1"}, "tool_known": true,
			"annotations": {"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false},
			"counters": {"calls": 1, "in_flight": 1}, "callable_matches": matches,
		},
	},
	extra,
)

test_a_callable_tool_is_allowed if {
	d := gatekeeper.decision with input as _call("get_customer", ["get_*"], {})
	d.decision == "allow"
	d.rule == "code_calls.callable"
	contains(d.reason, "code_calls.callable.crm: get_*")
}

test_a_tool_no_glob_names_is_denied if {
	d := gatekeeper.decision with input as _call("delete_customer", [], {})
	d.decision == "deny"
	d.rule == "code_calls.not_callable"
}

# tools.allow lets the model call a tool; it never makes it callable from code.
test_tools_allow_does_not_make_a_tool_callable if {
	d := gatekeeper.decision with input as _call("get_customer", [], {})
	d.rule == "code_calls.not_callable"
}

test_without_the_sidecars_matches_nothing_is_callable if {
	inp := json.remove(_call("get_customer", ["get_*"], {}), ["code_call/callable_matches"])
	d := gatekeeper.decision with input as inp
	d.decision == "deny"
	d.rule == "code_calls.not_callable"
}

test_an_unknown_tool_is_denied if {
	inp := json.patch(_call("get_ghost", ["get_*"], {}), [{"op": "replace", "path": "/code_call/tool_known", "value": false}])
	d := gatekeeper.decision with input as inp
	d.rule == "code_calls.unknown_tool"
}

test_tools_deny_holds_for_code_too if {
	d := gatekeeper.decision with input as _call("drop_table", ["drop_table"], {})
	d.decision == "deny"
	d.rule == "tools.deny_list"
}

test_tools_ask_is_an_ask_for_code_too if {
	d := gatekeeper.decision with input as _call("send_mail", ["send_mail"], {})
	d.decision == "ask"
	d.rule == "tools.ask_list"
}

test_a_tool_name_that_disagrees_with_server_and_tool_is_denied if {
	d := gatekeeper.decision with input as _call("get_customer", ["get_*"], {"tool_name": "mcp__crm__get_other"})
	d.decision == "deny"
	d.rule == "code_calls.malformed_input"
}

test_another_event_with_the_code_call_kind_is_denied if {
	d := gatekeeper.decision with input as _call("get_customer", ["get_*"], {"event": "PreToolUse"})
	d.decision == "deny"
	d.rule == "code_calls.malformed_input"
}

# A code call's kind keeps the host tool rules away, and the sandbox tool
# stays trusted only from gatekeeper's own server.
test_the_sandbox_tool_is_not_callable_from_code if {
	inp := object.union(_call("run", ["*"], {}), {
		"tool_name": "mcp__sandboxed_code__run", "mcp_server": {"name": "sandboxed_code", "source": "policy"},
		"code_call": {"server": "sandboxed_code"},
	})
	d := gatekeeper.decision with input as inp
	d.decision == "deny"
	d.rule == "mcp.untrusted_sandboxed_code"
}
