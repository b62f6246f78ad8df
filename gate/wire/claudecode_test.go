package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Hook inputs exactly as Claude Code 2.1.330 sent them in the CLI tests
// (docs/CLAUDE-CODE.md); read-only.
const (
	cliPreToolUse        = `{"session_id":"9d91f6f2-c754-4551-a5a0-3d76644d9ffc","transcript_path":"/home/u/.claude/projects/-ws/9d91f6f2-c754-4551-a5a0-3d76644d9ffc.jsonl","cwd":"/ws","prompt_id":"e4b6d149-3425-4eb8-a692-e2f8c8c01d90","permission_mode":"default","effort":{"level":"medium"},"hook_event_name":"PreToolUse","tool_name":"mcp__sandboxed_code__run","tool_input":{"language":"python","code":"print(1)"},"tool_use_id":"toolu_01","mcp_server":{"name":"sandboxed_code","source":"enterprise"}}`
	cliPermissionRequest = `{"session_id":"b51568d9-6292-475b-a498-0ec0d19eda8a","transcript_path":"/home/u/.claude/projects/-ws/b51568d9.jsonl","cwd":"/ws","prompt_id":"e0dd570e","permission_mode":"default","effort":{"level":"medium"},"hook_event_name":"PermissionRequest","tool_name":"Write","tool_input":{"file_path":"/ws/w.txt","content":"hi"},"permission_suggestions":[{"type":"setMode","mode":"acceptEdits","destination":"session"}]}`
	cliSessionEnd        = `{"session_id":"b51568d9-6292-475b-a498-0ec0d19eda8a","transcript_path":"/home/u/.claude/projects/-ws/b51568d9.jsonl","cwd":"/ws","prompt_id":"e0dd570e","hook_event_name":"SessionEnd","reason":"other"}`
)

func TestDecodeHookAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  HookInput
	}{
		{
			name:  "a PreToolUse of the managed sandboxed_code server keeps its provenance",
			input: cliPreToolUse,
			want: HookInput{Event: HookPreToolUse, SessionID: "9d91f6f2-c754-4551-a5a0-3d76644d9ffc", Cwd: "/ws", ToolName: "mcp__sandboxed_code__run",
				ToolInput: json.RawMessage(`{"language":"python","code":"print(1)"}`), ToolUseID: "toolu_01", MCPServer: &MCPServer{Name: "sandboxed_code", Source: "enterprise"}},
		},
		{
			name:  "a PermissionRequest has no tool_use_id",
			input: cliPermissionRequest,
			want:  HookInput{Event: HookPermissionRequest, SessionID: "b51568d9-6292-475b-a498-0ec0d19eda8a", Cwd: "/ws", ToolName: "Write", ToolInput: json.RawMessage(`{"file_path":"/ws/w.txt","content":"hi"}`)},
		},
		{
			name:  "a SessionEnd needs only its session",
			input: cliSessionEnd,
			want:  HookInput{Event: HookSessionEnd, SessionID: "b51568d9-6292-475b-a498-0ec0d19eda8a", Cwd: "/ws"},
		},
		{
			name:  "a subagent's PreToolUse carries agent_id and agent_type",
			input: `{"hook_event_name":"PreToolUse","session_id":"s","agent_id":"a8f3","agent_type":"general-purpose","tool_name":"Read","tool_input":{},"tool_use_id":"t"}`,
			want:  HookInput{Event: HookPreToolUse, SessionID: "s", ToolName: "Read", ToolInput: json.RawMessage(`{}`), ToolUseID: "t", AgentID: "a8f3", AgentType: "general-purpose"},
		},
		{
			name:  "a PostToolUse names its tool and tool use, not its response",
			input: `{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Read","tool_input":{"file_path":"/a"},"tool_response":{"x":1},"tool_use_id":"t","duration_ms":3}`,
			want:  HookInput{Event: HookPostToolUse, SessionID: "s", ToolName: "Read", ToolUseID: "t"},
		},
		{
			name:  "a PostToolUseFailure keeps its error",
			input: `{"hook_event_name":"PostToolUseFailure","session_id":"s","agent_id":"a","tool_name":"Read","tool_input":{},"tool_use_id":"t","error":"File does not exist.","is_interrupt":false}`,
			want:  HookInput{Event: HookPostToolUseFailure, SessionID: "s", ToolName: "Read", ToolUseID: "t", Error: "File does not exist.", AgentID: "a"},
		},
		{
			name:  "an Elicitation names its server",
			input: `{"hook_event_name":"Elicitation","session_id":"s","mcp_server_name":"evil","message":"your password?","requested_schema":{}}`,
			want:  HookInput{Event: HookElicitation, SessionID: "s", ServerName: "evil"},
		},
		{
			name:  "a ConfigChange names its source and file",
			input: `{"hook_event_name":"ConfigChange","session_id":"s","source":"project_settings","file_path":"/ws/.claude/settings.json"}`,
			want:  HookInput{Event: HookConfigChange, SessionID: "s", ConfigSource: "project_settings", FilePath: "/ws/.claude/settings.json"},
		},
		{
			name:  "another event is read without tool fields",
			input: `{"hook_event_name":"Stop","session_id":"s","tool_name":7}`,
			want:  HookInput{Event: "Stop", SessionID: "s"},
		},
		{
			name:  "a relative cwd is dropped",
			input: `{"hook_event_name":"PreToolUse","session_id":"s","cwd":"ws","tool_name":"Read","tool_input":{},"tool_use_id":"t"}`,
			want:  HookInput{Event: HookPreToolUse, SessionID: "s", ToolName: "Read", ToolInput: json.RawMessage(`{}`), ToolUseID: "t"},
		},
		{
			name:  "keys gatekeeper does not read are ignored whatever their value",
			input: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":{"file_path":"/a"},"tool_use_id":"t","future":null,"mcp_server":{"name":"x","source":"user","extra":[1]}}`,
			want:  HookInput{Event: HookPreToolUse, SessionID: "s", ToolName: "Read", ToolInput: json.RawMessage(`{"file_path":"/a"}`), ToolUseID: "t", MCPServer: &MCPServer{Name: "x", Source: "user"}},
		},
		{
			name:  "keys of tool_input differing only in case are distinct",
			input: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":{"path":"/a","Path":"/b"},"tool_use_id":"t"}`,
			want:  HookInput{Event: HookPreToolUse, SessionID: "s", ToolName: "Read", ToolInput: json.RawMessage(`{"path":"/a","Path":"/b"}`), ToolUseID: "t"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, e := DecodeHook([]byte(tc.input))
			if e != nil {
				t.Fatalf("DecodeHook(%s) = error %+v", tc.input, e)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("DecodeHook(%s) = %+v, want %+v", tc.input, *got, tc.want)
			}
		})
	}
}

func TestDecodeHookRefuses(t *testing.T) {
	t.Parallel()
	pre := func(edit string) string {
		return strings.Replace(`{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":{"file_path":"/a"},"tool_use_id":"t"X}`, "X", edit, 1)
	}
	tests := []struct {
		name, input, code string
		// event is what the caller can still read, to answer with a deny.
		event string
	}{
		{name: "text that is not JSON is malformed", input: `hello`, code: CodeMalformedFrame},
		{name: "invalid UTF-8 is malformed", input: "{\"hook_event_name\":\"PreToolUse\",\"session_id\":\"\xff\"}", code: CodeMalformedFrame},
		{name: "a truncated input still names its event", input: `{"hook_event_name":"PreToolUse","session_id":"s","tool_input":{`, code: CodeMalformedFrame, event: HookPreToolUse},
		{name: "a repeated tool_name is refused, not the last one taken", input: pre(`,"tool_name":"Bash"`), code: CodeDuplicateKey, event: HookPreToolUse},
		{name: "tool_name in another case is a repeated key", input: pre(`,"Tool_Name":"Bash"`), code: CodeDuplicateKey, event: HookPreToolUse},
		{name: "a repeated key inside tool_input is refused", input: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":{"file_path":"/a","file_path":"/etc/passwd"},"tool_use_id":"t"}`, code: CodeDuplicateKey, event: HookPreToolUse},
		{name: "a repeated event name names no event", input: `{"hook_event_name":"PreToolUse","hook_event_name":"Stop","session_id":"s"}`, code: CodeDuplicateKey, event: HookPreToolUse},
		{name: "a missing event is refused", input: `{"session_id":"s"}`, code: CodeMissingField},
		{name: "a missing session is refused", input: `{"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t"}`, code: CodeMissingField, event: HookPreToolUse},
		{name: "an empty session is refused", input: `{"hook_event_name":"SessionEnd","session_id":""}`, code: CodeInvalidField, event: HookSessionEnd},
		{name: "a session of 129 characters is refused", input: `{"hook_event_name":"SessionEnd","session_id":"` + strings.Repeat("s", 129) + `"}`, code: CodeInvalidField, event: HookSessionEnd},
		{name: "a PreToolUse without tool_input is refused", input: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_use_id":"t"}`, code: CodeMissingField, event: HookPreToolUse},
		{name: "a tool_input that is a string is refused", input: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":"{}","tool_use_id":"t"}`, code: CodeInvalidField, event: HookPreToolUse},
		{name: "a PreToolUse without tool_use_id is refused", input: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":{}}`, code: CodeMissingField, event: HookPreToolUse},
		{name: "a PreToolUse with an empty tool_use_id is refused", input: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":{},"tool_use_id":""}`, code: CodeInvalidField, event: HookPreToolUse},
		{name: "an empty tool_name is refused", input: `{"hook_event_name":"PermissionRequest","session_id":"s","tool_name":"","tool_input":{}}`, code: CodeInvalidField, event: HookPermissionRequest},
		{name: "an mcp_server without a name is refused", input: pre(`,"mcp_server":{"source":"project"}`), code: CodeMissingField, event: HookPreToolUse},
		{name: "an mcp_server that is null is refused", input: pre(`,"mcp_server":null`), code: CodeInvalidField, event: HookPreToolUse},
		{name: "an mcp_server with two sources in different case is refused", input: pre(`,"mcp_server":{"name":"sandboxed_code","source":"project","Source":"enterprise"}`), code: CodeDuplicateKey, event: HookPreToolUse},
		{name: "an agent_id that is not a string is refused", input: pre(`,"agent_id":7`), code: CodeInvalidField, event: HookPreToolUse},
		{name: "an agent_type of 129 characters is refused", input: pre(`,"agent_type":"` + strings.Repeat("a", 129) + `"`), code: CodeInvalidField, event: HookPreToolUse},
		{name: "a repeated agent_id in another case is refused", input: pre(`,"agent_id":"a","Agent_ID":"b"`), code: CodeDuplicateKey, event: HookPreToolUse},
		{name: "a PostToolUse without tool_use_id is refused", input: `{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Read"}`, code: CodeMissingField, event: HookPostToolUse},
		{name: "a PostToolUseFailure without its error is refused", input: `{"hook_event_name":"PostToolUseFailure","session_id":"s","tool_name":"Read","tool_use_id":"t"}`, code: CodeMissingField, event: HookPostToolUseFailure},
		{name: "a ConfigChange whose source is not a string is refused", input: `{"hook_event_name":"ConfigChange","session_id":"s","source":["policy_settings"]}`, code: CodeInvalidField, event: HookConfigChange},
		{name: "a tool_input nested too deep is refused", input: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":{"a":` + nested(MaxDepth) + `},"tool_use_id":"t"}`, code: CodeInvalidField, event: HookPreToolUse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, e := DecodeHook([]byte(tc.input))
			if e == nil {
				t.Fatalf("DecodeHook(%.200s) = %+v, want error %s", tc.input, got, tc.code)
			}
			if e.Code != tc.code || got.Event != tc.event {
				t.Errorf("DecodeHook(%.200s) = error %s (%s) with event %q, want %s with event %q", tc.input, e.Code, e.Message, got.Event, tc.code, tc.event)
			}
			if !strings.HasPrefix(e.Message, "hook input: ") {
				t.Errorf("message %q does not say it is about the hook input", e.Message)
			}
		})
	}
}

// TestEncodeHookAnswerIsWhatClaudeCodeReads pins each answer to a golden file
// holding exactly the bytes the CLI gets; the CLI tests (walkthroughs/test)
// prove the CLI acts on them.
func TestEncodeHookAnswerIsWhatClaudeCodeReads(t *testing.T) {
	t.Parallel()
	reason := `Bash is denied <"quoted"> [gatekeeper rule: tools.deny_list]`
	tests := []struct {
		name string
		a    HookAnswer
		// want is what the answer must hold, checked before the golden file.
		want string
	}{
		{name: "a PreToolUse deny", a: HookAnswer{Event: HookPreToolUse, Decision: Deny, Reason: reason}, want: `"permissionDecision":"deny"`},
		{name: "a PreToolUse ask", a: HookAnswer{Event: HookPreToolUse, Decision: Ask, Reason: reason}, want: `"permissionDecision":"ask"`},
		{name: "a PreToolUse allow has no opinion", a: HookAnswer{Event: HookPreToolUse, Decision: Allow, Reason: reason}, want: `{}`},
		{name: "a PermissionRequest allow", a: HookAnswer{Event: HookPermissionRequest, Decision: Allow, Reason: reason}, want: `"decision":{"behavior":"allow"}`},
		{name: "a PermissionRequest deny", a: HookAnswer{Event: HookPermissionRequest, Decision: Deny, Reason: reason}, want: `"behavior":"deny","message":`},
		{name: "a PermissionRequest ask has no opinion", a: HookAnswer{Event: HookPermissionRequest, Decision: Ask, Reason: reason}, want: `{}`},
		{name: "a SessionEnd", a: HookAnswer{Event: HookSessionEnd}, want: `{}`},
		{name: "an unknown event", a: HookAnswer{Event: "Stop", Decision: Deny, Reason: reason}, want: `{}`},
		{name: "a PostToolUse has no opinion", a: HookAnswer{Event: HookPostToolUse, Decision: Deny, Reason: reason}, want: `{}`},
		{name: "an Elicitation is declined", a: HookAnswer{Event: HookElicitation, Decision: Allow}, want: `{"hookSpecificOutput":{"hookEventName":"Elicitation","action":"decline"}}`},
		{name: "a ConfigChange is blocked", a: HookAnswer{Event: HookConfigChange, Decision: Allow, Reason: reason}, want: `{"decision":"block","reason":"Bash is denied`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := EncodeHookAnswer(tc.a)
			if !json.Valid(got) || !bytes.Contains(got, []byte(tc.want)) {
				t.Fatalf("EncodeHookAnswer(%+v) = %s, want valid JSON holding %s", tc.a, got, tc.want)
			}
			checkGolden(t, "hook_"+slug(tc.name), append(got, '\n'))
		})
	}
}

func TestDecodeOpenQueryOfAClaudeCodeSession(t *testing.T) {
	t.Parallel()
	got, e := Decode([]byte(`{"type":"open_query","id":"2","claude_code_session":"9d91f6f2-c754-4551-a5a0-3d76644d9ffc"}`))
	if e != nil {
		t.Fatal(e)
	}
	if want := (&OpenQuery{ID: "2", ClaudeCodeSession: "9d91f6f2-c754-4551-a5a0-3d76644d9ffc"}); !reflect.DeepEqual(got, want) {
		t.Errorf("Decode = %#v, want %#v", got, want)
	}
	for name, f := range map[string]string{
		"an empty session":           `{"type":"open_query","id":"2","claude_code_session":""}`,
		"a session beside a policy":  `{"type":"open_query","id":"2","sandbox_policy":{},"claude_code_session":"s"}`,
		"a session that is a number": `{"type":"open_query","id":"2","claude_code_session":1}`,
	} {
		if _, e := Decode([]byte(f)); e == nil || e.Code != CodeInvalidField {
			t.Errorf("%s: Decode(%s) = %v, want invalid_field", name, f, e)
		}
	}
}

// FuzzDecodeHook checks that DecodeHook never panics, always returns an
// input, refuses what encoding/json finds invalid or a repeated key, and
// that an accepted tool event carries a tool name and an object input whose
// answer is valid JSON. Run it with
// go test ./gate/wire -run '^$' -fuzz FuzzDecodeHook -fuzztime 30s
func FuzzDecodeHook(f *testing.F) {
	for _, s := range []string{cliPreToolUse, cliPermissionRequest, cliSessionEnd, `{"hook_event_name":"Stop","session_id":"s"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, e := DecodeHook(data)
		if in == nil {
			t.Fatalf("DecodeHook(%q) returned no input", data)
		}
		if e != nil {
			return
		}
		if !json.Valid(data) || (len(data) < 10000 && hasDuplicate(t, data)) {
			t.Fatalf("DecodeHook(%q) accepted invalid JSON or a repeated key", data)
		}
		if in.Event == "" || in.SessionID == "" {
			t.Fatalf("DecodeHook(%q) = %+v: accepted without event or session", data, in)
		}
		if hookToolEvent(in.Event) {
			var obj map[string]any
			if in.ToolName == "" || json.Unmarshal(in.ToolInput, &obj) != nil || obj == nil {
				t.Fatalf("DecodeHook(%q) = %+v: a tool event without a tool name or object input", data, in)
			}
		}
		for _, d := range []string{Allow, Deny, Ask} {
			if out := EncodeHookAnswer(HookAnswer{Event: in.Event, Decision: d, Reason: in.ToolName}); !json.Valid(out) {
				t.Fatalf("EncodeHookAnswer for %q = %s, not JSON", data, out)
			}
		}
	})
}

// TestHookEventsArePinned pins HookEvents to testdata/hook-events.json,
// which walkthroughs/test/claude-code.test.ts compares with the hook events
// compiled into the pinned CLI binary: an event the CLI adds fails there
// until it is listed here with what gatekeeper does with it.
func TestHookEventsArePinned(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "hook-events.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pinned struct {
		CLIVersion string            `json:"cli_version"`
		Events     map[string]string `json:"events"`
	}
	if err := json.Unmarshal(data, &pinned); err != nil {
		t.Fatal(err)
	}
	if got := HookEvents(); !reflect.DeepEqual(got, pinned.Events) {
		t.Errorf("HookEvents() = %v, testdata/hook-events.json has %v", got, pinned.Events)
	}
	if len(pinned.Events) != 33 || pinned.CLIVersion != "2.1.330" {
		t.Errorf("the pinned table has %d events of CLI %s, want the 33 of 2.1.330", len(pinned.Events), pinned.CLIVersion)
	}
	for ev, h := range HookEvents() {
		switch h {
		case HandleDecide, HandleRecord, HandleClose, HandleRefuse, HandleNone:
		default:
			t.Errorf("event %s: handling %q is not one of the Handle values", ev, h)
		}
	}
	// What the hook endpoint acts on and the table agree.
	for _, ev := range []string{HookPreToolUse, HookPermissionRequest} {
		if HookEvents()[ev] != HandleDecide || !hookToolEvent(ev) {
			t.Errorf("%s is decided", ev)
		}
	}
}
