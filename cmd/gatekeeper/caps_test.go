package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// TestServeCapsAreItsFlags: the caps on connections and open queries, and
// the debug endpoints, are wired from serve's flags.
func TestServeCapsAreItsFlags(t *testing.T) {
	t.Parallel()
	dir, file := writePolicy(t, cliPolicy)
	side := startWSSidecar(t, file, "--max-conns", "1", "--max-queries-per-conn", "1", "--debug-endpoints")
	if r := side.do(t, `{"type":"open_query","id":"o2"}`); r["code"] != "too_many_queries" || !strings.Contains(r["message"].(string), "maximum of 1 open queries (--max-queries-per-conn)") {
		t.Errorf("a second query on the connection: %v", r)
	}
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	bearer := http.Header{"Authorization": {"Bearer " + strings.TrimSpace(string(token))}}
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(dir, "gk.sock"))
	}}
	ws, resp, err := d.DialContext(t.Context(), "ws://gk/v1/ws", bearer)
	if ws != nil {
		ws.Close()
	}
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a second connection: %v (%v), want 503", resp, err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.NetDialContext}}
	req, _ := http.NewRequest("GET", "http://gk/debug/pprof/goroutine?debug=1", nil)
	req.Header = bearer
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine: %d %.80q", resp.StatusCode, body)
	}
}
