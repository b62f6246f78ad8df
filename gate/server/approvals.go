package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// maxPendingApprovals bounds the approval_request frames one connection
// waits on at once; past it an ask is denied at once.
const maxPendingApprovals = 256

// waiters are a connection's frames sent unasked (tool_call,
// approval_request) still waiting for the client's answer, by id. An
// answer is handed over at most once: the waiter that removes the entry,
// or the reader that finds it, owns it.
type waiters[T any] struct {
	mu      sync.Mutex
	pending map[string]chan T
}

// add registers a waiter; false when limit already wait.
func (w *waiters[T]) add(id string, limit int) (chan T, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) >= limit {
		return nil, false
	}
	if w.pending == nil {
		w.pending = map[string]chan T{}
	}
	ch := make(chan T, 1)
	w.pending[id] = ch
	return ch, true
}

// drop forgets a waiter; true when it was still waiting.
func (w *waiters[T]) drop(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.pending[id]
	delete(w.pending, id)
	return ok
}

// answer hands v to the waiter of id; false when none waits (an unknown
// id, or one answered, timed out or cancelled already).
func (w *waiters[T]) answer(id string, v T) bool {
	w.mu.Lock()
	ch, ok := w.pending[id]
	delete(w.pending, id)
	w.mu.Unlock()
	if ok {
		ch <- v // buffered, and this is its only send
	}
	return ok
}

// approval takes a client's approval on the reader goroutine. One that no
// ask waits for (unknown, answered already, timed out or cancelled) gets
// an error frame: the client learns that its answer decided nothing, and
// the connection stays open.
func (c *conn) approval(r *wire.Approval) {
	if !c.approvals.answer(r.ID, r) {
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeUnknownApproval, Message: "approval: no ask of this connection waits for id " + quoteID(r.ID) + " (it was answered already, timed out, its run ended, or it was never asked); this answer decided nothing"})
	}
}

// quoteID quotes an id of the client's for a message.
func quoteID(id string) string {
	if len(id) > 128 {
		id = id[:128]
	}
	return `"` + id + `"`
}

// relayApprover is a gate.Approver for the runs of one query: it relays
// each ask to the query's client as an approval_request, when the client
// declared approvals in open_query, and waits for its approval until ctx
// ends (code_calls.timeout, the run's end) or the connection does. Safe
// for concurrent use.
type relayApprover struct {
	c *conn
	// queryID is the query's; declared is open_query's approvals.
	queryID  string
	declared bool
	// source says where a server's calls go (gate.ToolSources).
	source func(server string) string
}

var _ gate.Approver = (*relayApprover)(nil)

// Approve relays r and waits for the answer.
func (a *relayApprover) Approve(ctx context.Context, r gate.ApprovalRequest) gate.Approval {
	if !a.declared {
		return gate.Approval{By: gate.AnsweredByNoHandler, Message: "the query's client declared no handler for asks (open_query without approvals)"}
	}
	id := newID("a_")
	ch, ok := a.c.approvals.add(id, maxPendingApprovals)
	if !ok {
		return gate.Approval{By: gate.AnsweredByNoHandler, Message: "the client's connection already waits on 256 asks"}
	}
	timeout := defaultToolCallTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	source := gate.SourcePolicy
	if a.source != nil {
		source = a.source(r.Server)
	}
	if o := a.c.s.cfg.ApprovalObserver; o != nil {
		o.ApprovalWaiting(PendingApproval{
			ID: id, QueryID: a.queryID, RunID: r.RunID, ToolUseID: r.ToolUseID, Server: r.Server, Tool: r.Tool,
			CallSeq: r.Seq, Rule: r.Rule, Reason: r.Reason, AskedAt: time.Now(), TimeoutMS: max(1, timeout.Milliseconds()),
		})
		defer o.ApprovalDone(id)
	}
	a.c.send(wire.ApprovalRequest{
		ID: id, QueryID: a.queryID, RunID: r.RunID, ToolUseID: r.ToolUseID, Language: r.Language,
		Server: r.Server, Tool: r.Tool, ToolName: r.ToolName(), ServerSource: source,
		Arguments: r.Arguments, CallSeq: r.Seq, Rule: r.Rule, Reason: r.Reason,
		TimeoutMS: max(1, timeout.Milliseconds()),
	})
	select {
	case ans := <-ch:
		return gate.Approval{ID: id, By: gate.AnsweredByClient, Allow: ans.Decision == wire.ApprovalAllow, Message: ans.Message}
	case <-ctx.Done():
		if a.c.approvals.drop(id) {
			a.c.send(wire.ApprovalCancel{ID: id, QueryID: a.queryID})
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return gate.Approval{ID: id, By: gate.AnsweredByTimeout, Message: "no answer within " + timeout.Round(time.Millisecond).String()}
		}
		return gate.Approval{ID: id, By: gate.AnsweredByCancelled, Message: "the run ended first"}
	case <-a.c.ctx.Done():
		a.c.approvals.drop(id)
		return gate.Approval{ID: id, By: gate.AnsweredByConnectionLost, Message: errConnLost.Error()}
	}
}
