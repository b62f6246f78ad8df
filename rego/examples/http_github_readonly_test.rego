package http_github_readonly_test

import data.gatekeeper

_req(method, path) := {
	"event": "http_request", "tool_name": "http_request", "tool_kind": "http_request",
	"run_id": "run_1", "query_id": "q_1", "policy": {"tools": {"allow": [], "deny": [], "ask": []}},
	"http": {
		"method": method, "scheme": "https", "host": "api.github.com", "port": 443,
		"path": path, "query": "", "proto": "HTTP/1.1",
		"headers": ["Authorization"], "body_bytes": 0, "body": "", "secrets": ["github"],
	},
}

test_get_of_our_repository_is_allowed if {
	d := gatekeeper.decision with input as _req("GET", "/repos/our-org/x")
	d.decision == "allow"
	d.rule == "http.allowed"
}

test_head_of_our_repository_is_allowed if {
	gatekeeper.decision.decision == "allow" with input as _req("HEAD", "/repos/our-org/x/contents/a")
}

test_delete_is_refused if {
	d := gatekeeper.decision with input as _req("DELETE", "/repos/our-org/x")
	d.decision == "deny"
	d.rule == "github.read_only"
}

test_another_org_is_refused if {
	d := gatekeeper.decision with input as _req("GET", "/repos/other-org/x")
	d.decision == "deny"
	d.rule == "github.our_org_only"
}

test_a_dot_segment_is_refused if {
	d := gatekeeper.decision with input as _req("GET", "/repos/our-org/./../other-org/x")
	d.rule == "github.our_org_only"
}

test_another_host_is_not_this_rules_business if {
	d := gatekeeper.decision with input as object.union(_req("DELETE", "/x"), {"http": object.union(_req("DELETE", "/x").http, {"host": "example.org"})})
	d.decision == "allow"
}
