package console_test

import (
	"bufio"
	"encoding/json"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/console"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

// TestTheStreamShowsTheCallsWaitingForApproval: a stream gets the set of
// asks waiting now after ready, the whole set again on each change, and
// an empty one once the last wait ends.
func TestTheStreamShowsTheCallsWaitingForApproval(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	h.write(t, decision("Read", "allow", "host_fs.workspace"))
	h.waitRecords(t, 1)
	asked := time.Now().Add(-1500 * time.Millisecond)
	h.con.ApprovalWaiting(server.PendingApproval{ID: "a_1", QueryID: "q_1", RunID: "r_1", Server: "crm", Tool: "lookup", CallSeq: 2, Rule: "tools.ask_list", Reason: "mcp__crm__lookup needs a human's approval", AskedAt: asked, TimeoutMS: 30000})
	resp := h.do(t, "GET", "/ui/api/stream?decision=deny", map[string]string{"Authorization": "Bearer " + token}, "")
	s := sse{bufio.NewReader(resp.Body)}
	if ev := s.any(t); ev.name != "ready" {
		t.Fatalf("first event %+v; want ready (no deny in the history)", ev)
	}
	pending := func(ev event) []console.PendingView {
		t.Helper()
		if ev.name != "pending" {
			t.Fatalf("event %+v; want pending", ev)
		}
		var p struct {
			Pending []console.PendingView `json:"pending"`
		}
		must(t, json.Unmarshal([]byte(ev.data), &p))
		return p.Pending
	}
	got := pending(s.any(t))
	if len(got) != 1 || got[0].ID != "a_1" || got[0].Server != "crm" || got[0].Tool != "lookup" || got[0].RunID != "r_1" || got[0].Rule != "tools.ask_list" || got[0].WaitedMS < 1500 {
		t.Fatalf("after ready, whatever the filter: %+v; want a_1 crm.lookup of r_1, waiting 1.5 s or more", got)
	}
	h.con.ApprovalWaiting(server.PendingApproval{ID: "a_2", Server: "crm", Tool: "delete", AskedAt: time.Now()})
	if got := pending(s.any(t)); len(got) != 2 || got[0].ID != "a_1" || got[1].ID != "a_2" {
		t.Fatalf("a second ask: %+v; want a_1 then a_2, oldest first", got)
	}
	h.con.ApprovalDone("a_1")
	if got := pending(s.any(t)); len(got) != 1 || got[0].ID != "a_2" {
		t.Fatalf("a_1 answered: %+v; want a_2 alone", got)
	}
	h.con.ApprovalDone("a_1") // done twice: no change, no event
	h.con.ApprovalDone("a_2")
	if got := pending(s.any(t)); len(got) != 0 {
		t.Fatalf("all answered: %+v; want none", got)
	}
}
