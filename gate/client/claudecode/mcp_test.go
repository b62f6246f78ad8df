package claudecode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/client"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// fakeSandbox stands in for the sidecar in protocol tests; it claims
// nothing about isolation (the CLI tests run the real sidecar and engine).
type fakeSandbox struct {
	mu    sync.Mutex
	calls []fakeCall
	// result or err is what Run returns; block makes it wait for ctx.
	result *wire.RunResult
	err    error
	block  bool
	// endc is closed when a blocked run's context ends (endedCh).
	endc chan struct{}
}

func (f *fakeSandbox) started() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls) > 0
}

// endedCh is closed when a blocked run's context has ended.
func (f *fakeSandbox) endedCh() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.endc == nil {
		f.endc = make(chan struct{})
	}
	return f.endc
}

type fakeCall struct {
	toolUseID string
	req       client.RunRequest
}

func (f *fakeSandbox) Run(ctx context.Context, toolUseID string, r client.RunRequest) (*wire.RunResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{toolUseID, r})
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		close(f.endedCh())
		return nil, ctx.Err()
	}
	return f.result, f.err
}

// session drives a server over pipes, one JSON-RPC message per line.
type session struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
	err chan error
}

// serve is an MCPServer on pipes, initialized as Claude Code does it.
func serve(t *testing.T, sb Sandbox) *session {
	t.Helper()
	return serveDescribed(t, sb, "")
}

// serveDescribed is serve with a run tool described by desc.
func serveDescribed(t *testing.T, sb Sandbox, desc string) *session {
	t.Helper()
	s := serveRaw(t, &MCPServer{Sandbox: sb, Version: "test", Description: desc})
	if r := s.call(initialize); r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// initialize is Claude Code 2.1.330's initialize request.
const initialize = `{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claude-code","version":"2.1.330"}},"jsonrpc":"2.0","id":0}`

// serveRaw serves srv on pipes, before any handshake; at the end of the
// test it closes the input and expects Serve to return nil.
func serveRaw(t *testing.T, srv *MCPServer) *session {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, out: bufio.NewScanner(outR), err: make(chan error, 1)}
	go func() {
		s.err <- srv.Serve(t.Context(), inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // replies nobody reads must not block Serve
		if err := <-s.err; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func (s *session) send(msg string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, msg+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

func (s *session) recv() map[string]any {
	s.t.Helper()
	if !s.out.Scan() {
		s.t.Fatalf("no reply: %v", s.out.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(s.out.Bytes(), &m); err != nil {
		s.t.Fatalf("reply %s: %v", s.out.Bytes(), err)
	}
	return m
}

func (s *session) call(msg string) map[string]any {
	s.t.Helper()
	s.send(msg)
	return s.recv()
}

// TestMCPHandshakeAsClaudeCodeDoesIt replays Claude Code 2.1.330's start:
// a server/discover probe, which this server refuses as an unknown method
// so that the CLI falls back to initialize (the handshake whose tools/call
// carries the tool use id in _meta, measured); then initialize, tools/list
// and ping.
func TestMCPHandshakeAsClaudeCodeDoesIt(t *testing.T) {
	t.Parallel()
	s := serveRaw(t, &MCPServer{Sandbox: &fakeSandbox{}, Version: "test"})
	errCode := func(r map[string]any) any {
		e, _ := r["error"].(map[string]any)
		return e["code"]
	}
	if r := s.call(`{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{}}`); errCode(r) != float64(-32601) {
		t.Fatalf("server/discover: %v", r)
	}
	if r := s.call(`{"jsonrpc":"2.0","id":"p","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}`); r["result"] != nil {
		t.Fatalf("server/discover at 2026-07-28 is answered, so a client would not fall back to initialize: %v", r)
	}
	r := s.call(initialize)
	res, _ := r["result"].(map[string]any)
	if r["id"] != float64(0) || res["protocolVersion"] != "2025-11-25" || res["serverInfo"].(map[string]any)["name"] != "gatekeeper" {
		t.Fatalf("initialize: %v", r)
	}
	if caps, _ := json.Marshal(res["capabilities"]); string(caps) != `{"tools":{}}` {
		t.Errorf("capabilities %s, want only tools, without listChanged", caps)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`) // no reply
	tools := s.call(`{"method":"tools/list","jsonrpc":"2.0","id":2}`)["result"].(map[string]any)["tools"].([]any)
	want, _ := json.Marshal(runTool)
	got, _ := json.Marshal(tools[0])
	if len(tools) != 1 || string(got) != string(want) {
		t.Errorf("tools/list: %s, want %s", got, want)
	}
	if r := s.call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); r["result"] == nil {
		t.Errorf("ping: %v", r)
	}

	old := serveRaw(t, &MCPServer{Sandbox: &fakeSandbox{}, Version: "test"})
	if r := old.call(`{"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"c","version":"1"}},"jsonrpc":"2.0","id":1}`); r["result"].(map[string]any)["protocolVersion"] != protocolVersions[0] {
		t.Errorf("an unknown version is answered with %v, want our newest", r)
	}
}

// TestMCPALineThatIsNotJSONEndsTheSession: the SDK's transport ends the
// session at a line it cannot parse, and Serve says why.
func TestMCPALineThatIsNotJSONEndsTheSession(t *testing.T) {
	t.Parallel()
	inR, inW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- (&MCPServer{Sandbox: &fakeSandbox{}}).Serve(t.Context(), inR, io.Discard) }()
	go func() { _, _ = io.WriteString(inW, "not json\n") }()
	err := <-done
	inW.Close()
	if err == nil || !strings.Contains(err.Error(), "invalid character") {
		t.Fatalf("Serve = %v, want the parse error", err)
	}
}

// TestTheRunToolShowsTheSessionsDescription: a session whose code may
// call MCP tools lists the run tool with the sidecar's description (its
// query_opened tool_description), the rest unchanged; without one, the
// plain wire.SandboxDescription, as @gatekeeper/client shows.
func TestTheRunToolShowsTheSessionsDescription(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, desc, want string }{
		{"no callable server", "", wire.SandboxDescription},
		{"callable servers", wire.SandboxDescription + "\n\nCode mode: …\n- crm (2 tools)\n", wire.SandboxDescription + "\n\nCode mode: …\n- crm (2 tools)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := serveDescribed(t, &fakeSandbox{}, tc.desc)
			tools := s.call(`{"method":"tools/list","jsonrpc":"2.0","id":2}`)["result"].(map[string]any)["tools"].([]any)
			got := tools[0].(map[string]any)
			if got["description"] != tc.want {
				t.Errorf("description = %q, want %q", got["description"], tc.want)
			}
			if got["name"] != "run" || got["inputSchema"] == nil {
				t.Errorf("the tool is %v; want run with its input schema", got)
			}
		})
	}
	if runTool["description"] != wire.SandboxDescription {
		t.Error("a described session changed the shared run tool")
	}
}

func TestMCPRunToolCalls(t *testing.T) {
	t.Parallel()
	ok := &wire.RunResult{RunReport: wire.RunReport{ExitCode: 0, Reason: "exited", Stdout: "42\n", DurationMS: 31}}
	call := func(args, meta string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run","arguments":` + args + `,"_meta":` + meta + `}}`
	}
	withID := `{"claudecode/toolUseId":"toolu_1","progressToken":2}`
	tests := []struct {
		name, msg string
		sandbox   *fakeSandbox
		// wantText is in the first content text; wantError is isError.
		wantText  string
		wantError bool
		// wantRun is the request handed to the sandbox, nil for none.
		wantRun *client.RunRequest
	}{
		{name: "a run with its tool use id runs and reports the result", msg: call(`{"language":"python","code":"print(6*7)","files":{"a.csv":"1"},"timeout_s":1.5}`, withID),
			sandbox: &fakeSandbox{result: ok}, wantText: "exit code 0 (exited) after 31 ms",
			wantRun: &client.RunRequest{Language: "python", Code: "print(6*7)", Files: map[string]wire.FileContent{"a.csv": {Data: "1"}}, TimeoutMS: ptr(int64(1500))}},
		{name: "a binary file in base64 and named outputs are passed on", msg: call(`{"language":"python","code":"x","files":{"a.bin":{"base64":"AP8="}},"outputs":["out"]}`, withID),
			sandbox: &fakeSandbox{result: ok}, wantText: "exit code 0",
			wantRun: &client.RunRequest{Language: "python", Code: "x", Files: map[string]wire.FileContent{"a.bin": {Data: "\x00\xff", Base64: true}}, Outputs: []string{"out"}}},
		{name: "a file object with another key does not run", msg: call(`{"language":"python","code":"x","files":{"a":{"base64":"AA==","mode":"755"}}}`, withID), sandbox: &fakeSandbox{result: ok}, wantText: `files["a"]`, wantError: true},
		{name: "bad base64 does not run", msg: call(`{"language":"python","code":"x","files":{"a":{"base64":"!!"}}}`, withID), sandbox: &fakeSandbox{result: ok}, wantText: `files["a"]`, wantError: true},
		{name: "to_agent is passed on", msg: call(`{"language":"python","code":"x","to_agent":["report.csv","*.png"]}`, withID),
			sandbox: &fakeSandbox{result: ok}, wantText: "exit code 0",
			wantRun: &client.RunRequest{Language: "python", Code: "x", ToAgent: []string{"report.csv", "*.png"}}},
		{name: "a null in to_agent does not run", msg: call(`{"language":"python","code":"x","to_agent":[null]}`, withID), sandbox: &fakeSandbox{result: ok}, wantText: "to_agent must be a list of strings", wantError: true},
		{name: "a null in outputs does not run", msg: call(`{"language":"python","code":"x","outputs":[null]}`, withID), sandbox: &fakeSandbox{result: ok}, wantText: "outputs must be a list of strings", wantError: true},
		{name: "a fraction of a millisecond rounds up", msg: call(`{"language":"sh","code":"","timeout_s":0.0001}`, withID),
			sandbox: &fakeSandbox{result: ok}, wantText: "exit code 0", wantRun: &client.RunRequest{Language: "sh", TimeoutMS: ptr(int64(1))}},
		{name: "a run without a tool use id does not run", msg: call(`{"language":"python","code":"x"}`, `{}`),
			sandbox: &fakeSandbox{result: ok}, wantText: "cannot tell which allowed tool call", wantError: true},
		{name: "a refused run names the rule", msg: call(`{"language":"python","code":"x"}`, withID),
			sandbox:  &fakeSandbox{err: &client.RefusedError{Code: "run_denied", Rule: "run.no_prior_allow", Message: "no allowed call is waiting"}},
			wantText: "gatekeeper refused to run the code: no allowed call is waiting [gatekeeper rule: run.no_prior_allow]", wantError: true,
			wantRun: &client.RunRequest{Language: "python", Code: "x"}},
		{name: "an unavailable runner says so", msg: call(`{"language":"node","code":"x"}`, withID),
			sandbox:  &fakeSandbox{err: &client.RefusedError{Code: "runner_unavailable", Message: "no engine"}},
			wantText: "gatekeeper could not run the code (runner_unavailable): no engine", wantError: true, wantRun: &client.RunRequest{Language: "node", Code: "x"}},
		{name: "an unreachable sidecar says so", msg: call(`{"language":"python","code":"x"}`, withID),
			sandbox: &fakeSandbox{err: errors.New("connect: refused")}, wantText: "gatekeeper is unavailable (connect: refused), so the code did not run", wantError: true,
			wantRun: &client.RunRequest{Language: "python", Code: "x"}},
		{name: "an unknown language does not run", msg: call(`{"language":"ruby","code":"x"}`, withID), sandbox: &fakeSandbox{result: ok}, wantText: "language must be", wantError: true},
		{name: "a missing code does not run", msg: call(`{"language":"python"}`, withID), sandbox: &fakeSandbox{result: ok}, wantText: "code is required", wantError: true},
		{name: "a zero timeout does not run", msg: call(`{"language":"python","code":"x","timeout_s":0}`, withID), sandbox: &fakeSandbox{result: ok}, wantText: "timeout_s must be", wantError: true},
		{name: "an unknown argument does not run", msg: call(`{"language":"python","code":"x","image":"evil"}`, withID), sandbox: &fakeSandbox{result: ok}, wantText: "unknown field", wantError: true},
		{name: "a file that is not text does not run", msg: call(`{"language":"python","code":"x","files":{"a":null}}`, withID), sandbox: &fakeSandbox{result: ok}, wantText: `files["a"]`, wantError: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, tc.sandbox)
			r := s.call(tc.msg)
			res, _ := r["result"].(map[string]any)
			if res == nil {
				t.Fatalf("no result: %v", r)
			}
			blocks := res["content"].([]any)
			text, _ := blocks[len(blocks)-1].(map[string]any)["text"].(string)
			if !strings.Contains(text, tc.wantText) || (res["isError"] == true) != tc.wantError {
				t.Errorf("result %v, want text %q and isError %v", res, tc.wantText, tc.wantError)
			}
			if !tc.wantError && res["structuredContent"] == nil {
				t.Errorf("a finished run has no structuredContent: %v", res)
			}
			switch {
			case tc.wantRun == nil && len(tc.sandbox.calls) != 0:
				t.Errorf("the sandbox ran %+v", tc.sandbox.calls)
			case tc.wantRun != nil && (len(tc.sandbox.calls) != 1 || tc.sandbox.calls[0].toolUseID != "toolu_1" || !reflect.DeepEqual(tc.sandbox.calls[0].req, *tc.wantRun)):
				t.Errorf("the sandbox got %+v, want toolu_1 with %+v", tc.sandbox.calls, *tc.wantRun)
			}
		})
	}
}

// TestMCPCancelledCallStopsItsRun: notifications/cancelled ends the
// context of its call's run, and the server goes on answering; a call of
// another tool is a JSON-RPC error.
func TestMCPCancelledCallStopsItsRun(t *testing.T) {
	t.Parallel()
	sb := &fakeSandbox{block: true}
	s := serve(t, sb)
	s.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run","arguments":{"language":"python","code":"x"},"_meta":{"claudecode/toolUseId":"t"}}}`)
	for !sb.started() {
		runtime.Gosched()
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`)
	select {
	case <-sb.endedCh():
	case <-time.After(10 * time.Second):
		t.Fatal("the run's context did not end after its call was cancelled")
	}
	s.send(`{"jsonrpc":"2.0","id":10,"method":"ping"}`)
	s.send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"nope","arguments":{}}}`)
	// The cancelled call gets no result (the SDK may answer it with an
	// error); the requests after it are answered.
	replies := map[float64]map[string]any{}
	for len(replies) < 2 {
		r := s.recv()
		if r["id"] == float64(9) {
			if r["result"] != nil {
				t.Errorf("the cancelled call has a result: %v", r)
			}
			continue
		}
		replies[r["id"].(float64)] = r
	}
	if replies[10]["result"] == nil {
		t.Errorf("ping after a cancel: %v", replies[10])
	}
	if e, _ := replies[11]["error"].(map[string]any); e["code"] != float64(-32602) {
		t.Errorf("an unknown tool: %v", replies[11])
	}
}

func ptr[T any](v T) *T { return &v }

// TestMCPImagesAreImageBlocks: an image a run returns is an image block
// before the text, its bytes as the sidecar sent them.
func TestMCPImagesAreImageBlocks(t *testing.T) {
	t.Parallel()
	png := "iVBORw0KGgo="
	res := &wire.RunResult{RunReport: wire.RunReport{Reason: "exited", Files: []wire.File{{Path: "a.png", MediaType: "image/png", Base64: &png}}}}
	s := serve(t, &fakeSandbox{result: res})
	r := s.call(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run","arguments":{"language":"python","code":"x"},"_meta":{"claudecode/toolUseId":"t"}}}`)
	blocks, _ := r["result"].(map[string]any)["content"].([]any)
	if len(blocks) != 2 {
		t.Fatalf("content %v, want an image and the text", blocks)
	}
	img := blocks[0].(map[string]any)
	if img["type"] != "image" || img["data"] != png || img["mimeType"] != "image/png" || blocks[1].(map[string]any)["type"] != "text" {
		t.Errorf("content %v, want the image %s first", blocks, png)
	}
}
