package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
		connected := regexp.MustCompile(`msg="mcp server connected" mcp_server=records transport=stdio tools=11 pid=(\d+)`)
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
