# gatekeeper: nested calls from sandboxed code (code mode).
#
# A program in a sandboxed run calls an MCP tool of one of the operator's
# servers through the bridge; the sidecar decides each such call with the
# same entry point, data.gatekeeper.decision, and the same deny, ask and
# allow sets as every tool call, over this input:
#   event          "code_call"
#   tool_kind      "code_call" (no other rule of the built-in policy allows
#                  this kind: tools.allow lets the model call a tool, not code)
#   tool_name      "mcp__<server>__<tool>", so tools.deny and tools.ask name
#                  a tool for both paths
#   tool_input     the call's arguments (an object)
#   tool_use_id    the tool use id of the run that makes the call
#   mcp_server     {"name": <server>, "source": "policy"} (a server of the
#                  policy's mcp_servers) or "source": "sdk" (an in-process
#                  server the query's client declared in sdk_servers, whose
#                  calls the client's own process runs)
#   policy, workspace_root, run_languages, deny_globs, write_protect_globs
#                  as for every call; paths is []
#   code_call      {"run_id", "query_id", "tool_use_id", "server", "tool",
#                  "arguments" (= tool_input),
#                  "tool_known": whether the server lists the tool,
#                  "annotations": {"readOnlyHint", "destructiveHint",
#                  "openWorldHint"}, the tool's MCP hints with
#                  MCP's defaults (false, true, true) where the server
#                  gives none; destructiveHint is false for a read-only
#                  tool (MCP: it means something only when readOnlyHint is
#                  false),
#                  "counters": {"calls": this call's 1-based number in its run,
#                  "in_flight": the run's calls in flight, this one included},
#                  "callable_matches": the globs of the effective
#                  code_calls.callable[server] that match tool (matched by
#                  the sidecar's one tool glob matcher)}
# Default deny: a call is allowed only when a callable glob names the tool
# and no deny or ask finding holds. An ask is relayed to the query's client
# (its canUseTool) while the call waits; without an answer that allows it,
# it is a deny with the ask's rule (gate/approval.go).
package gatekeeper

deny contains {
	"rule": "code_calls.unknown_tool",
	"reason": sprintf("MCP server %q has no tool %q", [input.code_call.server, input.code_call.tool]),
} if {
	input.tool_kind == "code_call"
	not input.code_call.tool_known
}

deny contains {
	"rule": "code_calls.not_callable",
	"reason": sprintf("tool %q of MCP server %q may not be called from code: no glob of the policy's code_calls.callable.%s names it", [input.code_call.tool, input.code_call.server, input.code_call.server]),
} if {
	input.tool_kind == "code_call"
	not _code_callable
}

# Both the event and the kind must say code_call, and the sidecar's
# tool_name must be the one it builds from server and tool.
deny contains {
	"rule": "code_calls.malformed_input",
	"reason": "a nested call's input does not agree with itself (event, tool_kind and tool_name), so it is denied",
} if {
	input.tool_kind == "code_call"
	not _code_call_consistent
}

allow contains {
	"rule": "code_calls.callable",
	"reason": sprintf("tool %q of MCP server %q is callable from code (code_calls.callable.%s: %s)", [input.code_call.tool, input.code_call.server, input.code_call.server, concat(", ", input.code_call.callable_matches)]),
} if {
	input.tool_kind == "code_call"
	_code_callable
	_code_call_consistent
}

_code_callable if {
	some _ in input.code_call.callable_matches
}

_code_call_consistent if {
	input.event == "code_call"
	input.tool_name == concat("", ["mcp__", input.code_call.server, "__", input.code_call.tool])
}
