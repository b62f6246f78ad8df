package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// hookInput is a Claude Code hook input of session sid (the shape of the
// CLI's own, see gate/wire/hook_test.go).
func hookInput(sid, event, tool, input, toolUseID, mcp string) string {
	s := fmt.Sprintf(`{"session_id":%q,"transcript_path":"/t.jsonl","cwd":"/","permission_mode":"default","hook_event_name":%q`, sid, event)
	if tool != "" {
		s += fmt.Sprintf(`,"tool_name":%q,"tool_input":%s`, tool, input)
	}
	if toolUseID != "" {
		s += fmt.Sprintf(`,"tool_use_id":%q`, toolUseID)
	}
	if mcp != "" {
		s += `,"mcp_server":` + mcp
	}
	return s + "}"
}

// hook POSTs body to the hook endpoint with token and returns the status
// and body.
func (h *harness) hook(t testing.TB, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", "http://gatekeeper"+wire.HookPath, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.httpClient().Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

// hookOK POSTs a hook input with the token and returns the answer, failing
// unless it is a 200 with a JSON object.
func (h *harness) hookOK(t testing.TB, body string) map[string]any {
	t.Helper()
	status, out := h.hook(t, h.token, body)
	var m map[string]any
	if status != 200 || json.Unmarshal([]byte(out), &m) != nil {
		t.Fatalf("hook %s: %d %s, want 200 with a JSON object", body, status, out)
	}
	return m
}

// permissionDecision reads a PreToolUse answer: "" for no opinion.
func permissionDecision(m map[string]any) (decision, reason string) {
	hso, _ := m["hookSpecificOutput"].(map[string]any)
	decision, _ = hso["permissionDecision"].(string)
	reason, _ = hso["permissionDecisionReason"].(string)
	return decision, reason
}

// behavior reads a PermissionRequest answer: "" for no opinion.
func behavior(m map[string]any) string {
	hso, _ := m["hookSpecificOutput"].(map[string]any)
	d, _ := hso["decision"].(map[string]any)
	b, _ := d["behavior"].(string)
	return b
}

// records verifies the audit log and returns its lines of kind.
func records(t testing.TB, path string, kind audit.Kind) []audit.Record {
	t.Helper()
	_, err := audit.VerifyFile(path)
	must(t, err)
	data, err := os.ReadFile(path)
	must(t, err)
	var out []audit.Record
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r audit.Record
		must(t, json.Unmarshal(line, &r))
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

func TestHookDecidesOnTheSameDecisionPath(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	ws := filepath.Join(h.dir, "ws")
	read := fmt.Sprintf(`{"file_path":%q}`, ws+"/a.txt")
	tests := []struct {
		name, event, tool, input, toolUseID string
		// wantAnswer is the permissionDecision (PreToolUse) or behavior
		// (PermissionRequest) the CLI gets; "" is no opinion.
		wantAnswer, wantDecision, wantRule string
	}{
		{"a PreToolUse read in the workspace has no opinion", "PreToolUse", "Read", read, "toolu_1", "", "allow", "host_fs.inside_workspace"},
		{"a PreToolUse of Bash is denied", "PreToolUse", "Bash", `{"command":"touch /tmp/x"}`, "toolu_2", "deny", "deny", "tools.deny_list"},
		{"a PreToolUse read of the SSH key is denied", "PreToolUse", "Read", fmt.Sprintf(`{"file_path":%q}`, ws+"/../../../etc/passwd"), "toolu_3", "deny", "deny", "host_fs.outside_workspace"},
		{"a PermissionRequest read in the workspace is allowed", "PermissionRequest", "Read", read, "", "allow", "allow", "host_fs.inside_workspace"},
		{"a PermissionRequest of Bash is denied", "PermissionRequest", "Bash", `{"command":"id"}`, "", "deny", "deny", "tools.deny_list"},
	}
	for _, tc := range tests {
		m := h.hookOK(t, hookInput("sess-1", tc.event, tc.tool, tc.input, tc.toolUseID, ""))
		got := behavior(m)
		var reason string
		if tc.event == "PreToolUse" {
			got, reason = permissionDecision(m)
		}
		if got != tc.wantAnswer {
			t.Errorf("%s: answer %v, want %q", tc.name, m, tc.wantAnswer)
		}
		if tc.wantAnswer == "deny" && tc.event == "PreToolUse" && !strings.HasSuffix(reason, "[gatekeeper rule: "+tc.wantRule+"]") {
			t.Errorf("%s: reason %q does not name rule %s", tc.name, reason, tc.wantRule)
		}
	}
	queries := records(t, h.auditPath, audit.KindQuery)
	if len(queries) != 1 || queries[0].Session != "sess-1" || queries[0].Client != server.HookClient {
		t.Fatalf("one session opens one query, recorded with its session: %+v", queries)
	}
	decisions := records(t, h.auditPath, audit.KindDecision)
	if len(decisions) != len(tests) {
		t.Fatalf("audit has %d decisions, want %d", len(decisions), len(tests))
	}
	for i, tc := range tests {
		d := decisions[i]
		if d.QueryID != queries[0].QueryID || d.Event != tc.event || d.Decision != tc.wantDecision || d.Rule != tc.wantRule || d.Client != server.HookClient || d.ToolUseID != tc.toolUseID {
			t.Errorf("%s: audit line %+v", tc.name, d)
		}
	}
}

func TestHookSessionsAreQueries(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	bash := func(sid string) { h.hookOK(t, hookInput(sid, "PreToolUse", "Bash", `{}`, "t", "")) }
	bash("a")
	bash("b")
	bash("a")
	h.hookOK(t, hookInput("a", "SessionEnd", "", "", "", ""))
	bash("a")
	queries := records(t, h.auditPath, audit.KindQuery)
	decisions := records(t, h.auditPath, audit.KindDecision)
	if len(queries) != 3 || queries[0].Session != "a" || queries[1].Session != "b" || queries[2].Session != "a" {
		t.Fatalf("want queries for a, b, and a again after its SessionEnd: %+v", queries)
	}
	want := []string{queries[0].QueryID, queries[1].QueryID, queries[0].QueryID, queries[2].QueryID}
	for i, d := range decisions {
		if d.QueryID != want[i] {
			t.Errorf("decision %d in query %s, want %s", i, d.QueryID, want[i])
		}
	}
}

func TestHookSessionsAreBounded(t *testing.T) {
	t.Parallel()
	t.Run("in number", func(t *testing.T) {
		t.Parallel()
		h := start(t, options{claudeCode: server.ClaudeCodeConfig{MaxSessions: 2}})
		read := fmt.Sprintf(`{"file_path":%q}`, filepath.Join(h.dir, "ws", "a.txt"))
		for _, sid := range []string{"a", "b"} {
			if d, _ := permissionDecision(h.hookOK(t, hookInput(sid, "PreToolUse", "Read", read, "t", ""))); d != "" {
				t.Fatalf("session %s: %q", sid, d)
			}
		}
		d, reason := permissionDecision(h.hookOK(t, hookInput("c", "PreToolUse", "Read", read, "t", "")))
		if d != "deny" || !strings.Contains(reason, "maximum of 2 Claude Code sessions") {
			t.Fatalf("a third session: %q %q, want a deny naming the limit", d, reason)
		}
		// A session that ends makes room.
		h.hookOK(t, hookInput("a", "SessionEnd", "", "", "", ""))
		if d, _ := permissionDecision(h.hookOK(t, hookInput("c", "PreToolUse", "Read", read, "t", ""))); d != "" {
			t.Fatalf("after a SessionEnd: %q", d)
		}
	})
	t.Run("in idle time", func(t *testing.T) {
		t.Parallel()
		// Every session is idle at once: a new one replaces it.
		h := start(t, options{claudeCode: server.ClaudeCodeConfig{MaxSessions: 1, SessionIdle: time.Nanosecond}})
		for _, sid := range []string{"a", "b", "a", "a"} {
			if d, _ := permissionDecision(h.hookOK(t, hookInput(sid, "PreToolUse", "Bash", `{}`, "t", ""))); d != "deny" {
				t.Fatalf("session %s: %q", sid, d)
			}
		}
		if got := records(t, h.auditPath, audit.KindQuery); len(got) != 4 {
			t.Fatalf("want 4 queries (a, b, and a reopened twice after idling), got %d", len(got))
		}
	})
}

func TestHookFailsClosed(t *testing.T) {
	t.Parallel()
	h := start(t, options{maxFrame: 4096})
	tests := []struct {
		name, token, body string
		status            int
		// deny means a 200 whose answer denies the call.
		deny bool
	}{
		{name: "no token is refused", token: "", body: hookInput("s", "PreToolUse", "Read", `{}`, "t", ""), status: 401},
		{name: "a wrong token is refused", token: "nope", body: hookInput("s", "PreToolUse", "Read", `{}`, "t", ""), status: 401},
		{name: "text that is not JSON is a 400", token: h.token, body: "hello", status: 400},
		{name: "an input without an event is a 400", token: h.token, body: `{"session_id":"s"}`, status: 400},
		{name: "a PreToolUse with a repeated tool_name is denied", token: h.token, body: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_name":"Bash","tool_input":{},"tool_use_id":"t"}`, status: 200, deny: true},
		{name: "a PreToolUse without tool_use_id is denied", token: h.token, body: `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":{}}`, status: 200, deny: true},
		{name: "a PermissionRequest with a string input is denied", token: h.token, body: `{"hook_event_name":"PermissionRequest","session_id":"s","tool_name":"Read","tool_input":"{}"}`, status: 200, deny: true},
		{name: "a body over the frame limit is a 413", token: h.token, body: hookInput("s", "PreToolUse", "Write", fmt.Sprintf(`{"content":%q}`, strings.Repeat("a", 5000)), "t", ""), status: 413},
	}
	for _, tc := range tests {
		status, out := h.hook(t, tc.token, tc.body)
		if status != tc.status {
			t.Errorf("%s: status %d (%s), want %d", tc.name, status, out, tc.status)
			continue
		}
		if !tc.deny {
			continue
		}
		var m map[string]any
		must(t, json.Unmarshal([]byte(out), &m))
		d, reason := permissionDecision(m)
		if b := behavior(m); b != "" {
			d, reason = b, m["hookSpecificOutput"].(map[string]any)["decision"].(map[string]any)["message"].(string)
		}
		if d != "deny" || !strings.Contains(reason, "could not read this hook input") {
			t.Errorf("%s: %s, want a deny saying the input could not be read", tc.name, out)
		}
	}
}

func TestHookAnswersOtherEventsWithNoOpinion(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	for _, ev := range []string{"Stop", "SessionStart", "UserPromptSubmit", "SubagentStart", "ElicitationResult", "WorktreeCreate"} {
		if m := h.hookOK(t, hookInput("s", ev, "", "", "", "")); len(m) != 0 {
			t.Errorf("%s: %v, want {}", ev, m)
		}
	}
	if got := records(t, h.auditPath, audit.KindQuery); len(got) != 0 {
		t.Errorf("events that decide nothing opened %d queries", len(got))
	}
}

// TestSandboxToolOfACLISessionNeedsGatekeeperMCP shows how the sidecar tells
// its own sandboxed_code server from a look-alike: the CLI reports the
// server's scope, and only a managed-mcp.json server ("enterprise") of a
// session that `gatekeeper mcp` attached to is gatekeeper's own.
func TestSandboxToolOfACLISessionNeedsGatekeeperMCP(t *testing.T) {
	t.Parallel()
	fr := &fakeRunner{}
	h := start(t, options{runner: fr})
	const sid = "9d91f6f2-c754-4551-a5a0-3d76644d9ffc"
	const input = `{"language":"python","code":"print('hello')"}`
	managed := `{"name":"sandboxed_code","source":"enterprise"}`
	pre := func(toolUseID, mcp string) (string, string) {
		return permissionDecision(h.hookOK(t, hookInput(sid, "PreToolUse", "mcp__sandboxed_code__run", input, toolUseID, mcp)))
	}
	if d, reason := pre("toolu_before", managed); d != "deny" || !strings.Contains(reason, "mcp.untrusted_sandboxed_code") {
		t.Fatalf("before gatekeeper mcp attached: %q %q, want mcp.untrusted_sandboxed_code", d, reason)
	}

	mcp := h.connect(t) // gatekeeper mcp
	opened := mcp.do(fmt.Sprintf(`{"type":"open_query","id":"o","claude_code_session":%q}`, sid))
	if opened["type"] != "query_opened" {
		t.Fatalf("attach: %v", opened)
	}
	q := opened["query_id"].(string)
	if queries := records(t, h.auditPath, audit.KindQuery); len(queries) != 1 || queries[0].QueryID != q {
		t.Fatalf("gatekeeper mcp attached to another query than the session's: %+v, %s", queries, q)
	}
	run := func(id, toolUseID string) map[string]any {
		return mcp.do(fmt.Sprintf(`{"type":"run","id":%q,"query_id":%q,"tool_use_id":%q,"language":"python","code":"print('hello')"}`, id, q, toolUseID))
	}
	for _, tc := range []struct{ name, mcp string }{
		{"a project server named sandboxed_code", `{"name":"sandboxed_code","source":"project"}`},
		{"a user server named sandboxed_code", `{"name":"sandboxed_code","source":"user"}`},
		{"a CLI claiming the sidecar's own source", `{"name":"sandboxed_code","source":"gatekeeper"}`},
		// A server of type "sdk" in a CLI's configuration is reported as
		// "sdk": not the SDK client's in-process server.
		{"a CLI claiming the SDK's source", `{"name":"sandboxed_code","source":"sdk"}`},
		{"a CLI claiming the SDK's source in capitals", `{"name":"sandboxed_code","source":"SDK"}`},
		{"a CLI claiming the SDK's source with a space", `{"name":"sandboxed_code","source":"sdk "}`},
		{"a CLI claiming the CLI's own prefix", `{"name":"sandboxed_code","source":"claude-code:sdk"}`},
		{"a CLI claiming the prefixed managed scope", `{"name":"sandboxed_code","source":"claude-code:enterprise"}`},
		{"a CLI claiming the sidecar's source in capitals", `{"name":"sandboxed_code","source":"Gatekeeper"}`},
		{"a CLI reporting stdio", `{"name":"sandboxed_code","source":"stdio"}`},
		{"a CLI reporting an empty source", `{"name":"sandboxed_code","source":""}`},
		{"no mcp_server at all", ""},
	} {
		if d, reason := pre("toolu_"+tc.name, tc.mcp); d != "deny" || !strings.Contains(reason, "mcp.untrusted_sandboxed_code") {
			t.Errorf("%s: %q %q, want mcp.untrusted_sandboxed_code", tc.name, d, reason)
		}
		if r := run("r", "toolu_"+tc.name); r["code"] != "run_denied" || r["rule"] != "run.no_prior_allow" {
			t.Errorf("%s: a run after the deny: %v", tc.name, r)
		}
	}
	if d, _ := pre("toolu_ok", managed); d != "" {
		t.Fatalf("the attested managed server: %q, want no opinion (an allow)", d)
	}
	out := run("r1", "toolu_ok")
	if out["type"] != "output" {
		t.Fatalf("run after the hook's allow: %v", out)
	}
	if res := mcp.recv(); res["type"] != "run_result" || res["stdout"] != "hello\n" {
		t.Fatalf("run_result: %v", res)
	}
	if r := run("r2", "toolu_ok"); r["rule"] != "run.no_prior_allow" {
		t.Fatalf("a second run on one allow: %v", r)
	}
	// A connection that did not attach cannot use the session's query.
	other := h.connect(t)
	if r := other.do(fmt.Sprintf(`{"type":"run","id":"x","query_id":%q,"tool_use_id":"toolu_ok","language":"python","code":"x"}`, q)); r["code"] != "unknown_query" {
		t.Fatalf("a run from another connection: %v", r)
	}
	// Closing the query on the connection only detaches it: the session
	// keeps its query and its attestation.
	if r := mcp.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, q)); r["type"] != "query_closed" {
		t.Fatalf("close_query: %v", r)
	}
	if d, _ := pre("toolu_after_close", managed); d != "" {
		t.Fatalf("after close_query: %q", d)
	}
	// SessionEnd closes the session under an attached connection.
	again := mcp.do(fmt.Sprintf(`{"type":"open_query","id":"o2","claude_code_session":%q}`, sid))
	if again["query_id"] != q {
		t.Fatalf("re-attach gave query %v, want %s", again["query_id"], q)
	}
	h.hookOK(t, hookInput(sid, "SessionEnd", "", "", "", ""))
	if r := run("r3", "toolu_after_close"); r["code"] != "unknown_query" {
		t.Fatalf("a run after SessionEnd: %v", r)
	}
}

func TestHookListenerServesOnlyTheHookEndpoint(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	handler := h.srv.HookHandler()
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/healthz", 200},
		{"GET", "/readyz", 200},
		{"POST", wire.HookPath, 401},
		{"GET", "/v1/ws", 404},
		{"GET", "/metrics", 404},
	} {
		req, err := http.NewRequest(tc.method, "http://127.0.0.1"+tc.path, bytes.NewReader(nil))
		must(t, err)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s %s on the hook listener: %d, want %d", tc.method, tc.path, rec.Code, tc.status)
		}
	}
}

// TestHookRecordsWhatBecameOfEachCall: a PostToolUse or PostToolUseFailure
// is an audit line tied to the decision that let the call run (its
// decision_id), with the subagent that made it; a call the session never
// decided is recorded with no decision, which an operator can look for.
func TestHookRecordsWhatBecameOfEachCall(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	const sid = "3c3b2a8e-post"
	read := fmt.Sprintf(`{"file_path":%q}`, filepath.Join(h.dir, "ws", "a.txt"))
	agent := `,"agent_id":"a8f3","agent_type":"general-purpose"}`
	withAgent := func(in string) string { return strings.TrimSuffix(in, "}") + agent }
	if d, _ := permissionDecision(h.hookOK(t, withAgent(hookInput(sid, "PreToolUse", "Read", read, "toolu_ok", "")))); d != "" {
		t.Fatalf("the read: %q, want no opinion", d)
	}
	if d, _ := permissionDecision(h.hookOK(t, hookInput(sid, "PreToolUse", "Bash", `{"command":"id"}`, "toolu_bash", ""))); d != "deny" {
		t.Fatalf("Bash: %q, want deny", d)
	}
	post := func(event, toolUseID, tail string) {
		t.Helper()
		in := fmt.Sprintf(`{"session_id":%q,"cwd":"/","hook_event_name":%q,"tool_name":"Read","tool_input":{},"tool_response":{"ok":true},"tool_use_id":%q%s}`, sid, event, toolUseID, tail)
		if m := h.hookOK(t, in); len(m) != 0 {
			t.Fatalf("%s: %v, want {}", event, m)
		}
	}
	post("PostToolUse", "toolu_ok", `,"agent_id":"a8f3","agent_type":"general-purpose"`)
	post("PostToolUseFailure", "toolu_bash", `,"error":"ran anyway\nFORGED"`)
	post("PostToolUse", "toolu_never_decided", ``)

	decisions := records(t, h.auditPath, audit.KindDecision)
	if len(decisions) != 2 || decisions[0].AgentID != "a8f3" || decisions[0].AgentType != "general-purpose" || decisions[1].AgentID != "" {
		t.Fatalf("decision lines: %+v, want the read with its subagent, then Bash without", decisions)
	}
	got := records(t, h.auditPath, audit.KindToolResult)
	if len(got) != 3 {
		t.Fatalf("tool_result lines: %+v, want 3", got)
	}
	want := []audit.Record{
		{Event: "PostToolUse", ToolUseID: "toolu_ok", DecisionID: decisions[0].DecisionID, Decision: "allow", AgentID: "a8f3", AgentType: "general-purpose"},
		{Event: "PostToolUseFailure", ToolUseID: "toolu_bash", DecisionID: decisions[1].DecisionID, Decision: "deny", Error: "ran anyway\nFORGED"},
		{Event: "PostToolUse", ToolUseID: "toolu_never_decided", Reason: "no decision of this session is known for this tool_use_id"},
	}
	for i, w := range want {
		g := got[i]
		if g.Event != w.Event || g.ToolUseID != w.ToolUseID || g.DecisionID != w.DecisionID || g.Decision != w.Decision || g.AgentID != w.AgentID ||
			g.AgentType != w.AgentType || g.Error != w.Error || g.Reason != w.Reason || g.QueryID != decisions[0].QueryID || g.Tool != "Read" || g.Client != "claude-code" {
			t.Errorf("line %d: %+v, want %+v in query %s", i, g, w, decisions[0].QueryID)
		}
	}
	if decisions[0].DecisionID == "" {
		t.Error("the decision has no decision_id to tie to")
	}
}

// TestHookRefusesElicitationAndConfigChange: an MCP server's request for
// input is declined and a settings change mid-session is blocked, whatever
// the input says, and each is an audit line; an input that cannot be read
// is an HTTP error, which the CLI's onFailure "block" turns into the same
// refusal.
func TestHookRefusesElicitationAndConfigChange(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	const sid = "6a0f-events"
	tests := []struct {
		name, input, want, rule string
	}{
		{"an elicitation of a server asking for a secret", `{"session_id":"` + sid + `","hook_event_name":"Elicitation","mcp_server_name":"sandboxed_code","message":"token?","requested_schema":{"type":"object"}}`,
			`{"hookSpecificOutput":{"hookEventName":"Elicitation","action":"decline"}}`, "claude_code.elicitation"},
		{"a URL elicitation", `{"session_id":"` + sid + `","hook_event_name":"Elicitation","mcp_server_name":"x","message":"log in","mode":"url","url":"https://example.com/"}`,
			`{"hookSpecificOutput":{"hookEventName":"Elicitation","action":"decline"}}`, "claude_code.elicitation"},
		{"a project settings change", `{"session_id":"` + sid + `","hook_event_name":"ConfigChange","source":"project_settings","file_path":"/ws/.claude/settings.json"}`,
			`"decision":"block"`, "claude_code.config_change"},
		{"a skills change", `{"session_id":"` + sid + `","hook_event_name":"ConfigChange","source":"skills"}`, `"decision":"block"`, "claude_code.config_change"},
		{"a change of a source no CLI has named yet", `{"session_id":"` + sid + `","hook_event_name":"ConfigChange","source":"future_settings","file_path":"/x"}`, `"decision":"block"`, "claude_code.config_change"},
	}
	for _, tc := range tests {
		status, out := h.hook(t, h.token, tc.input)
		if status != 200 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %d %s, want 200 holding %s", tc.name, status, out, tc.want)
		}
		if strings.Contains(tc.want, "block") && !strings.Contains(out, tc.rule) {
			t.Errorf("%s: the reason does not name %s: %s", tc.name, tc.rule, out)
		}
	}
	got := records(t, h.auditPath, audit.KindEvent)
	if len(got) != len(tests) {
		t.Fatalf("event lines: %+v, want %d", got, len(tests))
	}
	for i, tc := range tests {
		if got[i].Rule != tc.rule || got[i].Decision != "deny" || got[i].Client != "claude-code" || got[i].QueryID == "" {
			t.Errorf("%s: audit line %+v", tc.name, got[i])
		}
	}
	for name, in := range map[string]string{
		"an Elicitation with a repeated server name": `{"session_id":"s","hook_event_name":"Elicitation","mcp_server_name":"a","MCP_server_name":"b"}`,
		"a ConfigChange whose source is an object":   `{"session_id":"s","hook_event_name":"ConfigChange","source":{}}`,
	} {
		if status, out := h.hook(t, h.token, in); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, status, out)
		}
	}
}

// TestDecideFrameCarriesTheSubagent: the SDK client's decide frame names
// the subagent the same way, and the audit line keeps it.
func TestDecideFrameCarriesTheSubagent(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	c := h.connect(t)
	q := c.open("")
	read := fmt.Sprintf(`{"file_path":%q}`, filepath.Join(h.dir, "ws", "a.txt"))
	r := c.do(fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":"Read","tool_input":%s,"tool_use_id":"t1","agent_id":"sub-1","agent_type":"Explore"}`, q, read))
	if r["decision"] != "allow" {
		t.Fatalf("decide: %v", r)
	}
	got := records(t, h.auditPath, audit.KindDecision)
	if len(got) != 1 || got[0].AgentID != "sub-1" || got[0].AgentType != "Explore" {
		t.Fatalf("decision lines: %+v", got)
	}
}
