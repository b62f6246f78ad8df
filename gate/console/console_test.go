package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/console"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

const testPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [Read, mcp__sandboxed_code__run]
  deny: [Bash]
sandbox:
  proc: {timeout: 10s}
ceilings: {memory: 1g, timeout: 60s}
`

const token = "test-token-0123456789"

// clock is a settable clock for sessions and login limits.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type harness struct {
	con   *console.Console
	srv   *httptest.Server
	log   server.Auditor // the tee
	raw   *audit.Log
	clock *clock
	eng   *gate.Engine
	path  string
}

type options struct {
	tls        bool
	maxRuns    int
	maxRecords int
	audit      string        // an existing audit log to follow instead of a new one
	auditOpts  audit.Options // the options of the new one (rotation)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, o options) *harness {
	t.Helper()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "ws"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(testPolicy), 0o644))
	quiet := slog.New(slog.DiscardHandler)
	eng, err := gate.New(t.Context(), gate.Config{PolicyFile: filepath.Join(dir, "policy.yaml"), Home: dir, Logger: quiet})
	must(t, err)
	h := &harness{clock: &clock{now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}, eng: eng, path: filepath.Join(dir, "audit.jsonl")}
	if o.audit != "" {
		h.path = o.audit
	} else {
		h.raw, err = audit.Open(h.path, o.auditOpts)
		must(t, err)
		t.Cleanup(func() { h.raw.Close() })
	}
	h.con, err = console.New(console.Config{Token: token, AuditPath: h.path, Engine: eng, Logger: quiet, Now: h.clock.Now, MaxRuns: o.maxRuns, MaxRecords: o.maxRecords, Poll: 20 * time.Millisecond})
	must(t, err)
	if h.raw != nil {
		h.log = h.con.Auditor(h.raw)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.con.Run(ctx)
	}()
	if o.tls {
		h.srv = httptest.NewTLSServer(h.con.Handler())
	} else {
		h.srv = httptest.NewServer(h.con.Handler())
	}
	t.Cleanup(func() {
		cancel()
		<-done
		h.srv.Close()
	})
	return h
}

func (h *harness) write(t testing.TB, recs ...audit.Record) {
	t.Helper()
	for _, r := range recs {
		must(t, h.log.Write(r))
	}
}

// do sends a request to the console; header values "" are left out.
func (h *harness) do(t testing.TB, method, path string, header map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, h.srv.URL+path, strings.NewReader(body))
	must(t, err)
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	c := h.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	must(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// login logs in with the token and returns the session cookie.
func (h *harness) login(t testing.TB) *http.Cookie {
	t.Helper()
	resp := h.do(t, "POST", "/ui/api/login", map[string]string{"Content-Type": "application/json"}, `{"token":"`+token+`"}`)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("login: %s", resp.Status)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "gatekeeper_console" {
			return c
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}

var dataPaths = []string{"/ui/api/stream", "/ui/api/records", "/ui/api/overview", "/ui/api/runs/r_1", "/ui/api/queries/q_1"}

func TestDataNeedsASessionOrTheToken(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	cookie := h.login(t)
	cases := []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"no session", nil, http.StatusUnauthorized},
		{"a made-up session", map[string]string{"Cookie": "gatekeeper_console=0123"}, http.StatusUnauthorized},
		{"a wrong bearer token", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"the bearer token", map[string]string{"Authorization": "Bearer " + token}, 0},
		{"a session cookie", map[string]string{"Cookie": cookie.Name + "=" + cookie.Value}, 0},
	}
	for _, tc := range cases {
		for _, p := range dataPaths {
			resp := h.do(t, "GET", p+"?limit=0", tc.header, "")
			refused := resp.StatusCode == http.StatusUnauthorized
			if tc.want == http.StatusUnauthorized && !refused || tc.want == 0 && refused {
				t.Errorf("%s: GET %s answered %s", tc.name, p, resp.Status)
			}
		}
	}
}

func TestCrossOriginRequestsAreRefused(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	cookie := h.login(t)
	auth := cookie.Name + "=" + cookie.Value
	cases := []struct {
		name          string
		origin, fetch string
		want          int
	}{
		{"another origin", "http://evil.example", "", http.StatusForbidden},
		{"another port of this host", strings.Replace(h.srv.URL, "127.0.0.1:", "127.0.0.1:1", 1), "same-site", http.StatusForbidden},
		{"a cross-site fetch without Origin", "", "cross-site", http.StatusForbidden},
		{"a null origin", "null", "", http.StatusForbidden},
		{"this origin", h.srv.URL, "same-origin", 0},
		{"a typed-in address", "", "none", 0},
	}
	for _, tc := range cases {
		hdr := map[string]string{"Cookie": auth, "Origin": tc.origin, "Sec-Fetch-Site": tc.fetch}
		for _, p := range append(slicesOf(dataPaths), "/ui/api/session") {
			resp := h.do(t, "GET", p+"?limit=0", hdr, "")
			if got := resp.StatusCode == http.StatusForbidden; got != (tc.want == http.StatusForbidden) {
				t.Errorf("%s: GET %s answered %s", tc.name, p, resp.Status)
			}
		}
		hdr["Content-Type"] = "application/json"
		for _, p := range []string{"/ui/api/login", "/ui/api/logout"} {
			resp := h.do(t, "POST", p, hdr, `{"token":"`+token+`"}`)
			if got := resp.StatusCode == http.StatusForbidden; got != (tc.want == http.StatusForbidden) {
				t.Errorf("%s: POST %s answered %s", tc.name, p, resp.Status)
			}
		}
	}
}

func slicesOf(xs []string) []string { return append([]string(nil), xs...) }

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	// The policy, written out here a second time so that a change to it is
	// a deliberate one.
	const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"
	if console.ContentSecurityPolicy != csp {
		t.Fatalf("ContentSecurityPolicy = %q", console.ContentSecurityPolicy)
	}
	for _, p := range []string{"/ui/", "/ui/assets/app.js", "/ui/assets/console.css", "/ui/api/overview", "/ui/api/session", "/ui/login?code=x", "/ui/nothing"} {
		resp := h.do(t, "GET", p, nil, "")
		want := map[string]string{
			"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
			"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Cross-Origin-Resource-Policy": "same-origin",
		}
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", p, k, got, v)
			}
		}
	}
	for p, ct := range map[string]string{"/ui/": "text/html", "/ui/assets/app.js": "text/javascript", "/ui/assets/console.css": "text/css"} {
		if got := h.do(t, "GET", p, nil, "").Header.Get("Content-Type"); !strings.HasPrefix(got, ct) {
			t.Errorf("GET %s: Content-Type %q, want %s", p, got, ct)
		}
	}
}

func TestTheAssetsHaveNoInlineScriptOrStyle(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	body, _ := io.ReadAll(h.do(t, "GET", "/ui/", nil, "").Body)
	page := string(body)
	for _, bad := range []string{"<script>", "<style", " style=", "onclick=", "onload=", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html contains %q", bad)
		}
	}
	if !strings.Contains(page, `<script type="module" src="/ui/assets/app.js"></script>`) {
		t.Error("index.html does not load app.js as a module")
	}
}

func TestLoginSetsAStrictHttpOnlyCookie(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		tls    bool
		secure bool
	}{{"over http", false, false}, {"over https", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, options{tls: tc.tls})
			c := h.login(t)
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" || c.Secure != tc.secure || len(c.Value) != 64 {
				t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/, Secure=%v, a 256-bit value", c, tc.secure)
			}
		})
	}
}

func TestLoginRefusesWrongTokensAndForms(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	cases := []struct {
		name, ct, body string
		want           int
	}{
		{"a wrong token", "application/json", `{"token":"nope"}`, http.StatusUnauthorized},
		{"an empty token", "application/json", `{"token":""}`, http.StatusUnauthorized},
		{"a form post", "application/x-www-form-urlencoded", "token=" + token, http.StatusUnsupportedMediaType},
		{"not JSON", "application/json", "token", http.StatusBadRequest},
	}
	for _, tc := range cases {
		resp := h.do(t, "POST", "/ui/api/login", map[string]string{"Content-Type": tc.ct}, tc.body)
		if resp.StatusCode != tc.want || len(resp.Cookies()) != 0 {
			t.Errorf("%s: %s with %d cookies, want %d and none", tc.name, resp.Status, len(resp.Cookies()), tc.want)
		}
	}
}

func TestLoginBruteForceIsBounded(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	try := func(tok string) *http.Response {
		return h.do(t, "POST", "/ui/api/login", map[string]string{"Content-Type": "application/json"}, `{"token":"`+tok+`"}`)
	}
	for i := range 10 {
		if resp := try(fmt.Sprintf("guess-%d", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d: %s, want 401", i+1, resp.Status)
		}
	}
	// The budget is spent: even the right token is refused, so that a
	// guesser learns nothing.
	resp := try(token)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("after 10 wrong guesses the right token got %s (Retry-After %q), want 429", resp.Status, resp.Header.Get("Retry-After"))
	}
	if resp := h.do(t, "GET", "/ui/login?code=guess", nil, ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a one-time code while limited: %s, want 429", resp.Status)
	}
	h.clock.add(6 * time.Second) // one more attempt earned
	if resp := try(token); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("after the wait the right token got %s", resp.Status)
	}
	if resp := try("guess-x"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a success spends nothing: the next guess got %s, want 401", resp.Status)
	}
	if resp := try("guess-y"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the earned attempt is spent: %s, want 429", resp.Status)
	}
}

func TestOneTimeLoginURLWorksOnceAndExpires(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	u := h.con.LoginURL()
	resp := h.do(t, "GET", u, nil, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" || len(resp.Cookies()) != 1 || !resp.Cookies()[0].HttpOnly {
		t.Fatalf("first use: %s to %q with cookies %v", resp.Status, resp.Header.Get("Location"), resp.Cookies())
	}
	if resp := h.do(t, "GET", u, nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second use: %s, want 401", resp.Status)
	}
	late := h.con.LoginURL()
	h.clock.add(16 * time.Minute)
	if resp := h.do(t, "GET", late, nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("use after 16 minutes: %s, want 401", resp.Status)
	}
}

func TestSessionsExpireAndLogOut(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	c := h.login(t)
	hdr := map[string]string{"Cookie": c.Name + "=" + c.Value}
	if resp := h.do(t, "GET", "/ui/api/overview", hdr, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the session: %s", resp.Status)
	}
	if resp := h.do(t, "POST", "/ui/api/logout", hdr, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %s", resp.Status)
	}
	if resp := h.do(t, "GET", "/ui/api/overview", hdr, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after logout: %s, want 401", resp.Status)
	}
	c = h.login(t)
	h.clock.add(12*time.Hour + time.Second)
	if resp := h.do(t, "GET", "/ui/api/overview", map[string]string{"Cookie": c.Name + "=" + c.Value}, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after 12 hours: %s, want 401", resp.Status)
	}
}

func TestAForeignHostNameIsRefused(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	for host, want := range map[string]int{"evil.example": http.StatusMisdirectedRequest, "evil.example:80": http.StatusMisdirectedRequest, "localhost": http.StatusOK, "[::1]:9": http.StatusOK} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", h.srv.URL+"/ui/", nil)
		req.Host = host
		resp, err := h.srv.Client().Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %s, want %d", host, resp.Status, want)
		}
	}
}

// sse reads server-sent events from a stream response.
type sse struct{ r *bufio.Reader }

type event struct{ id, name, data string }

// next returns the next event other than a `pending` one (the calls
// waiting for approval, which every stream gets after ready).
func (s sse) next(t *testing.T) event {
	t.Helper()
	for {
		if ev := s.any(t); ev.name != "pending" {
			return ev
		}
	}
}

// any returns the next event.
func (s sse) any(t *testing.T) event {
	t.Helper()
	var ev event
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && ev.name != "":
			return ev
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// line returns the audit line an event carries.
func (ev event) record(t *testing.T) (console.Verdict, audit.Record) {
	t.Helper()
	var e struct {
		V    console.Verdict `json:"v"`
		Line audit.Record    `json:"line"`
	}
	must(t, json.Unmarshal([]byte(ev.data), &e))
	return e.V, e.Line
}

func decision(tool, dec, rule string) audit.Record {
	return audit.Record{Kind: audit.KindDecision, QueryID: "q_1", Tool: tool, Event: "PreToolUse", Decision: dec, Rule: rule, Reason: tool + " is " + dec}
}

// waitRecords waits until the console holds n records.
func (h *harness) waitRecords(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var got struct {
			Records []json.RawMessage `json:"records"`
		}
		must(t, json.NewDecoder(h.do(t, "GET", "/ui/api/records?limit=100000", map[string]string{"Authorization": "Bearer " + token}, "").Body).Decode(&got))
		if len(got.Records) >= n {
			return
		}
	}
	t.Fatalf("the console never held %d records", n)
}

func TestStreamSendsTheFilteredHistoryThenEachNewRecord(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	h.write(t, decision("Read", "allow", "host_fs.workspace"), decision("Bash", "deny", "tools.denied"), decision("Read", "deny", "host_fs.deny_glob"))
	h.waitRecords(t, 3)
	resp := h.do(t, "GET", "/ui/api/stream?decision=deny&limit=10", map[string]string{"Authorization": "Bearer " + token}, "")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	s := sse{bufio.NewReader(resp.Body)}
	for _, want := range []string{"tools.denied", "host_fs.deny_glob"} {
		ev := s.next(t)
		v, rec := ev.record(t)
		if ev.name != "record" || rec.Rule != want || v.Word != "DENY" || v.Icon != "✘" || ev.id != fmt.Sprintf("0.%d", rec.Seq) {
			t.Fatalf("history: %+v, want the deny by %s", ev, want)
		}
	}
	if ev := s.next(t); ev.name != "ready" || !strings.Contains(ev.data, `"backfilled":2`) {
		t.Fatalf("after the history: %+v, want ready with 2 backfilled", ev)
	}
	h.write(t, decision("Read", "allow", "host_fs.workspace"), decision("WebSearch", "deny", "tools.denied"))
	ev := s.next(t)
	if _, rec := ev.record(t); rec.Tool != "WebSearch" || rec.Seq != 5 {
		t.Fatalf("live: %+v, want the WebSearch deny (seq 5), not the allow", ev)
	}
}

func TestStreamResumesAfterTheLastEventID(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	for i := range 5 {
		h.write(t, decision(fmt.Sprintf("T%d", i), "deny", "r"))
	}
	h.waitRecords(t, 5)
	cases := []struct {
		name, last string
		first      int64
		gap        bool
	}{
		{"a known id", "0.3", 4, false},
		{"an id of another log", "7.3", 1, false}, // a new log: history as for a new page
	}
	for _, tc := range cases {
		resp := h.do(t, "GET", "/ui/api/stream", map[string]string{"Authorization": "Bearer " + token, "Last-Event-ID": tc.last}, "")
		s := sse{bufio.NewReader(resp.Body)}
		if _, rec := s.next(t).record(t); rec.Seq != tc.first {
			t.Errorf("%s: the stream starts at seq %d, want %d", tc.name, rec.Seq, tc.first)
		}
		resp.Body.Close()
	}
}

// overview decodes the overview into v once the console has read to the
// end of the log.
func (h *harness) overview(t *testing.T, v any) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		body, err := io.ReadAll(h.do(t, "GET", "/ui/api/overview", map[string]string{"Authorization": "Bearer " + token}, "").Body)
		must(t, err)
		if !strings.Contains(string(body), `"state":"reading"`) {
			must(t, json.Unmarshal(body, v))
			return
		}
	}
	t.Fatal("the console never read to the end of the log")
}

func TestRecordsFilters(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	h.write(t,
		audit.Record{Kind: audit.KindQuery, QueryID: "q_aaa1", Decision: "allow"},
		audit.Record{Kind: audit.KindDecision, QueryID: "q_aaa1", Tool: "Read", Decision: "deny", Rule: "host_fs.deny_glob", Reason: "Read of ~/.ssh/id_rsa is forbidden", ToolInput: map[string]any{"file_path": "~/.ssh/id_rsa"}},
		audit.Record{Kind: audit.KindDecision, QueryID: "q_bbb2", Tool: "Bash", Decision: "deny", Rule: "tools.denied"},
		audit.Record{Kind: audit.KindDecision, QueryID: "q_bbb2", Tool: "Read", Decision: "allow", Rule: "host_fs.workspace", ToolInput: map[string]any{"file_path": "notes.txt", "api_key": "sk-123"}},
		audit.Record{Kind: audit.KindRun, QueryID: "q_bbb2", Tool: "mcp__sandboxed_code__run", Decision: "allow", Outcome: audit.OutcomeTimedOut},
		audit.Record{Kind: audit.KindDecision, QueryID: "q_bbb2", Tool: "Write", Decision: "ask", Rule: "tools.ask"},
	)
	h.waitRecords(t, 6)
	cases := []struct {
		name, query string
		seqs        []int64
	}{
		{"no filter", "", []int64{1, 2, 3, 4, 5, 6}},
		{"denies", "decision=deny", []int64{2, 3}},
		{"denies and asks", "decision=deny&decision=ask", []int64{2, 3, 6}},
		{"a rule", "rule=tools.denied", []int64{3}},
		{"a rule prefix", "rule=host_fs.*", []int64{2, 4}},
		{"a tool", "tool=Read", []int64{2, 4}},
		{"a query prefix", "query=q_bbb", []int64{3, 4, 5, 6}},
		{"runs", "kind=run", []int64{5}},
		{"search in a reason, any case", "q=SSH", []int64{2}},
		{"search in the tool input", "q=notes.txt", []int64{4}},
		{"search does not find a masked secret", "q=sk-123", nil},
		{"fields together", "tool=Read&decision=allow", []int64{4}},
		{"the newest only", "limit=2", []int64{5, 6}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got struct {
				Records []struct {
					Line audit.Record `json:"line"`
				} `json:"records"`
			}
			must(t, json.NewDecoder(h.do(t, "GET", "/ui/api/records?"+tc.query, map[string]string{"Authorization": "Bearer " + token}, "").Body).Decode(&got))
			var seqs []int64
			for _, r := range got.Records {
				seqs = append(seqs, r.Line.Seq)
			}
			if fmt.Sprint(seqs) != fmt.Sprint(tc.seqs) {
				t.Errorf("?%s gave seqs %v, want %v", tc.query, seqs, tc.seqs)
			}
		})
	}
}

func TestRunDetailWhileHeldAndAfterEviction(t *testing.T) {
	t.Parallel()
	h := start(t, options{maxRuns: 1})
	run := func(id, out string) {
		exit := 0
		h.write(t,
			audit.Record{Kind: audit.KindDecision, QueryID: "q_1", ToolUseID: "tu_" + id, Tool: wire.SandboxTool, Decision: "allow", Rule: "sandbox.allowed", ToolInput: map[string]any{"language": "python", "code": "print('" + out + "')"}},
			audit.Record{Kind: audit.KindRun, QueryID: "q_1", ToolUseID: "tu_" + id, RunID: id, Tool: wire.SandboxTool, Decision: "allow", Outcome: audit.OutcomeExited, ExitCode: &exit, StdoutBytes: int64(len(out) + 1)},
		)
		h.con.ObserveRun(server.RunInfo{
			Spec:   runner.Spec{RunID: id, QueryID: "q_1", Language: runner.Python, Code: "print('" + out + "')", Files: map[string]string{"data.csv": "1,2,3", "api_token.txt": "s3cret"}, Sandbox: runner.Sandbox{MaxOutputBytes: 1 << 20}},
			Result: runner.Result{RunID: id, Reason: runner.Exited, Stdout: out + "\n"}, ToolUseID: "tu_" + id,
			Policy: []byte(`{"sandbox":{"proc":{"timeout":10000}},"token":"x"}`), PolicyHash: "sha256:abc",
		})
	}
	run("r_one", "first")
	run("r_two", "second")
	h.waitRecords(t, 4)
	type detail struct {
		Held    bool `json:"held"`
		Records []struct {
			Line audit.Record `json:"line"`
		} `json:"records"`
		Detail *struct {
			Code   string         `json:"code"`
			Stdout string         `json:"stdout"`
			Files  map[string]any `json:"files"`
			Policy map[string]any `json:"policy"`
		} `json:"detail"`
	}
	get := func(id string) detail {
		var d detail
		must(t, json.NewDecoder(h.do(t, "GET", "/ui/api/runs/"+id, map[string]string{"Authorization": "Bearer " + token}, "").Body).Decode(&d))
		return d
	}
	held := get("r_two")
	if !held.Held || held.Detail == nil || held.Detail.Stdout != "second\n" || held.Detail.Code != "print('second')" {
		t.Fatalf("the newest run: %+v", held)
	}
	if held.Detail.Files["data.csv"] != float64(5) || held.Detail.Files["api_token.txt"] != audit.Masked || held.Detail.Policy["token"] != audit.Masked {
		t.Errorf("files %v and policy %v: want the size of data.csv and the secret-named values masked", held.Detail.Files, held.Detail.Policy)
	}
	if len(held.Records) != 2 || held.Records[0].Line.Kind != audit.KindDecision || held.Records[1].Line.RunID != "r_two" {
		t.Errorf("audit lines of the run: %+v", held.Records)
	}
	gone := get("r_one")
	if gone.Held || gone.Detail != nil || len(gone.Records) != 2 {
		t.Fatalf("the evicted run: %+v, want its audit lines and no detail", gone)
	}
	if resp := h.do(t, "GET", "/ui/api/runs/r_never", map[string]string{"Authorization": "Bearer " + token}, ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown run: %s", resp.Status)
	}
}

func TestQueryDetailShowsItsOverrideAndEffectivePolicy(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	override := json.RawMessage(`{"proc":{"timeout":"30s"}}`)
	q, err := h.eng.OpenQuery(t.Context(), "q_over", override)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	h.write(t,
		audit.Record{Kind: audit.KindQuery, QueryID: "q_over", Decision: "allow", PolicyHash: eff.Hash, ToolInput: override},
		decision("Bash", "deny", "tools.denied"),
		audit.Record{Kind: audit.KindDecision, QueryID: "q_over", Tool: "Read", Decision: "allow", Rule: "host_fs.workspace"},
	)
	h.waitRecords(t, 3)
	var got struct {
		Records   []json.RawMessage `json:"records"`
		Override  map[string]any    `json:"override"`
		Effective struct {
			Exact  bool           `json:"exact"`
			Hash   string         `json:"hash"`
			Policy map[string]any `json:"policy"`
		} `json:"effective"`
	}
	must(t, json.NewDecoder(h.do(t, "GET", "/ui/api/queries/q_over", map[string]string{"Authorization": "Bearer " + token}, "").Body).Decode(&got))
	if len(got.Records) != 2 || got.Override["proc"] == nil || !got.Effective.Exact || got.Effective.Hash != eff.Hash {
		t.Fatalf("query view: %+v", got)
	}
	if to := got.Effective.Policy["sandbox"].(map[string]any)["proc"].(map[string]any)["timeout"]; to != float64(30000) {
		t.Errorf("effective timeout %v, want 30000 ms", to)
	}
}

func TestOverviewTellsTheChainAndTheReloads(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	h.write(t, decision("Bash", "deny", "tools.denied"), decision("Read", "allow", "r"))
	h.waitRecords(t, 2)
	var o struct {
		Revision string `json:"revision"`
		Reloads  []struct {
			Revision string `json:"revision"`
		} `json:"reloads"`
		Chain console.ChainStatus `json:"chain"`
	}
	h.overview(t, &o)
	if o.Revision != h.eng.Revision() || len(o.Reloads) != 1 || o.Reloads[0].Revision != o.Revision {
		t.Errorf("revision %q and reloads %+v", o.Revision, o.Reloads)
	}
	if o.Chain.State != "ok" || o.Chain.Lines != 2 || o.Chain.HeadMatches == nil || !*o.Chain.HeadMatches {
		t.Errorf("chain %+v, want ok over 2 lines, matching the writer's head", o.Chain)
	}
}

func TestOverviewShowsABrokenChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	l, err := audit.Open(path, audit.Options{})
	must(t, err)
	for _, r := range []audit.Record{decision("A", "deny", "r"), decision("B", "deny", "r"), decision("C", "deny", "r")} {
		must(t, l.Write(r))
	}
	must(t, l.Close())
	data, err := os.ReadFile(path)
	must(t, err)
	must(t, os.WriteFile(path, []byte(strings.Replace(string(data), `"tool":"B"`, `"tool":"X"`, 1)), 0o600))
	h := start(t, options{audit: path})
	h.waitRecords(t, 3)
	var o struct {
		Chain console.ChainStatus `json:"chain"`
	}
	h.overview(t, &o)
	if o.Chain.State != "broken" || o.Chain.Break == nil || o.Chain.Break.Line != 3 {
		t.Fatalf("chain %+v, want broken at line 3 (the one after the edit)", o.Chain)
	}
}
