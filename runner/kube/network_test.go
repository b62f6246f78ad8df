//go:build kube

package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/egresstest"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// These tests run networked sandboxes as Pods on the test cluster. The only
// traffic they make goes to servers they start on this host (reached only
// through the proxy, which dials from the host), to listeners in the
// cluster's network namespace, and to the cluster's own addresses; names
// resolve through a test resolver, never DNS.

// egressConfig is testConfig with a proxy that resolves through the test
// resolver and records its events in aud.
func egressConfig(t *testing.T, aud egress.Auditor) Config {
	t.Helper()
	cfg := testConfig(t, aud)
	p, err := egress.New(egress.Config{Auditor: aud, Resolver: egresstest.Resolver{"upstream.test": {netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Egress = p
	return cfg
}

// upstream is an HTTP server on the host's loopback: a sandbox reaches it
// through the proxy or not at all.
func upstream(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from upstream %s", r.URL.Path)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// netProbe runs in a networked sandbox and prints "label outcome" lines.
// TARGETS is replaced by Python tuples (label, host, port) that a direct
// connection must not reach.
const netProbe = `import errno, os, socket
def err(e):
    if isinstance(e, OSError) and e.errno in errno.errorcode:
        return errno.errorcode[e.errno]
    return type(e).__name__
proxy = os.environ["HTTP_PROXY"]
ph, pp = proxy[len("http://"):].rsplit(":", 1)
print("env", sorted(k for k in os.environ if "proxy" in k.lower()), os.environ.get("NO_PROXY"))
def via_proxy(label, target):
    try:
        s = socket.create_connection((ph, int(pp)), timeout=10)
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target).encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        print(label, head.split(b" ", 2)[1].decode(), body.decode(errors="replace").strip().replace(" ", "_"))
    except Exception as e:
        print(label, err(e))
via_proxy("allowed", "http://upstream.test:UPSTREAM/hello")
via_proxy("unlisted", "http://other.test:UPSTREAM/")
for label, host, port in TARGETS:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        print(label, "connected")
    except Exception as e:
        print(label, err(e))
    finally:
        s.close()
try:
    socket.getaddrinfo("example.com", 80)
    print("dns resolved")
except socket.gaierror:
    print("dns gaierror")
`

// TestNetworkedPodsReachOnlyTheProxy runs a networked sandbox under each
// runtime: it reaches an allowlisted upstream through the proxy (audited
// with its run id), is refused an unlisted one (403, the rule named), and
// reaches nothing directly: not another port of the proxy's address, not
// the API server, not the host's end of the veth, not the upstream itself;
// names do not resolve.
func TestNetworkedPodsReachOnlyTheProxy(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	port := upstream(t)
	other := listen(t, c.netns, net.JoinHostPort(c.gateway, "0"))
	host := listen(t, "", net.JoinHostPort(c.hostIP, "0"))
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			aud := &egresstest.Recorder{}
			r := withRuntime{newTestRunner(t, egressConfig(t, aud)), rt, c.image}
			_, otherPort, _ := net.SplitHostPort(other.ln.Addr().String())
			_, hostPort, _ := net.SplitHostPort(host.ln.Addr().String())
			targets := fmt.Sprintf("[(%q, %q, %s), (%q, %q, 6443), (%q, %q, %s), (%q, %q, %d), (%q, %q, 53)]",
				"another-port-of-the-proxy-address", c.gateway, otherPort,
				"the-api-server", c.nodeIP,
				"the-host-veth", c.hostIP, hostPort,
				"the-upstream-on-the-host", c.hostIP, port,
				"dns-on-the-gateway", c.gateway)
			code := strings.NewReplacer("TARGETS", targets, "UPSTREAM", fmt.Sprint(port)).Replace(netProbe)
			spec := runnertest.Spec(code)
			spec.Sandbox.Network = runner.Network{Enabled: true, Allow: []string{"upstream.test", "127.0.0.1"}}
			res, err := r.Run(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason != runner.Exited || res.ExitCode != 0 {
				t.Fatalf("the probe ended %s with %d: stdout %q stderr %q", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
			}
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
				k, v, _ := strings.Cut(line, " ")
				got[k] = v
			}
			for label, want := range map[string]string{
				"env":                               "['HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy'] ",
				"allowed":                           "200 hello_from_upstream_/hello",
				"unlisted":                          "403 " + "refused",
				"another-port-of-the-proxy-address": "ECONNREFUSED",
				"the-api-server":                    "ENETUNREACH", // Pods have no default route
				"the-host-veth":                     "ENETUNREACH",
				"the-upstream-on-the-host":          "ENETUNREACH",
				"dns-on-the-gateway":                "ECONNREFUSED",
				"dns":                               "gaierror",
			} {
				v := got[label]
				ok := v == want
				if label == "unlisted" {
					ok = strings.HasPrefix(v, "403 ") && strings.Contains(v, egress.RuleNotAllowlisted)
				}
				if !ok {
					t.Errorf("%s: got %q, want %q\nstdout:\n%s", label, v, want, res.Stdout)
				}
			}
			if other.conns.Load() != 0 || host.conns.Load() != 0 {
				t.Errorf("a listener the sandbox must not reach got a connection")
			}
			var allowed bool
			for _, ev := range aud.Events() {
				if ev.RunID == spec.RunID && ev.Host == "upstream.test" && ev.Decision == egress.Allow {
					allowed = true
				}
			}
			if !allowed {
				t.Errorf("no audited allow of upstream.test for run %s: %+v", spec.RunID, aud.Events())
			}
		})
	}
}

// TestCanaryRefusesClasses configures classes that do not give what a run
// needs and checks each is refused with the sentinel the gate maps to
// runner_unavailable, without running the run's code.
func TestCanaryRefusesClasses(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	tests := []struct {
		name    string
		classes RuntimeClasses
		rt      runner.Runtime
		network bool
		want    error
		say     string
	}{
		{name: "a class with a network for runs without one", classes: RuntimeClasses{RuncNoNet: "runc"}, rt: runner.Runc,
			want: runner.ErrNetworkUnsupported, say: `network interfaces "eth0,lo"`},
		{name: "a class that does not exist", classes: RuntimeClasses{RunscNoNet: "no-such-class"}, rt: runner.Runsc,
			want: runner.ErrRuntimeUnavailable, say: `RuntimeClass "no-such-class" not found`},
		{name: "a runc class whose handler cannot give a Pod its own user namespace", classes: RuntimeClasses{RuncNoNet: "gvisor-nonet"}, rt: runner.Runc,
			want: runner.ErrRuntimeUnavailable, say: "gvisor-nonet"},
		{name: "no class for runs with a network", classes: RuntimeClasses{RuncNoNet: "runc-nonet"}, rt: runner.Runc, network: true,
			want: runner.ErrRuntimeUnavailable, say: "no RuntimeClass is configured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, nil)
			cfg.Classes = tc.classes
			r := newTestRunner(t, cfg)
			spec := runnertest.Spec(`print("must not run")`)
			spec.Sandbox.Image, spec.Sandbox.Runtime = c.image, tc.rt
			spec.Sandbox.Network.Enabled = tc.network
			var out strings.Builder
			spec.OnOutput = func(_ runner.Stream, b []byte) { out.Write(b) }
			res, err := r.Run(t.Context(), spec)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("Run = %+v, %v; want an error wrapping %v saying %q", res, err, tc.want, tc.say)
			}
			if out.Len() > 0 {
				t.Errorf("the refused run's code ran: %q", out.String())
			}
		})
	}
}

// TestEgressPortOutsideTheFirewallIsRefused serves the proxy on a port the
// cluster's firewall does not admit: the canary cannot reach it, so
// networked runs are refused rather than run without their proxy.
func TestEgressPortOutsideTheFirewallIsRefused(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	cfg := egressConfig(t, &egresstest.Recorder{})
	cfg.EgressPorts = [2]uint16{0, 0} // any port: none of the admitted ones
	r := newTestRunner(t, cfg)
	spec := runnertest.Spec(`print("must not run")`)
	spec.Sandbox.Image = c.image
	spec.Sandbox.Network = runner.Network{Enabled: true, Allow: []string{"upstream.test"}}
	res, err := r.Run(t.Context(), spec)
	if !errors.Is(err, runner.ErrNetworkUnsupported) || !strings.Contains(err.Error(), "cannot reach the egress proxy") {
		t.Fatalf("Run = %+v, %v; want ErrNetworkUnsupported: the canary cannot reach the proxy", res, err)
	}
}

// TestPodsCannotReachEachOther runs a networked sandbox that listens on a
// port and prints its address, then another that connects to it: the
// bridge must not carry Pod-to-Pod traffic.
func TestPodsCannotReachEachOther(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	r := withRuntime{newTestRunner(t, egressConfig(t, &egresstest.Recorder{})), runner.Runc, c.image}
	addr := make(chan string, 1)
	listener := runnertest.Spec(`import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("` + c.gateway + `", 9))
ip = s.getsockname()[0]
l = socket.socket()
l.bind(("0.0.0.0", 8080))
l.listen(1)
l.settimeout(40)
print("addr", ip, flush=True)
try:
    l.accept()
    print("accepted")
except socket.timeout:
    print("nobody came")
`)
	listener.Sandbox.Network = runner.Network{Enabled: true, Allow: []string{"upstream.test"}}
	listener.Timeout = 90 * time.Second
	var once sync.Once
	var seen strings.Builder
	listener.OnOutput = func(_ runner.Stream, b []byte) {
		seen.Write(b)
		if f := strings.Fields(seen.String()); len(f) >= 2 && f[0] == "addr" {
			once.Do(func() { addr <- f[1] })
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan runner.Result, 1)
	go func() {
		res, err := r.Run(ctx, listener)
		if err != nil {
			t.Errorf("listener run: %v", err)
		}
		done <- res
	}()
	var ip string
	select {
	case ip = <-addr:
	case <-time.After(2 * time.Minute):
		t.Fatal("the listening sandbox never said its address")
	}
	dialer := runnertest.Spec(`import errno, socket
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("` + ip + `", 8080))
    print("connected")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e)))
`)
	dialer.Sandbox.Network = runner.Network{Enabled: true, Allow: []string{"upstream.test"}}
	res, err := r.Run(t.Context(), dialer)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(res.Stdout); got == "connected" || got == "" {
		t.Errorf("a sandbox connecting to another's address %s: %q (stderr %q), want an errno", ip, got, res.Stderr)
	}
	cancel()
	if lres := <-done; strings.Contains(lres.Stdout, "accepted") {
		t.Errorf("the listening sandbox accepted a connection: %q", lres.Stdout)
	}
}
