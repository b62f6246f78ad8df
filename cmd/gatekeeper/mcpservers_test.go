package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

// TestServeConnectsMCPServers: `gatekeeper serve` starts the policy's MCP
// servers, logs each one's state (a down one does not stop it), and stops
// them when it ends.
func TestServeConnectsMCPServers(t *testing.T) {
	t.Parallel()
	bin, err := mcptest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	dir, file := writePolicy(t, cliPolicy+fmt.Sprintf(`mcp_servers:
  records:
    description: test records
    command: [%q, -records, "5"]
    env: {API_TOKEN: {from_file: %q}}
  gone:
    url: %s
`, bin, secret, dead.URL))
	var pid int
	t.Run("serve", func(t *testing.T) {
		revision, logs := serveInProcess(t, dir, file)
		waitFor(t, "the sidecar", revision, func(r string) bool { return r != "" }, logs)
		connected := regexp.MustCompile(`msg="mcp server connected" mcp_server=records transport=stdio tools=12 pid=(\d+)`)
		deadline := time.Now().Add(30 * time.Second)
		for ; time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			log := logs.String()
			if m := connected.FindStringSubmatch(log); m != nil && strings.Contains(log, `msg="mcp server unavailable at start; its calls fail until it connects" mcp_server=gone`) {
				pid, _ = strconv.Atoi(m[1])
				break
			}
		}
		if pid == 0 {
			t.Fatalf("no server state logged:\n%s", logs)
		}
		if strings.Contains(logs.String(), "t0ken") {
			t.Errorf("the credential is in the log:\n%s", logs)
		}
	})
	if pid == 0 {
		return
	}
	// serve has returned: its server process is gone.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
	}
	t.Errorf("MCP server process %d outlived serve", pid)
}

// TestRunToolServers: gatekeeper run gets a client to the policy's MCP
// servers only when the policy declares servers and its code may call
// one; the client is the same the sidecar's runs call through.
func TestRunToolServers(t *testing.T) {
	t.Parallel()
	const servers = "mcp_servers:\n  records: {url: \"http://127.0.0.1:1/mcp\"}\n  search: {url: \"http://127.0.0.1:2/mcp\"}\n"
	const callable = "code_calls:\n  callable: {records: [lookup]}\n"
	for _, tc := range []struct {
		name, policy string
		want         []string
	}{
		{"no servers", cliPolicy, nil},
		{"servers no code may call", cliPolicy + servers, nil},
		{"servers code may call", cliPolicy + servers + callable, []string{"records", "search"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, file := writePolicy(t, tc.policy)
			eng, err := gate.New(t.Context(), gate.Config{PolicyFile: file, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			q, err := eng.OpenQuery(t.Context(), "cli", nil)
			if err != nil {
				t.Fatal(err)
			}
			eff, err := q.Effective(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			s, err := runToolServers(eff, quietLogger())
			if err != nil {
				t.Fatal(err)
			}
			if s == nil {
				if tc.want != nil {
					t.Fatalf("no servers, want %v", tc.want)
				}
				return
			}
			defer s.Close()
			if got := s.Names(); !slices.Equal(got, tc.want) {
				t.Errorf("servers %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLogCodeCalls: gatekeeper run, which has no audit log, writes each
// nested call as a line with its decision, rule and server.
func TestLogCodeCalls(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := logCodeCalls{slog.New(slog.NewTextHandler(&b, nil))}.Write(audit.Record{
		RunID: "r_1", CallSeq: 2, Server: "records", Tool: "lookup", Decision: "deny", Rule: "ops.no_vip", ErrorKind: "denied"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"msg=code_call", "run_id=r_1", "seq=2", "server=records", "tool=lookup", "decision=deny", "rule=ops.no_vip", "error_kind=denied"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the line lacks %s: %s", want, b.String())
		}
	}
}
