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

// TestServeReloads starts `gatekeeper serve` in-process and changes its
// policy: a valid change is picked up (on file change and on SIGHUP), a
// broken one is refused and the old revision keeps serving.
func TestServeReloads(t *testing.T) {
	dir, file := writePolicy(t, cliPolicy)
	sock := filepath.Join(dir, "gk.sock")
	ctx, cancel := context.WithCancel(t.Context())
	logs := &syncWriter{b: &strings.Builder{}}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "unix://" + sock, "--policy", file, "--no-runner",
			"--token-file", filepath.Join(dir, "token"), "--audit-log", filepath.Join(dir, "audit.jsonl"),
			"--watch-interval", "50ms"}, strings.NewReader(""), io.Discard, logs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	revision := func() string {
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
	waitFor := func(what string, ok func(string) bool) string {
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
	rev0 := waitFor("the sidecar to serve", func(r string) bool { return r != "" })

	// A broken file is refused; the old revision keeps serving.
	if err := os.WriteFile(file, []byte(cliPolicy+"oops: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if r := revision(); r != rev0 {
		t.Fatalf("after a broken change the revision is %q, want the old %q", r, rev0)
	}
	if !strings.Contains(logs.String(), "policy reload refused") {
		t.Errorf("the refused reload was not logged:\n%s", logs.String())
	}

	// A valid change is picked up by the watcher.
	if err := os.WriteFile(file, []byte(strings.Replace(cliPolicy, "allow: [Read]", "allow: [Read, Glob]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	rev1 := waitFor("the watcher to reload", func(r string) bool { return r != rev0 && r != "" })

	// SIGHUP reloads too (the watcher is slowed down by nothing here, so
	// this checks that a HUP does not kill the process and is served).
	if err := os.WriteFile(file, []byte(strings.Replace(cliPolicy, "allow: [Read]", "allow: [Read, LS]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("the HUP reload", func(r string) bool { return r != rev1 && r != "" })
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
