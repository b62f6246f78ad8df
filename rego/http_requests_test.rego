package http_requests_test

import data.gatekeeper

_policy := {"tools": {"allow": [], "deny": [], "ask": []}, "sandbox": {"net": {"enabled": true}}}

# _req is the sidecar's input for one request of run_1, with extra merged
# into its http object.
_req(extra) := {
	"event": "http_request", "tool_name": "http_request", "tool_kind": "http_request",
	"run_id": "run_1", "query_id": "q_1", "policy": _policy,
	"http": object.union(
		{
			"method": "GET", "scheme": "https", "host": "api.github.com", "port": 443,
			"path": "/repos/our-org/x", "query": "", "proto": "HTTP/1.1",
			"headers": ["Accept", "Authorization"], "body_bytes": 0, "body": "", "secrets": ["github"],
		},
		extra,
	),
}

test_a_request_no_rule_refuses_is_allowed if {
	d := gatekeeper.decision with input as _req({})
	d.decision == "allow"
	d.rule == "http.allowed"
	d.reason == "GET https://api.github.com/repos/our-org/x is allowed: no rule of the policy refuses it"
}

test_any_method_is_allowed_by_the_builtin_rule if {
	d := gatekeeper.decision with input as _req({"method": "DELETE"})
	d.decision == "allow"
}

test_an_operator_deny_wins if {
	d := gatekeeper.decision with input as _req({"method": "DELETE"})
		with gatekeeper.deny as {{"rule": "ops.no_delete", "reason": "no DELETE"}}
	d.decision == "deny"
	d.rule == "ops.no_delete"
}

test_a_request_without_a_path_is_refused if {
	d := gatekeeper.decision with input as _req({"path": "*"})
	d.decision == "deny"
	d.rule == "http.malformed_input"
}

test_a_request_missing_fields_is_refused if {
	d := gatekeeper.decision with input as object.remove(_req({}), ["tool_name"])
	d.decision == "deny"
}

test_a_request_whose_event_disagrees_is_refused if {
	d := gatekeeper.decision with input as object.union(_req({}), {"event": "PreToolUse"})
	d.decision == "deny"
	d.rule == "http.malformed_input"
}

# A tool call's kinds never reach the request rule.
test_the_http_rule_needs_the_http_kind if {
	d := gatekeeper.decision with input as object.union(_req({}), {"tool_kind": "other"})
	d.decision == "deny"
	d.rule != "http.allowed"
}
