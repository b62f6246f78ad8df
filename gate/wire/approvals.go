package wire

import (
	"encoding/json"
	"unicode/utf8"
)

// MaxApprovalMessageChars bounds an Approval's message.
const MaxApprovalMessageChars = 4096

// Values of Approval.Decision.
const (
	ApprovalAllow = "allow"
	ApprovalDeny  = "deny"
)

// ApprovalRequest asks the client of a query that declared approvals
// (OpenQuery.Approvals) to answer the policy's ask on a nested call of
// sandboxed code: the client asks its canUseTool handler and answers with
// an Approval of the same id. The program's call waits for it, at most
// TimeoutMS.
type ApprovalRequest struct {
	// ID is the sidecar's id of the ask ("a_…"), unique on the connection.
	ID      string `json:"id"`
	QueryID string `json:"query_id"`
	// RunID is the run whose program made the call; ToolUseID the model's
	// tool use of that sandboxed_code run; Language its program's.
	RunID     string `json:"run_id"`
	ToolUseID string `json:"tool_use_id"`
	Language  string `json:"language"`
	// Server and Tool name the tool; ToolName is its MCP name
	// (mcp__server__tool), what canUseTool is given.
	Server   string `json:"server"`
	Tool     string `json:"tool"`
	ToolName string `json:"tool_name"`
	// ServerSource is "policy" (an operator's server) or "sdk" (one of the
	// client's in-process servers).
	ServerSource string `json:"server_source"`
	// Arguments are the call's arguments, a JSON object, as the policy
	// saw them and as the server would get them.
	Arguments json.RawMessage `json:"arguments"`
	// CallSeq is the call's 1-based number within its run.
	CallSeq int `json:"call_seq"`
	// Rule and Reason are the policy's ask.
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
	// TimeoutMS is how long the call waits for the answer; after it, or
	// when the run ends, the sidecar sends ApprovalCancel and the call is
	// denied.
	TimeoutMS int64 `json:"timeout_ms"`
}

// ApprovalCancel tells the client that the sidecar no longer waits for
// the answer to an ApprovalRequest (its timeout passed, or its run
// ended): the call was denied, and an answer gets an error frame.
type ApprovalCancel struct {
	ID      string `json:"id"`
	QueryID string `json:"query_id"`
}

// Approval answers an ApprovalRequest: allow or deny, with an optional
// message (a deny's message reaches the model). An Approval whose id no
// ask waits for (unknown, answered, timed out) gets an error frame of
// code unknown_approval, and the connection stays open.
type Approval struct {
	// ID is the ApprovalRequest's id.
	ID string `json:"id"`
	// Decision is ApprovalAllow or ApprovalDeny.
	Decision string `json:"decision"`
	// Message is at most MaxApprovalMessageChars; "" when absent.
	Message string `json:"message,omitempty"`
}

// RequestID returns a.ID.
func (a *Approval) RequestID() string { return a.ID }

// Type returns TypeApproval.
func (*Approval) Type() string { return TypeApproval }
func (*Approval) isRequest()   {}

// MarshalJSON writes the frame as a client sends it, "type" first.
func (a Approval) MarshalJSON() ([]byte, error) {
	type fields Approval
	return marshalFrame(TypeApproval, fields(a))
}

// Type returns TypeApprovalRequest.
func (ApprovalRequest) Type() string { return TypeApprovalRequest }
func (ApprovalRequest) isReply()     {}

// MarshalJSON writes the frame, "type" first.
func (a ApprovalRequest) MarshalJSON() ([]byte, error) {
	type fields ApprovalRequest
	return marshalFrame(TypeApprovalRequest, fields(a))
}

// Type returns TypeApprovalCancel.
func (ApprovalCancel) Type() string { return TypeApprovalCancel }
func (ApprovalCancel) isReply()     {}

// MarshalJSON writes the frame, "type" first.
func (a ApprovalCancel) MarshalJSON() ([]byte, error) {
	type fields ApprovalCancel
	return marshalFrame(TypeApprovalCancel, fields(a))
}

var approvalKeys = []string{"type", "id", "decision", "message"}

func decodeApproval(r *reader) Request {
	r.known(approvalKeys)
	a := &Approval{ID: r.requestID()}
	a.Decision = r.enum("decision", ApprovalAllow, ApprovalDeny)
	if m := r.field("message", false, kindString); m != nil {
		a.Message = r.str(m)
		if utf8.RuneCountInString(a.Message) > MaxApprovalMessageChars {
			r.fail(CodeInvalidField, `field "message" must be at most 4096 characters`)
		}
	}
	return a
}
