package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// serveUI runs `gatekeeper serve` in-process with extra args and returns
// what it printed once it printed GATEKEEPER_URL and want, the line the
// test needs.
func serveUI(t *testing.T, listen, want string, extra ...string) string {
	t.Helper()
	dir, file := writePolicy(t, cliPolicy)
	if listen == "" {
		listen = "unix://" + filepath.Join(dir, "gk.sock")
	}
	ctx, cancel := context.WithCancel(t.Context())
	logs := &syncWriter{b: &strings.Builder{}}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", listen, "--policy", file, "--no-runner",
			"--token-file", filepath.Join(dir, "token"), "--audit-log", filepath.Join(dir, "audit.jsonl"), "--watch-interval", "0"}, extra...),
			strings.NewReader(""), io.Discard, logs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s := logs.String(); strings.Contains(s, "GATEKEEPER_URL=") && strings.Contains(s, want) {
			return s
		}
	}
	t.Fatalf("serve printed no GATEKEEPER_URL and %q:\n%s", want, logs.String())
	return ""
}

func TestServeUIOnTCPPrintsAOneTimeLoginThatWorks(t *testing.T) {
	t.Parallel()
	out := serveUI(t, "tcp://127.0.0.1:0", "GATEKEEPER_UI=", "--ui")
	m := regexp.MustCompile(`GATEKEEPER_UI=(http://127\.0\.0\.1:\d+)(/ui/login\?code=[0-9a-f]{64})\n`).FindStringSubmatch(out)
	if m == nil || strings.Contains(out, "GATEKEEPER_URL=ws://127.0.0.1:0") {
		t.Fatalf("serve --ui printed no login address with the real port:\n%s", out)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(m[1] + m[2])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("the printed login address answered %s with cookies %v", resp.Status, resp.Cookies())
	}
	// The cookie opens the data; the /metrics the overview reads is the server's.
	req, _ := http.NewRequest("GET", m[1]+"/ui/api/overview", nil)
	req.AddCookie(resp.Cookies()[0])
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"gatekeeper_decision_duration_seconds"`) {
		t.Fatalf("overview with the session: %s %.300s", resp.Status, body)
	}
}

func TestServeWithoutUIServesNoConsole(t *testing.T) {
	t.Parallel()
	out := serveUI(t, "tcp://127.0.0.1:0", "GATEKEEPER_URL=")
	addr := regexp.MustCompile(`GATEKEEPER_URL=ws://(\S+)`).FindStringSubmatch(out)
	if addr == nil || strings.Contains(out, "GATEKEEPER_UI") {
		t.Fatalf("serve without --ui printed:\n%s", out)
	}
	resp, err := http.Get("http://" + addr[1] + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/ui/ without --ui: %s, want 404", resp.Status)
	}
}

func TestServeUIOnAUnixSocketSaysABrowserNeedsTCP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "gk.sock")
	out := serveUI(t, "unix://"+sock, "a browser needs a TCP address", "--ui")
	if strings.Contains(out, "GATEKEEPER_UI=") || !strings.Contains(out, "a browser needs a TCP address") {
		t.Fatalf("serve --ui on a socket printed:\n%s", out)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Get("http://gk/ui/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the console on the socket, without a token: %s, want 401 (served, and guarded)", resp.Status)
	}
}
