# gatekeeper: requests of sandboxed code to intercepted hosts.
#
# A networked run's HTTPS (and plain http) requests to a host the policy
# names for inspection (sandbox.net.inspect, or a secret's hosts) are
# terminated by the egress proxy and each decided here, with the same
# entry point, data.gatekeeper.decision, and the same deny, ask and allow
# sets as every tool call, over this input:
#   event, tool_name, tool_kind  "http_request" (no tool-call rule of the
#                  built-in policy reads this kind)
#   run_id, query_id  the run making the request and its query
#   policy         the query's effective policy, as for every call
#   http           {"method": as sent ("GET"; upper case for the standard
#                  methods), "scheme": "https" | "http", "host": normalized
#                  as the proxy matches it (lower case, no trailing dot),
#                  "port": a number, "path": the request path as sent
#                  (escaped form, starting with "/"), "query": the raw query
#                  without "?", "proto": "HTTP/1.1" | "HTTP/2.0",
#                  "headers": the header names, canonical ("Authorization"),
#                  sorted, each once (never their values), "body_bytes": the
#                  body's length, -1 when unknown before it is sent,
#                  "body": its first sandbox.net.body_preview bytes as a
#                  string (invalid UTF-8 replaced by U+FFFD; sentinels, never
#                  secrets), "secrets": the names of the secrets the proxy
#                  would inject into this request}
# Default allow: a request is allowed (http.allowed) unless a deny finding
# holds; the operator's modules add deny findings (see
# docs/examples/http_github_readonly.rego). An ask is a refusal: nobody can
# answer it while the request waits. The proxy refuses misplaced or
# missing sentinels before it asks (egress.secret_*), and injects a secret
# only into a request allowed here.
package gatekeeper

allow contains {
	"rule": "http.allowed",
	"reason": sprintf("%s %s://%s%s is allowed: no rule of the policy refuses it", [input.http.method, input.http.scheme, input.http.host, input.http.path]),
} if {
	input.tool_kind == "http_request"
	_http_consistent
}

# The event, the kind and the name must all say http_request, and the
# request must have the fields a rule reads: a hand-made input that lacks
# them is refused rather than allowed past rules that could not match it.
deny contains {
	"rule": "http.malformed_input",
	"reason": "a request's input does not agree with itself (event, tool_kind, tool_name and the http fields), so it is refused",
} if {
	input.tool_kind == "http_request"
	not _http_consistent
}

_http_consistent if {
	input.event == "http_request"
	input.tool_name == "http_request"
	is_string(input.http.method)
	is_string(input.http.host)
	is_number(input.http.port)
	startswith(input.http.path, "/")
	is_string(input.http.query)
	is_array(input.http.headers)
	is_string(input.http.body)
	is_array(input.http.secrets)
}
