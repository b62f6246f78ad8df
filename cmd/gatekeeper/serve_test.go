package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// servedPolicy runs `gatekeeper serve` in-process on a temporary policy and
// returns the policy file, a function reading the served revision, and the
// sidecar's log.
func servedPolicy(t *testing.T, watch string) (file string, revision func() string, logs *syncWriter) {
	t.Helper()
	dir, file := writePolicy(t, cliPolicy)
	revision, logs = serveInProcess(t, dir, file, "--watch-interval", watch)
	return file, revision, logs
}

// serveInProcess runs `gatekeeper serve` in-process on policy file with
// its socket (gk.sock), token and audit log in dir, and extra flags; it
// returns a function reading the served revision and the sidecar's log.
func serveInProcess(t *testing.T, dir, file string, extra ...string) (revision func() string, logs *syncWriter) {
	t.Helper()
	sock := filepath.Join(dir, "gk.sock")
	ctx, cancel := context.WithCancel(t.Context())
	logs = &syncWriter{b: &strings.Builder{}}
	done := make(chan error, 1)
	args := append([]string{"serve", "--listen", "unix://" + sock, "--policy", file, "--no-runner",
		"--token-file", filepath.Join(dir, "token"), "--audit-log", filepath.Join(dir, "audit.jsonl")}, extra...)
	go func() { done <- run(ctx, args, strings.NewReader(""), io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	revision = func() string {
		resp, err := hc.Get("http://gk/healthz")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		var h struct {
			PolicyRevision string `json:"policy_revision"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&h)
		return h.PolicyRevision
	}
	return revision, logs
}

func waitFor(t *testing.T, what string, revision func() string, ok func(string) bool, logs *syncWriter) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if r := revision(); ok(r) {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; log:\n%s", what, logs.String())
	return ""
}

// TestServeReloadsOnFileChange: a valid change is picked up by the watcher,
// a broken one is refused and the old revision keeps serving.
func TestServeReloadsOnFileChange(t *testing.T) {
	file, revision, logs := servedPolicy(t, "50ms")
	rev0 := waitFor(t, "the sidecar to serve", revision, func(r string) bool { return r != "" }, logs)

	if err := os.WriteFile(file, []byte(cliPolicy+"oops: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused reload to be logged", func() string {
		if strings.Contains(logs.String(), "policy reload refused") {
			return "logged"
		}
		return ""
	}, func(r string) bool { return r != "" }, logs)
	if r := revision(); r != rev0 {
		t.Fatalf("after a broken change the revision is %q, want the old %q", r, rev0)
	}

	if err := os.WriteFile(file, []byte(strings.Replace(cliPolicy, "allow: [Read]", "allow: [Read, Glob]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watcher to reload", revision, func(r string) bool { return r != rev0 && r != "" }, logs)
}

// TestServeReloadsOnSIGHUP: with the watcher off, only the signal can make
// the new policy serve. Not parallel: it signals the test process.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	file, revision, logs := servedPolicy(t, "0")
	rev0 := waitFor(t, "the sidecar to serve", revision, func(r string) bool { return r != "" }, logs)
	if err := os.WriteFile(file, []byte(strings.Replace(cliPolicy, "allow: [Read]", "allow: [Read, LS]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if r := revision(); r != rev0 {
		t.Fatalf("the policy reloaded with the watcher off and no signal: %q", r)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the HUP reload", revision, func(r string) bool { return r != rev0 && r != "" }, logs)
}

// syncWriter lets the serve goroutine log while the test reads.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
