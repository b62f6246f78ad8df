package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// sessionPolicy turns sessions on for every query (an override may turn
// them off again).
var sessionPolicy = strings.Replace(testPolicy, "ceilings: {memory: 1g, timeout: 60s}",
	"  session: {idle_timeout: 5m, max_lifetime: 1h}\nceilings: {memory: 1g, timeout: 60s, session: {idle_timeout: 20m, max_lifetime: 1h}}", 1)

// sessionRunner stands in for a backend that keeps sessions: it records
// the session of every run and every EndSession, reports each run's
// number in its session, and tells Events of a session's start and end.
// lose, when set, is the StateLost of the next run.
type sessionRunner struct {
	mu    sync.Mutex
	specs []runner.Spec
	runs  map[string]int // session id → runs so far
	ended []string
	lose  *runner.StateLost
}

func (f *sessionRunner) Run(ctx context.Context, s runner.Spec) (runner.Result, error) {
	f.mu.Lock()
	f.specs = append(f.specs, s)
	res := runner.Result{RunID: s.RunID, Reason: runner.Exited, Stdout: "ok\n", Duration: time.Millisecond, Image: s.Sandbox.Image, Runtime: runner.Runc}
	var start bool
	if s.Session != nil {
		if f.runs == nil {
			f.runs = map[string]int{}
		}
		f.runs[s.Session.ID]++
		start = f.runs[s.Session.ID] == 1
		res.Session = &runner.SessionInfo{Run: f.runs[s.Session.ID], Started: time.Unix(1764650000, 0), Age: time.Second, PeakMemoryBytes: 1 << 20}
		res.StateLost, f.lose = f.lose, nil
	}
	f.mu.Unlock()
	if start && s.Session.Events != nil {
		s.Session.Events(runner.SessionEvent{Kind: runner.SessionStarted, SessionID: s.Session.ID, Sandbox: "sbx_1", Revision: s.Session.Revision, Started: time.Unix(1764650000, 0)})
	}
	s.OnOutput(runner.Stdout, []byte("ok\n"))
	return res, nil
}

func (f *sessionRunner) EndSession(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, id)
	delete(f.runs, id)
	return nil
}

// sessionIDs returns the session of each run so far ("" for a single-use
// run), in order.
func (f *sessionRunner) sessionIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.specs {
		id := ""
		if s.Session != nil {
			id = s.Session.ID
		}
		out = append(out, id)
	}
	return out
}

func (f *sessionRunner) endedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ended)
}

// waitEnded waits until EndSession was called for every id in want.
func (f *sessionRunner) waitEnded(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.endedIDs()
		if !slices.ContainsFunc(want, func(id string) bool { return !slices.Contains(got, id) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("EndSession was called for %q, want each of %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runOnce decides and runs one program in query q and returns its
// run_result.
func (c *client) runOnce(q, toolUseID string) map[string]any {
	c.t.Helper()
	if d := c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, toolUseID, sdkServer); d["decision"] != "allow" {
		c.t.Fatalf("decide: %v", d)
	}
	if out := c.do(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":%q,"language":"python","code":"x"}`, q, toolUseID)); out["type"] != "output" {
		c.t.Fatalf("run: %v", out)
	}
	res := c.recv()
	if res["type"] != "run_result" {
		c.t.Fatalf("run: %v", res)
	}
	return res
}

func TestCloseQueryEndsItsSession(t *testing.T) {
	t.Parallel()
	fr := &sessionRunner{}
	h := start(t, options{runner: fr, policy: sessionPolicy})
	c := h.connect(t)
	q := c.open("")
	c.runOnce(q, "toolu_1")
	c.runOnce(q, "toolu_2")
	ids := fr.sessionIDs()
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("sessions of the query's two runs = %q, want one session for both", ids)
	}
	if got := fr.endedIDs(); len(got) != 0 {
		t.Fatalf("sessions ended before close_query: %q", got)
	}
	if r := c.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, q)); r["type"] != "query_closed" {
		t.Fatalf("close_query: %v", r)
	}
	// query_closed is sent once the session is ended.
	if got := fr.endedIDs(); !slices.Equal(got, ids[:1]) {
		t.Errorf("EndSession calls at query_closed = %q, want exactly %q", got, ids[:1])
	}
}

func TestAQueryWithoutASessionEndsNone(t *testing.T) {
	t.Parallel()
	fr := &sessionRunner{}
	h := start(t, options{runner: fr, policy: sessionPolicy})
	c := h.connect(t)
	q := c.open(`{"session":{"idle_timeout":"0s"}}`)
	res := c.runOnce(q, "toolu_1")
	if ids := fr.sessionIDs(); !slices.Equal(ids, []string{""}) {
		t.Fatalf("sessions of a query that turned them off = %q, want a single-use run", ids)
	}
	if _, ok := res["session"]; ok {
		t.Errorf("run_result of a single-use run has a session: %v", res)
	}
	c.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, q))
	if got := fr.endedIDs(); len(got) != 0 {
		t.Errorf("EndSession calls for a query that never had a session: %q", got)
	}
}

func TestConnectionEndEndsEveryOpenSession(t *testing.T) {
	t.Parallel()
	fr := &sessionRunner{}
	h := start(t, options{runner: fr, policy: sessionPolicy})
	c := h.connect(t)
	q1, q2 := c.open(""), c.open("")
	c.runOnce(q1, "toolu_1")
	c.runOnce(q2, "toolu_2")
	ids := fr.sessionIDs()
	c.ws.Close()
	fr.waitEnded(t, ids...)
	if got := fr.endedIDs(); len(got) != 2 {
		t.Errorf("EndSession calls = %q, want one for each of %q", got, ids)
	}
}

func TestSessionsAreNeverShared(t *testing.T) {
	t.Parallel()
	fr := &sessionRunner{}
	h := start(t, options{runner: fr, policy: sessionPolicy})
	a, b := h.connect(t), h.connect(t)
	qa1, qa2, qb := a.open(""), a.open(""), b.open("")
	for i, run := range []struct {
		c *client
		q string
	}{{a, qa1}, {a, qa2}, {b, qb}, {a, qa1}, {a, qa2}, {b, qb}} {
		run.c.runOnce(run.q, fmt.Sprintf("toolu_%d", i))
	}
	ids := fr.sessionIDs()
	if ids[0] != ids[3] || ids[1] != ids[4] || ids[2] != ids[5] {
		t.Errorf("a query's runs changed session: %q", ids)
	}
	if ids[0] == ids[1] || ids[0] == ids[2] || ids[1] == ids[2] || slices.Contains(ids, "") {
		t.Errorf("two queries share a session (or a run had none): %q", ids)
	}
	// A query opened after one closed gets a session of its own.
	a.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, qa1))
	qa3 := a.open("")
	a.runOnce(qa3, "toolu_new")
	if last := fr.sessionIDs()[6]; slices.Contains(ids, last) {
		t.Errorf("a new query reused session %q", last)
	}
}

func TestSessionRunsAreReportedAndAudited(t *testing.T) {
	t.Parallel()
	fr := &sessionRunner{}
	h := start(t, options{runner: fr, policy: sessionPolicy})
	c := h.connect(t)
	q := c.open("")
	first := c.runOnce(q, "toolu_1")
	fr.mu.Lock()
	fr.lose = &runner.StateLost{Reason: runner.EndExpired, Lost: "the Python interpreter's variables", Fresh: true}
	fr.mu.Unlock()
	second := c.runOnce(q, "toolu_2")
	if s, _ := first["session"].(map[string]any); s["run"] != float64(1) || s["started_at"] != "2025-12-02T04:33:20.000Z" {
		t.Errorf("first run_result's session = %v, want run 1", first["session"])
	}
	if _, ok := first["state_lost"]; ok {
		t.Errorf("a run that lost nothing reports state_lost: %v", first["state_lost"])
	}
	if l, _ := second["state_lost"].(map[string]any); l["reason"] != "expired" || l["fresh"] != true || l["lost"] != "the Python interpreter's variables" {
		t.Errorf("second run_result's state_lost = %v", second["state_lost"])
	}
	c.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, q))
	sid := fr.sessionIDs()[0]
	runs := records(t, h.auditPath, audit.KindRun) // records verifies the chain
	if len(runs) != 2 || runs[0].SessionID != sid || runs[0].SessionRun != 1 || runs[1].SessionRun != 2 || runs[0].StateLost != nil {
		t.Fatalf("run lines = %+v, want session %s runs 1 and 2", runs, sid)
	}
	if l := runs[1].StateLost; l == nil || *l != (audit.StateLost{Reason: "expired", Lost: "the Python interpreter's variables", Fresh: true}) {
		t.Errorf("second run line's state_lost = %+v", l)
	}
	starts := records(t, h.auditPath, audit.KindSession)
	if len(starts) != 1 || starts[0].Event != audit.SessionStart || starts[0].SessionID != sid || starts[0].QueryID != q ||
		starts[0].Sandbox != "sbx_1" || starts[0].Revision == "" || starts[0].Revision != runs[0].PolicyRevision || starts[0].Started.IsZero() {
		t.Errorf("session lines = %+v, want one session_start of %s under the run's revision", starts, sid)
	}
}

func TestAClaudeCodeSessionEndEndsItsSandboxSession(t *testing.T) {
	t.Parallel()
	fr := &sessionRunner{}
	h := start(t, options{runner: fr, policy: sessionPolicy})
	const sid = "5b0c58b4-5a3e-4c0e-9d4b-8f1c1e2f3a4b"
	mcp := h.connect(t) // gatekeeper mcp
	opened := mcp.do(fmt.Sprintf(`{"type":"open_query","id":"o","claude_code_session":%q}`, sid))
	q, _ := opened["query_id"].(string)
	if q == "" {
		t.Fatalf("attach: %v", opened)
	}
	mcp.runOnce(q, "toolu_1")
	ids := fr.sessionIDs()
	// Detaching (gatekeeper mcp closing its query) keeps the CLI
	// session's query, and its sandbox session.
	mcp.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, q))
	if got := fr.endedIDs(); len(got) != 0 {
		t.Fatalf("detaching ended sessions %q, want none before SessionEnd", got)
	}
	h.hookOK(t, hookInput(sid, "SessionEnd", "", "", "", ""))
	if got := fr.endedIDs(); !slices.Equal(got, ids) {
		t.Errorf("EndSession calls after SessionEnd = %q, want %q", got, ids)
	}
}

// blockingSessionRunner is a sessionRunner whose runs wait for release
// once they have started (started gets a value).
type blockingSessionRunner struct {
	sessionRunner
	started, release chan struct{}
}

func (f *blockingSessionRunner) Run(ctx context.Context, s runner.Spec) (runner.Result, error) {
	f.started <- struct{}{}
	<-f.release
	return f.sessionRunner.Run(ctx, s)
}

// TestARunStillRunningAtCloseQueryIsEndedAgain: a run in progress when its
// query closes may start its session again after the close ended it (the
// backend makes a fresh one for an ID it forgot), so the session is ended
// once more when that run is done.
func TestARunStillRunningAtCloseQueryIsEndedAgain(t *testing.T) {
	t.Parallel()
	fr := &blockingSessionRunner{started: make(chan struct{}, 1), release: make(chan struct{})}
	h := start(t, options{runner: fr, policy: sessionPolicy})
	c := h.connect(t)
	q := c.open("")
	if d := c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, "toolu_1", sdkServer); d["decision"] != "allow" {
		t.Fatalf("decide: %v", d)
	}
	c.send(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":"toolu_1","language":"python","code":"x"}`, q))
	<-fr.started
	if r := c.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, q)); r["type"] != "query_closed" {
		t.Fatalf("close_query: %v", r)
	}
	ended := fr.endedIDs()
	if len(ended) != 1 {
		t.Fatalf("EndSession calls at close_query = %q, want one", ended)
	}
	close(fr.release)
	for r := c.recv(); r["type"] != "run_result"; r = c.recv() {
	}
	fr.waitEnded(t, ended[0])
	deadline := time.Now().Add(10 * time.Second)
	for len(fr.endedIDs()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := fr.endedIDs(); !slices.Equal(got, []string{ended[0], ended[0]}) {
		t.Errorf("EndSession calls = %q, want the session ended at the close and again after its last run", got)
	}
}

// TestTheModelIsToldThatASessionKeepsState: a query that keeps a session
// describes the run tool with wire.SessionDescription after the plain
// description of its image; one that turned sessions off keeps the plain
// one.
func TestTheModelIsToldThatASessionKeepsState(t *testing.T) {
	t.Parallel()
	h := start(t, options{runner: &sessionRunner{}, policy: sessionPolicy})
	c := h.connect(t)
	for _, tc := range []struct {
		name, override, want string
	}{
		{"a query with a session", "", pythonImageDescription + "\n\n" + wire.SessionDescription},
		{"a query that turned its session off", `{"session":{"idle_timeout":"0s"}}`, pythonImageDescription},
	} {
		f := `{"type":"open_query","id":"o"}`
		if tc.override != "" {
			f = `{"type":"open_query","id":"o","sandbox_policy":` + tc.override + `}`
		}
		r := c.do(f)
		if r["type"] != "query_opened" {
			t.Fatalf("%s: open_query: %v", tc.name, r)
		}
		got, _ := r["tool_description"].(string)
		if got != tc.want {
			t.Errorf("%s: tool_description = %q, want %q", tc.name, got, tc.want)
		}
	}
}
