package client_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/client"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want client.Endpoint
		bad  bool
	}{
		{in: "unix:///run/gk.sock", want: client.Endpoint{Network: "unix", Addr: "/run/gk.sock"}},
		{in: "/run/gk.sock", want: client.Endpoint{Network: "unix", Addr: "/run/gk.sock"}},
		{in: "tcp://127.0.0.1:7777", want: client.Endpoint{Network: "tcp", Addr: "127.0.0.1:7777"}},
		{in: "ws://127.0.0.1:7777/v1/ws", want: client.Endpoint{Network: "tcp", Addr: "127.0.0.1:7777"}},
		{in: "http://127.0.0.1:7778/v1/claude-code/hook", want: client.Endpoint{Network: "tcp", Addr: "127.0.0.1:7778"}},
		{in: "unix://run/gk.sock", bad: true},
		{in: "tcp://127.0.0.1", bad: true},
		{in: "https://example.com:443", bad: true},
		{in: "", bad: true},
	}
	for _, tc := range tests {
		got, err := client.ParseURL(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// echoRunner stands in for Docker; it claims nothing about isolation.
type echoRunner struct{}

func (echoRunner) Run(_ context.Context, s runner.Spec) (runner.Result, error) {
	return runner.Result{RunID: s.RunID, Reason: runner.Exited, Stdout: s.Code, Duration: time.Millisecond}, nil
}

// TestSessionAttachesAndRunsInTheCLISessionsQuery runs the client against
// the real server: Hold attests the session, so the hook endpoint trusts
// its managed sandboxed_code server; Run then runs the tool use the hook
// allowed, and only that one.
func TestSessionAttachesAndRunsInTheCLISessionsQuery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "ws"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte("version: 1\nworkspace_root: ./ws\ntools:\n  allow: [mcp__sandboxed_code__run]\n"), 0o644))
	quiet := slog.New(slog.DiscardHandler)
	eng, err := gate.New(t.Context(), gate.Config{PolicyFile: filepath.Join(dir, "policy.yaml"), Logger: quiet})
	must(t, err)
	alog, err := audit.Open(filepath.Join(dir, "audit.jsonl"), audit.Options{})
	must(t, err)
	t.Cleanup(func() { alog.Close() })
	srv, err := server.New(server.Config{Engine: eng, Auditor: alog, Runner: echoRunner{}, Token: "tok", Logger: quiet})
	must(t, err)
	sock := filepath.Join(dir, "gk.sock")
	ln, err := server.Listen("unix://"+sock, false)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	ep := client.Endpoint{Network: "unix", Addr: sock}
	sess := &client.Session{Endpoint: ep, Token: func() (string, error) { return "tok", nil }, ID: "sess-1", Client: "test"}
	hook := func(toolUseID string) string {
		in := `{"hook_event_name":"PreToolUse","session_id":"sess-1","tool_name":"mcp__sandboxed_code__run","tool_input":{"language":"python","code":"x"},"tool_use_id":"` + toolUseID + `","mcp_server":{"name":"sandboxed_code","source":"enterprise"}}`
		out, err := ep.Hook(t.Context(), "tok", []byte(in))
		must(t, err)
		return string(out)
	}
	if out := hook("toolu_0"); !strings.Contains(out, "mcp.untrusted_sandboxed_code") {
		t.Fatalf("before the session is held: %s", out)
	}
	holdCtx, stopHold := context.WithCancel(t.Context())
	attached := make(chan struct{})
	go sess.Hold(holdCtx, 10*time.Millisecond, func(string) { close(attached) }, func(error) {})
	<-attached
	if out := hook("toolu_1"); out != "{}" {
		t.Fatalf("once held: %s, want no opinion (an allow)", out)
	}
	res, err := sess.Run(t.Context(), "toolu_1", client.RunRequest{Language: "python", Code: "print('hi')"})
	if err != nil || res.Stdout != "print('hi')" || res.Reason != "exited" {
		t.Fatalf("run: %+v, %v", res, err)
	}
	_, err = sess.Run(t.Context(), "toolu_1", client.RunRequest{Language: "python", Code: "again"})
	if re, ok := client.IsRefused(err); !ok || re.Rule != "run.no_prior_allow" {
		t.Fatalf("a second run on one allow: %v", err)
	}
	stopHold()
	if _, err := (&client.Session{Endpoint: ep, Token: func() (string, error) { return "wrong", nil }, ID: "s"}).Run(t.Context(), "t", client.RunRequest{Language: "sh"}); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("a wrong token: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
