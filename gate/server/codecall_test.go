package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

const codeCallPolicy = testPolicy + `code_calls:
  callable:
    crm: [get_*]
`

// crmServer is one MCP server for protocol tests; the real MCP client is
// tested with real servers in its own package.
type crmServer struct{}

func (crmServer) Tool(_ context.Context, server, tool string) (runner.ToolInfo, bool, error) {
	yes := true
	return runner.ToolInfo{Name: tool, ReadOnly: &yes}, server == "crm", nil
}

func (crmServer) CallTool(_ context.Context, _, tool string, _ json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"content":[{"type":"text","text":"` + tool + `"}]}`), nil
}

// bridgeRunner stands in for the runner's bridge: its "program" makes two
// nested calls through Spec.Caller, as the run loop does, and the result
// counts them.
type bridgeRunner struct {
	mu      sync.Mutex
	answers []runner.ToolResult
	noTools bool
}

func (b *bridgeRunner) Run(ctx context.Context, s runner.Spec) (runner.Result, error) {
	res := runner.Result{RunID: s.RunID, Reason: runner.Exited, Duration: time.Millisecond, Runtime: runner.Runc}
	if s.Caller == nil {
		b.mu.Lock()
		b.noTools = true
		b.mu.Unlock()
		return res, nil
	}
	for i, tool := range []string{"get_customer", "delete_customer"} {
		a := s.Caller.CallTool(ctx, runner.NestedCall{Server: "crm", Tool: tool, Arguments: json.RawMessage(`{"id":1}`), Seq: i + 1, InFlight: 1})
		b.mu.Lock()
		b.answers = append(b.answers, a)
		b.mu.Unlock()
		res.ToolCalls++
	}
	return res, nil
}

// TestARunsNestedCallsAreDecidedAndAuditedUnderIt: the sidecar's run path
// gives a run of a query whose code may call tools a bridge to the
// configured servers; each nested call is decided and gets a code_call
// line naming the run, and the run line counts them.
func TestARunsNestedCallsAreDecidedAndAuditedUnderIt(t *testing.T) {
	t.Parallel()
	br := &bridgeRunner{}
	h := start(t, options{runner: br, policy: codeCallPolicy, tune: func(c *server.Config) { c.ToolServers = crmServer{} }})
	c := h.connect(t)
	q := c.open("")
	c.decide(q, wire.SandboxTool, `{"language":"python","code":"x"}`, "toolu_1", sdkServer)
	if r := c.do(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":"toolu_1","language":"python","code":"x"}`, q)); r["type"] != "run_result" {
		t.Fatalf("run: %v", r)
	}
	br.mu.Lock()
	answers := br.answers
	br.mu.Unlock()
	if len(answers) != 2 || answers[0].Err != nil || answers[1].Err == nil || answers[1].Err.Rule != "code_calls.not_callable" {
		t.Fatalf("answers = %+v; want a result, then a deny by code_calls.not_callable", answers)
	}
	rep, err := audit.VerifyFile(h.auditPath)
	must(t, err)
	var calls []audit.Record
	var run *audit.Record
	for _, rec := range readAudit(t, h.auditPath) {
		switch rec.Kind {
		case audit.KindCodeCall:
			calls = append(calls, rec)
		case audit.KindRun:
			run = &rec
		}
	}
	if run == nil || run.ToolCalls != 2 {
		t.Fatalf("run line %+v; want tool_calls 2 (%d lines verified)", run, rep.Lines)
	}
	if len(calls) != 2 || calls[0].Decision != gate.Allow || calls[1].Decision != gate.Deny {
		t.Fatalf("code_call lines %+v", calls)
	}
	for _, rec := range calls {
		if rec.RunID != run.RunID || rec.QueryID != q || rec.ToolUseID != "toolu_1" || rec.PolicyHash != run.PolicyHash {
			t.Errorf("code_call line names run %q query %q tool use %q policy %q; want the run's %q %q toolu_1 %q", rec.RunID, rec.QueryID, rec.ToolUseID, rec.PolicyHash, run.RunID, q, run.PolicyHash)
		}
	}
	// A query whose override leaves code no tool gets no bridge.
	q2 := c.open(`{"code_calls":{"callable":{}}}`)
	c.decide(q2, wire.SandboxTool, `{"language":"python","code":"x"}`, "toolu_2", sdkServer)
	if r := c.do(fmt.Sprintf(`{"type":"run","id":"r2","query_id":%q,"tool_use_id":"toolu_2","language":"python","code":"x"}`, q2)); r["type"] != "run_result" {
		t.Fatalf("run: %v", r)
	}
	br.mu.Lock()
	defer br.mu.Unlock()
	if !br.noTools {
		t.Error("a run whose code may call no tool got a bridge")
	}
}

// slowListing is crmServer whose tool listing, once begun, waits until
// the test releases it (or the listing's bound ends it): a server still
// connecting, as the sidecar's wrappers see it.
type slowListing struct {
	crmServer
	started chan struct{}
	release chan struct{}
}

func (s *slowListing) List(ctx context.Context) ([]runner.ServerTools, error) {
	select {
	case s.started <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return []runner.ServerTools{{Name: "crm", Description: "the CRM", Hash: "h",
		Tools: []runner.ToolInfo{{Name: "get_customer", InputSchema: json.RawMessage(`{"type":"object"}`)}}}}, nil
}

// TestAListingHoldsUpNoDecision: while one query's open_query waits for
// the servers' tools for its description, a decision of another query of
// the same connection is answered; the first query's reply follows, with
// the description, once the listing ends.
func TestAListingHoldsUpNoDecision(t *testing.T) {
	t.Parallel()
	lister := &slowListing{started: make(chan struct{}, 1), release: make(chan struct{})}
	h := start(t, options{policy: codeCallPolicy, tune: func(c *server.Config) { c.ToolServers = lister }})
	c := h.connect(t)
	other := c.open(`{"code_calls":{"callable":{}}}`) // lists nothing
	c.send(`{"type":"open_query","id":"slow"}`)
	<-lister.started
	ws := filepath.Join(h.dir, "ws")
	if r := c.decide(other, "Read", fmt.Sprintf(`{"file_path":%q}`, ws+"/a.txt"), "toolu_1", ""); r["type"] != "decision" || r["decision"] != "allow" {
		t.Fatalf("while a listing waits, the next frame got %v (id %v), want the other query's decision", r["type"], r["id"])
	}
	close(lister.release)
	r := c.recv()
	if desc, _ := r["tool_description"].(string); r["type"] != "query_opened" || r["id"] != "slow" || !strings.Contains(desc, "- crm (1 tool): the CRM") {
		t.Fatalf("after the listing: %v", r)
	}
}
