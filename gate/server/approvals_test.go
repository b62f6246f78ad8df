package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// askPolicy asks before notes.search, which code may call.
var askPolicy = strings.Replace(sdkPolicy, "  deny: [Bash]\n", "  deny: [Bash]\n  ask: [mcp__notes__search]\n", 1)

// openAsking opens a query declaring the notes server and, when
// approvals, that the client answers asks.
func (c *client) openAsking(approvals bool) string {
	c.t.Helper()
	r := c.do(fmt.Sprintf(`{"type":"open_query","id":"o","sdk_servers":%s,"approvals":%t}`, notesServers, approvals))
	if r["type"] != "query_opened" {
		c.t.Fatalf("open_query: %v", r)
	}
	return r["query_id"].(string)
}

// callLines verifies the audit chain and returns its code_call lines.
func callLines(t *testing.T, path string) []audit.Record {
	t.Helper()
	calls, _ := codeCallLines(t, path)
	return calls
}

// TestAnAskOnANestedCallReachesTheClient: the policy's ask on a nested
// call is relayed as an approval_request naming the tool, its arguments
// and the run and program that asked; an allow lets the call go on to
// its server (here the client's own tool), a deny answers the program
// with the handler's message, and each answer is on the call's line.
func TestAnAskOnANestedCallReachesTheClient(t *testing.T) {
	t.Parallel()
	search := runner.NestedCall{Server: "notes", Tool: "search", Arguments: json.RawMessage(`{"q":"gvisor"}`)}
	rn := &callingRunner{calls: []runner.NestedCall{search, search}}
	h := start(t, options{runner: rn, policy: askPolicy})
	c := h.connect(t)
	q := c.openAsking(true)
	c.startRun(q, "toolu_1")
	ask := c.recv()
	want := map[string]any{"type": "approval_request", "query_id": q, "tool_use_id": "toolu_1", "language": "python", "server": "notes", "tool": "search",
		"tool_name": "mcp__notes__search", "server_source": "sdk", "call_seq": float64(1), "rule": "tools.ask_list"}
	for k, v := range want {
		if ask[k] != v {
			t.Errorf("approval_request %s = %v; want %v (frame %v)", k, ask[k], v, ask)
		}
	}
	if args, _ := json.Marshal(ask["arguments"]); string(args) != `{"q":"gvisor"}` {
		t.Errorf("arguments = %s", args)
	}
	if id, _ := ask["id"].(string); !strings.HasPrefix(id, "a_") {
		t.Errorf("id = %v; want the sidecar's a_ id", ask["id"])
	}
	if run, _ := ask["run_id"].(string); run == "" {
		t.Errorf("run_id missing: %v", ask)
	}
	if ms, _ := ask["timeout_ms"].(float64); ms <= 0 || ms > 2000 {
		t.Errorf("timeout_ms = %v; want what is left of code_calls.timeout", ask["timeout_ms"])
	}
	c.send(fmt.Sprintf(`{"type":"approval","id":%q,"decision":"allow"}`, ask["id"]))
	call := c.recv()
	if call["type"] != "tool_call" || call["tool"] != "search" {
		t.Fatalf("got %v; want the allowed call relayed to its tool", call)
	}
	c.send(fmt.Sprintf(`{"type":"tool_result","id":%q,"result":{"content":[{"type":"text","text":"2 notes"}]}}`, call["id"]))
	ask2 := c.recv()
	if ask2["type"] != "approval_request" || ask2["call_seq"] != float64(2) {
		t.Fatalf("got %v; want the second call's ask", ask2)
	}
	c.send(fmt.Sprintf(`{"type":"approval","id":%q,"decision":"deny","message":"not on a Friday"}`, ask2["id"]))
	if r := c.recv(); r["type"] != "run_result" {
		t.Fatalf("got %v; want the run_result (the denied call reaches no tool)", r)
	}
	got := rn.answers()
	if len(got) != 2 || got[0].Err != nil || !strings.Contains(string(got[0].Result), "2 notes") {
		t.Fatalf("answers = %+v; want the tool's result first", got)
	}
	if e := got[1].Err; e == nil || e.Kind != runner.ToolDenied || e.Rule != "tools.ask_list" || !strings.Contains(e.Message, "the user denied this call from code: not on a Friday") {
		t.Errorf("second answer = %+v; want denied with the handler's message", got[1])
	}
	lines := callLines(t, h.auditPath)
	if len(lines) != 2 {
		t.Fatalf("code_call lines = %+v; want 2", lines)
	}
	a0, a1 := lines[0].Approval, lines[1].Approval
	if lines[0].Decision != gate.Allow || a0 == nil || a0.By != gate.AnsweredByClient || a0.Decision != gate.Allow || a0.ID != ask["id"] || a0.AskedAt.IsZero() || a0.AnsweredAt.Before(a0.AskedAt) {
		t.Errorf("first line %+v approval %+v; want allowed by the client", lines[0], a0)
	}
	if lines[1].Decision != gate.Deny || a1 == nil || a1.By != gate.AnsweredByClient || a1.Decision != gate.Deny || a1.Message != "not on a Friday" {
		t.Errorf("second line %+v approval %+v; want denied by the client with its message", lines[1], a1)
	}
}

// TestAnAskNobodyAnswersIsADeny: without a declared handler, after the
// call's timeout, and after a lost connection, an ask is a deny whose
// reason says why, and the line says who "answered".
func TestAnAskNobodyAnswersIsADeny(t *testing.T) {
	t.Parallel()
	search := runner.NestedCall{Server: "notes", Tool: "search", Arguments: json.RawMessage(`{"q":"x"}`)}

	t.Run("a client that declared no handler", func(t *testing.T) {
		t.Parallel()
		rn := &callingRunner{calls: []runner.NestedCall{search}}
		h := start(t, options{runner: rn, policy: askPolicy})
		c := h.connect(t)
		q := c.openAsking(false)
		c.startRun(q, "toolu_1")
		if r := c.recv(); r["type"] != "run_result" {
			t.Fatalf("got %v; want the run_result: nothing is asked of a client without a handler", r)
		}
		got := rn.answers()
		if len(got) != 1 || got[0].Err == nil || got[0].Err.Kind != runner.ToolDenied || !strings.Contains(got[0].Err.Message, "call mcp__notes__search directly") {
			t.Fatalf("answers = %+v; want a deny telling the model to call the tool directly", got)
		}
		lines := callLines(t, h.auditPath)
		if len(lines) != 1 || lines[0].Approval == nil || lines[0].Approval.By != gate.AnsweredByNoHandler || lines[0].Approval.Decision != gate.Deny {
			t.Errorf("lines = %+v; want one deny answered by no_handler", lines)
		}
	})

	t.Run("no answer within the call's timeout; the late answer gets an error frame", func(t *testing.T) {
		t.Parallel()
		rn := &callingRunner{calls: []runner.NestedCall{search}}
		h := start(t, options{runner: rn, policy: strings.Replace(askPolicy, "timeout: 2s", "timeout: 300ms", 1)})
		c := h.connect(t)
		q := c.openAsking(true)
		c.startRun(q, "toolu_1")
		ask := c.recv()
		if ask["type"] != "approval_request" {
			t.Fatalf("got %v", ask)
		}
		cancel := c.recv()
		if cancel["type"] != "approval_cancel" || cancel["id"] != ask["id"] || cancel["query_id"] != q {
			t.Fatalf("got %v; want the approval_cancel of %v", cancel, ask["id"])
		}
		if r := c.recv(); r["type"] != "run_result" {
			t.Fatalf("got %v", r)
		}
		late := c.do(fmt.Sprintf(`{"type":"approval","id":%q,"decision":"allow"}`, ask["id"]))
		if late["type"] != "error" || late["code"] != wire.CodeUnknownApproval || late["id"] != ask["id"] {
			t.Errorf("got %v; want unknown_approval for the late answer", late)
		}
		got := rn.answers()
		if len(got) != 1 || got[0].Err == nil || got[0].Err.Kind != runner.ToolTimeout || !strings.Contains(got[0].Err.Message, "no approval came before the call's timeout") {
			t.Fatalf("answers = %+v; want a timeout saying no approval came", got)
		}
		lines := callLines(t, h.auditPath)
		if len(lines) != 1 || lines[0].Decision != gate.Deny || lines[0].Approval == nil || lines[0].Approval.By != gate.AnsweredByTimeout || lines[0].Approval.WaitMS < 250 {
			t.Errorf("lines = %+v; want one deny answered by timeout after about 300 ms", lines)
		}
		if q2 := c.open(""); q2 == "" {
			t.Error("the connection did not live on after the error frame")
		}
	})

	t.Run("a lost connection", func(t *testing.T) {
		t.Parallel()
		rn := &callingRunner{calls: []runner.NestedCall{search}}
		h := start(t, options{runner: rn, policy: askPolicy})
		c := h.connect(t)
		q := c.openAsking(true)
		c.startRun(q, "toolu_1")
		if ask := c.recv(); ask["type"] != "approval_request" {
			t.Fatalf("got %v", ask)
		}
		c.ws.Close()
		got := rn.awaitAnswers(1)
		if len(got) != 1 || got[0].Err == nil || got[0].Result != nil {
			t.Fatalf("answers = %+v; want one deny", got)
		}
		lines := callLines(t, h.auditPath)
		if len(lines) != 1 || lines[0].Decision != gate.Deny || lines[0].Approval == nil ||
			(lines[0].Approval.By != gate.AnsweredByConnectionLost && lines[0].Approval.By != gate.AnsweredByCancelled) {
			t.Errorf("lines = %+v; want one deny answered by connection_lost (or cancelled, when the run ended first)", lines)
		}
	})
}

// TestAnApprovalNoAskWaitsForGetsAnError: an unknown id, and a second
// answer to one ask, get unknown_approval; the connection lives on, and
// only the first answer counts.
func TestAnApprovalNoAskWaitsForGetsAnError(t *testing.T) {
	t.Parallel()
	rn := &callingRunner{calls: []runner.NestedCall{{Server: "notes", Tool: "search", Arguments: json.RawMessage(`{"q":"x"}`)}}}
	h := start(t, options{runner: rn, policy: askPolicy})
	c := h.connect(t)
	if r := c.do(`{"type":"approval","id":"a_forged","decision":"allow"}`); r["type"] != "error" || r["code"] != wire.CodeUnknownApproval || r["id"] != "a_forged" {
		t.Fatalf("got %v; want unknown_approval", r)
	}
	q := c.openAsking(true)
	c.startRun(q, "toolu_1")
	ask := c.recv()
	c.send(fmt.Sprintf(`{"type":"approval","id":%q,"decision":"deny"}`, ask["id"]))
	c.send(fmt.Sprintf(`{"type":"approval","id":%q,"decision":"allow"}`, ask["id"]))
	var sawError, sawResult bool
	for !sawError || !sawResult {
		switch r := c.recv(); {
		case r["type"] == "error" && r["code"] == wire.CodeUnknownApproval:
			sawError = true
		case r["type"] == "run_result":
			sawResult = true
		default:
			t.Fatalf("got %v; want unknown_approval and the run_result", r)
		}
	}
	if got := rn.answers(); len(got) != 1 || got[0].Err == nil || got[0].Err.Kind != runner.ToolDenied {
		t.Errorf("answers = %+v; want the first answer's deny", got)
	}
}

// waitLog is an ApprovalObserver that records what it is told.
type waitLog struct {
	mu     sync.Mutex
	events []string
	seen   []server.PendingApproval
}

func (w *waitLog) ApprovalWaiting(p server.PendingApproval) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, "waiting "+p.ID)
	w.seen = append(w.seen, p)
}

func (w *waitLog) ApprovalDone(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, "done "+id)
}

func (w *waitLog) snapshot() ([]string, []server.PendingApproval) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events), slices.Clone(w.seen)
}

// TestTheApprovalObserverSeesAWaitWhileItLasts: the observer (the live
// console) is told of an ask while the client has not answered it, with
// the call's tool, run and rule, and told it is done once answered.
func TestTheApprovalObserverSeesAWaitWhileItLasts(t *testing.T) {
	t.Parallel()
	search := runner.NestedCall{Server: "notes", Tool: "search", Arguments: json.RawMessage(`{"q":"gvisor"}`)}
	rn := &callingRunner{calls: []runner.NestedCall{search}}
	obs := &waitLog{}
	h := start(t, options{runner: rn, policy: askPolicy, approvals: obs})
	c := h.connect(t)
	q := c.openAsking(true)
	c.startRun(q, "toolu_1")
	ask := c.recv()
	id, _ := ask["id"].(string)
	events, seen := obs.snapshot()
	if !slices.Equal(events, []string{"waiting " + id}) || len(seen) != 1 {
		t.Fatalf("while the ask waits: %v; want waiting %s alone", events, id)
	}
	if p := seen[0]; p.QueryID != q || p.RunID != ask["run_id"] || p.Server != "notes" || p.Tool != "search" || p.CallSeq != 1 || p.Rule != "tools.ask_list" || p.Reason == "" || p.AskedAt.IsZero() || p.TimeoutMS <= 0 {
		t.Errorf("pending = %+v; want the call's query, run, tool, rule and reason", p)
	}
	c.send(fmt.Sprintf(`{"type":"approval","id":%q,"decision":"deny","message":"no"}`, id))
	if r := c.recv(); r["type"] != "run_result" {
		t.Fatalf("got %v; want the run_result", r)
	}
	if events, _ := obs.snapshot(); !slices.Equal(events, []string{"waiting " + id, "done " + id}) {
		t.Errorf("after the answer: %v; want waiting then done", events)
	}
}
