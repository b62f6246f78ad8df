package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/bundle"
)

// nginxServer is Debian's nginx serving dir/www on a loopback port, with
// an access log that records each request's status.
type nginxServer struct {
	t    *testing.T
	dir  string
	port int
	cmd  *exec.Cmd
}

// newNginx prepares (but does not start) an nginx. Without nginx the test
// fails under CI=true (make test-go installs it: scripts/ensure-command)
// and is skipped elsewhere.
func newNginx(t *testing.T) *nginxServer {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nginx is not installed (scripts/ensure-command nginx nginx installs it): %v", err)
		}
		t.Skipf("nginx is not installed (scripts/ensure-command nginx nginx installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	user := ""
	if os.Getuid() == 0 {
		user = "user root;" // workers must read the test's private temporary directory
	}
	conf := fmt.Sprintf(`%s
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log;
events { worker_connections 64; }
http {
  log_format st '$status $request';
  access_log %[2]s/access.log st;
  client_body_temp_path %[2]s/tmp; proxy_temp_path %[2]s/tmp; fastcgi_temp_path %[2]s/tmp; uwsgi_temp_path %[2]s/tmp; scgi_temp_path %[2]s/tmp;
  server {
    listen 127.0.0.1:%[3]d;
    root %[2]s/www;
    types { application/gzip gz; }
  }
}
`, user, dir, port)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &nginxServer{t: t, dir: dir, port: port}
	n.cmd = exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-t")
	if out, err := n.cmd.CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	n.cmd = nil
	t.Cleanup(n.stop)
	return n
}

func (n *nginxServer) url() string { return fmt.Sprintf("http://127.0.0.1:%d/b.tar.gz", n.port) }

func (n *nginxServer) start() {
	n.t.Helper()
	bin, _ := exec.LookPath("nginx")
	if bin == "" {
		bin = "/usr/sbin/nginx"
	}
	n.cmd = exec.Command(bin, "-p", n.dir, "-c", filepath.Join(n.dir, "nginx.conf"), "-g", "daemon off;")
	n.cmd.Stderr = os.Stderr
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.port)); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.t.Fatal("nginx did not start listening")
}

// stop ends the nginx this test started (its own process, by its pid).
func (n *nginxServer) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(os.Interrupt) // SIGINT: nginx's fast shutdown
	_ = n.cmd.Wait()
	n.cmd = nil
}

// publish replaces the served bundle atomically, as a bundle service would.
func (n *nginxServer) publish(raw []byte) {
	n.t.Helper()
	tmp := filepath.Join(n.dir, "www", ".b.tmp")
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		n.t.Fatal(err)
	}
	// nginx's ETag is the file's mtime and size: make sure a new file differs.
	future := time.Now().Add(time.Duration(len(raw)%7+1) * time.Second)
	_ = os.Chtimes(tmp, future, future)
	if err := os.Rename(tmp, filepath.Join(n.dir, "www", "b.tar.gz")); err != nil {
		n.t.Fatal(err)
	}
}

// statuses counts the access log's lines of one HTTP status.
func (n *nginxServer) statuses(code string) int {
	b, _ := os.ReadFile(filepath.Join(n.dir, "access.log"))
	c := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, code+" ") {
			c++
		}
	}
	return c
}

// bundleKeys writes an ECDSA P-256 key pair: the private key's file and
// the public key's.
func bundleKeys(t *testing.T, dir, name string) (priv, pub string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	pubDER, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	priv, pub = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// buildBundle runs `gatekeeper bundle build` and returns the bundle.
func buildBundle(t *testing.T, policyFile string, args ...string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	var stderr bytes.Buffer
	if err := run(t.Context(), append([]string{"bundle", "build", "--policy", policyFile, "-o", out}, args...), strings.NewReader(""), io.Discard, &stderr); err != nil {
		t.Fatalf("bundle build %v: %v\n%s", args, err, stderr.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// readyz is /readyz's answer under --bundle.
type readyz struct {
	code              int
	Ready             bool   `json:"ready"`
	Reason            string `json:"reason"`
	BundleRevision    string `json:"bundle_revision"`
	SignatureVerified bool   `json:"signature_verified"`
	FromCache         bool   `json:"from_cache"`
	LastError         string `json:"last_error"`
	PolicyRevision    string `json:"policy_revision"`
}

// serveBundle runs `gatekeeper serve --bundle` in-process; stop ends it.
func serveBundle(t *testing.T, dir string, extra ...string) (ready func() readyz, logs *syncWriter, stop func()) {
	t.Helper()
	sock := filepath.Join(dir, "gk.sock")
	ctx, cancel := context.WithCancel(t.Context())
	logs = &syncWriter{b: &strings.Builder{}}
	done := make(chan error, 1)
	args := append([]string{"serve", "--listen", "unix://" + sock, "--no-runner", "--claude-code-dir", "",
		"--token-file", filepath.Join(dir, "token"), "--audit-log", filepath.Join(dir, "audit.jsonl"), "--state-dir", filepath.Join(dir, "state")}, extra...)
	go func() { done <- run(ctx, args, strings.NewReader(""), io.Discard, logs) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(stop)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	ready = func() readyz {
		resp, err := hc.Get("http://gk/readyz")
		if err != nil {
			return readyz{}
		}
		defer resp.Body.Close()
		r := readyz{code: resp.StatusCode}
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return r
	}
	return ready, logs, stop
}

// hookBash asks the sidecar in dir about a Bash call through the Claude
// Code hook endpoint and returns its answer.
func hookBash(t *testing.T, dir string) string {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(dir, "gk.sock"))
	}}}
	body := `{"session_id":"s1","transcript_path":"/t.jsonl","cwd":"/","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_1"}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", "http://gk/v1/claude-code/hook", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return string(out)
}

func waitReady(t *testing.T, what string, ready func() readyz, ok func(readyz) bool, logs *syncWriter) readyz {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last readyz
	for time.Now().Before(deadline) {
		if last = ready(); last.code != 0 && ok(last) {
			return last
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last /readyz %+v; log:\n%s", what, last, logs.String())
	return last
}

// TestServeBundleFromNginx runs the sidecar on signed bundles that
// `gatekeeper bundle build` made, served by Debian's nginx: a decision and
// its audit line carry the bundle's revision; ETag polling
// picks up a new revision; a broken bundle, an unsigned one, one signed
// with another key, one whose signature names no key id and a rollback
// are each refused, with the running revision kept and the reason in
// /readyz; a restart while nginx is down starts on the cached bundle,
// and one with no cache answers 503 and denies every call saying why.
func TestServeBundleFromNginx(t *testing.T) {
	ng := newNginx(t)
	dir, policyFile := writePolicy(t, cliPolicy)
	priv, pub := bundleKeys(t, dir, "k1")
	otherPriv, _ := bundleKeys(t, dir, "other")
	signed := func(rev, serial string) []byte {
		return buildBundle(t, policyFile, "--revision", rev, "--serial", serial, "--signing-key", priv, "--key-id", "k1")
	}
	cache := filepath.Join(dir, "cache")
	flags := []string{"--bundle", ng.url(), "--bundle-poll", "1s", "--bundle-verification-key", pub, "--bundle-key-id", "k1", "--bundle-cache", cache}

	ng.publish(signed("r1", "1"))
	ng.start()
	sdir := t.TempDir()
	ready, logs, stop := serveBundle(t, sdir, flags...)
	r := waitReady(t, "r1", ready, func(r readyz) bool { return r.BundleRevision == "r1" }, logs)
	if r.code != http.StatusOK || !r.Ready || !r.SignatureVerified || !strings.HasPrefix(r.PolicyRevision, "bundle:r1@sha256:") {
		t.Fatalf("/readyz on r1 = %+v, want 200, ready, verified, policy revision bundle:r1@sha256:...", r)
	}
	if out := hookBash(t, sdir); !strings.Contains(out, `"deny"`) || !strings.Contains(out, "Bash") {
		t.Fatalf("Bash under r1 = %s, want the policy's deny of Bash", out)
	}
	if audit, _ := os.ReadFile(filepath.Join(sdir, "audit.jsonl")); !strings.Contains(string(audit), `"policy_revision":"`+r.PolicyRevision+`"`) {
		t.Fatalf("no audit line carries %s:\n%s", r.PolicyRevision, audit)
	}

	t.Run("ETag polling answers 304 until a new revision is published", func(t *testing.T) {
		deadline := time.Now().Add(10 * time.Second)
		for ng.statuses("304") == 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if ng.statuses("304") == 0 {
			t.Fatalf("no 304 in nginx's access log: the downloader sent no If-None-Match")
		}
		ng.publish(signed("r2", "2"))
		waitReady(t, "r2", ready, func(r readyz) bool { return r.BundleRevision == "r2" && r.Ready }, logs)
	})

	refused := []struct {
		name, want string
		raw        func() []byte
	}{
		{"a broken policy is refused with its line in the bundle", "bundle r3: data.gatekeeper.sandbox_policy (sandbox.policy.yaml):4", func() []byte {
			// gatekeeper bundle build refuses a broken policy (opa build would not): the package builds one.
			key, err := os.ReadFile(priv)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			broken := "version: 1\nworkspace_root: /tmp\ntools:\n  alow: [Read]\n"
			if err := bundle.Build(&buf, bundle.BuildOptions{File: "sandbox.policy.yaml", Policy: []byte(broken), Revision: "r3", Serial: 3, SigningKey: key, KeyID: "k1"}); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}},
		{"an unsigned bundle is refused", "bundle missing .signatures.json", func() []byte {
			return buildBundle(t, policyFile, "--revision", "r4", "--serial", "4")
		}},
		{"a bundle signed with another key is refused", "failed to verify JWT signature", func() []byte {
			return buildBundle(t, policyFile, "--revision", "r5", "--serial", "5", "--signing-key", otherPriv, "--key-id", "k1")
		}},
		{"a bundle whose signature names no key id is refused", "verification key ID is empty", func() []byte {
			// gatekeeper bundle build will not make one: the package can.
			key, err := os.ReadFile(priv)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := bundle.Build(&buf, bundle.BuildOptions{File: "p.yaml", Policy: []byte(cliPolicy), Revision: "r6", Serial: 6, SigningKey: key}); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}},
		{"a rollback is refused", "rollback refused", func() []byte { return signed("r0", "1") }},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			ng.publish(tc.raw())
			r := waitReady(t, tc.want, ready, func(r readyz) bool { return strings.Contains(r.LastError, tc.want) }, logs)
			if r.BundleRevision != "r2" || !r.Ready {
				t.Fatalf("/readyz after the refusal = %+v, want r2 still in force", r)
			}
		})
	}

	t.Run("a restart while nginx is down starts on the cached bundle", func(t *testing.T) {
		stop()
		ng.stop()
		ready, logs, stop := serveBundle(t, t.TempDir(), flags...)
		defer stop()
		r := waitReady(t, "the cached r2", ready, func(r readyz) bool { return r.BundleRevision == "r2" }, logs)
		if !r.Ready || !r.FromCache || !r.SignatureVerified {
			t.Fatalf("/readyz on the cache = %+v, want r2 ready from the cache, verified", r)
		}
		ng.publish(signed("r7", "7"))
		ng.start()
		waitReady(t, "r7 once nginx is back", ready, func(r readyz) bool { return r.BundleRevision == "r7" && !r.FromCache }, logs)
	})

	t.Run("with no cache and nginx down every call is denied and readyz says so", func(t *testing.T) {
		ng.stop()
		empty := append(append([]string{}, flags...), "--bundle-cache", filepath.Join(t.TempDir(), "none"))
		sdir := t.TempDir()
		ready, logs, stop := serveBundle(t, sdir, empty...)
		defer stop()
		r := waitReady(t, "a 503", ready, func(r readyz) bool { return r.code == http.StatusServiceUnavailable }, logs)
		if r.Ready || !strings.Contains(r.Reason, "no policy bundle has been loaded") {
			t.Fatalf("/readyz without a bundle = %+v, want 503 saying no bundle has been loaded", r)
		}
		if out := hookBash(t, sdir); !strings.Contains(out, `"deny"`) || !strings.Contains(out, "no policy bundle has been loaded") {
			t.Fatalf("Bash without a bundle = %s, want a deny saying no policy bundle has been loaded", out)
		}
		if !strings.Contains(logs.String(), "no cached policy bundle") {
			t.Fatalf("the log does not say there is no bundle:\n%s", logs.String())
		}
	})

	t.Run("--bundle-allow-rollback accepts a lower serial", func(t *testing.T) {
		ng.publish(signed("r1b", "1"))
		ng.start()
		ready, logs, stop := serveBundle(t, t.TempDir(), append(append([]string{}, flags...), "--bundle-allow-rollback")...)
		defer stop()
		waitReady(t, "r1b over the cached r7", ready, func(r readyz) bool { return r.BundleRevision == "r1b" && r.Ready }, logs)
	})
}
