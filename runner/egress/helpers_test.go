package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

// recorder is an Auditor that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Egress(ev Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// await returns the first event matching ok, polling until waitFor.
func (r *recorder) await(t *testing.T, what string, ok func(Event) bool) Event {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		for _, ev := range r.all() {
			if ok(ev) {
				return ev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit event %s among %+v", what, r.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeResolver maps test names to addresses and never asks real DNS.
type fakeResolver struct {
	names map[string][]netip.Addr
	// next, when set for a name, replaces its answer after the first lookup.
	next  map[string][]netip.Addr
	mu    sync.Mutex
	calls map[string]int
}

func newResolver(names map[string]string) *fakeResolver {
	r := &fakeResolver{names: map[string][]netip.Addr{}, next: map[string][]netip.Addr{}, calls: map[string]int{}}
	for name, addrs := range names {
		for a := range strings.SplitSeq(addrs, ",") {
			r.names[name] = append(r.names[name], netip.MustParseAddr(a))
		}
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	if network != "ip" {
		return nil, fmt.Errorf("fake resolver: unexpected network %q", network)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[host]++
	addrs, ok := r.names[host]
	if next, ok := r.next[host]; ok && r.calls[host] > 1 {
		addrs = next
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return append([]netip.Addr(nil), addrs...), nil
}

// rebindAfterFirst makes name resolve to addr from its second lookup on.
func (r *fakeResolver) rebindAfterFirst(name, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next[name] = []netip.Addr{netip.MustParseAddr(addr)}
}

func (r *fakeResolver) lookups(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// loopbackDialer dials only loopback addresses: these tests must never
// send traffic anywhere else. It counts what it was asked to dial.
type loopbackDialer struct {
	d       net.Dialer
	refused atomic.Int64
	mu      sync.Mutex
	dialed  []string
}

func (d *loopbackDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, address)
	d.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().IsLoopback() {
		d.refused.Add(1)
		return nil, fmt.Errorf("test dialer: %q is not a loopback address", address)
	}
	return d.d.DialContext(ctx, network, address)
}

func (d *loopbackDialer) addresses() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// harness is a running Proxy on loopback with a recorder, a fake resolver
// and a loopback-only dialer.
type harness struct {
	p      *Proxy
	addr   string
	audit  *recorder
	res    *fakeResolver
	dialer *loopbackDialer
	cancel context.CancelFunc
	done   chan error
}

// testNames are the names every harness's resolver knows.
var testNames = map[string]string{
	"allowed.test":      "127.0.0.1",
	"other.test":        "127.0.0.1",
	"rebind.test":       "10.0.0.1",
	"loopback.test":     "127.0.0.1",
	"mixed.test":        "127.0.0.1,10.0.0.1",
	"bad.example.com":   "127.0.0.1",
	"good.example.com":  "127.0.0.1",
	"a.example.com":     "127.0.0.1",
	"a.b.example.com":   "127.0.0.1",
	"example.com":       "127.0.0.1",
	"metadata-ip.test":  "169.254.169.254",
	"nat64-meta.test":   "64:ff9b::a9fe:a9fe",
	"public.test":       "93.184.215.14",
	"public-mixed.test": "93.184.215.14,10.1.2.3",
	"unspecified.test":  "0.0.0.0",
	"flip.test":         "127.0.0.1",
}

// startProxy starts a proxy with cfg (Auditor, Resolver and Dialer are
// filled in) and stops it when the test ends, checking that Serve returned
// nil and that nothing but loopback was dialed.
func startProxy(t *testing.T, cfg Config) *harness {
	t.Helper()
	return startProxyResolving(t, cfg, newResolver(testNames))
}

// startProxyResolving is startProxy with res as the resolver; nil leaves
// the proxy its default, the system's resolver (h.res is then nil).
func startProxyResolving(t *testing.T, cfg Config, res *fakeResolver) *harness {
	t.Helper()
	h := &harness{audit: &recorder{}, res: res, dialer: &loopbackDialer{}, done: make(chan error, 1)}
	cfg.Auditor, cfg.Dialer = h.audit, h.dialer
	cfg.Resolver = nil
	if res != nil {
		cfg.Resolver = res
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.p = p
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	h.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(waitFor):
			t.Errorf("Serve did not return after its context ended")
		}
		if n := h.dialer.refused.Load(); n > 0 {
			t.Errorf("the proxy tried to dial %d non-loopback addresses: %v", n, h.dialer.addresses())
		}
	})
	return h
}

// register registers the loopback client address with allow and deny.
func (h *harness) register(t *testing.T, allow, deny []string) {
	t.Helper()
	err := h.p.Register(netip.MustParseAddr("127.0.0.1"), Registration{Run: RunIdentity{RunID: "run-1", QueryID: "query-1"}, Network: runner.Network{Enabled: true, Allow: allow, Deny: deny}})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
}

// client is an http.Client using the proxy, trusting roots for TLS and
// checking the server name "example.com" (httptest's certificate).
func (h *harness) client(t *testing.T, roots *x509.CertPool) *http.Client {
	t.Helper()
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}),
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "example.com"},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitFor}
}

// raw sends one raw HTTP/1.1 request to the proxy, with a Host header
// naming no real host (the proxy must go by the request target) and the
// extra header lines given, and returns the response and its body.
func (h *harness) raw(t *testing.T, method, target string, headers ...string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitFor))
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: host-header.invalid\r\n", method, target)
	for _, hl := range headers {
		req += hl + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatalf("write request: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: read response: %v", method, target, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, target, err)
	}
	return resp, string(body)
}

// tunnel opens a CONNECT tunnel to hostport and returns the connection,
// positioned after the proxy's 200 reply.
func (h *harness) tunnel(t *testing.T, hostport string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br, resp := h.tryTunnel(t, hostport)
	if resp.StatusCode != http.StatusOK {
		c.Close()
		t.Fatalf("CONNECT %s: status %q; want 200", hostport, resp.Status)
	}
	return c, br
}

// tryTunnel sends CONNECT hostport and returns whatever the proxy replied.
func (h *harness) tryTunnel(t *testing.T, hostport string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, br, resp, err := h.connect(hostport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, br, resp
}

// connect sends CONNECT hostport and reads the reply; on error the
// connection is closed.
func (h *harness) connect(hostport string) (net.Conn, *bufio.Reader, *http.Response, error) {
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dial proxy: %w", err)
	}
	c.SetDeadline(time.Now().Add(waitFor))
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport); err != nil {
		c.Close()
		return nil, nil, nil, fmt.Errorf("write CONNECT: %w", err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, nil, fmt.Errorf("CONNECT %s: read response: %w", hostport, err)
	}
	return c, br, resp, nil
}

// upstream is an HTTP handler for the test servers: "/" names the host it
// was reached as, "/headers" echoes the request headers, "/big" sends
// ?n= bytes, "/echo" echoes the body.
func upstream() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream ok host=%s", r.Host)
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		r.Header.Write(w)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write([]byte(strings.Repeat("x", n)))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, r.Body)
	})
	return mux
}

// startHTTP starts a plain HTTP upstream on loopback and returns its port.
func startHTTP(t *testing.T) uint16 {
	t.Helper()
	srv := httptest.NewServer(upstream())
	t.Cleanup(srv.Close)
	return portOf(t, srv.Listener.Addr())
}

// startHTTPS starts a TLS upstream on loopback and returns its port and a
// pool trusting its certificate.
func startHTTPS(t *testing.T) (uint16, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewTLSServer(upstream())
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return portOf(t, srv.Listener.Addr()), roots
}

// startTCP starts a raw TCP upstream on loopback that runs serve for each
// connection (and then closes it); it stops when the test ends.
func startTCP(t *testing.T, serve func(net.Conn)) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return portOf(t, ln.Addr())
}

func portOf(t *testing.T, a net.Addr) uint16 {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatalf("parse %s: %v", a, err)
	}
	return ap.Port()
}

// hp joins a host and a port.
func hp(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// wantRefusal checks a refusal's status, rule header and body.
func wantRefusal(t *testing.T, what string, resp *http.Response, body string, status int, rule string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %q; want %d", what, resp.Status, status)
	}
	if !strings.Contains(resp.Status, "(rule "+rule+")") {
		t.Errorf("%s: status line %q does not name rule %s; clients that report only it must show the rule", what, resp.Status, rule)
	}
	if got := resp.Header.Get("X-Gatekeeper-Rule"); got != rule {
		t.Errorf("%s: X-Gatekeeper-Rule %q; want %q", what, got, rule)
	}
	if !strings.HasPrefix(body, "gatekeeper egress denied: ") || !strings.Contains(body, "(rule "+rule+")") {
		t.Errorf("%s: body %q does not name rule %s", what, body, rule)
	}
}

// errorsIsTimeout reports whether err is a network timeout.
func errorsIsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
