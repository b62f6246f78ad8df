package runner

import (
	"context"
	"encoding/json"
	"time"
)

// NestedCall is one call a run's program made through the bridge.
type NestedCall struct {
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

// ToolCaller executes a run's nested calls (Spec.Caller). The gate implements it: it decides each call,
// forwards the allowed ones and audits them. CallTool must return when ctx ends.
type ToolCaller interface {
	CallTool(ctx context.Context, call NestedCall) ToolResult
}

// CallLimits bounds a run's nested calls (Sandbox.Calls). The zero value allows no call at all.
type CallLimits struct {
	MaxCalls         int           // calls per run
	MaxInFlight      int           // calls in flight at once; the others wait their turn, in order
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
	// RuleBadRequest is the rule of a line that is not a valid request
	// (kind ToolBadRequest): not JSON, an unknown field, no server or
	// tool, arguments that are not an object.
	RuleBadRequest = "code_calls.bad_request"
	// RuleMaxRefusals is the rule of every call after a run's
	// MaxRefusals refusals (kind ToolLimit): the bridge is closed for the
	// rest of the run. A fixed bound, not a policy field.
	RuleMaxRefusals = "code_calls.max_refusals"
)

// The bounds on what a run's refusals write to the audit log, whatever
// the policy says: a program that floods the bridge with calls it knows
// are refused (past max_calls, malformed, oversize) costs at most
// MaxRefusalLines lines of their own and one line counting the rest, and
// after MaxRefusals refusals the bridge is closed for the run: every
// later call is refused (RuleMaxRefusals) without being looked at further.
const (
	MaxRefusalLines = 64
	MaxRefusals     = 1024
)

// ToolRefusal is a call the bridge answered itself, without CallTool:
// a line that is not a request, a CallLimits bound, a call whose timeout
// passed while it waited for a slot, a call still waiting when the run
// ended, or any call once the bridge is closed (RuleMaxRefusals).
type ToolRefusal struct {
	// Call is what the bridge read of the call: Seq always; Server, Tool
	// and Arguments when the line was a request (Arguments as sent, at
	// most a line's bound); InFlight is 0.
	Call NestedCall
	// Err is the program's answer; its Kind and Rule are the refusal's.
	Err ToolError
}

// RefusalCounts counts the refusals of a run that got no Refused call.
type RefusalCounts struct {
	// ByRule counts them by rule, or by kind for one without a rule (a
	// call still waiting when the run ended: ToolCancelled).
	ByRule map[string]int
	// Closed is set when the run reached MaxRefusals and the bridge closed.
	Closed bool
}

// RefusalRecorder is an optional ability of a ToolCaller, tested for at
// run time (as http.Flusher is): the bridge tells it of the calls it
// refused itself, so that every call of a run is audited, refusals
// included. A run's first MaxRefusalLines refusals each come to Refused;
// the rest are counted and come to Omitted once, after every Refused and
// CallTool of the run returned, when the run ended (not at all when
// there were none). So a run's calls (Result.ToolCalls) are its CallTool
// calls, plus its Refused calls, plus the counts in its Omitted.
// Both are called from the bridge's goroutines, never on the path that
// reads the program's output; they may block (an audit write), and must
// be safe for concurrent use.
type RefusalRecorder interface {
	Refused(r ToolRefusal)
	Omitted(c RefusalCounts)
}
