package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestEncodeWritesEveryReplyAsProtocolMD(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply Reply
	}{
		{name: "welcome", reply: Welcome{ID: "1", V: 1, Server: "gatekeeper/0.1.0", PolicyRevision: "sha256:4f1c"}},
		{name: "query opened", reply: QueryOpened{ID: "2", QueryID: "q_6b0c", PolicyHash: "sha256:9e2d", EffectivePolicy: map[string]any{"proc": map[string]any{"timeout": 30000, "memory": 536870912}}}},
		{name: "query opened with a raw effective policy", reply: &QueryOpened{ID: "2", QueryID: "q_6b0c", PolicyHash: "sha256:9e2d", EffectivePolicy: json.RawMessage(`{"proc": {"timeout": 30000}}`)}},
		{name: "query opened with a tool description", reply: QueryOpened{ID: "2", QueryID: "q_6b0c", PolicyHash: "sha256:9e2d", EffectivePolicy: map[string]any{"code_calls": map[string]any{"callable": map[string]any{"notes": []string{"search"}}}}, ToolDescription: "Run a short program in an isolated sandbox.\n\nCode mode: a python or node program can call these MCP servers' tools; …\n- notes (1 tool): the team's notes\n"}},
		{name: "decision", reply: Decision{ID: "3", Decision: Allow, Reason: "Read of /srv/app/notes.txt is inside the workspace", Rule: "host_fs.inside_workspace", DecisionID: "d_0d3e", PolicyRevision: "sha256:4f1c", ToolUseID: "toolu_01"}},
		{name: "decision with an empty tool use id", reply: Decision{ID: "3", Decision: Ask, Reason: "Bash <rm -rf> & friends need a human", Rule: "bash.ask", DecisionID: "d_0d3f", PolicyRevision: "sha256:4f1c"}},
		{name: "output", reply: Output{ID: "4", RunID: "r_9a1f", Stream: "stdout", Data: "hello\n"}},
		{name: "output with invalid UTF-8", reply: Output{ID: "4", RunID: "r_9a1f", Stream: "stderr", Data: "caf\xc3 \xff\xfe ok\x00"}},
		{name: "run result", reply: RunResult{ID: "4", RunReport: NewRunReport(runner.Result{RunID: "r_9a1f", ExitCode: 0, Reason: runner.Exited, Stdout: "hello\n", Stderr: "", Duration: 412 * time.Millisecond, PeakMemoryBytes: 7340032, Image: "gatekeeper-sandbox:3f9a", Runtime: runner.Runc})}},
		{name: "run result that timed out with invalid UTF-8", reply: RunResult{ID: "4", RunReport: NewRunReport(runner.Result{RunID: "r_9a1g", ExitCode: 137, Reason: runner.TimedOut, Stdout: "\xe2\x82", Truncated: true, Duration: 5 * time.Second, PeakMemoryBytes: 1 << 20, Image: "gatekeeper-sandbox:3f9a", Runtime: runner.Runsc})}},
		{name: "run result with files and a saved workspace", reply: RunResult{ID: "4", RunReport: NewRunReport(runner.Result{
			RunID: "r_9a1h", Reason: runner.Exited, Stdout: "chart drawn\n", Duration: 1830 * time.Millisecond, PeakMemoryBytes: 60 << 20, Image: "gatekeeper-sandbox:python-data-35fc", Runtime: runner.Runc,
			Files: []runner.File{
				{Path: "chart.png", Size: 8, SHA256: "4c4b6a3be1314ab86138bef4314dde022e600960d8689a2c8f8631802d20dab6", Change: runner.FileCreated, MediaType: "image/png", Content: []byte("\x89PNG\r\n\x1a\n")},
				{Path: "out/big.csv", Size: 5 << 20, SHA256: "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4", Change: runner.FileCreated, MediaType: "text/csv; charset=utf-8"},
				{Path: "summary.txt", Size: 6, SHA256: "8f67aeb8926b53c7569391657071c27b07606cf45e3dd8de52cc85f6c691c814", Change: runner.FileModified, MediaType: "text/plain; charset=utf-8", Content: []byte("total\n")},
			},
			FilesOmitted: 2, Workspace: runner.WorkspaceSaved, ToolCalls: 3,
		})}},
		{name: "run result with a file for the agent", reply: RunResult{ID: "4", RunReport: toAgent(NewRunReport(runner.Result{
			RunID: "r_9a1m", Reason: runner.Exited, Stdout: "report written\n", Duration: 640 * time.Millisecond, PeakMemoryBytes: 30 << 20, Image: "gatekeeper-sandbox:python-227b", Runtime: runner.Runc,
			Files: []runner.File{
				{Path: "report.csv", Size: 12, SHA256: "31ad2fa0e4b4f4a4f0e6b1e0c3c7d3b54e8f4f5e9c1ba8e1a0f4d9c2b7e6a513", Change: runner.FileCreated, MediaType: "text/csv; charset=utf-8", Content: []byte("id,name\n1,a\n")},
			},
		}), "report.csv")}},
		{name: "run result whose workspace was not saved", reply: RunResult{ID: "4", RunReport: NewRunReport(runner.Result{
			RunID: "r_9a1i", ExitCode: 137, Reason: runner.TimedOut, Duration: 10 * time.Second, Image: "gatekeeper-sandbox:python-227b", Runtime: runner.Runc,
			Workspace: runner.WorkspaceNotSaved, WorkspaceNote: "the run timed out, so /workspace was not saved: the next run starts from it as it was before this run",
		})}},
		{name: "run result in a session", reply: RunResult{ID: "4", RunReport: NewRunReport(runner.Result{
			RunID: "r_9a1j", Reason: runner.Exited, Stdout: "1000\n", Duration: 38 * time.Millisecond, PeakMemoryBytes: 90 << 20, Image: "gatekeeper-sandbox:python-data-35fc", Runtime: runner.Runsc,
			Session: &runner.SessionInfo{Run: 2, Started: time.Date(2026, 12, 2, 5, 40, 1, 234567891, time.FixedZone("CET", 3600)), Age: 42*time.Second + 7*time.Millisecond, Idle: 5 * time.Second, Restarts: 1, PeakMemoryBytes: 120 << 20},
		})}},
		{name: "run result that started in a fresh session", reply: RunResult{ID: "4", RunReport: NewRunReport(runner.Result{
			RunID: "r_9a1k", Reason: runner.Exited, Duration: 900 * time.Millisecond, Image: "gatekeeper-sandbox:python-227b", Runtime: runner.Runc,
			Session:   &runner.SessionInfo{Run: 1, Started: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC), Restarts: 1},
			StateLost: &runner.StateLost{Reason: runner.EndExpired, Lost: "the Python interpreter's variables and imports, background processes, /tmp and /dev/shm", Fresh: true},
		})}},
		{name: "run result that lost its session", reply: RunResult{ID: "4", RunReport: NewRunReport(runner.Result{
			RunID: "r_9a1l", ExitCode: 137, Reason: runner.OOMKilled, Duration: 2 * time.Second, PeakMemoryBytes: 256 << 20, Image: "gatekeeper-sandbox:python-227b", Runtime: runner.Runc,
			Session:   &runner.SessionInfo{Run: 4, Started: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC), Age: time.Minute, Idle: 3 * time.Second},
			StateLost: &runner.StateLost{Reason: runner.EndOOMKilled, Lost: "the Python interpreter's variables and imports, background processes, /tmp and /dev/shm"},
		})}},
		{name: "query closed", reply: QueryClosed{ID: "5", QueryID: "q_6b0c"}},
		{name: "error", reply: &Error{ID: "7", Code: CodeUnknownField, Message: `decide: unknown field "toolname"`}},
		{name: "error with violations", reply: Error{ID: "2", Code: CodePolicyOverrideRejected, Message: "sandbox policy override rejected: 2 violations", Violations: []string{"sandbox.proc.memory 8g exceeds ceiling 1g", "sandbox.net.allow host evil.example is not within ceilings.net_hosts"}}},
		{name: "error with a rule", reply: Error{ID: "4", Code: CodeRunDenied, Message: "network access to evil.example is not allowed", Rule: "sandbox.net.deny"}},
		{name: "error without an id", reply: Error{Code: CodeMalformedFrame, Message: "frame: not a JSON object at byte 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Encode(tc.reply)
			if err != nil {
				t.Fatalf("Encode(%#v): %v", tc.reply, err)
			}
			if want := `{"type":"` + tc.reply.Type() + `",`; !bytes.HasPrefix(got, []byte(want)) {
				t.Errorf("Encode(%#v) = %s, want it to start with %s", tc.reply, got, want)
			}
			if !json.Valid(got) || bytes.ContainsAny(got, "\n") {
				t.Errorf("Encode(%#v) = %s, want one line of JSON", tc.reply, got)
			}
			checkGolden(t, "reply_"+slug(tc.name), append(got, '\n'))
		})
	}
}

func TestEncodeReplacesInvalidUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply Reply
		field func(map[string]any) any
		want  string
	}{
		{
			name:  "output data cut inside a rune gets U+FFFD",
			reply: Output{ID: "4", RunID: "r", Stream: "stdout", Data: "caf\xc3"},
			field: func(m map[string]any) any { return m["data"] },
			want:  "caf\ufffd",
		},
		{
			name:  "each invalid byte of run_result stderr gets U+FFFD and NUL is kept",
			reply: RunResult{ID: "4", RunReport: RunReport{RunID: "r", Stderr: "a\xff\xfeb\x00"}},
			field: func(m map[string]any) any { return m["stderr"] },
			want:  "a\ufffd\ufffdb\x00",
		},
		{
			name:  "valid multi-byte text is kept",
			reply: RunResult{ID: "4", RunReport: RunReport{RunID: "r", Stdout: "héllo ✓ 🐍"}},
			field: func(m map[string]any) any { return m["stdout"] },
			want:  "héllo ✓ 🐍",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := Encode(tc.reply)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("Encode(%#v) = %s, not JSON: %v", tc.reply, b, err)
			}
			if got := tc.field(m); got != tc.want {
				t.Errorf("Encode(%#v) carries %q, want %q", tc.reply, got, tc.want)
			}
		})
	}
}

func TestEncodeFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply Reply
		want  error // nil: any error that names the frame type
	}{
		{name: "a nil reply is refused", reply: nil, want: ErrNilReply},
		{name: "a nil pointer is refused", reply: (*Decision)(nil), want: ErrNilReply},
		{name: "a nil error frame is refused", reply: (*Error)(nil), want: ErrNilReply},
		{name: "an effective policy that cannot be marshalled is an error", reply: QueryOpened{ID: "2", EffectivePolicy: make(chan int)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := Encode(tc.reply)
			switch {
			case err == nil:
				t.Fatalf("Encode(%#v) = %s, want an error", tc.reply, b)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("Encode(%#v) = error %v, want %v", tc.reply, err, tc.want)
			case tc.want == nil && !strings.HasPrefix(err.Error(), "encode "+tc.reply.Type()+" frame: "):
				t.Errorf("Encode(%#v) = error %q, want it to name the frame type", tc.reply, err)
			}
		})
	}
}

func TestErrorIsAnError(t *testing.T) {
	t.Parallel()
	var err error = &Error{ID: "3", Code: CodeUnknownQuery, Message: `decide: query "q_1" is not open`}
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnknownQuery {
		t.Fatalf("errors.As(%v) did not find the *Error", err)
	}
	if got, want := err.Error(), `unknown_query: decide: query "q_1" is not open`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestRequestsMarshalAsClientsSendThem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{name: "a hello", req: &Hello{ID: "1", V: 1, Client: "c"}, want: `{"type":"hello","id":"1","v":1,"client":"c"}`},
		{name: "an open_query without override", req: &OpenQuery{ID: "2"}, want: `{"type":"open_query","id":"2"}`},
		{name: "a decide", req: &Decide{ID: "3", QueryID: "q", Event: EventCanUseTool, ToolName: "mcp__fs__read", ToolInput: json.RawMessage(`{"a": "b c"}`), MCPServer: &MCPServer{Name: "fs", Source: SourceSDK}}, want: `{"type":"decide","id":"3","query_id":"q","event":"canUseTool","tool_name":"mcp__fs__read","tool_input":{"a":"b c"},"tool_use_id":"","mcp_server":{"name":"fs","source":"sdk"}}`},
		{name: "a run", req: &Run{ID: "4", QueryID: "q", ToolUseID: "t", Language: "sh", Code: "ls", Files: map[string]FileContent{"b": {Data: "2"}, "a": {Data: "1"}, "c": {Data: "\x00\xff", Base64: true}}, TimeoutMS: int64p(10), Outputs: []string{}}, want: `{"type":"run","id":"4","query_id":"q","tool_use_id":"t","language":"sh","code":"ls","files":{"a":"1","b":"2","c":{"base64":"AP8="}},"timeout_ms":10,"outputs":[]}`},
		{name: "a close_query", req: &CloseQuery{ID: "5", QueryID: "q"}, want: `{"type":"close_query","id":"5","query_id":"q"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("json.Marshal(%#v) = %s, want %s", tc.req, got, tc.want)
			}
			back, e := Decode(got)
			if e != nil {
				t.Fatalf("Decode(%s) = %v", got, e)
			}
			if again, _ := json.Marshal(back); string(again) != tc.want {
				t.Errorf("the decoded frame marshals to %s, want %s", again, tc.want)
			}
		})
	}
}

// toAgent is r with the files toAgent names kept for the agent's code.
func toAgent(r RunReport, toAgent ...string) RunReport {
	r.KeepForAgent(toAgent)
	return r
}
