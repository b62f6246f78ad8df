package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Who answered an ask on a nested call (Approval.By, and the audit line's
// approval.by).
const (
	// AnsweredByClient: the query's client answered, with the agent
	// builder's canUseTool handler.
	AnsweredByClient = "client"
	// AnsweredByNoHandler: nobody could be asked (a client that declared
	// no approval handler, gatekeeper run, the Claude Code CLI path).
	AnsweredByNoHandler = "no_handler"
	// AnsweredByTimeout: no answer came within code_calls.timeout or the
	// run's own timeout.
	AnsweredByTimeout = "timeout"
	// AnsweredByConnectionLost: the client's connection closed before it
	// answered.
	AnsweredByConnectionLost = "connection_lost"
	// AnsweredByCancelled: the run ended before an answer came.
	AnsweredByCancelled = "cancelled"
)

// ApprovalRequest is an ask on one nested call, as an Approver sees it:
// the call, the policy's rule and reason for asking, and which run and
// program asked.
type ApprovalRequest struct {
	RunID, QueryID string
	// ToolUseID is the model's tool use of the sandboxed_code run whose
	// program made the call; Language is that program's language.
	ToolUseID, Language string
	Server, Tool        string
	// Arguments are the call's arguments as the policy saw them.
	Arguments json.RawMessage
	// Seq is the call's 1-based number within its run.
	Seq          int
	Rule, Reason string
}

// ToolName is the name the model would call the tool by directly
// (mcp__server__tool): what a canUseTool handler is given.
func (r ApprovalRequest) ToolName() string { return mcpToolName(r.Server, r.Tool) }

// Approval is the answer to an ApprovalRequest. Anything but an Allow by
// AnsweredByClient is a deny.
type Approval struct {
	// By is one of the AnsweredBy constants.
	By    string
	Allow bool
	// Message is the handler's own words (a deny's message); for an
	// answer nobody gave, why.
	Message string
	// ID is the relay's id of the ask ("" when nothing was relayed).
	ID string
}

// Approver relays an ask on a nested call to someone who can answer it.
// Approve blocks until an answer or until ctx ends (code_calls.timeout,
// the run's end), and never fails: an answer it cannot get is a deny
// saying why (By). Safe for concurrent use.
type Approver interface {
	Approve(ctx context.Context, r ApprovalRequest) Approval
}

// ask relays d, an ask on call, to the run's Approver and records the
// answer on rec. It returns nil when the call may proceed, or the
// program's answer: a deny whose message the model can read.
func (c *CodeCaller) ask(ctx context.Context, call runner.NestedCall, forward json.RawMessage, d Decision, rec *audit.Record) *runner.ToolResult {
	req := ApprovalRequest{
		RunID: c.cfg.RunID, QueryID: c.cfg.QueryID, ToolUseID: c.cfg.ToolUseID, Language: c.cfg.Language,
		Server: call.Server, Tool: call.Tool, Arguments: forward, Seq: call.Seq, Rule: d.Rule, Reason: d.Reason,
	}
	asked := time.Now()
	a := Approval{By: AnsweredByNoHandler, Message: "no one can answer an ask from this run's code: the client declared no approval handler"}
	if c.cfg.Approver != nil {
		a = c.cfg.Approver.Approve(ctx, req)
	}
	if a.By != AnsweredByClient {
		a.Allow = false
	}
	answered := time.Now()
	rec.Approval = &audit.Approval{
		ID: a.ID, By: a.By, Decision: Deny, Message: a.Message,
		AskedAt: asked.UTC(), AnsweredAt: answered.UTC(), WaitMS: answered.Sub(asked).Milliseconds(),
	}
	if a.Allow {
		rec.Approval.Decision, rec.Decision = Allow, Allow
		return nil
	}
	rec.Decision = Deny
	rec.Reason = approvalDenial(req, a)
	res := toolError(runner.ToolDenied, d.Rule, rec.Reason)
	if a.By == AnsweredByTimeout || a.By == AnsweredByCancelled {
		res = ctxOr(ctx, runner.ToolDenied, rec.Reason)
		if res.Err.Rule == "" {
			res.Err.Rule = d.Rule
		}
	}
	return &res
}

// approvalDenial is the reason the model reads for an ask that was not
// allowed.
func approvalDenial(r ApprovalRequest, a Approval) string {
	name := r.ToolName()
	switch a.By {
	case AnsweredByClient:
		msg := fmt.Sprintf("%s; the user denied this call from code", r.Reason)
		if a.Message != "" {
			msg += ": " + a.Message
		}
		return msg
	case AnsweredByTimeout:
		return fmt.Sprintf("%s; no approval came before the call's timeout, so it is denied", r.Reason)
	case AnsweredByConnectionLost:
		return fmt.Sprintf("%s; the client's connection closed before anyone approved it, so it is denied", r.Reason)
	case AnsweredByCancelled:
		return fmt.Sprintf("%s; the run ended before anyone approved it, so it is denied", r.Reason)
	}
	return fmt.Sprintf("%s; no one can approve a call from this run's code (%s), so call %s directly (as a tool call of your own, not from code) if you need it", r.Reason, a.Message, name)
}
