package runner

import (
	"errors"
	"fmt"
	"log/slog"
)

// ServerError is an MCP server's failure as a program and the model see
// it: the server's name, the kind of failure, and a reason in gatekeeper's
// own words. Error is the one function that words it, and it never
// includes Cause: the raw error of a transport, a process or the server
// (it may name the server's command or URL, or quote the server's own
// text), which is the operator's, for the sidecar's log (LogValue) and
// the audit line (ServerErrorDetail) only.
type ServerError struct {
	// Server is the server's name in the policy.
	Server string
	// Kind is the kind of failure, a sentinel error of the MCP client
	// (such as "MCP server unavailable"): errors.Is matches it.
	Kind error
	// Reason says why in gatekeeper's words; it holds nothing the server,
	// its transport or its configuration wrote.
	Reason string
	// Cause is the raw error; nil when there is none.
	Cause error
}

// Error returns `mcp server "<name>": <kind>: <reason>`, without Cause.
func (e *ServerError) Error() string {
	s := fmt.Sprintf("mcp server %q: %v", e.Server, e.Kind)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns Kind and Cause, for errors.Is and errors.As.
func (e *ServerError) Unwrap() []error { return []error{e.Kind, e.Cause} }

// LogValue logs the error with its Cause, for the sidecar's log.
func (e *ServerError) LogValue() slog.Value {
	return slog.StringValue(e.detail())
}

func (e *ServerError) detail() string {
	if e.Cause == nil {
		return e.Error()
	}
	return e.Error() + " (" + e.Cause.Error() + ")"
}

// ServerErrorDetail returns the text of the ServerError in err's chain
// with its Cause, for the audit line and the sidecar's log; "" when err
// holds none.
func ServerErrorDetail(err error) string {
	var se *ServerError
	if errors.As(err, &se) {
		return se.detail()
	}
	return ""
}

// ErrResultTooLarge is the Kind of a ServerError whose server's answer to
// a call was larger than the bound its MCP client reads
// (code_calls.max_result_bytes): the answer was not read to its end, and
// the call is refused by that bound.
var ErrResultTooLarge = errors.New("MCP server's answer is larger than " + RuleMaxResultBytes)
