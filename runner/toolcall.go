package runner

import (
	"context"
	"encoding/json"
	"time"
)

// ToolCall is one call a run's program made through the bridge.
type ToolCall struct {
	Server, Tool string
	Arguments    json.RawMessage // a JSON object, within Sandbox.Calls.MaxArgumentBytes
	Seq          int             // 1-based order of the call within its run
	InFlight     int             // calls of the run in flight, this one included
}

// ToolResult is the answer to a ToolCall: Result (an MCP CallToolResult as JSON) or Err.
type ToolResult struct {
	Result json.RawMessage
	Err    *ToolError
}

// ToolError is a call that got no result; Kind is one of the kinds above.
type ToolError struct{ Kind, Rule, Message string }

// ToolCaller executes a run's nested calls (Spec.Tools). The gate implements it: it decides each call,
// forwards the allowed ones and audits them. CallTool must return when ctx ends.
type ToolCaller interface {
	CallTool(ctx context.Context, call ToolCall) ToolResult
}

// CallLimits bounds a run's nested calls (Sandbox.Calls). The zero value allows no call at all.
type CallLimits struct {
	MaxCalls         int           // calls per run
	MaxInFlight      int           // calls in flight at once
	MaxArgumentBytes int64         // bytes of one call's arguments JSON
	MaxResultBytes   int64         // bytes of one call's result JSON
	Timeout          time.Duration // per call
}

// The kinds of a ToolError, as the program's runtime sees them.
const (
	ToolDenied     = "denied"      // the policy refused: Rule names the Rego rule
	ToolLimit      = "limit"       // a CallLimits bound was hit: Rule names it
	ToolTimeout    = "timeout"     // the call outlived CallLimits.Timeout
	ToolServer     = "server"      // the MCP server failed or is down
	ToolCancelled  = "cancelled"   // the run is ending
	ToolBadRequest = "bad_request" // the line was not a valid request
)

// The rules a limit or timeout answer names, one per CallLimits bound: the
// policy's fields under code_calls, which the gate's policy validates, the
// bridge and the gate enforce and the program sees in ToolError.Rule.
const (
	RuleMaxCalls         = "code_calls.max_calls"
	RuleMaxInFlight      = "code_calls.max_in_flight"
	RuleMaxArgumentBytes = "code_calls.max_argument_bytes"
	RuleMaxResultBytes   = "code_calls.max_result_bytes"
	RuleTimeout          = "code_calls.timeout"
)
