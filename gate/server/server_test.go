package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/artifacts"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// defaultTag is the image of a policy that names none: the default
// profile's tag.
func defaultTag(t *testing.T) string {
	t.Helper()
	tag, err := profile.Resolve(profile.Default)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

const testPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [Read, mcp__sandboxed_code__run]
  deny: [Bash]
sandbox:
  fs: {deny: ["**/.env"]}
  proc: {timeout: 10s}
ceilings: {memory: 1g, timeout: 60s}
`

type harness struct {
	sock, token, dir, auditPath string
	srv                         *server.Server
	audit                       *audit.Log
	engine                      *gate.Engine
	// shutdown ends Serve and waits for it to return, or for wait to end.
	shutdown func(wait context.Context) error
}

type options struct {
	runner      server.Runner
	workspaces  *workspace.Store
	artifacts   server.Artifacts
	auditor     server.Auditor
	origins     []string
	maxFrame    int64
	maxInFlight int
	policy      string
	// rego is an operator module loaded beside the built-in ones.
	rego       string
	ping, read time.Duration
	claudeCode server.ClaudeCodeConfig
	observer   server.RunObserver
	approvals  server.ApprovalObserver
	ui         http.Handler
	registry   *prometheus.Registry
	// tune changes the server's Config last (the caps, say).
	tune func(*server.Config)
}

func start(t testing.TB, o options) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{dir: dir, sock: filepath.Join(dir, "gk.sock"), auditPath: filepath.Join(dir, "audit.jsonl")}
	must(t, os.MkdirAll(filepath.Join(dir, "ws"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "ws", "a.txt"), []byte("A"), 0o644))
	if o.policy == "" {
		o.policy = testPolicy
	}
	must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(o.policy), 0o644))
	quiet := slog.New(slog.DiscardHandler)
	gcfg := gate.Config{PolicyFile: filepath.Join(dir, "policy.yaml"), Home: dir, Logger: quiet}
	if o.rego != "" {
		gcfg.RegoDir = filepath.Join(dir, "rego")
		must(t, os.MkdirAll(gcfg.RegoDir, 0o755))
		must(t, os.WriteFile(filepath.Join(gcfg.RegoDir, "ops.rego"), []byte(o.rego), 0o644))
	}
	eng, err := gate.New(t.Context(), gcfg)
	must(t, err)
	h.engine = eng
	h.audit, err = audit.Open(h.auditPath, audit.Options{})
	must(t, err)
	t.Cleanup(func() { h.audit.Close() })
	var auditor server.Auditor = h.audit
	if o.auditor != nil {
		auditor = o.auditor
	}
	h.token, err = server.LoadOrCreateToken(filepath.Join(dir, "token"))
	must(t, err)
	cfg := server.Config{
		Engine: eng, Auditor: auditor, Runner: o.runner, Token: h.token, AllowedOrigins: o.origins,
		MaxFrameBytes: o.maxFrame, MaxInFlight: o.maxInFlight, Logger: quiet,
		PingInterval: o.ping, ReadTimeout: o.read, RunObserver: o.observer, ApprovalObserver: o.approvals, UI: o.ui, Registry: o.registry, ClaudeCode: o.claudeCode,
		Workspaces: o.workspaces, Artifacts: o.artifacts, StoreCode: artifacts.Always,
	}
	if o.tune != nil {
		o.tune(&cfg)
	}
	h.srv, err = server.New(cfg)
	must(t, err)
	ln, err := server.Listen("unix://"+h.sock, false)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var serveErr error
	go func() {
		defer close(finished)
		serveErr = h.srv.Serve(ctx, ln)
	}()
	h.shutdown = func(wait context.Context) error {
		cancel()
		select {
		case <-finished:
			return serveErr
		case <-wait.Done():
			return fmt.Errorf("serve did not return: %w", wait.Err())
		}
	}
	t.Cleanup(func() {
		cancel()
		<-finished
		if serveErr != nil {
			t.Errorf("serve: %v", serveErr)
		}
	})
	return h
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", h.sock)
	}}}
}

func (h *harness) dial(t testing.TB, header http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", h.sock)
	}}
	return d.DialContext(t.Context(), "ws://gatekeeper/v1/ws", header)
}

// client is a connected, helloed test client.
type client struct {
	t  testing.TB
	ws *websocket.Conn
	// wait is how long recv waits for a frame; zero means 10 s.
	wait time.Duration
}

func (h *harness) connect(t testing.TB) *client {
	t.Helper()
	ws, _, err := h.dial(t, http.Header{"Authorization": {"Bearer " + h.token}})
	must(t, err)
	t.Cleanup(func() { ws.Close() })
	c := &client{t: t, ws: ws}
	if r := c.do(`{"type":"hello","id":"h","v":1,"client":"test"}`); r["type"] != "welcome" {
		t.Fatalf("hello: %v", r)
	}
	return c
}

func (c *client) send(frame string) {
	c.t.Helper()
	must(c.t, c.ws.WriteMessage(websocket.TextMessage, []byte(frame)))
}

func (c *client) recv() map[string]any {
	c.t.Helper()
	wait := c.wait
	if wait == 0 {
		wait = 10 * time.Second
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(wait))
	_, data, err := c.ws.ReadMessage()
	must(c.t, err)
	var m map[string]any
	must(c.t, json.Unmarshal(data, &m))
	return m
}

func (c *client) do(frame string) map[string]any {
	c.t.Helper()
	c.send(frame)
	return c.recv()
}

func (c *client) open(override string) string {
	c.t.Helper()
	f := `{"type":"open_query","id":"o"}`
	if override != "" {
		f = `{"type":"open_query","id":"o","sandbox_policy":` + override + `}`
	}
	r := c.do(f)
	if r["type"] != "query_opened" {
		c.t.Fatalf("open_query: %v", r)
	}
	return r["query_id"].(string)
}

func (c *client) decide(qid, tool, input, toolUseID, mcp string) map[string]any {
	c.t.Helper()
	f := fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":%q,"tool_input":%s,"tool_use_id":%q`, qid, tool, input, toolUseID)
	if mcp != "" {
		f += `,"mcp_server":` + mcp
	}
	return c.do(f + "}")
}

const sdkServer = `{"name":"sandboxed_code","source":"sdk"}`

func TestDecisionsOverTheSocket(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	c := h.connect(t)
	q := c.open("")
	ws := filepath.Join(h.dir, "ws")
	tests := []struct {
		name, tool, input, decision, rule string
	}{
		{"a read in the workspace is allowed", "Read", fmt.Sprintf(`{"file_path":%q}`, ws+"/a.txt"), "allow", "host_fs.inside_workspace"},
		{"a traversal is denied", "Read", fmt.Sprintf(`{"file_path":%q}`, ws+"/../../../etc/passwd"), "deny", "host_fs.outside_workspace"},
		{"Bash is denied", "Bash", `{"command":"id"}`, "deny", "tools.deny_list"},
		{"an unknown tool is denied", "Nope", `{}`, "deny", "tools.not_allowlisted"},
	}
	for _, tc := range tests {
		r := c.decide(q, tc.tool, tc.input, "toolu_1", "")
		if r["type"] != "decision" || r["decision"] != tc.decision || r["rule"] != tc.rule {
			t.Errorf("%s: got %v, want %s/%s", tc.name, r, tc.decision, tc.rule)
		}
		if r["id"] != "d" || !strings.HasPrefix(r["decision_id"].(string), "d_") || !strings.HasPrefix(r["policy_revision"].(string), "sha256:") {
			t.Errorf("%s: reply fields: %v", tc.name, r)
		}
	}
	rep, err := audit.VerifyFile(h.auditPath)
	must(t, err)
	if rep.Lines != 1+len(tests) { // the open_query line plus one per decision
		t.Errorf("audit has %d lines, want %d", rep.Lines, 1+len(tests))
	}
}

func TestBadFramesGetErrorsAndTheConnectionLives(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	c := h.connect(t)
	q := c.open("")
	tests := []struct {
		name, frame, code, id string
	}{
		{"malformed JSON", `{"type":"decide",`, "malformed_frame", ""},
		{"an array instead of an object", `[1,2]`, "malformed_frame", ""},
		{"an unknown type", `{"type":"explode","id":"1"}`, "unknown_type", "1"},
		{"a missing field", fmt.Sprintf(`{"type":"decide","id":"2","query_id":%q,"event":"PreToolUse","tool_input":{},"tool_use_id":"t"}`, q), "missing_field", "2"},
		{"an unknown field", fmt.Sprintf(`{"type":"decide","id":"3","query_id":%q,"event":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t","toolname":"x"}`, q), "unknown_field", "3"},
		{"a duplicate key", fmt.Sprintf(`{"type":"decide","id":"4","query_id":%q,"event":"PreToolUse","tool_name":"Read","tool_name":"Bash","tool_input":{},"tool_use_id":"t"}`, q), "duplicate_key", "4"},
		{"keys differing only in case", fmt.Sprintf(`{"type":"decide","id":"5","query_id":%q,"event":"PreToolUse","tool_name":"Read","Tool_Name":"Bash","tool_input":{},"tool_use_id":"t"}`, q), "duplicate_key", "5"},
		{"a wrong type", fmt.Sprintf(`{"type":"decide","id":"6","query_id":%q,"event":"PreToolUse","tool_name":7,"tool_input":{},"tool_use_id":"t"}`, q), "invalid_field", "6"},
		{"an unknown query", `{"type":"decide","id":"7","query_id":"q_nope","event":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t"}`, "unknown_query", "7"},
		{"a second hello is fine but a bad version is not", `{"type":"hello","id":"8","v":2}`, "unsupported_version", "8"},
	}
	for _, tc := range tests {
		r := c.do(tc.frame)
		if r["type"] != "error" || r["code"] != tc.code || r["id"] != tc.id || r["message"] == "" {
			t.Errorf("%s: got %v, want error %s with id %q", tc.name, r, tc.code, tc.id)
		}
		// The connection lives: a good frame is still decided.
		if d := c.decide(q, "Bash", `{}`, "t", ""); d["rule"] != "tools.deny_list" {
			t.Fatalf("%s: connection did not survive: %v", tc.name, d)
		}
	}
	must(t, c.ws.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"hello","id":"b","v":1}`)))
	if r := c.recv(); r["code"] != "malformed_frame" {
		t.Errorf("binary frame: %v", r)
	}
}

func TestHelloIsRequiredFirst(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	ws, _, err := h.dial(t, http.Header{"Authorization": {"Bearer " + h.token}})
	must(t, err)
	defer ws.Close()
	c := &client{t: t, ws: ws}
	if r := c.do(`{"type":"open_query","id":"1"}`); r["code"] != "hello_required" || r["id"] != "1" {
		t.Fatalf("got %v", r)
	}
	if r := c.do(`{"type":"hello","id":"2","v":1}`); r["type"] != "welcome" || r["v"] != float64(1) {
		t.Fatalf("got %v", r)
	}
}

func TestOversizedFrameClosesWith1009(t *testing.T) {
	t.Parallel()
	h := start(t, options{maxFrame: 4096})
	c := h.connect(t)
	c.send(`{"type":"hello","id":"x","v":1,"client":"` + strings.Repeat("a", 5000) + `"}`)
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := c.ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
		t.Fatalf("read after oversized frame: %v, want close 1009", err)
	}
	// The server lives on for other connections.
	h.connect(t)
}

func TestWhoMayConnect(t *testing.T) {
	t.Parallel()
	h := start(t, options{origins: []string{"https://ok.example"}})
	tests := []struct {
		name   string
		header http.Header
		status int
	}{
		{"no token", http.Header{}, http.StatusUnauthorized},
		{"a wrong token", http.Header{"Authorization": {"Bearer nope"}}, http.StatusUnauthorized},
		{"a token without Bearer", http.Header{"Authorization": {h.token}}, http.StatusUnauthorized},
		{"a browser origin not listed", http.Header{"Authorization": {"Bearer " + h.token}, "Origin": {"https://evil.example"}}, http.StatusForbidden},
		{"a listed origin", http.Header{"Authorization": {"Bearer " + h.token}, "Origin": {"https://ok.example"}}, http.StatusSwitchingProtocols},
		{"the token", http.Header{"Authorization": {"Bearer " + h.token}}, http.StatusSwitchingProtocols},
	}
	for _, tc := range tests {
		ws, resp, err := h.dial(t, tc.header)
		if ws != nil {
			ws.Close()
		}
		if resp == nil || resp.StatusCode != tc.status {
			t.Errorf("%s: response %v (err %v), want %d", tc.name, resp, err, tc.status)
		}
	}
	hc := h.httpClient()
	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", "http://gatekeeper"+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		must(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get("/healthz", ""); s != 200 {
		t.Errorf("/healthz without token: %d", s)
	}
	if s := get("/readyz", ""); s != 200 {
		t.Errorf("/readyz without token (a policy file: always ready): %d", s)
	}
	if s := get("/metrics", ""); s != 401 {
		t.Errorf("/metrics without token: %d", s)
	}
	if s := get("/metrics", h.token); s != 200 {
		t.Errorf("/metrics with token: %d", s)
	}
	fi, err := os.Stat(h.sock)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	tok, err := os.Stat(filepath.Join(h.dir, "token"))
	must(t, err)
	if tok.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", tok.Mode().Perm())
	}
}

func TestListenRefusesRemoteTCPWithoutAllowRemote(t *testing.T) {
	t.Parallel()
	if _, err := server.Listen("tcp://0.0.0.0:0", false); err == nil || !strings.Contains(err.Error(), "--allow-remote") {
		t.Errorf("listen on 0.0.0.0: %v", err)
	}
	ln, err := server.Listen("tcp://127.0.0.1:0", false)
	must(t, err)
	ln.Close()
}

// A socket directory made first by another user (the default
// /tmp/gatekeeper-<uid> is a name anyone can take), or a link to one, is
// refused: its owner could swap the socket for its own. One of root's,
// such as a Pod's emptyDir (0777), is accepted.
func TestListenRefusesASocketDirectoryOfAnotherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatalf("this test makes a directory of another user and needs root (uid %d)", os.Geteuid())
	}
	base := t.TempDir()
	theirs := filepath.Join(base, "gatekeeper-0")
	must(t, os.Mkdir(theirs, 0o777))
	must(t, os.Chown(theirs, 65534, 65534))
	link := filepath.Join(base, "link")
	must(t, os.Symlink(theirs, link))
	for _, dir := range []string{theirs, link} {
		_, err := server.Listen("unix://"+filepath.Join(dir, "gatekeeper.sock"), false)
		if err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("listen in %s: %v, want a refusal naming uid 65534", dir, err)
		}
		if _, err := os.Lstat(filepath.Join(theirs, "gatekeeper.sock")); !os.IsNotExist(err) {
			t.Errorf("a socket was made in %s: %v", dir, err)
		}
	}
	shared := filepath.Join(base, "emptydir")
	must(t, os.Mkdir(shared, 0o777))
	must(t, os.Chmod(shared, 0o777))
	ln, err := server.Listen("unix://"+filepath.Join(shared, "gatekeeper.sock"), false)
	must(t, err)
	ln.Close()
}

func TestMetricsCountDecisions(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	c := h.connect(t)
	q := c.open("")
	c.decide(q, "Bash", `{}`, "t", "")
	body := scrapeMetrics(t, h)
	for _, want := range []string{`gatekeeper_decisions_total{decision="deny",event="PreToolUse",rule="tools.deny_list"} 1`, `gatekeeper_connections_open 1`, `gatekeeper_decision_duration_seconds_count 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestQueriesBelongToTheirConnection(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	a, b := h.connect(t), h.connect(t)
	q := a.open("")
	if r := b.decide(q, "Read", `{}`, "t", ""); r["code"] != "unknown_query" {
		t.Errorf("decide on another connection's query: %v", r)
	}
	if r := a.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, q)); r["type"] != "query_closed" || r["query_id"] != q {
		t.Errorf("close_query: %v", r)
	}
	if r := a.decide(q, "Read", `{}`, "t", ""); r["code"] != "unknown_query" {
		t.Errorf("decide on a closed query: %v", r)
	}
}

func TestOverrideRejectedListsViolations(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	c := h.connect(t)
	r := c.do(`{"type":"open_query","id":"o","sandbox_policy":{"proc":{"memory":"8g","timeout":"5m"}}}`)
	if r["code"] != "policy_override_rejected" {
		t.Fatalf("got %v", r)
	}
	v, _ := json.Marshal(r["violations"])
	if string(v) != `["sandbox.proc.memory 8g exceeds ceiling 1g","sandbox.proc.timeout 300s exceeds ceiling 60s"]` {
		t.Errorf("violations = %s", v)
	}
	r = c.do(`{"type":"open_query","id":"o2","sandbox_policy":{"proc":{"timeout":"30s"}}}`)
	eff, _ := json.Marshal(r["effective_policy"])
	if r["type"] != "query_opened" || !strings.Contains(string(eff), `"timeout":30000`) {
		t.Errorf("accepted override: %v", r)
	}
}

// fakeRunner stands in for Docker in protocol tests; it claims nothing
// about isolation (the runner's own suite does that against a real engine).
type fakeRunner struct {
	mu    sync.Mutex
	specs []runner.Spec
}

func (f *fakeRunner) Run(ctx context.Context, s runner.Spec) (runner.Result, error) {
	f.mu.Lock()
	f.specs = append(f.specs, s)
	f.mu.Unlock()
	s.OnOutput(runner.Stdout, []byte("hello\n"))
	return runner.Result{RunID: s.RunID, Reason: runner.Exited, Stdout: "hello\n", Duration: 5 * time.Millisecond, Image: s.Sandbox.Image, Runtime: runner.Runc}, nil
}

func TestRunNeedsAPriorAllowAndIsDecidedAgain(t *testing.T) {
	t.Parallel()
	fr := &fakeRunner{}
	h := start(t, options{runner: fr})
	c := h.connect(t)
	q := c.open("")
	run := func(id, toolUseID, lang string) map[string]any {
		return c.do(fmt.Sprintf(`{"type":"run","id":%q,"query_id":%q,"tool_use_id":%q,"language":%q,"code":"print('hello')"}`, id, q, toolUseID, lang))
	}
	if r := run("r0", "toolu_never", "python"); r["code"] != "run_denied" || r["rule"] != "run.no_prior_allow" {
		t.Fatalf("run without a decision: %v", r)
	}
	// A deny does not authorize a run.
	if d := c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, "toolu_1", `{"name":"sandboxed_code","source":"stdio"}`); d["decision"] != "deny" {
		t.Fatalf("decide: %v", d)
	}
	if r := run("r1", "toolu_1", "python"); r["code"] != "run_denied" {
		t.Fatalf("run after a deny: %v", r)
	}
	if d := c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, "toolu_2", sdkServer); d["decision"] != "allow" {
		t.Fatalf("decide: %v", d)
	}
	// The SDK asks again through canUseTool: still one run.
	if d := c.do(fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"canUseTool","tool_name":"mcp__sandboxed_code__run","tool_input":{"language":"python","code":"x"},"tool_use_id":"toolu_2","mcp_server":%s}`, q, sdkServer)); d["decision"] != "allow" {
		t.Fatalf("canUseTool decide: %v", d)
	}
	out := run("r2", "toolu_2", "python")
	if out["type"] != "output" || out["stream"] != "stdout" || out["data"] != "hello\n" || out["id"] != "r2" {
		t.Fatalf("first frame of the run: %v", out)
	}
	res := c.recv()
	if res["type"] != "run_result" || res["stdout"] != "hello\n" || res["exit_code"] != float64(0) || res["reason"] != "exited" || res["run_id"] != out["run_id"] {
		t.Fatalf("run_result: %v", res)
	}
	if got := fr.specs[0]; got.Sandbox.Image != defaultTag(t) || got.Timeout != 10*time.Second || got.Sandbox.UID != 65534 {
		t.Errorf("spec handed to the runner: %+v", got)
	}
	// Each allow authorizes exactly one run.
	if r := run("r3", "toolu_2", "python"); r["code"] != "run_denied" || r["rule"] != "run.no_prior_allow" {
		t.Fatalf("second run on one allow: %v", r)
	}
	// An allow replayed after the run does not authorize it again.
	c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, "toolu_2", sdkServer)
	if r := run("r3b", "toolu_2", "python"); r["code"] != "run_denied" {
		t.Fatalf("run after a replayed allow: %v", r)
	}
	// A run's own language may differ from the one its allow saw: the run
	// is decided again on its own input (TestTheRunIsDecidedOnItsOwnCode
	// shows a refusal), and sh is allowed.
	c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, "toolu_3", sdkServer)
	if r := run("r4", "toolu_3", "sh"); r["type"] != "output" {
		t.Fatalf("sh run: %v", r)
	}
	c.recv()
	rep, err := audit.VerifyFile(h.auditPath)
	must(t, err)
	if rep.Lines != 12 { // the query, 6 decisions, 5 runs and run refusals
		t.Errorf("audit has %d lines; want 12: every query, decision and run", rep.Lines)
	}
}

func TestRunWithoutRunnerIsUnavailable(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	c := h.connect(t)
	q := c.open("")
	c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, "toolu_1", sdkServer)
	r := c.do(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":"toolu_1","language":"python","code":"x"}`, q))
	if r["code"] != "runner_unavailable" {
		t.Fatalf("got %v", r)
	}
	// Decisions keep working.
	if d := c.decide(q, "Bash", `{}`, "t", ""); d["decision"] != "deny" {
		t.Fatalf("decide after runner_unavailable: %v", d)
	}
}

func TestRunTimeoutAboveThePolicyIsRefused(t *testing.T) {
	t.Parallel()
	h := start(t, options{runner: &fakeRunner{}})
	c := h.connect(t)
	q := c.open("")
	c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, "toolu_1", sdkServer)
	r := c.do(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":"toolu_1","language":"python","code":"x","timeout_ms":60000}`, q))
	if r["code"] != "invalid_field" || !strings.Contains(r["message"].(string), "exceeds the query's sandbox.proc.timeout") {
		t.Fatalf("got %v", r)
	}
}

// failingAuditor fails every write of the given kinds.
type failingAuditor struct{ kinds []audit.Kind }

func (f failingAuditor) Write(r audit.Record) error {
	for _, k := range f.kinds {
		if r.Kind == k {
			return errors.New("disk full")
		}
	}
	return nil
}

func TestAuditFailureDenies(t *testing.T) {
	t.Parallel()
	h := start(t, options{auditor: failingAuditor{kinds: []audit.Kind{audit.KindQuery, audit.KindDecision}}})
	ws, _, err := h.dial(t, http.Header{"Authorization": {"Bearer " + h.token}})
	must(t, err)
	defer ws.Close()
	c := &client{t: t, ws: ws}
	c.do(`{"type":"hello","id":"h","v":1}`)
	// Without an audit log no query opens.
	if r := c.do(`{"type":"open_query","id":"o"}`); r["code"] != "internal" || !strings.Contains(r["message"].(string), "audit") {
		t.Fatalf("open_query with a failing audit log: %v", r)
	}
}

func TestDecisionAuditFailureDenies(t *testing.T) {
	t.Parallel()
	h := start(t, options{auditor: failingAuditor{kinds: []audit.Kind{audit.KindDecision}}})
	c := h.connect(t)
	q := c.open("")
	// An allowed call whose audit line cannot be written is denied.
	r := c.decide(q, "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(h.dir, "ws", "a.txt")), "t", "")
	if r["decision"] != "deny" || r["rule"] != "gatekeeper.error" || !strings.Contains(r["reason"].(string), "audit log") {
		t.Fatalf("decision with a failing audit log: %v", r)
	}
}

func TestAFloodOfFramesIsAnsweredInFull(t *testing.T) {
	t.Parallel()
	h := start(t, options{maxInFlight: 16})
	c := h.connect(t)
	q := c.open("")
	const n = 10000
	frame := fmt.Sprintf(`{"type":"decide","id":"f","query_id":%q,"event":"PreToolUse","tool_name":"Bash","tool_input":{},"tool_use_id":"t"}`, q)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for range n {
			if c.ws.WriteMessage(websocket.TextMessage, []byte(frame)) != nil {
				return
			}
		}
	}()
	counts := map[string]int{}
	for range n {
		r := c.recv()
		switch {
		case r["type"] == "decision" && r["rule"] == "tools.deny_list":
			counts["decision"]++
		case r["code"] == "too_many_requests":
			counts["too_many"]++
		default:
			t.Fatalf("unexpected reply %v", r)
		}
	}
	if counts["decision"] == 0 || counts["decision"]+counts["too_many"] != n {
		t.Errorf("replies %v, want %d in all", counts, n)
	}
	<-wrote // one writer at a time: the flood's may still be finishing its last frame
	if d := c.decide(q, "Bash", `{}`, "t", ""); d["rule"] != "tools.deny_list" {
		t.Errorf("after the flood: %v", d)
	}
}

func TestKeepAlive(t *testing.T) {
	t.Parallel()
	// Margins wide enough that a stall of a loaded machine cannot make a
	// live client miss its pongs: pings every 100 ms, dropped after 2 s
	// without one.
	const readTimeout = 2 * time.Second
	ends := &readEnds{}
	h := start(t, options{ping: 100 * time.Millisecond, read: readTimeout, tune: func(c *server.Config) { c.Logger = slog.New(ends) }})

	// A client that reads answers the server's pings and stays connected
	// well past the read timeout. Its reader has no deadline of its own: it
	// stays in ReadMessage, answering pings, until the client leaves, so a
	// stall of this goroutine cannot make it miss a pong.
	live := h.connect(t)
	_ = live.ws.SetReadDeadline(time.Time{}) // drop the hello's
	done := make(chan error, 1)
	go func() {
		_, _, err := live.ws.ReadMessage() // answers pings while waiting
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the idle reading client's read ended before it left: %v", err)
	case <-time.After(5 * time.Second):
	}
	if got := ends.errs(); len(got) != 0 {
		t.Fatalf("the server ended connections %v while only a ponging client was connected", got)
	}
	// The live client leaves; its reader ends for that, and the server's
	// end of it is not for a read deadline.
	live.ws.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the live client's reader ended with %v, want its closed connection", err)
	}
	for i := 0; len(ends.errs()) == 0; i++ {
		if i == 1000 {
			t.Fatal("the server never saw the live client leave")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := ends.errs(); len(got) != 1 || errors.Is(got[0], os.ErrDeadlineExceeded) {
		t.Fatalf("the live client's end was seen as %v, want one end that is not a read deadline", got)
	}

	// A client that answers no ping (it reads, but ignores them) and is
	// otherwise the same is dropped by the server, for its read timeout,
	// and no sooner than that after its last frame.
	dead, _, err := h.dial(t, http.Header{"Authorization": {"Bearer " + h.token}})
	must(t, err)
	defer dead.Close()
	pings := 0
	dead.SetPingHandler(func(string) error { pings++; return nil })
	lastFrame := time.Now()
	must(t, dead.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello","id":"h","v":1}`)))
	_ = dead.SetReadDeadline(time.Now().Add(15 * time.Second))
	var frames []string
	for err == nil { // the welcome, then the drop
		var data []byte
		if _, data, err = dead.ReadMessage(); err == nil {
			frames = append(frames, string(data))
		}
	}
	dropped := time.Since(lastFrame)
	if strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a client that answered no ping was not disconnected within 15 s: %v", err)
	}
	if len(frames) != 1 || !strings.Contains(frames[0], `"welcome"`) || !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("the client got %q, then %v; want the welcome, then a close frame", frames, err)
	}
	if dropped < readTimeout {
		t.Errorf("the client was dropped %v after its last frame, before the read timeout of %v", dropped, readTimeout)
	}
	if pings < 2 {
		t.Errorf("the client was sent %d pings before the drop, want several", pings)
	}
	if got := ends.errs()[1:]; len(got) != 1 || !errors.Is(got[0], os.ErrDeadlineExceeded) {
		t.Errorf("the server ended the client's connection for %v, want its read deadline", got)
	}
}

// readEnds is a log handler that keeps the error of each connection whose
// reading ended ("connection read ended"), and drops the other records.
type readEnds struct {
	mu  sync.Mutex
	got []error
}

func (h *readEnds) Enabled(context.Context, slog.Level) bool { return true }
func (h *readEnds) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *readEnds) WithGroup(string) slog.Handler            { return h }

func (h *readEnds) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "connection read ended" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			h.mu.Lock()
			h.got = append(h.got, err)
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *readEnds) errs() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.got...)
}

// blockingRunner runs until its context ends, then reports the run
// cancelled, as the Docker runner does for a container it started.
type blockingRunner struct{ started chan struct{} }

func (b *blockingRunner) Run(ctx context.Context, s runner.Spec) (runner.Result, error) {
	close(b.started)
	<-ctx.Done()
	return runner.Result{RunID: s.RunID, Reason: runner.Cancelled, ExitCode: -1, Image: s.Sandbox.Image, Runtime: runner.Runc}, nil
}

func TestShutdownClosesAClientThatAnswersPingsAndCancelsItsRun(t *testing.T) {
	t.Parallel()
	br := &blockingRunner{started: make(chan struct{})}
	// Frequent pings, and a read timeout far beyond the test: only the
	// shutdown itself can end the connection.
	h := start(t, options{runner: br, ping: 10 * time.Millisecond, read: time.Hour})
	c := h.connect(t)
	q := c.open("")
	c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, "toolu_shut", sdkServer)
	c.send(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":"toolu_shut","language":"python","code":"x"}`, q))
	// A generous bound: if it is ever reached, the shutdown hung.
	wait, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case <-br.started:
	case <-wait.Done():
		t.Fatal("the run never started")
	}
	// The client reads all the while, so it answers every ping.
	closed := make(chan error, 1)
	go func() {
		_ = c.ws.SetReadDeadline(time.Time{})
		for {
			if _, _, err := c.ws.ReadMessage(); err != nil {
				closed <- err
				return
			}
		}
	}()
	if err := h.shutdown(wait); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Errorf("the client's connection ended with %v, want a close frame 1001 (going away)", err)
	}
	var run *audit.Record
	for _, line := range readAuditLines(t, h.auditPath) {
		if line.Kind == audit.KindRun && line.ToolUseID == "toolu_shut" {
			run = &line
		}
	}
	if run == nil || run.Outcome != audit.OutcomeCancelled {
		t.Fatalf("the run's audit line %+v, want outcome cancelled", run)
	}
}

// readAuditLines decodes every line of the audit log at path.
func readAuditLines(t *testing.T, path string) []audit.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	var out []audit.Record
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r audit.Record
		must(t, json.Unmarshal([]byte(l), &r))
		out = append(out, r)
	}
	return out
}

// TestADecisionThatWalksDoesNotHoldUpTheFramesBehindIt sends a Grep of a
// directory (its decision walks every entry below it for files fs.deny
// forbids) and then a Read. The reader decides a Read itself but leaves a
// decision that walks to a worker. The Grep's audit write is held until
// the Read is answered, standing for a walk as long as any: were the Grep
// decided on the reader, the Read would never be read. (A race of the
// Read against a real 10,000-file walk was one a loaded machine could
// lose.)
func TestADecisionThatWalksDoesNotHoldUpTheFramesBehindIt(t *testing.T) {
	t.Parallel()
	policy := strings.Replace(testPolicy, "allow: [Read,", "allow: [Read, Grep,", 1)
	held := &holdingAuditor{tool: "Grep", entered: make(chan struct{}), release: make(chan struct{})}
	h := start(t, options{policy: policy, auditor: held})
	big := filepath.Join(h.dir, "ws", "big")
	for i := range 4 {
		d := filepath.Join(big, fmt.Sprint(i))
		must(t, os.MkdirAll(d, 0o755))
		for j := range 25 {
			must(t, os.WriteFile(filepath.Join(d, fmt.Sprint(j)), nil, 0o644))
		}
	}
	c := h.connect(t)
	q := c.open("")
	c.send(fmt.Sprintf(`{"type":"decide","id":"grep","query_id":%q,"event":"PreToolUse","tool_name":"Grep","tool_input":{"pattern":"x","path":%q},"tool_use_id":"t1"}`, q, big))
	select {
	case <-held.entered: // the Grep is decided and held
	case <-time.After(30 * time.Second):
		t.Fatal("the Grep's decision never reached the audit log")
	}
	c.send(fmt.Sprintf(`{"type":"decide","id":"read","query_id":%q,"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":%q},"tool_use_id":"t2"}`, q, filepath.Join(h.dir, "ws", "a.txt")))
	_ = c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var first map[string]any
	_, data, err := c.ws.ReadMessage()
	held.release <- struct{}{}
	if err != nil {
		t.Fatalf("no reply to the Read while the Grep's decision was held: %v", err)
	}
	must(t, json.Unmarshal(data, &first))
	second := c.recv()
	if first["id"] != "read" || second["id"] != "grep" {
		t.Fatalf("replies came as %v then %v: want the Read answered while the Grep was held", first["id"], second["id"])
	}
	if first["decision"] != "allow" || second["decision"] != "allow" || second["rule"] != "host_fs.inside_workspace" {
		t.Fatalf("decisions %v and %v, want both allowed", first, second)
	}
}
