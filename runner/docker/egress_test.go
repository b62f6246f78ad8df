package docker

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/egresstest"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// These tests run networked sandboxes on the real engine. The only traffic
// they make goes to servers they start on this host (listening on 0.0.0.0,
// which the sandboxes must reach only through the proxy) and to the Docker
// networks the runner creates; names resolve through a test resolver, never
// DNS.

// testResolver maps upstream.test to loopback, where the proxy reaches the
// upstream servers; private.test and rebind.test to addresses the proxy
// must refuse to dial.
var testResolver = egresstest.Resolver{
	"upstream.test": {netip.MustParseAddr("127.0.0.1")},
	"private.test":  {netip.MustParseAddr("10.11.12.13")},
	"rebind.test":   {netip.MustParseAddr("169.254.169.254")},
}

// newEgressRunner returns a test Runner with an egress proxy of its own.
func newEgressRunner(t *testing.T, aud egress.Auditor) *Runner {
	t.Helper()
	p, err := egress.New(egress.Config{Auditor: aud, Resolver: testResolver})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRunner(t)
	r.pf.cfg.Egress = p
	return r
}

// hostServers are what the sandbox must reach only through the proxy: an
// HTTP and an HTTPS upstream, a bare TCP service and a UDP service, all on
// 0.0.0.0, so that without the firewall a sandbox would reach each of them
// on its network's gateway address.
type hostServers struct {
	httpPort, httpsPort, tcpPort, udpPort int
	caPEM                                 string
	tcpAccepts, udpPackets                atomic.Int64
}

func startHostServers(t *testing.T) *hostServers {
	t.Helper()
	hs := &hostServers{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from upstream %s", r.URL.Path)
	})
	listen := func() net.Listener {
		ln, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	serve := func(ln net.Listener) {
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	ln := listen()
	hs.httpPort = ln.Addr().(*net.TCPAddr).Port
	serve(ln)

	cert, caPEM := selfSigned(t, "upstream.test")
	hs.caPEM = caPEM
	tln := listen()
	hs.httpsPort = tln.Addr().(*net.TCPAddr).Port
	serve(tls.NewListener(tln, &tls.Config{Certificates: []tls.Certificate{cert}}))

	raw := listen()
	hs.tcpPort = raw.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			hs.tcpAccepts.Add(1)
			io.WriteString(c, "host service\n")
			c.Close()
		}
	}()
	t.Cleanup(func() { raw.Close() })

	udp, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	hs.udpPort = udp.LocalAddr().(*net.UDPAddr).Port
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			hs.udpPackets.Add(1)
			udp.WriteTo(buf[:n], from) // echo, as a DNS server would answer
		}
	}()
	t.Cleanup(func() { udp.Close() })
	return hs
}

// selfSigned returns a certificate for name and its PEM, which the sandbox
// trusts as its CA.
func selfSigned(t *testing.T, name string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// egressProbe runs inside the sandbox: it prints one JSON line per probe.
// The requests it sends to the proxy by hand (raw) come from cfg.json, so
// that every spelling is exactly what the test wrote.
const egressProbe = `import ast, errno, os, socket, ssl, time
cfg = ast.literal_eval(open("cfg.txt").read())
def js(v):
    # The image's python3-minimal has no json module.
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + "".join(c if 0x20 <= ord(c) < 0x7f and c not in '"\\' else "\\u%04x" % ord(c) for c in v) + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(js(x) for x in v) + "]"
    return "{" + ",".join(js(k) + ":" + js(x) for k, x in v.items()) + "}"
last = [time.monotonic()]
def emit(name, **kw):
    kw["probe"] = name
    now = time.monotonic()
    kw["ms"] = int((now - last[0]) * 1000)
    last[0] = now
    print(js(kw), flush=True)
def err(e):
    if isinstance(e, OSError) and e.errno in errno.errorcode:
        return errno.errorcode[e.errno]
    return type(e).__name__ + ": " + str(e)

proxy = os.environ.get("HTTPS_PROXY", "")
emit("env", keys=sorted(os.environ), http_proxy=os.environ.get("HTTP_PROXY"), https_proxy=proxy,
     lower=[os.environ.get("http_proxy"), os.environ.get("https_proxy")], no_proxy=[os.environ.get("NO_PROXY"), os.environ.get("no_proxy")])
ph, pp = proxy[len("http://"):].rsplit(":", 1)
pp = int(pp)

def read_all(s):
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            return data
        data += b
def response(data):
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode(errors="replace")
def request(method, target):
    return ("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (method, target)).encode()

def raw(name, method, target):
    try:
        s = socket.create_connection((ph, pp), timeout=10)
        s.sendall(request(method, target))
        status, body = response(read_all(s))
        s.close()
        emit(name, status=status, body=body)
    except Exception as e:
        emit(name, error=err(e))

def https(name, host, port):
    try:
        s = socket.create_connection((ph, pp), timeout=10)
        s.sendall(request("CONNECT", "%s:%d" % (host, port)))
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(1)
            if not b:
                raise EOFError("proxy closed the tunnel")
            head += b
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            emit(name, status=status, body=head.decode(errors="replace"))
            return
        t = ssl.create_default_context(cafile="ca.pem").wrap_socket(s, server_hostname=host)
        t.sendall(b"GET /hello HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host.encode())
        status, body = response(read_all(t))
        t.close()
        emit(name, status=status, body=body)
    except Exception as e:
        emit(name, error=err(e))

raw("http through the proxy", "GET", "http://upstream.test:%d/hello" % cfg["http"])
https("https through a CONNECT tunnel", "upstream.test", cfg["https"])
for name, method, target in cfg["raw"]:
    raw(name, method, target)

def tcp(name, host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        emit(name, error="connected", data=s.recv(100).decode(errors="replace"))
    except Exception as e:
        emit(name, error=err(e))
    finally:
        s.close()
tcp("direct tcp to the upstream on the gateway", ph, cfg["http"])
tcp("direct tcp to a host service on the gateway", ph, cfg["tcp"])
tcp("direct tcp to a host service on docker0", "172.17.0.1", cfg["tcp"])
tcp("direct tcp to the proxy port on docker0", "172.17.0.1", pp)

def udp(name, host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x08upstream\x04test\x00\x00\x01\x00\x01", (host, port))
        emit(name, error="answered", data=repr(s.recvfrom(512)[0]))
    except Exception as e:
        emit(name, error=err(e))
    finally:
        s.close()
udp("udp to a host service on the gateway", ph, cfg["udp"])
udp("dns query to the gateway", ph, 53)

for n in ["upstream.test", "example.com", "host.docker.internal"]:
    try:
        emit("resolve " + n, error="resolved", addrs=sorted(set(a[4][0] for a in socket.getaddrinfo(n, 80))))
    except Exception as e:
        emit("resolve " + n, error="gaierror" if isinstance(e, socket.gaierror) else err(e))

v6 = [l.split()[0] for l in open("/proc/net/if_inet6").read().splitlines()] if os.path.exists("/proc/net/if_inet6") else []
emit("ipv6 addresses", addrs=v6)
def v6send(name, addr):
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            s.sendto(b"x", addr)
            emit(name, error="sent")
        finally:
            s.close()
    except Exception as e:
        emit(name, error=err(e))
try:
    eth0 = socket.if_nametoindex("eth0")
except OSError:
    eth0 = 0
v6send("ipv6 to all nodes on the link", ("ff02::1", cfg["udp"], 0, eth0))
try:
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(("::ffff:" + ph, cfg["tcp"], 0, 0))
        emit("ipv6 socket to the v4-mapped gateway", error="connected")
    finally:
        s.close()
except Exception as e:
    emit("ipv6 socket to the v4-mapped gateway", error=err(e))
emit("done")
`

// rawCase is one request the sandbox sends to the proxy by hand, and what
// the proxy must answer and audit.
type rawCase struct {
	name, method, target string
	status               int
	rule                 string
	host                 string // the normalized host in the audit event
}

func rawCases(hs *hostServers) []rawCase {
	p := hs.httpPort
	return []rawCase{
		{"an allowlisted name spelled in capitals with a trailing dot", "GET", fmt.Sprintf("http://UPSTREAM.Test.:%d/caps", p), 200, egress.RuleAllowlisted, "upstream.test"},
		{"the allowlisted loopback literal", "GET", fmt.Sprintf("http://127.0.0.1:%d/literal", p), 200, egress.RuleAllowlisted, "127.0.0.1"},
		{"the allowlisted loopback literal as one hex number", "GET", fmt.Sprintf("http://0x7f000001:%d/hex", p), 200, egress.RuleAllowlisted, "127.0.0.1"},
		{"an unlisted name", "GET", fmt.Sprintf("http://other.test:%d/", p), 403, egress.RuleNotAllowlisted, "other.test"},
		{"an unlisted name over CONNECT", "CONNECT", "other.test:443", 403, egress.RuleNotAllowlisted, "other.test"},
		{"a denied name", "GET", "http://blocked.test/", 403, egress.RuleDenylisted, "blocked.test"},
		{"a denied name in capitals with a trailing dot", "GET", "http://BLOCKED.Test./", 403, egress.RuleDenylisted, "blocked.test"},
		{"a name under a denied wildcard over CONNECT", "CONNECT", "a.blocked.test:443", 403, egress.RuleDenylisted, "a.blocked.test"},
		{"an IDN under a denied wildcard", "GET", "http://bücher.blocked.test/", 403, egress.RuleDenylisted, "xn--bcher-kva.blocked.test"},
		{"the model vendor API", "CONNECT", "api.anthropic.com:443", 403, egress.RuleModelVendor, "api.anthropic.com"},
		{"the model vendor API in capitals with a trailing dot", "GET", "http://API.Anthropic.COM./v1/messages", 403, egress.RuleModelVendor, "api.anthropic.com"},
		{"the metadata address", "GET", "http://169.254.169.254/latest/meta-data/", 403, egress.RuleMetadata, "169.254.169.254"},
		{"the metadata address as one hex number", "GET", "http://0xa9fea9fe/", 403, egress.RuleMetadata, "169.254.169.254"},
		{"the metadata address as one decimal number", "GET", "http://2852039166/", 403, egress.RuleMetadata, "169.254.169.254"},
		{"the metadata address IPv4-mapped", "CONNECT", "[::ffff:169.254.169.254]:80", 403, egress.RuleMetadata, "169.254.169.254"},
		{"the metadata name", "GET", "http://metadata.google.internal/", 403, egress.RuleMetadata, "metadata.google.internal"},
		{"an unlisted loopback address", "GET", fmt.Sprintf("http://127.0.0.2:%d/", p), 403, egress.RuleNotAllowlisted, "127.0.0.2"},
		{"an unlisted loopback address shortened", "GET", fmt.Sprintf("http://127.2:%d/", p), 403, egress.RuleNotAllowlisted, "127.0.0.2"},
		{"an unlisted loopback address in hex", "GET", fmt.Sprintf("http://0x7f.0.0.2:%d/", p), 403, egress.RuleNotAllowlisted, "127.0.0.2"},
		{"an unlisted loopback address in octal", "GET", fmt.Sprintf("http://0177.0.0.2:%d/", p), 403, egress.RuleNotAllowlisted, "127.0.0.2"},
		{"an unlisted loopback address as one decimal number", "GET", fmt.Sprintf("http://2130706434:%d/", p), 403, egress.RuleNotAllowlisted, "127.0.0.2"},
		{"an unlisted loopback address IPv4-mapped", "CONNECT", fmt.Sprintf("[::ffff:127.0.0.2]:%d", p), 403, egress.RuleNotAllowlisted, "127.0.0.2"},
		{"the IPv6 loopback", "CONNECT", fmt.Sprintf("[::1]:%d", p), 403, egress.RuleNotAllowlisted, "::1"},
		{"an allowlisted name resolving to a private address", "GET", fmt.Sprintf("http://private.test:%d/", p), 403, egress.RulePrivateAddress, "private.test"},
		{"an allowlisted name resolving to the metadata address", "CONNECT", "rebind.test:443", 403, egress.RuleMetadata, "rebind.test"},
	}
}

// egressPolicy allows the upstream by name and, as the private-address
// rule demands for a name resolving to loopback, by its literal address.
func egressPolicy() runner.Network {
	return runner.Network{
		Enabled: true,
		Allow:   []string{"upstream.test", "127.0.0.1", "private.test", "rebind.test", "api.anthropic.com", "169.254.169.254", "metadata.google.internal"},
		Deny:    []string{"blocked.test", "*.blocked.test"},
	}
}

// TestEgress is not parallel with the package's other tests: its TLS and
// proxy traffic would count in the heap the conformance suite's output
// flood case measures. Its two runtimes run in parallel.
func TestEgress(t *testing.T) {
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			testEgress(t, rt)
		})
	}
}

func testEgress(t *testing.T, rt runner.Runtime) {
	aud := &egresstest.Recorder{}
	r := newEgressRunner(t, aud)
	hs := startHostServers(t)
	cases := rawCases(hs)
	raw := make([][3]string, len(cases))
	for i, c := range cases {
		raw[i] = [3]string{c.name, c.method, c.target}
	}
	cfg, err := json.Marshal(map[string]any{"http": hs.httpPort, "https": hs.httpsPort, "tcp": hs.tcpPort, "udp": hs.udpPort, "raw": raw})
	if err != nil {
		t.Fatal(err)
	}

	spec := runnertest.Spec(egressProbe)
	spec.Sandbox.Runtime = rt
	spec.Sandbox.Network = egressPolicy()
	spec.Files = map[string]string{"cfg.txt": string(cfg), "ca.pem": hs.caPEM} // JSON, read as a Python literal
	spec.Timeout = 90 * time.Second

	// When the sandbox reports its proxy, the test connects to that same
	// listener from the host: a source that is no registered sandbox.
	var unknownSource string
	var lineBuf strings.Builder
	spec.OnOutput = func(s runner.Stream, b []byte) {
		if s != runner.Stdout {
			return
		}
		lineBuf.Write(b)
		if unknownSource != "" || !strings.Contains(lineBuf.String(), "\n") {
			return
		}
		var env struct {
			HTTPSProxy string `json:"https_proxy"`
		}
		first, _, _ := strings.Cut(lineBuf.String(), "\n")
		if json.Unmarshal([]byte(first), &env) != nil || !strings.HasPrefix(env.HTTPSProxy, "http://") {
			unknownSource = "no proxy in the first line: " + first
			return
		}
		unknownSource = probeFromHost(strings.TrimPrefix(env.HTTPSProxy, "http://"), hs.httpPort)
	}

	begin := time.Now()
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: networked run took %v (program %v)", rt, time.Since(begin), res.Duration)
	t.Logf("%s: probes:\n%s", rt, res.Stdout)
	if res.Reason != runner.Exited || res.ExitCode != 0 {
		t.Fatalf("ended %s %d; stdout %q stderr %q", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
	}
	got := map[string]map[string]any{}
	for line := range strings.Lines(res.Stdout) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("probe line %q: %v", line, err)
		}
		got[m["probe"].(string)] = m
	}
	if _, ok := got["done"]; !ok {
		t.Fatalf("the probe did not finish: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	probe := func(name string) map[string]any {
		t.Helper()
		m, ok := got[name]
		if !ok {
			t.Errorf("probe %q missing", name)
			return map[string]any{}
		}
		return m
	}

	t.Run("the sandbox has the proxy in its environment and nothing else of the host", func(t *testing.T) {
		env := probe("env")
		proxy, _ := env["https_proxy"].(string)
		if !strings.HasPrefix(proxy, "http://") || env["http_proxy"] != proxy || fmt.Sprint(env["lower"]) != fmt.Sprint([]any{proxy, proxy}) {
			t.Errorf("proxy environment %v", env)
		}
		if fmt.Sprint(env["no_proxy"]) != "[ ]" {
			t.Errorf("NO_PROXY and no_proxy = %v, want both empty", env["no_proxy"])
		}
		// The program's own environment (launch.Env) and the proxy's six
		// variables, and nothing else.
		keys := []string{"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}
		for _, kv := range launch.Env() {
			keys = append(keys, strings.SplitN(kv, "=", 2)[0])
		}
		sort.Strings(keys)
		want := fmt.Sprint(keys)
		if fmt.Sprint(env["keys"]) != want {
			t.Errorf("environment keys %v, want %s", env["keys"], want)
		}
	})
	t.Run("the allowlisted host answers over HTTP and HTTPS", func(t *testing.T) {
		for _, name := range []string{"http through the proxy", "https through a CONNECT tunnel"} {
			m := probe(name)
			if m["status"] != float64(200) || m["body"] != "hello from upstream /hello" {
				t.Errorf("%s: %v", name, m)
			}
		}
	})
	t.Run("each request sent to the proxy by hand gets its answer", func(t *testing.T) {
		for _, c := range cases {
			m := probe(c.name)
			body, _ := m["body"].(string)
			if m["status"] != float64(c.status) {
				t.Errorf("%s (%s %s): %v, want status %d", c.name, c.method, c.target, m, c.status)
				continue
			}
			if c.status == 403 && (!strings.HasPrefix(body, "gatekeeper egress denied: ") || !strings.Contains(body, "(rule "+c.rule+")")) {
				t.Errorf("%s: body %q does not name rule %s", c.name, body, c.rule)
			}
			if c.status == 200 && !strings.HasPrefix(body, "hello from upstream /") {
				t.Errorf("%s: body %q, want the upstream's", c.name, body)
			}
		}
	})
	t.Run("nothing but the proxy is reachable, and no name resolves", func(t *testing.T) {
		for _, name := range []string{
			"direct tcp to the upstream on the gateway", "direct tcp to a host service on the gateway",
			"direct tcp to a host service on docker0", "direct tcp to the proxy port on docker0",
		} {
			if e := probe(name)["error"]; e != "ECONNREFUSED" && e != "ENETUNREACH" && e != "TimeoutError: timed out" {
				t.Errorf("%s: %v, want refused", name, probe(name))
			}
		}
		for _, name := range []string{"udp to a host service on the gateway", "dns query to the gateway"} {
			if e := probe(name)["error"]; e == "answered" || e == nil {
				t.Errorf("%s: %v, want no answer", name, probe(name))
			}
		}
		for _, n := range []string{"upstream.test", "example.com", "host.docker.internal"} {
			if e := probe("resolve " + n)["error"]; e != "gaierror" {
				t.Errorf("resolve %s: %v, want a resolver error", n, probe("resolve "+n))
			}
		}
		if n := hs.tcpAccepts.Load(); n != 0 {
			t.Errorf("the host service accepted %d connections from the sandbox", n)
		}
		if n := hs.udpPackets.Load(); n != 0 {
			t.Errorf("the host UDP service received %d datagrams from the sandbox", n)
		}
	})
	t.Run("IPv6 reaches nothing", func(t *testing.T) {
		if a := probe("ipv6 addresses")["addrs"]; fmt.Sprint(a) != "[]" {
			t.Errorf("the sandbox has IPv6 addresses %v", a)
		}
		for _, name := range []string{"ipv6 to all nodes on the link", "ipv6 socket to the v4-mapped gateway"} {
			if e := probe(name)["error"]; e == "sent" || e == "connected" || e == nil {
				t.Errorf("%s: %v, want an error", name, probe(name))
			}
		}
	})
	t.Run("a connection from an unregistered source is refused", func(t *testing.T) {
		if unknownSource != "403 "+egress.RuleUnknownSource {
			t.Errorf("host connection to the proxy: %s, want 403 %s", unknownSource, egress.RuleUnknownSource)
		}
	})
	t.Run("every request is audited once with the run's identity", func(t *testing.T) {
		events := aud.Events()
		byHost := map[string][]egress.Event{}
		for _, ev := range events {
			if ev.Rule == egress.RuleUnknownSource {
				if ev.RunID != "" {
					t.Errorf("unknown-source event carries run %q", ev.RunID)
				}
				continue
			}
			if ev.RunID != spec.RunID || ev.QueryID != spec.QueryID {
				t.Errorf("event %+v: run %q query %q, want %q %q", ev, ev.RunID, ev.QueryID, spec.RunID, spec.QueryID)
			}
			byHost[ev.Host+" "+ev.Rule] = append(byHost[ev.Host+" "+ev.Rule], ev)
		}
		want := map[string]int{"upstream.test " + egress.RuleAllowlisted: 2}
		for _, c := range cases {
			want[c.host+" "+c.rule]++
		}
		for k, n := range want {
			if len(byHost[k]) != n {
				t.Errorf("%d events for %s, want %d", len(byHost[k]), k, n)
			}
		}
		if len(events) != len(cases)+3 {
			t.Errorf("%d events, want %d (the %d requests by hand, 2 through the environment, 1 from the host)", len(events), len(cases)+3, len(cases))
		}
		for _, ev := range byHost["upstream.test "+egress.RuleAllowlisted] {
			if ev.Decision != egress.Allow || ev.BytesDown == 0 || ev.BytesUp == 0 || ev.Error != "" {
				t.Errorf("allowed event %+v: want allow with bytes both ways and no error", ev)
			}
		}
	})
	t.Run("the network and its firewall are gone when Run returns", func(t *testing.T) {
		if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
			t.Errorf("Leftovers = %d, %v; want 0", n, err)
		}
	})
}

// probeFromHost sends one request to the proxy at addr from this host and
// returns "<status> <rule>".
func probeFromHost(addr string, port int) string {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET http://upstream.test:%d/ HTTP/1.1\r\nHost: upstream.test\r\nConnection: close\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	return fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("X-Gatekeeper-Rule"))
}

// TestEgressDisabledMeansNoNetwork runs on a runner that has a proxy: a
// sandbox whose policy leaves the network off still has loopback only.
func TestEgressDisabledMeansNoNetwork(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	r := newEgressRunner(t, &egresstest.Recorder{})
	spec := runnertest.Spec(`import os
print(sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]))
print(sorted(k for k in os.environ if "proxy" in k.lower()))`)
	spec.Sandbox.Network = runner.Network{Enabled: false, Allow: []string{"upstream.test"}}
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "['lo']\n[]\n" {
		t.Errorf("stdout %q (stderr %q), want loopback only and no proxy variables", res.Stdout, res.Stderr)
	}
}

// TestEgressCancelledRunLeavesNothing cancels a networked run mid-way: the
// container, the network, the firewall and the registration all go.
func TestEgressCancelledRunLeavesNothing(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	aud := &egresstest.Recorder{}
	r := newEgressRunner(t, aud)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	spec := runnertest.Spec("import time\nprint('started', flush=True)\ntime.sleep(120)")
	spec.Sandbox.Network = egressPolicy()
	spec.OnOutput = func(runner.Stream, []byte) { cancel() }
	res, err := r.Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != runner.Cancelled {
		t.Errorf("reason %s, want cancelled", res.Reason)
	}
	if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
		t.Errorf("Leftovers = %d, %v; want 0", n, err)
	}
}

// TestEgressCleanupRemovesLeftoverNetworks plays a sidecar killed mid-run:
// a network and firewall opened and never closed are removed by Cleanup.
func TestEgressCleanupRemovesLeftoverNetworks(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	r := newEgressRunner(t, &egresstest.Recorder{})
	spec := runnertest.Spec("print(1)")
	spec.Sandbox.Network = egressPolicy()
	sn, err := r.pf.openNetwork(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	sn.stop() // the proxy goes with the sidecar; network and firewall stay
	<-sn.served
	if n, err := r.Leftovers(t.Context()); err != nil || n != 2 {
		t.Fatalf("Leftovers = %d, %v; want 2 (the network and its firewall)", n, err)
	}
	removed, err := r.Cleanup(t.Context())
	if err != nil || removed != 1 {
		t.Errorf("Cleanup = %d, %v; want 1 network removed", removed, err)
	}
	if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
		t.Errorf("Leftovers after Cleanup = %d, %v; want 0", n, err)
	}
}

// TestEgressRunsKeepTheirWorkspace: networked runs are never pooled, but
// their workspace lasts like any other: what one run fetched through the
// proxy, the next run reads.
func TestEgressRunsKeepTheirWorkspace(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	r := newEgressRunner(t, &egresstest.Recorder{})
	hs := startHostServers(t)
	store, err := workspace.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := store.Workspace("q")
	if err != nil {
		t.Fatal(err)
	}
	run := func(code string) runner.Result {
		t.Helper()
		spec := runnertest.Spec(code)
		spec.Sandbox.Network = egressPolicy()
		spec.Workspace = ws
		res, err := r.Run(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// python3-minimal has no urllib: a plain HTTP request to the proxy.
	res := run(fmt.Sprintf(`import os, socket
host, port = os.environ["HTTP_PROXY"].removeprefix("http://").rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"GET http://upstream.test:%d/kept HTTP/1.0\r\nHost: upstream.test:%d\r\n\r\n")
reply = b""
while chunk := s.recv(65536):
    reply += chunk
open("fetched.txt", "wb").write(reply.split(b"\r\n\r\n", 1)[1])`, hs.httpPort, hs.httpPort))
	if res.ExitCode != 0 || res.Workspace != runner.WorkspaceSaved {
		t.Fatalf("fetch: exit %d, workspace %q (%s), stderr %q", res.ExitCode, res.Workspace, res.WorkspaceNote, res.Stderr)
	}
	res = run(`print(open("fetched.txt").read())`)
	if res.Stdout != "hello from upstream /kept\n" {
		t.Errorf("the next networked run read %q (stderr %q), want what the first fetched", res.Stdout, res.Stderr)
	}
}

// noNetAdminEnv names the instance a re-executed test process runs
// TestAFirewallThatCannotBeInstalledRefusesTheRun's run under, without
// CAP_NET_ADMIN.
const noNetAdminEnv = "GATEKEEPER_TEST_NO_NET_ADMIN_INSTANCE"

// TestAFirewallThatCannotBeInstalledRefusesTheRun runs a networked spec on
// the real engine from a sidecar without CAP_NET_ADMIN (the test binary
// re-executed under setpriv with it dropped from its bounding and
// inheritable sets), whose real iptables therefore cannot install the
// network's firewall. The run must be refused before any container
// exists, and its network removed; the parent, which has the capability,
// then checks that nothing of the instance is left, firewall rules
// included.
func TestAFirewallThatCannotBeInstalledRefusesTheRun(t *testing.T) {
	if instance := os.Getenv(noNetAdminEnv); instance != "" {
		runWithoutNetAdmin(t, instance)
		return
	}
	t.Parallel()
	requireEngine(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop CAP_NET_ADMIN: %v", err)
	}
	instance := fmt.Sprintf("test-%d-%d", os.Getpid(), instanceSeq.Add(1))
	cmd := exec.CommandContext(t.Context(), setpriv, "--bounding-set=-net_admin", "--inh-caps=-net_admin", "--",
		os.Args[0], "-test.run=^TestAFirewallThatCannotBeInstalledRefusesTheRun$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), noNetAdminEnv+"="+instance)
	out, err := cmd.CombinedOutput()
	t.Logf("the run without CAP_NET_ADMIN:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestAFirewallThatCannotBeInstalledRefusesTheRun") {
		t.Fatalf("the test process without CAP_NET_ADMIN failed: %v", err)
	}
	p, err := egress.New(egress.Config{Auditor: &egresstest.Recorder{}, Resolver: testResolver})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Instance: instance, DefaultImage: testImage, Egress: p})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
		t.Errorf("the refused run's instance left %d containers, networks or firewall rules (%v); want none", n, err)
	}
}

// runWithoutNetAdmin is the re-executed half: it checks it really lacks
// CAP_NET_ADMIN, then runs a networked spec that must be refused.
func runWithoutNetAdmin(t *testing.T, instance string) {
	requireEngine(t)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	const capNetAdmin = 12
	for line := range strings.Lines(string(status)) {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil || eff&(1<<capNetAdmin) != 0 {
				t.Fatalf("effective capabilities %q (%v): CAP_NET_ADMIN was not dropped", strings.TrimSpace(hex), err)
			}
		}
	}
	p, err := egress.New(egress.Config{Auditor: &egresstest.Recorder{}, Resolver: testResolver})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Instance: instance, DefaultImage: testImage, Egress: p})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spec := runnertest.Spec(`print("ran")`)
	spec.Sandbox.Network = egressPolicy()
	res, err := r.Run(t.Context(), spec)
	if !errors.Is(err, runner.ErrNetworkUnsupported) || !strings.Contains(fmtErr(err), "iptables") {
		t.Fatalf("Run = %+v, %v; want an error wrapping %v from iptables", res, err, runner.ErrNetworkUnsupported)
	}
	t.Logf("refused: %v", err)
	// Without the capability the firewall cannot be listed either: ask
	// the engine directly for what the instance has.
	filter := filters.NewArgs(filters.Arg("label", runner.LabelInstance+"="+instance))
	cs, err := r.pf.cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filter})
	if err != nil || len(cs) != 0 {
		t.Errorf("containers of the refused run: %d, %v; want none", len(cs), err)
	}
	ns, err := r.pf.cli.NetworkList(t.Context(), network.ListOptions{Filters: filter})
	if err != nil || len(ns) != 0 {
		t.Errorf("networks of the refused run: %d, %v; want none (removed with the refusal)", len(ns), err)
	}
}
