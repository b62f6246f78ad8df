package server_test

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

// metric reads one sample of the sidecar's /metrics, as its text.
func (h *harness) metric(t *testing.T, name string) string {
	t.Helper()
	for _, line := range strings.Split(scrapeMetrics(t, h), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// TestAClientThatNeverClosesItsQueriesHitsTheCap is the flood the soak
// found: before the caps, 200,000 open_query frames on one connection were
// all accepted and the sidecar grew to 110 MiB. Now the connection gets
// its cap of queries and every open_query past it too_many_queries; the
// connection stays usable, and closing a query makes room for one more.
func TestAClientThatNeverClosesItsQueriesHitsTheCap(t *testing.T) {
	t.Parallel()
	h := start(t, options{tune: func(c *server.Config) { c.MaxQueriesPerConn = 100 }})
	c := h.connect(t)
	const n = 3000
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			if c.ws.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"type":"open_query","id":"o%d"}`, i)) != nil {
				return
			}
		}
	}()
	var opened []string
	refused := 0
	for range n {
		r := c.recv()
		switch {
		case r["type"] == "query_opened":
			opened = append(opened, r["query_id"].(string))
		case r["code"] == "too_many_queries":
			if !strings.Contains(r["message"].(string), "maximum of 100 open queries (--max-queries-per-conn)") {
				t.Fatalf("refusal %v does not name the cap", r)
			}
			refused++
		default:
			t.Fatalf("unexpected reply %v", r)
		}
	}
	if len(opened) != 100 || refused != n-100 {
		t.Fatalf("%d opened and %d refused, want 100 and %d", len(opened), refused, n-100)
	}
	if got := h.metric(t, "gatekeeper_queries_open"); got != "100" {
		t.Errorf("gatekeeper_queries_open %s, want 100", got)
	}
	if got := h.metric(t, `gatekeeper_limit_refusals_total{limit="queries_per_conn"}`); got != fmt.Sprint(n-100) {
		t.Errorf("refusals counted %s, want %d", got, n-100)
	}
	<-sent // one writer at a time
	// Still usable: its queries decide, and a close makes room for one.
	if d := c.decide(opened[0], "Bash", `{}`, "t", ""); d["rule"] != "tools.deny_list" {
		t.Fatalf("decide on an open query: %v", d)
	}
	if r := c.do(`{"type":"open_query","id":"again"}`); r["code"] != "too_many_queries" {
		t.Fatalf("open_query at the cap: %v", r)
	}
	if r := c.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, opened[0])); r["type"] != "query_closed" {
		t.Fatalf("close_query: %v", r)
	}
	if r := c.do(`{"type":"open_query","id":"again"}`); r["type"] != "query_opened" {
		t.Fatalf("open_query after a close: %v", r)
	}
}

// TestTheCapOnAllQueriesIsSharedAndFreedWithItsConnection fills the
// sidecar-wide cap from two connections; the queries of a connection that
// ends are given back.
func TestTheCapOnAllQueriesIsSharedAndFreedWithItsConnection(t *testing.T) {
	t.Parallel()
	h := start(t, options{tune: func(c *server.Config) { c.MaxQueriesPerConn, c.MaxQueries = 3, 4 }})
	a, b := h.connect(t), h.connect(t)
	for range 3 {
		a.open("")
	}
	b.open("")
	r := b.do(`{"type":"open_query","id":"x"}`)
	if r["code"] != "too_many_queries" || !strings.Contains(r["message"].(string), "maximum of 4 open queries across all connections (--max-queries)") {
		t.Fatalf("the fifth query: %v, want too_many_queries naming --max-queries", r)
	}
	must(t, a.ws.Close())
	// The sidecar gives a's queries back once it has seen a go.
	for i := 0; ; i++ {
		r = b.do(fmt.Sprintf(`{"type":"open_query","id":"y%d"}`, i))
		if r["type"] == "query_opened" {
			break
		}
		if r["code"] != "too_many_queries" || i == 500 {
			t.Fatalf("open_query after the other connection closed: %v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := h.metric(t, "gatekeeper_queries_open"); got != "2" {
		t.Errorf("gatekeeper_queries_open %s, want 2", got)
	}
}

// TestConnectionsPastTheCapGet503 holds the cap's connections open; one
// more upgrade is refused with 503, Retry-After and a body naming the cap,
// and the connections served go on working.
func TestConnectionsPastTheCapGet503(t *testing.T) {
	t.Parallel()
	h := start(t, options{tune: func(c *server.Config) { c.MaxConns = 2 }})
	a, b := h.connect(t), h.connect(t)
	bearer := http.Header{"Authorization": {"Bearer " + h.token}}
	ws, resp, err := h.dial(t, bearer)
	if ws != nil {
		ws.Close()
	}
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third connection: %v (err %v), want 503", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "maximum of 2 connections (--max-conns)") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("503 body %q, Retry-After %q: want the cap named and a Retry-After", body, resp.Header.Get("Retry-After"))
	}
	q := b.open("")
	if d := b.decide(q, "Bash", `{}`, "t", ""); d["rule"] != "tools.deny_list" {
		t.Fatalf("a connection within the cap: %v", d)
	}
	must(t, a.ws.Close())
	for i := 0; ; i++ {
		ws, resp, err = h.dial(t, bearer)
		if err == nil {
			ws.Close()
			break
		}
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || i == 500 {
			t.Fatalf("a connection after one closed: %v (err %v)", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := h.metric(t, `gatekeeper_limit_refusals_total{limit="conns"}`); got == "" || got == "0" {
		t.Errorf("refused connections counted %q", got)
	}
}

// TestGoldenTooManyQueries pins the error frame of an open_query past the
// connection's cap, as docs/protocol.md shows it, in
// testdata/golden/an_open_query_past_the_cap_is_refused.json.
func TestGoldenTooManyQueries(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	c := h.connect(t)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range server.DefaultMaxQueriesPerConn {
			if c.ws.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"type":"open_query","id":"o%d"}`, i)) != nil {
				return
			}
		}
	}()
	for range server.DefaultMaxQueriesPerConn {
		if r := c.recv(); r["type"] != "query_opened" {
			t.Fatalf("open_query within the cap: %v", r)
		}
	}
	<-sent
	const frame = `{"type":"open_query","id":"2"}`
	c.send(frame)
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, reply, err := c.ws.ReadMessage()
	must(t, err)
	checkGolden(t, "an_open_query_past_the_cap_is_refused.json", frame, reply)
}

// TestIdleConnectionsHoldNoDecisionWorkers: the soak's 1,000 idle
// connections cost the sidecar 74 KiB each, most of it the two decision
// workers every connection started at once, each holding a stack grown
// for Rego. Workers now start with a connection's first decision and end
// when it has been idle a while; a decision after that starts one again.
// A Grep, which may walk a tree, is decided by a worker (a Bash, decided
// on the reader, never started one: the test could not fail). The
// auditor holds each decision inside its worker, so the test reads the
// gauge while the worker surely runs.
func TestIdleConnectionsHoldNoDecisionWorkers(t *testing.T) {
	t.Parallel()
	held := &holdingAuditor{entered: make(chan struct{}), release: make(chan struct{})}
	h := start(t, options{auditor: held, tune: func(c *server.Config) { c.DecisionWorkerIdle = 20 * time.Millisecond }})
	clients := make([]*client, 20)
	for i := range clients {
		clients[i] = h.connect(t)
		clients[i].open("")
	}
	if got := h.metric(t, "gatekeeper_decision_workers"); got != "0" {
		t.Fatalf("%s decision workers with 20 connections that decided nothing, want 0", got)
	}
	c := clients[0]
	q := c.open("")
	for round := range 3 {
		c.send(fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":"Grep","tool_input":{"pattern":"x","path":%q},"tool_use_id":"t"}`, q, filepath.Join(h.dir, "ws")))
		select {
		case <-held.entered:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the decision never reached the audit log", round)
		}
		// The decision is held in its worker: the worker runs now.
		got := h.metric(t, "gatekeeper_decision_workers")
		held.release <- struct{}{}
		if got != "1" {
			t.Errorf("round %d: %s decision workers while a decision is being made, want 1", round, got)
		}
		if d := c.recv(); d["rule"] != "tools.not_allowlisted" {
			t.Fatalf("round %d: %v", round, d)
		}
		// The worker ends once idle; poll, as its end is the server's to time.
		for i := 0; h.metric(t, "gatekeeper_decision_workers") != "0"; i++ {
			if i == 500 {
				t.Fatalf("round %d: the decision worker of an idle connection did not end", round)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// holdingAuditor holds the audit write of every decision (of tool, if
// set) until the test releases it, saying on entered that one arrived;
// other records pass.
type holdingAuditor struct {
	tool             string
	entered, release chan struct{}
}

func (a *holdingAuditor) Write(r audit.Record) error {
	if r.Kind == audit.KindDecision && (a.tool == "" || r.Tool == a.tool) {
		a.entered <- struct{}{}
		<-a.release
	}
	return nil
}
