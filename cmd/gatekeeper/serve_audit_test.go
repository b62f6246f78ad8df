package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/internal/tmpfs"
)

// wsClient is a raw protocol client of a served sidecar, helloed.
type wsClient struct {
	t  *testing.T
	ws *websocket.Conn
}

// connect dials the sidecar at sock with the token in tokenFile.
func connect(t *testing.T, sock, tokenFile string) *wsClient {
	t.Helper()
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	ws, _, err := d.DialContext(t.Context(), "ws://gatekeeper/v1/ws", map[string][]string{"Authorization": {"Bearer " + strings.TrimSpace(string(token))}})
	if err != nil {
		t.Fatalf("dial the sidecar: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	c := &wsClient{t: t, ws: ws}
	if r := c.do(`{"type":"hello","id":"h","v":1,"client":"audit-test"}`); r["type"] != "welcome" {
		t.Fatalf("hello: %v", r)
	}
	return c
}

func (c *wsClient) do(frame string) map[string]any {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		c.t.Fatal(err)
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		c.t.Fatal(err)
	}
	return m
}

// readFile asks for a Read of file, which the test policy allows inside
// its workspace.
func (c *wsClient) readFile(query, file string) map[string]any {
	c.t.Helper()
	return c.do(fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":%q},"tool_use_id":"t"}`, query, file))
}

// serveAudit runs `gatekeeper serve` on the test policy with the extra
// flags and returns its socket, its token file, the policy's workspace,
// and a stop function that ends it and returns its error.
func serveAudit(t *testing.T, args ...string) (sock, token, ws string, stop func() error) {
	t.Helper()
	dir, file := writePolicy(t, cliPolicy)
	sock, token = filepath.Join(dir, "gk.sock"), filepath.Join(dir, "token")
	ctx, cancel := context.WithCancel(t.Context())
	logs := &syncWriter{b: &strings.Builder{}}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", "unix://" + sock, "--policy", file, "--no-runner",
			"--token-file", token, "--watch-interval", "0"}, args...), strings.NewReader(""), logs, logs)
	}()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { stop() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v; log:\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar did not listen within 10s; log:\n%s", logs.String())
		}
	}
	return sock, token, filepath.Join(dir, "ws"), stop
}

func TestServeRotatesTheAuditLogAndCheckpointsItsHead(t *testing.T) {
	// The flags come from the environment, so not parallel.
	dir := t.TempDir()
	logPath := filepath.Join(dir, "audit.jsonl")
	heads := filepath.Join(dir, "head.jsonl")
	t.Setenv("GATEKEEPER_AUDIT_MAX_BYTES", "2k")
	t.Setenv("GATEKEEPER_AUDIT_COMPRESS", "true")
	t.Setenv("GATEKEEPER_AUDIT_KEEP", "3")
	t.Setenv("GATEKEEPER_AUDIT_HEAD", heads)
	t.Setenv("GATEKEEPER_AUDIT_HEAD_INTERVAL", "5ms")
	sock, token, ws, stop := serveAudit(t, "--audit-log", logPath)
	c := connect(t, sock, token)
	q := c.do(`{"type":"open_query","id":"o"}`)["query_id"].(string)
	for i := range 40 {
		if r := c.readFile(q, filepath.Join(ws, fmt.Sprintf("f%d.txt", i))); r["decision"] != "allow" {
			t.Fatalf("decision %d = %v, want allow", i, r)
		}
	}
	c.ws.Close()
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	files, err := audit.Files(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("with --audit-keep 3 the log has %d files, want 3 rotated and the active one", len(files))
	}
	for _, f := range files[:len(files)-1] {
		if !f.Compressed {
			t.Errorf("%s is not compressed, with --audit-compress", f.Path)
		}
	}
	out, err := cli(t, "", "audit", "verify", "--head", heads, logPath)
	if err != nil {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
	for _, want := range []string{"chain intact; it starts after audit.jsonl.", "removed by retention", "checkpoints of " + heads + " match; the newest, seq "} {
		if !strings.Contains(out, want) {
			t.Errorf("audit verify output does not contain %q:\n%s", want, out)
		}
	}
}

func TestServeDeniesWhileTheAuditDiskIsFull(t *testing.T) {
	t.Parallel()
	disk := tmpfs.Mount(t, 256<<10)
	logPath := filepath.Join(disk, "audit.jsonl")
	sock, token, ws, stop := serveAudit(t, "--audit-log", logPath, "--audit-max-bytes", "64k")
	c := connect(t, sock, token)
	q := c.do(`{"type":"open_query","id":"o"}`)["query_id"].(string)
	file := filepath.Join(ws, "a.txt")
	if r := c.readFile(q, file); r["decision"] != "allow" {
		t.Fatalf("decision before the disk filled = %v, want allow", r)
	}
	full := tmpfs.Fill(t, disk)
	// The file's last page takes a few more lines; then every decision is
	// a deny.
	denied := 0
	for i := 0; i < 40; i++ {
		r := c.readFile(q, file)
		if r["decision"] == "allow" {
			if denied > 0 {
				t.Fatalf("decision %d on a full disk = allow after a deny", i)
			}
			continue
		}
		denied++
		if r["decision"] != "deny" || r["rule"] != "gatekeeper.error" || r["reason"] != "gatekeeper could not write its audit log, so the call is denied" {
			t.Fatalf("decision on a full disk = %v, want a deny by gatekeeper.error saying the audit log could not be written", r)
		}
	}
	if denied < 20 {
		t.Fatalf("%d of 40 decisions on a full disk were denied, want all after the last page filled", denied)
	}
	full.Free(-1)
	if r := c.readFile(q, file); r["decision"] != "allow" {
		t.Fatalf("decision once space returned = %v, want allow", r)
	}
	c.ws.Close()
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	out, err := cli(t, "", "audit", "verify", logPath)
	if err != nil || !strings.Contains(out, "chain intact") {
		t.Fatalf("audit verify after the disk filled and emptied: %v\n%s", err, out)
	}
}

func TestServeCheckpointsToSyslog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := filepath.Join(dir, "syslog.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	logPath := filepath.Join(dir, "audit.jsonl")
	_, _, _, stop := serveAudit(t, "--audit-log", logPath, "--audit-head", "syslog+unixgram://"+addr)
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	// Start and shutdown each send a checkpoint of the empty log.
	var got strings.Builder
	buf := make([]byte, 4096)
	for range 2 {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("read the syslog message: %v", err)
		}
		got.Write(buf[:n])
		got.WriteByte('\n')
	}
	msgs := got.String()
	heads, err := audit.ReadHeads(strings.NewReader(msgs), "syslog")
	if err != nil || len(heads) != 2 {
		t.Fatalf("syslog got %q: %d checkpoints, %v; want 2", msgs, len(heads), err)
	}
	if !strings.Contains(msgs, "gatekeeper") || heads[1].Log != logPath || heads[1].Seq != 0 {
		t.Errorf("syslog messages %q, want them tagged gatekeeper with a checkpoint of %s at seq 0", msgs, logPath)
	}
}

func TestServeRefusesBadAuditFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "a size without a number", args: []string{"--audit-max-bytes", "lots"}, wantErr: `invalid value "lots" for flag -audit-max-bytes`},
		{name: "a negative keep", args: []string{"--audit-keep", "-1"}, wantErr: "--audit-keep -1: want 0 or more"},
		{name: "a head in a missing directory", args: []string{"--audit-head", "/nonexistent/dir/head.jsonl"}, wantErr: "--audit-head /nonexistent/dir/head.jsonl: open /nonexistent/dir/head.jsonl: no such file or directory"},
		{name: "a syslog URL without an address", args: []string{"--audit-head", "syslog+tcp://"}, wantErr: "want syslog://HOST:PORT"},
		// Checkpoints in the log itself would break its chain.
		{name: "a head that is the audit log", args: []string{"--audit-head", "$DIR/audit.jsonl"}, wantErr: "--audit-head $DIR/audit.jsonl: that is a file of the audit log"},
		{name: "a head that is a rotated file of the audit log", args: []string{"--audit-head", "$DIR/./audit.jsonl.000000000001"}, wantErr: "that is a file of the audit log"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, file := writePolicy(t, cliPolicy)
			args := []string{"serve", "--listen", "unix://" + filepath.Join(dir, "gk.sock"), "--policy", file, "--no-runner",
				"--token-file", filepath.Join(dir, "token"), "--audit-log", filepath.Join(dir, "audit.jsonl")}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "$DIR", dir))
			}
			out, err := cli(t, "", args...)
			if wantErr := strings.ReplaceAll(tc.wantErr, "$DIR", dir); err == nil || !strings.Contains(err.Error()+out, wantErr) {
				t.Errorf("serve %v = %v, want an error containing %q; output:\n%s", tc.args, err, wantErr, out)
			}
		})
	}
}
