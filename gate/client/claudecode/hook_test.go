package claudecode

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/client"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// fakeHookEndpoint serves h at the hook path on a Unix socket; it stands in
// for the sidecar to test how the command hook treats each kind of answer
// (the CLI tests run the real sidecar).
func fakeHookEndpoint(t *testing.T, h http.HandlerFunc) client.Endpoint {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "gk.sock")
	ln, err := net.Listen("unix", sock)
	must(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.HookPath, h)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return client.Endpoint{Network: "unix", Addr: sock}
}

func TestRunHookFailsClosed(t *testing.T) {
	t.Parallel()
	const answer = `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}`
	const input = `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash","tool_input":{},"tool_use_id":"t"}`
	token := func() (string, error) { return "tok", nil }
	tests := []struct {
		name    string
		handler http.HandlerFunc
		// sidecar overrides the endpoint (an unreachable one).
		sidecar *client.Endpoint
		token   func() (string, error)
		stdin   string
		// wantCode 0 prints wantOut; 2 denies naming wantErr.
		wantCode         int
		wantOut, wantErr string
	}{
		{name: "the sidecar's answer is printed", handler: func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if r.Header.Get("Authorization") != "Bearer tok" || string(body) != input {
				http.Error(w, "bad request", 400)
				return
			}
			io.WriteString(w, answer)
		}, stdin: input, wantCode: 0, wantOut: answer + "\n"},
		{name: "a 401 denies", handler: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "wrong token", 401) }, stdin: input, wantCode: 2, wantErr: "HTTP 401: wrong token"},
		{name: "a 400 denies", handler: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "unreadable", 400) }, stdin: "x", wantCode: 2, wantErr: "HTTP 400"},
		{name: "an answer that is not JSON denies", handler: func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "allow") }, stdin: input, wantCode: 2, wantErr: "not a JSON object"},
		{name: "an answer that is a JSON array denies", handler: func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "[]") }, stdin: input, wantCode: 2, wantErr: "not a JSON object"},
		{name: "an empty answer denies", handler: func(w http.ResponseWriter, _ *http.Request) {}, stdin: input, wantCode: 2, wantErr: "not a JSON object"},
		{name: "a sidecar that does not answer in time denies", handler: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, stdin: input, wantCode: 2, wantErr: "no answer within"},
		{name: "an unreachable sidecar denies", sidecar: &client.Endpoint{Network: "unix", Addr: "/nonexistent/gk.sock"}, stdin: input, wantCode: 2, wantErr: "/nonexistent/gk.sock"},
		{name: "no token denies", handler: func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, answer) }, token: func() (string, error) { return "", errors.New("no token file") }, stdin: input, wantCode: 2, wantErr: "no token file"},
		{name: "an input over the limit denies", handler: func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, answer) }, stdin: strings.Repeat(" ", maxHookInput+1), wantCode: 2, wantErr: "larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := HookOptions{Token: token, Timeout: 2 * time.Second}
			if tc.sidecar != nil {
				o.Sidecar = *tc.sidecar
			} else {
				o.Sidecar = fakeHookEndpoint(t, tc.handler)
			}
			if tc.token != nil {
				o.Token = tc.token
			}
			var out, errb bytes.Buffer
			code := RunHook(context.Background(), o, strings.NewReader(tc.stdin), &out, &errb)
			if code != tc.wantCode || out.String() != tc.wantOut {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and stdout %q", code, out.String(), errb.String(), tc.wantCode, tc.wantOut)
			}
			if tc.wantCode == 2 && (!strings.Contains(errb.String(), tc.wantErr) || !strings.Contains(errb.String(), "so this tool call is denied [gatekeeper rule: "+UnavailableRule+"]")) {
				t.Errorf("stderr %q does not deny naming %q", errb.String(), tc.wantErr)
			}
		})
	}
}
