package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsSidecar is `gatekeeper serve` run in-process, with one helloed
// connection and one open query.
type wsSidecar struct {
	ws    *websocket.Conn
	query string
}

func startWSSidecar(t *testing.T, policyFile string, extra ...string) *wsSidecar {
	t.Helper()
	dir := filepath.Dir(policyFile)
	sock := filepath.Join(dir, "gk.sock")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", "unix://" + sock, "--policy", policyFile, "--no-runner",
			"--token-file", filepath.Join(dir, "token"), "--audit-log", filepath.Join(dir, "audit.jsonl"),
			"--watch-interval", "0"}, extra...), strings.NewReader(""), io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return dialSidecar(t, sock, filepath.Join(dir, "token"), 10*time.Second, nil)
}

// dialSidecar connects to the sidecar listening on the Unix socket sock
// with the token in tokenFile, waiting up to wait for both, says hello and
// opens a query; log, when not nil, is shown if it cannot connect.
func dialSidecar(t *testing.T, sock, tokenFile string, wait time.Duration, log fmt.Stringer) *wsSidecar {
	t.Helper()
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	var ws *websocket.Conn
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		token, err := os.ReadFile(tokenFile)
		if err == nil {
			ws, _, err = d.DialContext(t.Context(), "ws://gk/v1/ws", http.Header{"Authorization": {"Bearer " + strings.TrimSpace(string(token))}})
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect to the sidecar: %v\n%v", err, log)
		}
	}
	t.Cleanup(func() { ws.Close() })
	s := &wsSidecar{ws: ws}
	if r := s.do(t, `{"type":"hello","id":"h","v":1}`); r["type"] != "welcome" {
		t.Fatalf("hello: %v", r)
	}
	r := s.do(t, `{"type":"open_query","id":"o"}`)
	if r["type"] != "query_opened" {
		t.Fatalf("open_query: %v", r)
	}
	s.query = r["query_id"].(string)
	return s
}

func (s *wsSidecar) do(t *testing.T, frame string) map[string]any {
	t.Helper()
	if err := s.ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	_ = s.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := s.ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDecideReadsTheCallAsServeDoes pins that `gatekeeper decide` (a rule
// author's dry run) and `gatekeeper serve` judge the same call: each case
// is sent to decide on stdin and, with type, id and query_id added, to a
// real sidecar as a decide frame. Both refuse it with the same error code,
// or both reach the same decision by the same rule. A reader such as
// encoding/json, which matches keys case-insensitively, keeps the last of
// two equal keys and ignores data after the object, would decide each of
// the refused cases below, about another call than the one serve refuses.
func TestDecideReadsTheCallAsServeDoes(t *testing.T) {
	t.Setenv("HOME", "/home/nobody")
	_, file := writePolicy(t, cliPolicy)
	side := startWSSidecar(t, file)
	tests := []struct {
		name, call string
		code       string // the error code both give; "" when both decide
		rule       string // the rule both decide by
	}{
		{"keys differing only in case", `{"event":"PreToolUse","tool_name":"Read","Tool_Name":"Bash","tool_input":{"file_path":"a.txt"},"tool_use_id":"t"}`, "duplicate_key", ""},
		{"a key in upper case", `{"event":"PreToolUse","TOOL_NAME":"Bash","tool_input":{},"tool_use_id":"t"}`, "unknown_field", ""},
		{"a repeated key", `{"event":"PreToolUse","tool_name":"Read","tool_name":"Bash","tool_input":{},"tool_use_id":"t"}`, "duplicate_key", ""},
		{"a repeated key inside tool_input", `{"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"a.txt","file_path":"~/.ssh/id_rsa"},"tool_use_id":"t"}`, "duplicate_key", ""},
		{"an escaped repeated key", `{"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"~/.ssh/id_rsa","file_p\u0061th":"a.txt"},"tool_use_id":"t"}`, "duplicate_key", ""},
		{"case-variant keys of mcp_server", `{"event":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t","mcp_server":{"name":"a","Name":"b","source":"sdk"}}`, "duplicate_key", ""},
		{"a second object after the call", `{"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"a.txt"},"tool_use_id":"t"}{"tool_name":"Bash"}`, "malformed_frame", ""},
		{"a null mcp_server", `{"event":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t","mcp_server":null}`, "invalid_field", ""},
		{"an event in another case", `{"event":"pretooluse","tool_name":"Read","tool_input":{},"tool_use_id":"t"}`, "invalid_field", ""},
		{"a tool_input that is a string", `{"event":"PreToolUse","tool_name":"Read","tool_input":"{}","tool_use_id":"t"}`, "invalid_field", ""},
		{"a relative cwd", `{"event":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t","cwd":"ws"}`, "invalid_field", ""},
		{"case-variant keys inside tool_input are data", `{"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"a.txt","File_Path":"~/.ssh/id_rsa"},"tool_use_id":"t"}`, "", "host_fs.inside_workspace"},
		{"a denied read", `{"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"~/.ssh/id_rsa"},"tool_use_id":"t"}`, "", "host_fs.deny_glob"},
		{"a denied tool", `{"event":"canUseTool","tool_name":"Bash","tool_input":{"command":"id"},"tool_use_id":""}`, "", "tools.deny_list"},
		{"a malformed tool name", `{"event":"PreToolUse","tool_name":"Read\u200b","tool_input":{"file_path":"a.txt"},"tool_use_id":"t"}`, "", "tools.malformed_name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := cli(t, tc.call, "decide", "--policy", file)
			code := 0
			if e, ok := err.(exitError); ok {
				code = int(e)
			} else if err != nil {
				t.Fatalf("decide: %v", err)
			}
			frame := `{"type":"decide","id":"d","query_id":"` + side.query + `",` + strings.TrimPrefix(tc.call, "{")
			r := side.do(t, frame)
			if tc.code != "" {
				if code != 2 || !strings.Contains(out, "gatekeeper decide: "+tc.code+": ") {
					t.Errorf("decide: exit %d, %q; want exit 2 naming %s", code, out, tc.code)
				}
				if r["type"] != "error" || r["code"] != tc.code {
					t.Errorf("serve: %v; want error %s", r, tc.code)
				}
				return
			}
			var res decideResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("decide output %q: %v", out, err)
			}
			if res.Rule != tc.rule || r["rule"] != tc.rule || res.Decision != r["decision"] {
				t.Errorf("decide: %s by %s; serve: %v by %v; want both by %s", res.Decision, res.Rule, r["decision"], r["rule"], tc.rule)
			}
		})
	}
}
