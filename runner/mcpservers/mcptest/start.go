package mcptest

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
)

// Build builds the stdio server program (mcptestserver) into dir and
// returns its path. It takes a few seconds the first time (the go build
// cache makes later builds quick); a test binary builds it once.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "mcptestserver")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest/mcptestserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &BuildError{Err: err, Output: string(out)}
	}
	return bin, nil
}

// BuildError is a failed Build, with the compiler's output.
type BuildError struct {
	Err    error
	Output string
}

func (e *BuildError) Error() string { return "build mcptestserver: " + e.Err.Error() + "\n" + e.Output }

// Stdio returns the configuration of a stdio server named name, run from
// the program bin (see Build), holding records records, with env.
func Stdio(bin, name string, records int, env map[string]mcpservers.Value) mcpservers.Config {
	return mcpservers.Config{
		Name:        name,
		Description: "test records over stdio",
		Command:     []string{bin, "-name", name, "-records", strconv.Itoa(records)},
		Env:         env,
	}
}

// HTTP starts a streamable HTTP server named name on loopback holding
// records records, stopped at the test's end, and returns its
// configuration with headers.
func HTTP(t testing.TB, name string, records int, headers map[string]mcpservers.Value) mcpservers.Config {
	t.Helper()
	stop := make(chan struct{})
	s := NewServer(Options{
		Name:    name,
		Records: records,
		Stop:    stop,
		Secret: func(req *mcp.CallToolRequest, name string) (string, bool) {
			if req.Extra == nil || req.Extra.Header == nil {
				return "", false
			}
			v := req.Extra.Header.Values(name)
			if len(v) == 0 {
				return "", false
			}
			return v[0], true
		},
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		close(stop)
		srv.CloseClientConnections()
		srv.Close()
	})
	return mcpservers.Config{Name: name, Description: "test records over HTTP", URL: srv.URL, Headers: headers}
}
