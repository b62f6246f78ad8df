package server_test

// The adversarial suite of the gate, over the real socket with the real OPA
// engine: what a hostile model (its tool names and inputs) or a hostile
// client (its frames) can send, each case asserting the specific outcome
// (the rule, the error code). Cases the engine's own tests
// (gate/engine_test.go) or server_test.go already cover are not repeated;
// these add what only shows on the wire (JSON escapes, frames, connections)
// and what an attacker would try next.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// adversarialPolicy allows the host file tools and the sandbox tool, and
// denies the home directory's dot files, as the shipped policy does.
const adversarialPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [Read, Write, Edit, Glob, Grep, WebFetch, mcp__sandboxed_code__run]
  deny: [Bash]
sandbox:
  fs: {deny: ["~/.ssh/**", "**/.env", "~/.*"]}
  proc: {timeout: 10s}
ceilings: {memory: 1g, timeout: 60s}
`

// advStart starts a sidecar with adversarialPolicy and a fake HOME (the
// harness dir) holding .ssh/id_rsa, and a tree of links in the workspace:
//
//	ws/a.txt
//	ws/l1 -> l2, ws/l2 -> sub/l3, ws/sub/l3 -> ../../outside   (a chain leaving)
//	ws/loop -> loop                                             (a loop)
//	outside/secret.txt
func advStart(t *testing.T, r server.Runner) *harness {
	t.Helper()
	h := start(t, options{policy: adversarialPolicy, runner: r})
	ws := filepath.Join(h.dir, "ws")
	for _, d := range []string{filepath.Join(h.dir, ".ssh"), filepath.Join(h.dir, "outside"), filepath.Join(ws, "sub")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(h.dir, ".ssh", "id_rsa"), []byte("KEY"), 0o600))
	must(t, os.WriteFile(filepath.Join(h.dir, "outside", "secret.txt"), []byte("S"), 0o600))
	must(t, os.Symlink("l2", filepath.Join(ws, "l1")))
	must(t, os.Symlink("sub/l3", filepath.Join(ws, "l2")))
	must(t, os.Symlink("../../outside", filepath.Join(ws, "sub", "l3")))
	must(t, os.Symlink("loop", filepath.Join(ws, "loop")))
	return h
}

// decideRaw sends a decide whose tool_name and tool_input are raw JSON text,
// so that a case can spell them with escapes.
func (c *client) decideRaw(qid, toolJSON, inputJSON, mcpJSON string) map[string]any {
	c.t.Helper()
	f := fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":%s,"tool_input":%s,"tool_use_id":"toolu_adv"`, qid, toolJSON, inputJSON)
	if mcpJSON != "" {
		f += `,"mcp_server":` + mcpJSON
	}
	return c.do(f + "}")
}

func TestAdversarialToolNames(t *testing.T) {
	t.Parallel()
	h := advStart(t, nil)
	c := h.connect(t)
	q := c.open("")
	read := fmt.Sprintf(`{"file_path":%q}`, filepath.Join(h.dir, "ws", "a.txt"))
	run := `{"language":"python","code":"print(1)"}`
	tests := []struct {
		name, tool, input, mcp, decision, rule string
	}{
		{"an escape spelling plain ASCII is the same name", `"Rea\u0064"`, read, "", "allow", "host_fs.inside_workspace"},
		{"an upper-case variant of a denied tool is not allowlisted", `"BASH"`, `{"command":"id"}`, "", "deny", "tools.not_allowlisted"},
		{"a mixed-case variant of an allowed tool is not allowlisted", `"rEAD"`, read, "", "deny", "tools.not_allowlisted"},
		{"a trailing tab is malformed", `"Read\t"`, read, "", "deny", "tools.malformed_name"},
		{"a trailing newline is malformed", `"Read\n"`, read, "", "deny", "tools.malformed_name"},
		{"a trailing NUL is malformed", `"Read\u0000"`, read, "", "deny", "tools.malformed_name"},
		{"an escaped zero-width space is malformed", `"Re\u200bad"`, read, "", "deny", "tools.malformed_name"},
		{"an escaped zero-width joiner is malformed", `"Re\u200dad"`, read, "", "deny", "tools.malformed_name"},
		{"a leading byte order mark is malformed", `"\ufeffRead"`, read, "", "deny", "tools.malformed_name"},
		{"a right-to-left override is malformed", `"\u202eRead"`, read, "", "deny", "tools.malformed_name"},
		{"an escaped Cyrillic look-alike is malformed", `"R\u0435ad"`, read, "", "deny", "tools.malformed_name"},
		{"full-width letters are malformed", `"Ｒｅａｄ"`, read, "", "deny", "tools.malformed_name"},
		{"a combining accent is malformed", `"Read\u0301"`, read, "", "deny", "tools.malformed_name"},
		{"a 10,000-character name is denied", `"` + strings.Repeat("A", 10000) + `"`, `{}`, "", "deny", "tools.not_allowlisted"},
		{"the sandbox tool with a zero-width suffix is malformed", `"mcp__sandboxed_code__run\u200b"`, run, sdkServer, "deny", "tools.malformed_name"},
		{"the sandbox tool in upper case is not allowlisted", `"mcp__sandboxed_code__RUN"`, run, sdkServer, "deny", "tools.not_allowlisted"},
		{"a case variant of the sandbox server is not allowlisted", `"mcp__Sandboxed_Code__run"`, run, `{"name":"Sandboxed_Code","source":"sdk"}`, "deny", "tools.not_allowlisted"},
		{"the sandbox tool from a configured SSE server is untrusted", `"mcp__sandboxed_code__run"`, run, `{"name":"sandboxed_code","source":"sse"}`, "deny", "mcp.untrusted_sandboxed_code"},
		{"the sandbox tool from a configured HTTP server is untrusted", `"mcp__sandboxed_code__run"`, run, `{"name":"sandboxed_code","source":"http"}`, "deny", "mcp.untrusted_sandboxed_code"},
		{"the sandbox tool from a server of unknown source is untrusted", `"mcp__sandboxed_code__run"`, run, `{"name":"sandboxed_code","source":"unknown"}`, "deny", "mcp.untrusted_sandboxed_code"},
		{"the sandbox tool claimed by a server named sandboxed is a mismatch", `"mcp__sandboxed_code__run"`, run, `{"name":"sandboxed","source":"sdk"}`, "deny", "mcp.server_mismatch"},
		{"a server name holding __ cannot produce the sandbox tool", `"mcp__sandboxed_code__run"`, run, `{"name":"sandboxed_code__run","source":"sdk"}`, "deny", "mcp.server_mismatch"},
		{"a tool of a server named with __ is judged as any other tool", `"mcp__sandboxed__code__run"`, run, `{"name":"sandboxed__code","source":"sdk"}`, "deny", "tools.not_allowlisted"},
		{"an mcp_server on a built-in tool is a mismatch", `"Read"`, read, `{"name":"files","source":"stdio"}`, "deny", "mcp.server_mismatch"},
	}
	for _, tc := range tests {
		r := c.decideRaw(q, tc.tool, tc.input, tc.mcp)
		if r["type"] != "decision" || r["decision"] != tc.decision || r["rule"] != tc.rule {
			t.Errorf("%s: got %v, want %s by %s", tc.name, r, tc.decision, tc.rule)
		}
	}
}

func TestAdversarialPaths(t *testing.T) {
	t.Parallel()
	h := advStart(t, nil)
	c := h.connect(t)
	q := c.open("")
	ws := filepath.Join(h.dir, "ws")
	tests := []struct {
		name, tool, input, rule, reason string
	}{
		{"a NUL spelled as an escape is a bad path", "Read", fmt.Sprintf(`{"file_path":"%s/a.txt\u0000/../../../etc/passwd"}`, ws), "host_fs.bad_path", "NUL"},
		{"dots spelled as escapes still climb out", "Read", fmt.Sprintf(`{"file_path":"%s/\u002e\u002e/\u002e\u002e/etc/passwd"}`, ws), "host_fs.outside_workspace", ""},
		{"a relative path climbing to the sidecar's token is outside", "Read", `{"file_path":"./../token"}`, "host_fs.outside_workspace", "/token"},
		{"a chain of three links leaving the workspace is outside", "Read", fmt.Sprintf(`{"file_path":"%s/l1/secret.txt"}`, ws), "host_fs.outside_workspace", "outside/secret.txt"},
		{"a new file under a link chain is outside", "Write", fmt.Sprintf(`{"file_path":"%s/l1/new.txt","content":"x"}`, ws), "host_fs.outside_workspace", ""},
		{"a symlink loop is a bad path", "Read", fmt.Sprintf(`{"file_path":"%s/loop/x"}`, ws), "host_fs.bad_path", ""},
		{"a component longer than 255 bytes is a bad path", "Read", fmt.Sprintf(`{"file_path":"%s/%s"}`, ws, strings.Repeat("x", 256)), "host_fs.bad_path", ""},
		{"a path of 5,000 bytes is a bad path", "Read", fmt.Sprintf(`{"file_path":"%s/%s"}`, ws, strings.Repeat("d/", 2500)), "host_fs.bad_path", ""},
		{"another user's home through ~user is outside", "Read", `{"file_path":"~root/.ssh/id_rsa"}`, "host_fs.outside_workspace", "/root/.ssh/id_rsa"},
		{"~ alone in Grep's path is the home directory", "Grep", `{"pattern":".","path":"~"}`, "host_fs.outside_workspace", ""},
		{"a Glob pattern climbing after a wildcard is outside", "Glob", `{"pattern":"*/../../../*"}`, "host_fs.outside_workspace", ""},
		{"an empty Grep path is a bad path", "Grep", `{"pattern":".","path":""}`, "host_fs.bad_path", ""},
		{"a path given as an object is a bad path", "Edit", `{"file_path":{"path":"a.txt"},"old_string":"A","new_string":"B"}`, "host_fs.bad_path", ""},
	}
	for _, tc := range tests {
		r := c.decideRaw(q, `"`+tc.tool+`"`, tc.input, "")
		if r["type"] != "decision" || r["decision"] != "deny" || r["rule"] != tc.rule || !strings.Contains(fmt.Sprint(r["reason"]), tc.reason) {
			t.Errorf("%s: got %v, want deny by %s with a reason containing %q", tc.name, r, tc.rule, tc.reason)
		}
	}
}

// TestAdversarialPathsWithSurroundingWhitespace pins a bypass found with the
// real Claude Code (walkthrough 3): Claude Code trims the path of Glob and
// Grep before it uses it (JavaScript's trim: spaces, tabs, newlines, NBSP,
// BOM, …) but hands the untrimmed path to the hook. gatekeeper takes
// " ~/.ssh" for a relative path inside the workspace and allows it, and
// Grep then prints the private key. A path with surrounding white space
// must be denied (or judged as trimmed), never judged as a different path
// than the tool will open.
func TestAdversarialPathsWithSurroundingWhitespace(t *testing.T) {
	t.Parallel()
	h := advStart(t, nil)
	c := h.connect(t)
	q := c.open("")
	tests := []struct{ name, tool, input string }{
		{"Grep of a leading-space ~/.ssh", "Grep", `{"pattern":".","path":" ~/.ssh","output_mode":"content"}`},
		{"Grep of a leading-tab absolute key path", "Grep", fmt.Sprintf(`{"pattern":".","path":"\t%s/.ssh/id_rsa"}`, h.dir)},
		{"Grep of a leading-newline /etc", "Grep", `{"pattern":"root","path":"\n/etc"}`},
		{"Glob under a leading no-break space /etc", "Glob", `{"pattern":"*","path":"\u00a0/etc"}`},
		{"Glob under a leading byte order mark /etc", "Glob", `{"pattern":"*","path":"\ufeff/etc"}`},
		{"Glob under a leading ideographic space /etc", "Glob", `{"pattern":"*","path":"\u3000/etc"}`},
		{"Read of a leading-space /etc/passwd", "Read", `{"file_path":" /etc/passwd"}`},
	}
	for _, tc := range tests {
		r := c.decideRaw(q, `"`+tc.tool+`"`, tc.input, "")
		if r["type"] != "decision" || r["decision"] != "deny" || !strings.HasPrefix(fmt.Sprint(r["rule"]), "host_fs.") {
			t.Errorf("%s: got %s by %s (%s), want a host_fs deny", tc.name, r["decision"], r["rule"], r["reason"])
		}
	}
}

func TestAdversarialFrames(t *testing.T) {
	t.Parallel()
	h := advStart(t, nil)
	c := h.connect(t)
	q := c.open("")
	inside := filepath.Join(h.dir, "ws", "a.txt")
	decide := func(rest string) string {
		return fmt.Sprintf(`{"type":"decide","id":"f","query_id":%q,"event":"PreToolUse","tool_use_id":"t",%s}`, q, rest)
	}
	tests := []struct {
		name, frame, typ, want string // want: the rule of a decision, or the code of an error
	}{
		{"a key spelled with an escape is that key", decide(fmt.Sprintf(`"tool\u005fname":"Read","tool_input":{"file_path":%q}`, inside)), "decision", "host_fs.inside_workspace"},
		{"a key repeated through an escape is refused", decide(`"tool_name":"Read","tool\u005fname":"Bash","tool_input":{}`), "error", "duplicate_key"},
		{"a path repeated through an escape inside tool_input is refused", decide(fmt.Sprintf(`"tool_name":"Read","tool_input":{"file_path":%q,"file\u005fpath":"/etc/passwd"}`, inside)), "error", "duplicate_key"},
		{"a key in upper case alone is unknown", decide(`"TOOL_NAME":"Read","tool_input":{}`), "error", "unknown_field"},
		{"case-variant keys of mcp_server are refused", decide(`"tool_name":"mcp__sandboxed_code__run","tool_input":{},"mcp_server":{"name":"sandboxed_code","source":"sdk","Source":"stdio"}`), "error", "duplicate_key"},
		{"an mcp_server source in another case is invalid", decide(`"tool_name":"mcp__sandboxed_code__run","tool_input":{},"mcp_server":{"name":"sandboxed_code","source":"SDK"}`), "error", "invalid_field"},
		{"a client cannot claim the sidecar's own event run", strings.Replace(decide(`"tool_name":"mcp__sandboxed_code__run","tool_input":{"language":"python","code":"x"},"mcp_server":{"name":"sandboxed_code","source":"sdk"}`), `"PreToolUse"`, `"run"`, 1), "error", "invalid_field"},
		{"an event in another case is invalid", strings.Replace(decide(`"tool_name":"Read","tool_input":{}`), `"PreToolUse"`, `"pretooluse"`, 1), "error", "invalid_field"},
		{"a null tool_input is invalid", decide(`"tool_name":"Read","tool_input":null`), "error", "invalid_field"},
		{"a tool_input that is an array is invalid", decide(`"tool_name":"Read","tool_input":[{"file_path":"/etc/passwd"}]`), "error", "invalid_field"},
		{"a second object after the frame is malformed", decide(`"tool_name":"Read","tool_input":{}`) + `{"type":"decide"}`, "error", "malformed_frame"},
	}
	for _, tc := range tests {
		r := c.do(tc.frame)
		got := r["rule"]
		if tc.typ == "error" {
			got = r["code"]
		}
		if r["type"] != tc.typ || got != tc.want {
			t.Errorf("%s: got %v, want %s %s", tc.name, r, tc.typ, tc.want)
		}
	}
	// The connection lives on.
	if d := c.decide(q, "Bash", `{}`, "t", ""); d["rule"] != "tools.deny_list" {
		t.Fatalf("after the bad frames: %v", d)
	}
}

func TestAToolInputWithTenThousandKeysIsDecidedAndAudited(t *testing.T) {
	t.Parallel()
	h := advStart(t, nil)
	c := h.connect(t)
	q := c.open("")
	var b strings.Builder
	fmt.Fprintf(&b, `{"file_path":%q`, filepath.Join(h.dir, "ws", "a.txt"))
	for i := range 9999 {
		fmt.Fprintf(&b, `,"k%d":%d`, i, i)
	}
	b.WriteString("}")
	// An allow (not gatekeeper.error) also shows the evaluation finished
	// within the decision timeout.
	r := c.decideRaw(q, `"Read"`, b.String(), "")
	if r["decision"] != "allow" || r["rule"] != "host_fs.inside_workspace" {
		t.Fatalf("got %v", r)
	}
	// The same input with one key repeated at its end is refused whole.
	dup := strings.TrimSuffix(b.String(), "}") + `,"k0":0}`
	if r := c.decideRaw(q, `"Read"`, dup, ""); r["code"] != "duplicate_key" {
		t.Errorf("10,000 keys with one repeated: %v", r)
	}
	rep, err := audit.VerifyFile(h.auditPath)
	must(t, err)
	if rep.Lines != 2 { // the query and the one decision
		t.Errorf("audit has %d lines, want 2", rep.Lines)
	}
}

func TestSecretLookingInputsAreMaskedOverTheWire(t *testing.T) {
	t.Parallel()
	h := advStart(t, nil)
	c := h.connect(t)
	q := c.open("")
	const secret = "sk-live-adversarial-0d9f"
	input := fmt.Sprintf(`{"url":"https://example.com/","prompt":"x","api\u005fkey":%[1]q,"headers":{"Authorization":"Bearer %[1]s","X-Api-Key":%[1]q},`+
		`"list":[{"password":%[1]q},{"clientSecret":%[1]q}],"aws_secret_access_key":%[1]q,"privateKey":%[1]q,"SESSIONID":%[1]q,"note":"kept"}`, secret)
	if r := c.decideRaw(q, `"WebFetch"`, input, ""); r["rule"] != "net.disabled" {
		t.Fatalf("decide: %v", r)
	}
	raw, err := os.ReadFile(h.auditPath)
	must(t, err)
	if strings.Contains(string(raw), secret) {
		t.Fatalf("the secret is in the audit log:\n%s", raw)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var rec struct {
		ToolInput map[string]any `json:"tool_input"`
	}
	must(t, json.Unmarshal([]byte(lines[len(lines)-1]), &rec))
	got, _ := json.Marshal(rec.ToolInput)
	want := `{"SESSIONID":"***","api_key":"***","aws_secret_access_key":"***","headers":{"Authorization":"***","X-Api-Key":"***"},"list":[{"password":"***"},{"clientSecret":"***"}],"note":"kept","privateKey":"***","prompt":"x","url":"https://example.com/"}`
	if string(got) != want {
		t.Errorf("logged tool_input\n%s\nwant\n%s", got, want)
	}
}

func TestAdversarialRunFrames(t *testing.T) {
	t.Parallel()
	fr := &fakeRunner{}
	h := advStart(t, fr)
	a, b := h.connect(t), h.connect(t)
	qa := a.open("")
	allow := func(c *client, q, id string) {
		t.Helper()
		if d := c.decide(q, wire.SandboxTool, `{"language":"python","code":"print(1)"}`, id, sdkServer); d["decision"] != "allow" {
			t.Fatalf("decide %s: %v", id, d)
		}
	}
	runFrame := func(q, id string) string {
		return fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":%q,"language":"python","code":"print(1)"}`, q, id)
	}

	// Another connection cannot spend an allow, even knowing the query id.
	allow(a, qa, "toolu_a")
	if r := b.do(runFrame(qa, "toolu_a")); r["code"] != "unknown_query" {
		t.Errorf("run on another connection's query: %v", r)
	}
	// An allow for another tool with the same tool_use_id authorizes nothing.
	if d := a.decide(qa, "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(h.dir, "ws", "a.txt")), "toolu_read", ""); d["decision"] != "allow" {
		t.Fatalf("decide Read: %v", d)
	}
	if r := a.do(runFrame(qa, "toolu_read")); r["code"] != "run_denied" || r["rule"] != "run.no_prior_allow" {
		t.Errorf("run on a Read allow: %v", r)
	}
	// An allow in one query does not authorize a run in another query of the same connection.
	qa2 := a.open("")
	if r := a.do(runFrame(qa2, "toolu_a")); r["code"] != "run_denied" || r["rule"] != "run.no_prior_allow" {
		t.Errorf("run in a sibling query: %v", r)
	}
	// A canUseTool allow without a tool_use_id authorizes nothing, and a run needs one.
	if d := a.do(fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"canUseTool","tool_name":%q,"tool_input":{"language":"python","code":"x"},"tool_use_id":"","mcp_server":%s}`, qa, wire.SandboxTool, sdkServer)); d["decision"] != "allow" {
		t.Fatalf("canUseTool decide without id: %v", d)
	}
	if r := a.do(runFrame(qa, "")); r["code"] != "invalid_field" {
		t.Errorf("run with an empty tool_use_id: %v", r)
	}
	// The allow is still there for its own connection, and spent exactly once
	// even when two runs race for it.
	a.send(strings.Replace(runFrame(qa, "toolu_a"), `"id":"r"`, `"id":"r1"`, 1))
	a.send(strings.Replace(runFrame(qa, "toolu_a"), `"id":"r"`, `"id":"r2"`, 1))
	var results, denied int
	for results+denied < 2 {
		r := a.recv()
		switch {
		case r["type"] == "output":
		case r["type"] == "run_result":
			results++
		case r["code"] == "run_denied" && r["rule"] == "run.no_prior_allow":
			denied++
		default:
			t.Fatalf("racing runs: unexpected %v", r)
		}
	}
	if results != 1 || denied != 1 {
		t.Errorf("two racing runs on one allow: %d ran, %d refused; want 1 and 1", results, denied)
	}
	// A closed query's allows die with it.
	allow(a, qa2, "toolu_closed")
	a.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, qa2))
	if r := a.do(runFrame(qa2, "toolu_closed")); r["code"] != "unknown_query" {
		t.Errorf("run in a closed query: %v", r)
	}
	fr.mu.Lock()
	ran := len(fr.specs)
	fr.mu.Unlock()
	if ran != 1 {
		t.Errorf("the runner ran %d specs, want exactly 1", ran)
	}
}

func TestFloodedAllowsForgetTheOldestAndFailClosed(t *testing.T) {
	t.Parallel()
	fr := &fakeRunner{}
	h := advStart(t, fr)
	c := h.connect(t)
	q := c.open("")
	const n = 1025 // one more than a query remembers
	// Decisions of one batch are evaluated concurrently, in any order; the
	// first and the last are sent alone so that they are the oldest and the
	// newest allow.
	allow := func(from, to int) {
		for j := from; j < to; j++ {
			c.send(fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":%q,"tool_input":{"language":"python","code":"x"},"tool_use_id":"toolu_%d","mcp_server":%s}`, q, wire.SandboxTool, j, sdkServer))
		}
		for j := from; j < to; j++ {
			if r := c.recv(); r["decision"] != "allow" {
				t.Fatalf("decide %d: %v", j, r)
			}
		}
	}
	allow(0, 1)
	const batch = 32 // below the in-flight limit
	for i := 1; i < n-1; i += batch {
		allow(i, min(i+batch, n-1))
	}
	allow(n-1, n)
	run := func(id string) map[string]any {
		return c.do(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":%q,"language":"python","code":"x"}`, q, id))
	}
	if r := run("toolu_0"); r["code"] != "run_denied" || r["rule"] != "run.no_prior_allow" {
		t.Errorf("the oldest allow, pushed out: %v", r)
	}
	if r := run(fmt.Sprintf("toolu_%d", n-1)); r["type"] != "output" {
		t.Errorf("the newest allow: %v", r)
	}
}

// TestTheRunIsDecidedOnItsOwnCode plays a client that gets an allow for
// harmless code and then sends a run with other code under the same
// tool_use_id: the sidecar decides the run's own input again, so an
// operator's rule on the code still holds.
func TestTheRunIsDecidedOnItsOwnCode(t *testing.T) {
	t.Parallel()
	fr := &fakeRunner{}
	h := startWithRego(t, fr, `package gatekeeper

deny contains {"rule": "team.no_sockets", "reason": "sandboxed code may not use sockets"} if {
	input.tool_name == "mcp__sandboxed_code__run"
	regex.match(`+"`"+`\bimport\s+socket\b`+"`"+`, input.tool_input.code)
}
`)
	c := h.connect(t)
	q := c.open("")
	if d := c.decide(q, wire.SandboxTool, `{"language":"python","code":"print(1)"}`, "toolu_swap", sdkServer); d["decision"] != "allow" {
		t.Fatalf("decide: %v", d)
	}
	r := c.do(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":"toolu_swap","language":"python","code":"import socket\nsocket.create_connection(('192.0.2.1', 80))"}`, q))
	if r["code"] != "run_denied" || r["rule"] != "team.no_sockets" {
		t.Fatalf("run with swapped code: %v", r)
	}
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if len(fr.specs) != 0 {
		t.Errorf("the runner ran %d specs, want none", len(fr.specs))
	}
}

func TestAnOversizedFrameClosesOnlyItsConnection(t *testing.T) {
	t.Parallel()
	fr := &fakeRunner{}
	h := start(t, options{maxFrame: 8192, runner: fr})
	good, bad := h.connect(t), h.connect(t)
	q := good.open("")
	if d := good.decide(q, wire.SandboxTool, `{"language":"python","code":"x"}`, "toolu_keep", sdkServer); d["decision"] != "allow" {
		t.Fatalf("decide: %v", d)
	}
	bad.open("")
	bad.send(fmt.Sprintf(`{"type":"decide","id":"x","query_id":"q","event":"PreToolUse","tool_name":"Read","tool_input":{"pad":%q},"tool_use_id":"t"}`, strings.Repeat("a", 9000)))
	_ = bad.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := bad.ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
		t.Fatalf("the oversized frame's connection: %v, want close 1009", err)
	}
	if r := good.do(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":"toolu_keep","language":"python","code":"x"}`, q)); r["type"] != "output" {
		t.Fatalf("the other connection's allowed run: %v", r)
	}
}

func TestAdversarialConnect(t *testing.T) {
	t.Parallel()
	h := start(t, options{origins: []string{"https://ok.example"}})
	bearer := "Bearer " + h.token
	tests := []struct {
		name   string
		header http.Header
		url    string
		status int
	}{
		{"half of the token", http.Header{"Authorization": {"Bearer " + h.token[:len(h.token)/2]}}, "", http.StatusUnauthorized},
		{"the token with a character more", http.Header{"Authorization": {bearer + "x"}}, "", http.StatusUnauthorized},
		{"the token with two spaces after Bearer", http.Header{"Authorization": {"Bearer  " + h.token}}, "", http.StatusUnauthorized},
		{"the token under another scheme", http.Header{"Authorization": {"Basic " + h.token}}, "", http.StatusUnauthorized},
		{"a wrong token first and the right one second", http.Header{"Authorization": {"Bearer nope", bearer}}, "", http.StatusUnauthorized},
		{"the token in the query string", http.Header{}, "?token=" + h.token, http.StatusUnauthorized},
		{"the token as a subprotocol", http.Header{"Sec-WebSocket-Protocol": {h.token}}, "", http.StatusUnauthorized},
		{"the allowed origin in another case", http.Header{"Authorization": {bearer}, "Origin": {"https://OK.example"}}, "", http.StatusForbidden},
		{"the allowed origin with a trailing slash", http.Header{"Authorization": {bearer}, "Origin": {"https://ok.example/"}}, "", http.StatusForbidden},
		{"the allowed origin as a prefix of another host", http.Header{"Authorization": {bearer}, "Origin": {"https://ok.example.evil.example"}}, "", http.StatusForbidden},
		{"the opaque origin null", http.Header{"Authorization": {bearer}, "Origin": {"null"}}, "", http.StatusForbidden},
		{"the allowed origin over http", http.Header{"Authorization": {bearer}, "Origin": {"http://ok.example"}}, "", http.StatusForbidden},
	}
	for _, tc := range tests {
		d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", h.sock)
		}}
		ws, resp, err := d.DialContext(t.Context(), "ws://gatekeeper/v1/ws"+tc.url, tc.header)
		if ws != nil {
			ws.Close()
		}
		if resp == nil || resp.StatusCode != tc.status {
			t.Errorf("%s: response %v (err %v), want %d", tc.name, resp, err, tc.status)
		}
	}
}

// startWithRego is start with an operator rego directory holding one module.
func startWithRego(t *testing.T, r server.Runner, module string) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{dir: dir, sock: filepath.Join(dir, "gk.sock"), auditPath: filepath.Join(dir, "audit.jsonl")}
	must(t, os.MkdirAll(filepath.Join(dir, "ws"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "rego.d"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "rego.d", "team.rego"), []byte(module), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(adversarialPolicy), 0o644))
	quiet := slog.New(slog.DiscardHandler)
	eng, err := gate.New(t.Context(), gate.Config{PolicyFile: filepath.Join(dir, "policy.yaml"), RegoDir: filepath.Join(dir, "rego.d"), Home: dir, Logger: quiet})
	must(t, err)
	h.audit, err = audit.Open(h.auditPath, audit.Options{})
	must(t, err)
	t.Cleanup(func() { h.audit.Close() })
	h.token, err = server.LoadOrCreateToken(filepath.Join(dir, "token"))
	must(t, err)
	h.srv, err = server.New(server.Config{Engine: eng, Auditor: h.audit, Runner: r, Token: h.token, Logger: quiet})
	must(t, err)
	ln, err := server.Listen("unix://"+h.sock, false)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := h.srv.Serve(ctx, ln); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return h
}
