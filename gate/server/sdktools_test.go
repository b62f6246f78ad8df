package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// sdkPolicy lets code call one tool of the client's in-process server
// "notes" (and of no operator server).
const sdkPolicy = testPolicy + `code_calls:
  callable:
    notes: [search]
  timeout: 2s
`

// notesServers is open_query's sdk_servers for the client's in-process
// server "notes": search (callable) and drop (not callable).
const notesServers = `[{"name":"notes","description":"the team's notes","tools":[` +
	`{"name":"search","description":"Search the notes.","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},"annotations":{"readOnlyHint":true}},` +
	`{"name":"drop","inputSchema":{"type":"object"}}]}]`

// callingRunner's "program" makes the given nested calls through
// Spec.Caller, one after the other, as the run loop does.
type callingRunner struct {
	calls []runner.NestedCall
	mu    sync.Mutex
	got   []runner.ToolResult
	files map[string][]byte
}

func (r *callingRunner) Run(ctx context.Context, s runner.Spec) (runner.Result, error) {
	res := runner.Result{RunID: s.RunID, Reason: runner.Exited, Duration: time.Millisecond, Runtime: runner.Runc}
	r.mu.Lock()
	r.files = s.ToolFiles
	r.mu.Unlock()
	if s.Caller == nil {
		return res, nil
	}
	for i, call := range r.calls {
		call.Seq, call.InFlight = i+1, 1
		a := s.Caller.CallTool(ctx, call)
		r.mu.Lock()
		r.got = append(r.got, a)
		r.mu.Unlock()
		res.ToolCalls++
	}
	return res, nil
}

func (r *callingRunner) answers() []runner.ToolResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runner.ToolResult(nil), r.got...)
}

// awaitAnswers waits up to 10 s for the program to have n answers, and
// returns what it has.
func (r *callingRunner) awaitAnswers(n int) []runner.ToolResult {
	deadline := time.Now().Add(10 * time.Second)
	for len(r.answers()) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return r.answers()
}

// openWithTools opens a query declaring servers and returns its id and
// query_opened frame.
func (c *client) openWithTools(servers string) (string, map[string]any) {
	c.t.Helper()
	r := c.do(`{"type":"open_query","id":"o","sdk_servers":` + servers + `}`)
	if r["type"] != "query_opened" {
		c.t.Fatalf("open_query: %v", r)
	}
	return r["query_id"].(string), r
}

// startRun decides and sends a run of query q.
func (c *client) startRun(q, toolUseID string) {
	c.t.Helper()
	c.decide(q, wire.SandboxTool, `{"language":"python","code":"x"}`, toolUseID, sdkServer)
	c.send(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":%q,"language":"python","code":"x"}`, q, toolUseID))
}

// TestAnInProcessToolIsRelayedToItsClientDecidedAndAudited: the client
// declares an in-process server; a run's nested call to its callable
// tool reaches the client as a tool_call frame, the client's tool_result
// is the program's answer, and the call is decided (source sdk) and gets
// its code_call line like any other; a call to a tool no glob names never
// reaches the client. The query's run tool description names the server.
func TestAnInProcessToolIsRelayedToItsClientDecidedAndAudited(t *testing.T) {
	t.Parallel()
	rn := &callingRunner{calls: []runner.NestedCall{
		{Server: "notes", Tool: "search", Arguments: json.RawMessage(`{"q":"gvisor"}`)},
		{Server: "notes", Tool: "drop", Arguments: json.RawMessage(`{}`)},
	}}
	h := start(t, options{runner: rn, policy: sdkPolicy})
	c := h.connect(t)
	q, opened := c.openWithTools(notesServers)
	desc, _ := opened["tool_description"].(string)
	if !strings.HasPrefix(desc, pythonImageDescription+"\n\nCode mode:") || !strings.Contains(desc, "\n- notes (1 tool): the team's notes\n") {
		t.Errorf("tool_description = %q; want the plain description, then the notes server with its one callable tool", desc)
	}
	c.startRun(q, "toolu_1")
	call := c.recv()
	if call["type"] != "tool_call" || call["query_id"] != q || call["server"] != "notes" || call["tool"] != "search" {
		t.Fatalf("got %v; want a tool_call of notes.search in query %s", call, q)
	}
	if args, _ := json.Marshal(call["arguments"]); string(args) != `{"q":"gvisor"}` {
		t.Errorf("arguments = %s", args)
	}
	if ms, _ := call["timeout_ms"].(float64); ms <= 0 || ms > 2000 {
		t.Errorf("timeout_ms = %v; want the call's remaining code_calls.timeout (at most 2000)", call["timeout_ms"])
	}
	c.send(fmt.Sprintf(`{"type":"tool_result","id":%q,"result":{"content":[{"type":"text","text":"2 notes"}]}}`, call["id"]))
	if r := c.recv(); r["type"] != "run_result" {
		t.Fatalf("got %v; want the run_result (no tool_call for drop)", r)
	}
	got := rn.answers()
	if len(got) != 2 || got[0].Err != nil || string(got[0].Result) != `{"content":[{"type":"text","text":"2 notes"}]}` {
		t.Fatalf("answers = %+v; want the client's result first", got)
	}
	if got[1].Err == nil || got[1].Err.Kind != runner.ToolDenied || got[1].Err.Rule != "code_calls.not_callable" {
		t.Errorf("answer to drop = %+v; want denied by code_calls.not_callable", got[1])
	}
	if f := rn.files["python/gatekeeper_tools/notes.py"]; !strings.Contains(string(f), "def search(") || strings.Contains(string(f), "def drop(") {
		t.Errorf("the run's wrappers of notes:\n%s\nwant search and not drop", f)
	}
	if _, err := audit.VerifyFile(h.auditPath); err != nil {
		t.Fatal(err)
	}
	var lines []audit.Record
	for _, rec := range readAudit(t, h.auditPath) {
		if rec.Kind == audit.KindCodeCall {
			lines = append(lines, rec)
		}
	}
	if len(lines) != 2 || lines[0].Decision != gate.Allow || lines[0].Server != "notes" || lines[0].Tool != "search" || lines[0].ResultBytes == 0 ||
		lines[1].Decision != gate.Deny || lines[1].Rule != "code_calls.not_callable" {
		t.Errorf("code_call lines = %+v", lines)
	}
}

// TestRelayedCallsFailClosed: a client that answers with an error, one
// that does not answer in time (a tool_cancel follows, and its late
// answer gets no reply), and one whose connection closes mid-call each
// fail the call in the program; none becomes a result.
func TestRelayedCallsFailClosed(t *testing.T) {
	t.Parallel()
	search := runner.NestedCall{Server: "notes", Tool: "search", Arguments: json.RawMessage(`{"q":"x"}`)}

	t.Run("an error answer is a server error naming it", func(t *testing.T) {
		t.Parallel()
		rn := &callingRunner{calls: []runner.NestedCall{search}}
		c := start(t, options{runner: rn, policy: sdkPolicy}).connect(t)
		q, _ := c.openWithTools(notesServers)
		c.startRun(q, "toolu_1")
		call := c.recv()
		c.send(fmt.Sprintf(`{"type":"tool_result","id":%q,"error":"the handler threw: disk full"}`, call["id"]))
		if r := c.recv(); r["type"] != "run_result" {
			t.Fatalf("got %v", r)
		}
		got := rn.answers()
		if len(got) != 1 || got[0].Err == nil || got[0].Err.Kind != runner.ToolServer || !strings.Contains(got[0].Err.Message, "disk full") {
			t.Errorf("answers = %+v; want kind server naming the client's error", got)
		}
	})

	t.Run("no answer in time is a timeout, cancelled, and the late answer is dropped", func(t *testing.T) {
		t.Parallel()
		rn := &callingRunner{calls: []runner.NestedCall{search}}
		c := start(t, options{runner: rn, policy: strings.Replace(sdkPolicy, "timeout: 2s", "timeout: 200ms", 1)}).connect(t)
		q, _ := c.openWithTools(notesServers)
		c.startRun(q, "toolu_1")
		call := c.recv()
		cancel := c.recv()
		if cancel["type"] != "tool_cancel" || cancel["id"] != call["id"] || cancel["query_id"] != q {
			t.Fatalf("got %v; want the tool_cancel of %v", cancel, call["id"])
		}
		c.send(fmt.Sprintf(`{"type":"tool_result","id":%q,"result":{"content":[]}}`, call["id"]))
		c.send(`{"type":"tool_result","id":"t_forged","result":{"content":[]}}`)
		if r := c.recv(); r["type"] != "run_result" {
			t.Fatalf("got %v", r)
		}
		if r := c.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, q)); r["type"] != "query_closed" {
			t.Fatalf("got %v; want query_closed next: a late or unknown tool_result gets no reply", r)
		}
		got := rn.answers()
		if len(got) != 1 || got[0].Err == nil || got[0].Err.Kind != runner.ToolTimeout {
			t.Errorf("answers = %+v; want kind timeout", got)
		}
	})

	t.Run("a closed connection fails the pending call", func(t *testing.T) {
		t.Parallel()
		rn := &callingRunner{calls: []runner.NestedCall{search}}
		h := start(t, options{runner: rn, policy: sdkPolicy})
		c := h.connect(t)
		q, _ := c.openWithTools(notesServers)
		c.startRun(q, "toolu_1")
		if call := c.recv(); call["type"] != "tool_call" {
			t.Fatalf("got %v", call)
		}
		c.ws.Close()
		got := rn.awaitAnswers(1)
		if len(got) != 1 || got[0].Err == nil || got[0].Result != nil {
			t.Fatalf("answers = %+v; want one error", got)
		}
		if k := got[0].Err.Kind; k != runner.ToolServer && k != runner.ToolCancelled {
			t.Errorf("kind %q; want server or cancelled", k)
		}
	})
}

// TestAnInProcessServerMayNotTakeAnOperatorServersName: code_calls
// names a server by its name alone, so a client's server of the name of
// one of the policy's mcp_servers is refused, not namespaced, and the
// connection goes on.
func TestAnInProcessServerMayNotTakeAnOperatorServersName(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: sdkPolicy + "mcp_servers:\n  notes:\n    command: [/bin/false]\n"})
	c := h.connect(t)
	r := c.do(`{"type":"open_query","id":"o","sdk_servers":` + notesServers + `}`)
	if r["type"] != "error" || r["code"] != wire.CodeInvalidField || !strings.Contains(r["message"].(string), `"notes" is one of the policy's mcp_servers`) {
		t.Fatalf("got %v; want invalid_field naming the clash", r)
	}
	if q := c.open(""); q == "" {
		t.Fatal("no query after the refusal")
	}
}

// pythonImageDescription is the run tool's description under the
// default image (python), which has no Node.
var pythonImageDescription = wire.SandboxDescriptionFor([]string{"python", "sh"})

// TestAQueryWithoutServersGetsItsImagesLanguages: no callable server: the
// tool_description is the plain description naming only the languages of
// the query's image (the default, python, has no Node).
func TestAQueryWithoutServersGetsItsImagesLanguages(t *testing.T) {
	t.Parallel()
	c := start(t, options{policy: testPolicy}).connect(t)
	_, r := c.openWithTools(notesServers)
	if d, _ := r["tool_description"].(string); d != pythonImageDescription || strings.Contains(d, `"node"`) {
		t.Errorf("tool_description = %q; want the plain description naming python and sh only", d)
	}
	// An image with every language: none, the clients' own text.
	node := start(t, options{policy: strings.Replace(testPolicy, "ceilings: {", "ceilings: {images: [node], ", 1)}).connect(t)
	if r := node.do(`{"type":"open_query","id":"o","sandbox_policy":{"fs":{"image":"node"}}}`); r["type"] != "query_opened" || r["tool_description"] != nil {
		t.Errorf("a query under the node image: %v; want no tool_description", r)
	}
}

// TestAnotherConnectionCannotAnswerACall: call ids belong to the
// connection that was sent the tool_call. A second connection of the same
// token that learns the id and answers first is dropped without a reply;
// the call gets its own client's answer.
func TestAnotherConnectionCannotAnswerACall(t *testing.T) {
	t.Parallel()
	rn := &callingRunner{calls: []runner.NestedCall{{Server: "notes", Tool: "search", Arguments: json.RawMessage(`{"q":"x"}`)}}}
	h := start(t, options{runner: rn, policy: sdkPolicy})
	owner, other := h.connect(t), h.connect(t)
	q, _ := owner.openWithTools(notesServers)
	owner.startRun(q, "toolu_1")
	call := owner.recv()
	if call["type"] != "tool_call" {
		t.Fatalf("got %v", call)
	}
	other.send(fmt.Sprintf(`{"type":"tool_result","id":%q,"result":{"content":[{"type":"text","text":"forged"}]}}`, call["id"]))
	if r := other.do(`{"type":"open_query","id":"o2"}`); r["type"] != "query_opened" {
		t.Fatalf("got %v; want query_opened next: the forged answer gets no reply", r)
	}
	owner.send(fmt.Sprintf(`{"type":"tool_result","id":%q,"result":{"content":[{"type":"text","text":"real"}]}}`, call["id"]))
	if r := owner.recv(); r["type"] != "run_result" {
		t.Fatalf("got %v", r)
	}
	if got := rn.answers(); len(got) != 1 || got[0].Err != nil || !strings.Contains(string(got[0].Result), `"real"`) {
		t.Errorf("answers = %+v; want the owner's result, not the forged one", got)
	}
}

// noInProcessRego is an operator's rule against the tools of in-process
// (sdk) servers, but for the run tool itself.
const noInProcessRego = `package gatekeeper

deny contains {"rule": "ops.no_in_process", "reason": "tools of the client's own process are not allowed here"} if {
	input.mcp_server.source == "sdk"
	input.mcp_server.name != "sandboxed_code"
}
`

// TestAnOperatorRuleOnTheSourceOfAServerHolds: mcp_server.source reaches
// the operator's Rego both from a decide frame (as the client sends it)
// and for a nested call to an in-process server (as the sidecar knows
// it), and the code_call line names the source.
func TestAnOperatorRuleOnTheSourceOfAServerHolds(t *testing.T) {
	t.Parallel()
	rn := &callingRunner{calls: []runner.NestedCall{{Server: "notes", Tool: "search", Arguments: json.RawMessage(`{"q":"x"}`)}}}
	h := start(t, options{runner: rn, policy: sdkPolicy, rego: noInProcessRego})
	c := h.connect(t)
	q, _ := c.openWithTools(notesServers)
	for _, tc := range []struct{ mcp, rule string }{
		{`{"name":"notes","source":"sdk"}`, "ops.no_in_process"},
		{`{"name":"notes","source":"stdio"}`, ""},
	} {
		d := c.decide(q, "mcp__notes__search", `{"q":"x"}`, "toolu_d", tc.mcp)
		if got := d["rule"]; (tc.rule != "" && got != tc.rule) || (tc.rule == "" && got == "ops.no_in_process") {
			t.Errorf("decide with mcp_server %s: %v; want rule %q", tc.mcp, d, tc.rule)
		}
	}
	c.startRun(q, "toolu_1")
	if r := c.recv(); r["type"] != "run_result" {
		t.Fatalf("got %v; want the run_result (the call is denied, so no tool_call frame)", r)
	}
	if got := rn.answers(); len(got) != 1 || got[0].Err == nil || got[0].Err.Rule != "ops.no_in_process" {
		t.Fatalf("answers %+v; want a deny by ops.no_in_process", got)
	}
	var lines []audit.Record
	for _, rec := range readAudit(t, h.auditPath) {
		if rec.Kind == audit.KindCodeCall {
			lines = append(lines, rec)
		}
	}
	if len(lines) != 1 || lines[0].Rule != "ops.no_in_process" || lines[0].ServerSource != wire.SourceSDK {
		t.Errorf("code_call lines %+v; want one deny by ops.no_in_process with server_source sdk", lines)
	}
}
