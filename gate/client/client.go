// Package client is the Go client of the gatekeeper protocol (gate/wire,
// docs/protocol.md), the second client beside the TypeScript one in
// ts-client/: it connects to a running sidecar, which gate/server serves.
// The Claude Code commands use it (gate/client/claudecode): `gatekeeper
// hook` forwards a hook input to the hook endpoint over HTTP, `gatekeeper
// mcp` runs code over the WebSocket protocol in the query of its Claude
// Code session. It speaks the protocol only: it imports gate/wire, never
// the gate's decision code or the runner.
package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/sockdir"
)

// Endpoint is where the sidecar listens.
type Endpoint struct {
	// Network is "unix" or "tcp"; Addr the socket path or host:port.
	Network, Addr string
}

// ParseURL reads a sidecar address as the TypeScript client does:
// unix:///path.sock, a bare absolute socket path, tcp://host:port,
// ws://host:port[/path] or http://host:port[/path] (the path is ignored:
// each request uses its own).
func ParseURL(s string) (Endpoint, error) {
	switch {
	case strings.HasPrefix(s, "unix://"):
		p := strings.TrimPrefix(s, "unix://")
		if !filepath.IsAbs(p) {
			return Endpoint{}, fmt.Errorf("sidecar address %q: want unix:///absolute/path", s)
		}
		return Endpoint{Network: "unix", Addr: p}, nil
	case strings.HasPrefix(s, "/"):
		return Endpoint{Network: "unix", Addr: s}, nil
	case strings.HasPrefix(s, "tcp://"):
		s = "http://" + strings.TrimPrefix(s, "tcp://")
	case strings.HasPrefix(s, "ws://"):
		s = "http://" + strings.TrimPrefix(s, "ws://")
	case strings.HasPrefix(s, "http://"):
	default:
		return Endpoint{}, fmt.Errorf("sidecar address %q: want unix:///path, tcp://host:port, ws://host:port or http://host:port", s)
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Port() == "" {
		return Endpoint{}, fmt.Errorf("sidecar address %q: want host:port", s)
	}
	return Endpoint{Network: "tcp", Addr: u.Host}, nil
}

// String is the endpoint as ParseURL reads it back.
func (e Endpoint) String() string {
	if e.Network == "unix" {
		return "unix://" + e.Addr
	}
	return "tcp://" + e.Addr
}

// dial connects to the endpoint, whatever address the caller asked for.
// A socket in the /tmp default directory is refused, before anything is
// sent, when another user made that directory (internal/sockdir).
func (e Endpoint) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	if dir := filepath.Dir(e.Addr); e.Network == "unix" && dir == sockdir.TmpDefault() {
		if err := sockdir.Check(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sidecar socket %s: %w", e.Addr, err)
		}
	}
	return (&net.Dialer{}).DialContext(ctx, e.Network, e.Addr)
}

// HTTPClient returns a client whose every request goes to the endpoint;
// request URLs should use the host "gatekeeper".
func (e Endpoint) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: e.dial, DisableKeepAlives: true}}
}

// Token returns the bearer token: the content of file (white space around
// it trimmed) when file is not "", else token. An empty result is an error.
func Token(token, file string) (string, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read token file: %w", err)
		}
		token = string(data)
	}
	if token = strings.TrimSpace(token); token == "" {
		return "", errors.New("no token: give --token-file or GATEKEEPER_TOKEN")
	}
	return token, nil
}
