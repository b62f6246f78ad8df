package egress

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// fakeJudge records what it is asked and answers with decide (allow all
// when nil).
type fakeJudge struct {
	mu     sync.Mutex
	reqs   []runner.HTTPRequest
	decide func(runner.HTTPRequest) runner.HTTPVerdict
}

func (j *fakeJudge) JudgeRequest(_ context.Context, req runner.HTTPRequest) runner.HTTPVerdict {
	j.mu.Lock()
	j.reqs = append(j.reqs, req)
	j.mu.Unlock()
	if j.decide == nil {
		return runner.HTTPVerdict{Allow: true, Rule: "http.allowed", Reason: "test allows"}
	}
	return j.decide(req)
}

func (j *fakeJudge) seen() []runner.HTTPRequest {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]runner.HTTPRequest(nil), j.reqs...)
}

// tlsUpstream is a TLS upstream on loopback (certificate for example.com
// and 127.0.0.1) that records the requests it serves: "/count" answers
// the number of body bytes it read, "/headers" echoes the headers, "/echo"
// the body, anything else names the path.
type tlsUpstream struct {
	port     uint16
	roots    *x509.CertPool
	received atomic.Int64 // body bytes read by /count so far
	mu       sync.Mutex
	hits     []*http.Request
	bodies   []string // what /echo read
}

func startTLSUpstream(t *testing.T, h2 bool) *tlsUpstream {
	t.Helper()
	u := &tlsUpstream{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.hits = append(u.hits, r.Clone(context.Background()))
		u.mu.Unlock()
		switch r.URL.Path {
		case "/count":
			buf := make([]byte, 64<<10)
			var n int64
			for {
				k, err := r.Body.Read(buf)
				n += int64(k)
				u.received.Add(int64(k))
				if err != nil {
					break
				}
			}
			fmt.Fprintf(w, "%d", n)
		case "/headers":
			r.Header.Write(w)
		case "/gz":
			// The Authorization header, gzipped when the client takes it.
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				io.WriteString(w, r.Header.Get("Authorization"))
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, r.Header.Get("Authorization"))
			zw.Close()
		case "/br":
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, "not really brotli: "+r.Header.Get("Authorization"))
		case "/stall":
			io.WriteString(w, "started")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(waitFor):
			}
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			u.mu.Lock()
			u.bodies = append(u.bodies, string(b))
			u.mu.Unlock()
			w.Write(b)
		default:
			fmt.Fprintf(w, "upstream %s %s %s", r.Proto, r.Method, r.URL.Path)
		}
	}))
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u.roots = x509.NewCertPool()
	u.roots.AddCert(srv.Certificate())
	u.port = portOf(t, srv.Listener.Addr())
	return u
}

func (u *tlsUpstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.hits...)
}

// interceptHarness is a proxy with a CA whose upstream roots trust u.
type interceptHarness struct {
	*harness
	ca *CA
	u  *tlsUpstream
}

// startIntercepting starts a proxy with a fresh CA that verifies
// upstreams against u's certificate (or roots, when not nil).
func startIntercepting(t *testing.T, u *tlsUpstream, cfg Config) *interceptHarness {
	t.Helper()
	ca, err := NewCA()
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	cfg.CA = ca
	if cfg.UpstreamRoots == nil {
		cfg.UpstreamRoots = u.roots
	}
	return &interceptHarness{harness: startProxy(t, cfg), ca: ca, u: u}
}

// registerInspecting registers the loopback client with example.com and
// a.example.com allowed (and u's loopback port), example.com inspected.
func (h *interceptHarness) registerInspecting(t *testing.T, j runner.RequestJudge, n runner.Network, sentinels map[string]string) {
	t.Helper()
	n.Enabled = true
	n.Allow = append(n.Allow, "example.com", "a.example.com", hp("127.0.0.1", h.u.port))
	if n.Inspect == nil {
		n.Inspect = []string{"example.com"}
	}
	reg := Registration{Run: RunIdentity{RunID: "run-1", QueryID: "query-1"}, Network: n, Sentinels: sentinels}
	if j != nil {
		reg.Run.Judge = j
	}
	if err := h.p.Register(netip.MustParseAddr("127.0.0.1"), reg); err != nil {
		t.Fatalf("Register: %v", err)
	}
}

// proxyClient is an http.Client through the proxy trusting roots (the
// proxy's CA when nil), speaking HTTP/2 when h2.
func (h *interceptHarness) proxyClient(t *testing.T, roots *x509.CertPool, h2 bool, tweak func(*tls.Config)) *http.Client {
	t.Helper()
	if roots == nil {
		roots = x509.NewCertPool()
		roots.AppendCertsFromPEM(h.p.CACert())
	}
	tc := &tls.Config{RootCAs: roots}
	if tweak != nil {
		tweak(tc)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}), TLSClientConfig: tc, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP1(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitFor}
}

// do sends req and returns the response and its body.
func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	return resp, string(b)
}

func newReq(t *testing.T, method, u string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	return req
}

func TestProxyInterceptsOnlyInspectedHosts(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			t.Parallel()
			u := startTLSUpstream(t, h2)
			h := startIntercepting(t, u, Config{})
			j := &fakeJudge{}
			h.registerInspecting(t, j, runner.Network{}, nil)
			wantProto := "HTTP/1.1"
			if h2 {
				wantProto = "HTTP/2.0"
			}

			// Inspected: the client sees the proxy's leaf and an answer
			// from the upstream, and the judge saw the request.
			resp, body := do(t, h.proxyClient(t, nil, h2, nil), newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/inspected?q=1", u.port), nil))
			if resp.StatusCode != http.StatusOK || body != fmt.Sprintf("upstream %s GET /inspected", wantProto) {
				t.Fatalf("inspected GET = %q %q", resp.Status, body)
			}
			if resp.Proto != wantProto {
				t.Errorf("client spoke %s to the proxy; want %s", resp.Proto, wantProto)
			}
			if got := resp.TLS.PeerCertificates[0].Issuer.CommonName; !strings.HasPrefix(got, "gatekeeper egress CA ") {
				t.Errorf("inspected host's certificate issued by %q; want the proxy's CA", got)
			}
			seen := j.seen()
			if len(seen) != 1 || seen[0].Path != "/inspected" || seen[0].Query != "q=1" || seen[0].Host != "example.com" || seen[0].Scheme != "https" || seen[0].Proto != wantProto {
				t.Errorf("judge saw %+v; want one GET /inspected?q=1 to example.com", seen)
			}
			ev := h.audit.await(t, "for the inspected request", func(ev Event) bool { return ev.Intercepted && ev.Path == "/inspected" })
			if ev.Addr != netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), u.port) {
				t.Errorf("event Addr %s; want the upstream's", ev.Addr)
			}
			if ev.Decision != Allow || ev.Rule != "http.allowed" || ev.Status != 200 || ev.Proto != wantProto || ev.RunID != "run-1" || ev.Method != "GET" || ev.BytesDown != int64(len(body)) {
				t.Errorf("event %+v; want an allowed GET, status 200, %s, %d bytes down", ev, wantProto, len(body))
			}

			// Not inspected: a tunnel; the client sees the upstream's own
			// certificate and the judge is not asked.
			c := h.proxyClient(t, u.roots, h2, func(tc *tls.Config) { tc.ServerName = "example.com" })
			resp, body = do(t, c, newReq(t, http.MethodGet, fmt.Sprintf("https://a.example.com:%d/tunnelled", u.port), nil))
			if resp.StatusCode != http.StatusOK || !strings.HasSuffix(body, "GET /tunnelled") {
				t.Fatalf("tunnelled GET = %q %q", resp.Status, body)
			}
			if got := resp.TLS.PeerCertificates[0].Issuer.CommonName; strings.HasPrefix(got, "gatekeeper") {
				t.Errorf("a host not inspected was intercepted (issuer %q)", got)
			}
			if n := len(j.seen()); n != 1 {
				t.Errorf("the judge was asked %d times; want 1 (the tunnel is not judged)", n)
			}
		})
	}
}

func TestProxyRefusalTellsTheProgramWhyAndNotToRetry(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, false)
	h := startIntercepting(t, u, Config{})
	j := &fakeJudge{decide: func(r runner.HTTPRequest) runner.HTTPVerdict {
		if r.Method == http.MethodGet {
			return runner.HTTPVerdict{Allow: true, Rule: "http.allowed"}
		}
		return runner.HTTPVerdict{Rule: "http.read_only", Reason: "only GET is allowed on example.com."}
	}}
	h.registerInspecting(t, j, runner.Network{}, nil)
	for _, h2 := range []bool{false, true} {
		resp, body := do(t, h.proxyClient(t, nil, h2, nil), newReq(t, http.MethodDelete, fmt.Sprintf("https://example.com:%d/repos/x", u.port), nil))
		want := fmt.Sprintf("gatekeeper refused DELETE https://example.com:%d/repos/x: http.read_only: only GET is allowed on example.com. This request will be refused again; do not retry it.\n", u.port)
		if resp.StatusCode != http.StatusForbidden || body != want {
			t.Errorf("h2=%v: DELETE = %q %q; want 403 %q", h2, resp.Status, body, want)
		}
		if got := resp.Header.Get("X-Gatekeeper-Rule"); got != "http.read_only" {
			t.Errorf("h2=%v: X-Gatekeeper-Rule %q", h2, got)
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the upstream received %d refused requests", n)
	}
	ev := h.audit.await(t, "for the refusal", func(ev Event) bool { return ev.Intercepted && ev.Method == http.MethodDelete })
	if ev.Decision != Deny || ev.Rule != "http.read_only" || ev.Status != 403 || ev.Path != "/repos/x" {
		t.Errorf("refusal event %+v", ev)
	}
}

func TestProxyJudgeSeesTheRequest(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, true)
	h := startIntercepting(t, u, Config{})
	j := &fakeJudge{}
	h.registerInspecting(t, j, runner.Network{BodyPreview: 1024}, nil)
	payload := strings.Repeat("0123456789", 300)
	req := newReq(t, http.MethodPost, fmt.Sprintf("https://example.com:%d/echo?a=1&b=%%2F", u.port), strings.NewReader(payload))
	req.Header.Set("X-Custom", "v")
	resp, body := do(t, h.proxyClient(t, nil, true, nil), req)
	if resp.StatusCode != 200 || body != payload {
		t.Fatalf("POST /echo = %q, %d bytes; want the payload back", resp.Status, len(body))
	}
	seen := j.seen()
	if len(seen) != 1 {
		t.Fatalf("judge saw %d requests", len(seen))
	}
	r := seen[0]
	if r.Method != "POST" || r.Path != "/echo" || r.Query != "a=1&b=%2F" || r.Port != u.port || r.BodyBytes != int64(len(payload)) || string(r.Body) != payload[:1024] {
		t.Errorf("judge saw %s %s?%s port %d, %d body bytes, preview %q", r.Method, r.Path, r.Query, r.Port, r.BodyBytes, r.Body)
	}
	if !slices.Contains(r.Headers, "X-Custom") || !slices.IsSorted(r.Headers) {
		t.Errorf("judge saw headers %v; want X-Custom among them, sorted", r.Headers)
	}
	ev := h.audit.await(t, "for the POST", func(ev Event) bool { return ev.Intercepted && ev.Method == "POST" })
	if ev.BytesUp != int64(len(payload)) || ev.BytesDown != int64(len(payload)) {
		t.Errorf("event counts %d up, %d down; want %d each way", ev.BytesUp, ev.BytesDown, len(payload))
	}
}

func TestProxyRefusesEveryRequestWithoutAJudge(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, false)
	h := startIntercepting(t, u, Config{})
	h.registerInspecting(t, nil, runner.Network{}, nil)
	resp, body := do(t, h.proxyClient(t, nil, false, nil), newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/", u.port), nil))
	if resp.StatusCode != 403 || resp.Header.Get("X-Gatekeeper-Rule") != RuleNoJudge || !strings.Contains(body, RuleNoJudge) {
		t.Errorf("GET without a judge = %q %q", resp.Status, body)
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}
}

func TestProxyVerifiesTheUpstreamWhateverTheClientDoes(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, false)
	h := startIntercepting(t, u, Config{UpstreamRoots: x509.NewCertPool()}) // trusts nothing
	j := &fakeJudge{}
	h.registerInspecting(t, j, runner.Network{}, nil)
	c := h.proxyClient(t, nil, false, func(tc *tls.Config) { tc.InsecureSkipVerify = true })
	resp, body := do(t, c, newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/", u.port), nil))
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Gatekeeper-Rule") != RuleUpstreamUnverified {
		t.Errorf("GET to a forged upstream = %q %q; want 502 %s", resp.Status, body, RuleUpstreamUnverified)
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the unverified upstream received %d requests", n)
	}
	h.audit.await(t, "upstream_unverified", func(ev Event) bool { return ev.Rule == RuleUpstreamUnverified && ev.Decision == Deny })
}

func TestProxyAuditsAClientThatRefusesItsCertificate(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, false)
	h := startIntercepting(t, u, Config{})
	h.registerInspecting(t, &fakeJudge{}, runner.Network{}, nil)
	// This client trusts only the real upstream's certificate: a pinning client.
	c := h.proxyClient(t, u.roots, false, func(tc *tls.Config) { tc.ServerName = "example.com" })
	_, err := c.Do(newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/", u.port), nil))
	var uerr x509.UnknownAuthorityError
	if !errors.As(err, &uerr) {
		t.Errorf("pinning client got %v; want an unknown authority error (never the real upstream)", err)
	}
	ev := h.audit.await(t, "tls_refused", func(ev Event) bool { return ev.Rule == RuleTLSRefused })
	if ev.Decision != Deny || !ev.Intercepted || ev.Host != "example.com" || ev.RunID != "run-1" {
		t.Errorf("tls_refused event %+v", ev)
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}
}

func TestProxyRefusesAHostOtherThanTheConnectHost(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, true)
	h := startIntercepting(t, u, Config{})
	j := &fakeJudge{}
	h.registerInspecting(t, j, runner.Network{}, nil)
	target := fmt.Sprintf("https://example.com:%d/", u.port)

	t.Run("a Host header or :authority naming another host", func(t *testing.T) {
		for _, h2 := range []bool{false, true} {
			req := newReq(t, http.MethodGet, target, nil)
			req.Host = "a.example.com"
			resp, body := do(t, h.proxyClient(t, nil, h2, nil), req)
			if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("X-Gatekeeper-Rule") != RuleHostMismatch {
				t.Errorf("h2=%v: Host a.example.com on example.com = %q %q; want 421 %s", h2, resp.Status, body, RuleHostMismatch)
			}
		}
	})
	t.Run("a TLS server name naming another host", func(t *testing.T) {
		c := h.proxyClient(t, nil, true, func(tc *tls.Config) { tc.ServerName = "a.example.com" })
		if _, err := c.Do(newReq(t, http.MethodGet, target, nil)); err == nil {
			t.Errorf("SNI a.example.com on a CONNECT to example.com was served")
		}
		h.audit.await(t, "SNI host_mismatch", func(ev Event) bool {
			return ev.Rule == RuleHostMismatch && strings.Contains(ev.Reason, "TLS server name")
		})
	})
	if n := len(u.requests()); n != 0 || len(j.seen()) != 0 {
		t.Errorf("the upstream received %d requests and the judge saw %d; want none", n, len(j.seen()))
	}
}

// interceptedConn opens a CONNECT to hostport and completes TLS with the
// proxy's leaf over HTTP/1.1.
func (h *interceptHarness) interceptedConn(t *testing.T, hostport string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, br := h.tunnel(t, hostport)
	if br.Buffered() > 0 {
		t.Fatalf("bytes after the 200")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(h.p.CACert())
	tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "example.com", NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return tc, bufio.NewReader(tc)
}

func TestProxyRefusesAConflictingContentLengthAndTransferEncoding(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, false)
	h := startIntercepting(t, u, Config{})
	j := &fakeJudge{}
	h.registerInspecting(t, j, runner.Network{}, nil)
	tc, br := h.interceptedConn(t, hp("example.com", u.port))
	host := hp("example.com", u.port)
	// Well-framed requests of each kind first, pipelined on one
	// connection, so that the framer must follow every body to find the
	// conflicting head; then the conflict, whose Content-Length reading
	// would end the body after "5\r\nh" and make "ello..." a request.
	fmt.Fprintf(tc, "POST /echo HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n", host)
	fmt.Fprintf(tc, "POST /echo HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\n\r\nfghij", host)
	fmt.Fprintf(tc, "\r\nGET /plain HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	fmt.Fprintf(tc, "POST /echo HTTP/1.1\r\nHost: %s\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
	var got []string
	for range 5 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		b, _ := io.ReadAll(resp.Body)
		got = append(got, fmt.Sprintf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Gatekeeper-Rule"), b))
	}
	want := []string{"200  abcde", "200  fghij", "200  upstream HTTP/1.1 GET /plain"}
	if len(got) != 4 || !slices.Equal(got[:3], want) || !strings.HasPrefix(got[3], "400 "+RuleBadRequest+" gatekeeper refused POST") {
		t.Errorf("responses %q; want %q, then the conflicting POST refused 400 and the connection closed", got, want)
	}
	if n := len(u.requests()); n != 3 {
		t.Errorf("upstream received %d requests; want the 3 well-framed ones", n)
	}
	if n := len(j.seen()); n != 3 {
		t.Errorf("judge saw %d requests; want 3", n)
	}
}

func TestProxyStreamsALargeUploadAndCutsOneOverTheLimit(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	t.Run("10 MiB stream through", func(t *testing.T) {
		t.Parallel()
		u := startTLSUpstream(t, false)
		h := startIntercepting(t, u, Config{})
		h.registerInspecting(t, &fakeJudge{}, runner.Network{BodyPreview: 1024}, nil)
		// The body's second half is only produced once the upstream has
		// received most of the first: a proxy that buffered the whole body
		// would never forward it, and the upload would time out.
		pr, pw := io.Pipe()
		go func() {
			chunk := make([]byte, 64<<10)
			for sent := 0; sent < 10*mib; sent += len(chunk) {
				if sent == 5*mib {
					deadline := time.Now().Add(waitFor / 2)
					for u.received.Load() < 4*mib {
						if time.Now().After(deadline) {
							pw.CloseWithError(errors.New("the upstream got nothing while the client was still sending: the proxy buffers uploads"))
							return
						}
						time.Sleep(time.Millisecond)
					}
				}
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			pw.Close()
		}()
		resp, body := do(t, h.proxyClient(t, nil, false, nil), newReq(t, http.MethodPut, fmt.Sprintf("https://example.com:%d/count", u.port), pr))
		if resp.StatusCode != 200 || body != fmt.Sprint(10*mib) {
			t.Errorf("10 MiB upload = %q %q", resp.Status, body)
		}
		ev := h.audit.await(t, "for the upload", func(ev Event) bool { return ev.Intercepted && ev.Method == http.MethodPut })
		if ev.BytesUp != 10*mib {
			t.Errorf("event counts %d bytes up; want %d", ev.BytesUp, 10*mib)
		}
	})
	t.Run("a body over MaxBytesPerConn is cut", func(t *testing.T) {
		t.Parallel()
		u := startTLSUpstream(t, false)
		h := startIntercepting(t, u, Config{MaxBytesPerConn: 2 * mib})
		h.registerInspecting(t, &fakeJudge{}, runner.Network{}, nil)
		resp, err := h.proxyClient(t, nil, false, nil).Do(newReq(t, http.MethodPut, fmt.Sprintf("https://example.com:%d/count", u.port), io.LimitReader(zeros{}, 5*mib)))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(b) == fmt.Sprint(5*mib) {
				t.Errorf("a 5 MiB upload passed a 2 MiB limit")
			}
		}
		ev := h.audit.await(t, "for the cut upload", func(ev Event) bool { return ev.Intercepted && ev.Method == http.MethodPut })
		if !strings.Contains(ev.Error, "byte limit") || ev.BytesUp > 2*mib {
			t.Errorf("event %+v; want a byte limit error after at most 2 MiB", ev)
		}
		if got := u.received.Load(); got > 2*mib {
			t.Errorf("upstream received %d bytes; want at most %d", got, 2*mib)
		}
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestProxyBoundsARunsRequestLinesAndBindStartsTheNextRun(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, true)
	h := startIntercepting(t, u, Config{})
	h.registerInspecting(t, &fakeJudge{}, runner.Network{}, nil)
	c := h.proxyClient(t, nil, true, nil)
	const extra = 10
	for i := range MaxRequestLines + extra {
		resp, _ := do(t, c, newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/r%d", u.port, i), nil))
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %s", i, resp.Status)
		}
	}
	count := func(run string) (lines int) {
		for _, ev := range h.audit.all() {
			if ev.RunID == run && ev.Intercepted {
				lines++
			}
		}
		return lines
	}
	if n := count("run-1"); n != MaxRequestLines {
		t.Errorf("run-1 wrote %d request lines; want %d", n, MaxRequestLines)
	}
	j2 := &fakeJudge{}
	if err := h.p.Bind(netip.MustParseAddr("127.0.0.1"), RunIdentity{RunID: "run-2", QueryID: "query-2", Judge: j2}); err != nil {
		t.Fatalf("Bind: %v", err)
	}
	sum := h.audit.await(t, "summary of run-1", func(ev Event) bool { return ev.Rule == RuleRequestLines })
	if sum.RunID != "run-1" || sum.Omitted != extra {
		t.Errorf("summary %+v; want run-1 with %d omitted", sum, extra)
	}
	// The same connection's next request belongs to run-2 and its judge.
	do(t, c, newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/after-bind", u.port), nil))
	ev := h.audit.await(t, "after Bind", func(ev Event) bool { return ev.Path == "/after-bind" })
	if ev.RunID != "run-2" || ev.QueryID != "query-2" || len(j2.seen()) != 1 {
		t.Errorf("after Bind: event of %q/%q, run-2's judge asked %d times; want run-2, once", ev.RunID, ev.QueryID, len(j2.seen()))
	}
}

func TestProxyRefusesEveryRequestAfterTooManyRefusals(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, true)
	h := startIntercepting(t, u, Config{})
	j := &fakeJudge{decide: func(runner.HTTPRequest) runner.HTTPVerdict { return runner.HTTPVerdict{Rule: "http.no", Reason: "no"} }}
	h.registerInspecting(t, j, runner.Network{}, nil)
	c := h.proxyClient(t, nil, true, nil)
	for i := range MaxRequestRefusals + 1 {
		resp, _ := do(t, c, newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/", u.port), nil))
		want := "http.no"
		if i == MaxRequestRefusals {
			want = RuleMaxRefusals
		}
		if got := resp.Header.Get("X-Gatekeeper-Rule"); resp.StatusCode != 403 || got != want {
			t.Fatalf("request %d: %s rule %q; want 403 %s", i, resp.Status, got, want)
		}
	}
	if n := len(j.seen()); n != MaxRequestRefusals {
		t.Errorf("judge asked %d times; want %d", n, MaxRequestRefusals)
	}
}

func TestProxyInjectsASecretOnlyOverTLSAndScrubsItFromTheResponse(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, false)
	httpPort := startHTTP(t)
	h := startIntercepting(t, u, Config{})
	secret := runner.Secret{Name: "tok", Hosts: []string{"example.com"}, Inject: runner.SecretPlace{Header: "Authorization"}, Value: runner.NewHidden("real-value-123")}
	sentinels := NewSentinels([]runner.Secret{secret})
	j := &fakeJudge{}
	h.registerInspecting(t, j, runner.Network{Allow: []string{hp("127.0.0.1", httpPort)}, Inspect: []string{}, Secrets: []runner.Secret{secret}}, sentinels)

	req := newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/headers", u.port), nil)
	req.Header.Set("Authorization", "Bearer "+sentinels["tok"])
	resp, body := do(t, h.proxyClient(t, nil, false, nil), req)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /headers = %q %q", resp.Status, body)
	}
	if hits := u.requests(); len(hits) != 1 || hits[0].Header.Get("Authorization") != "Bearer real-value-123" {
		t.Errorf("upstream did not receive the secret")
	}
	if strings.Contains(body, "real-value-123") || !strings.Contains(body, sentinels["tok"]) {
		t.Errorf("echoed headers %q: the secret came back, or its sentinel did not", body)
	}
	if seen := j.seen(); len(seen) != 1 || !slices.Equal(seen[0].Secrets, []string{"tok"}) {
		t.Errorf("judge saw %+v; want secrets [tok]", seen)
	}
	ev := h.audit.await(t, "with the secret", func(ev Event) bool { return ev.Path == "/headers" })
	if !slices.Equal(ev.Secrets, []string{"tok"}) || strings.Contains(fmt.Sprintf("%+v", ev), "real-value-123") {
		t.Errorf("event %+v; want secrets [tok] and never the value", ev)
	}

	// Plain http to the same host: refused before anything is sent.
	plain := newReq(t, http.MethodGet, fmt.Sprintf("http://example.com:%d/", httpPort), nil)
	plain.Header.Set("Authorization", "Bearer "+sentinels["tok"])
	resp, body = do(t, h.client(t, nil), plain)
	if resp.StatusCode != 403 || resp.Header.Get("X-Gatekeeper-Rule") != RuleSecretPlaintext {
		t.Errorf("sentinel over plain http = %q %q; want 403 %s", resp.Status, body, RuleSecretPlaintext)
	}
	// Plain http without a sentinel is judged like https.
	resp, body = do(t, h.client(t, nil), newReq(t, http.MethodGet, fmt.Sprintf("http://example.com:%d/plain", httpPort), nil))
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "upstream ok") {
		t.Errorf("plain http = %q %q", resp.Status, body)
	}
	if seen := j.seen(); len(seen) != 2 || seen[1].Scheme != "http" || seen[1].Path != "/plain" {
		t.Errorf("judge saw %+v; want the plain request second, scheme http", seen)
	}
}

func TestRegisterRefusesInterceptionWithoutACA(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Auditor: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []runner.Network{
		{Enabled: true, Inspect: []string{"example.com"}},
		{Enabled: true, Secrets: []runner.Secret{{Name: "s", Hosts: []string{"example.com"}, Inject: runner.SecretPlace{Header: "X"}}}},
	} {
		err := p.Register(netip.MustParseAddr("10.0.0.9"), Registration{Network: n, Sentinels: map[string]string{"s": "gksentinel_x"}})
		if !errors.Is(err, ErrNoCA) {
			t.Errorf("Register(%+v) = %v; want ErrNoCA", n, err)
		}
	}
	if p.CACert() != nil {
		t.Errorf("CACert without a CA is not nil")
	}
}

// unused keeps net imported for helpers above on every platform.
var _ = net.ErrClosed

func TestProxyGoesByTheAbsoluteFormHostOnAnInterceptedConnection(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, false)
	h := startIntercepting(t, u, Config{})
	j := &fakeJudge{}
	h.registerInspecting(t, j, runner.Network{}, nil)
	tc, br := h.interceptedConn(t, hp("example.com", u.port))
	// Go's server ignores the Host header of an absolute-form request
	// (RFC 9112 3.2.2), so the URL's host is the one checked and sent.
	fmt.Fprintf(tc, "GET https://a.example.com:%d/other HTTP/1.1\r\nHost: example.com:%d\r\n\r\n", u.port, u.port)
	fmt.Fprintf(tc, "GET https://example.com:%d/same HTTP/1.1\r\nHost: a.example.com\r\n\r\n", u.port)
	var got []string
	for range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("read response: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		got = append(got, fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("X-Gatekeeper-Rule")))
	}
	if got[0] != "421 "+RuleHostMismatch || got[1] != "200 " {
		t.Errorf("responses %q; want the other host refused 421, the same host served", got)
	}
	hits := u.requests()
	if len(hits) != 1 || hits[0].Host != hp("example.com", u.port) || hits[0].URL.Path != "/same" {
		t.Errorf("upstream received %d requests (first Host %q); want /same with Host example.com", len(hits), func() string {
			if len(hits) > 0 {
				return hits[0].Host
			}
			return ""
		}())
	}
}

func TestProxySwapsABodySecretInABodyReadWholeAndRefusesALargerOne(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, false)
	h := startIntercepting(t, u, Config{})
	secret := runner.Secret{Name: "form", Hosts: []string{"example.com"}, Inject: runner.SecretPlace{Body: true}, Value: runner.NewHidden("body-value-456")}
	sentinels := NewSentinels([]runner.Secret{secret})
	j := &fakeJudge{}
	h.registerInspecting(t, j, runner.Network{BodyPreview: 16, Secrets: []runner.Secret{secret}}, sentinels)
	c := h.proxyClient(t, nil, true, nil)

	// The sentinel lies past the 16-byte preview: the body is read whole.
	payload := strings.Repeat("p", 100) + "&token=" + sentinels["form"]
	resp, body := do(t, c, newReq(t, http.MethodPost, fmt.Sprintf("https://example.com:%d/echo", u.port), strings.NewReader(payload)))
	if resp.StatusCode != 200 || body != payload {
		t.Errorf("POST = %q %q; want the payload echoed with the sentinel back in place of the value", resp.Status, body)
	}
	u.mu.Lock()
	got := append([]string(nil), u.bodies...)
	u.mu.Unlock()
	if len(got) != 1 || got[0] != strings.Repeat("p", 100)+"&token=body-value-456" {
		t.Errorf("upstream read %q; want the value swapped in", got)
	}
	if seen := j.seen(); len(seen) != 1 || len(seen[0].Body) != 16 || !slices.Equal(seen[0].Secrets, []string{"form"}) || seen[0].BodyBytes != int64(len(payload)) {
		t.Errorf("judge saw %+v; want a 16-byte preview, the whole length and secret form", seen)
	}

	big := sentinels["form"] + strings.Repeat("x", MaxSecretBody)
	resp, body = do(t, c, newReq(t, http.MethodPost, fmt.Sprintf("https://example.com:%d/echo", u.port), strings.NewReader(big)))
	if resp.StatusCode != 403 || resp.Header.Get("X-Gatekeeper-Rule") != RuleSecretBodyTooLarge {
		t.Errorf("POST of %d bytes with a body secret = %q %.200q; want 403 %s", len(big), resp.Status, body, RuleSecretBodyTooLarge)
	}
	if n := len(u.requests()); n != 1 {
		t.Errorf("upstream received %d requests; want only the first", n)
	}
}

func TestProxyCutsAnInterceptedRequestIdleForTooLongButNotTheConnection(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, true)
	h := startIntercepting(t, u, Config{IdleTimeout: 300 * time.Millisecond})
	h.registerInspecting(t, &fakeJudge{}, runner.Network{}, nil)
	c := h.proxyClient(t, nil, true, nil)
	start := time.Now()
	resp, err := c.Do(newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/stall", u.port), nil))
	if err != nil {
		t.Fatalf("GET /stall: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || string(b) != "started" || time.Since(start) > waitFor/2 {
		t.Errorf("stalled response: %q, %v after %s; want it cut after its first bytes", b, err, time.Since(start))
	}
	ev := h.audit.await(t, "for the stalled request", func(ev Event) bool { return ev.Path == "/stall" })
	if !strings.Contains(ev.Error, "idle timeout") || ev.Status != 200 {
		t.Errorf("event %+v; want status 200 and an idle timeout", ev)
	}
	// The connection itself lives on while requests keep coming.
	for i := range 4 {
		time.Sleep(150 * time.Millisecond)
		var reused bool
		req := newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/again", u.port), nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }}))
		resp, body := do(t, c, req)
		if resp.StatusCode != 200 || !strings.HasSuffix(body, "GET /again") {
			t.Fatalf("request %d after the stall: %q %q", i, resp.Status, body)
		}
		if i > 0 && !reused {
			t.Errorf("request %d after the stall came on a new connection; the last one was closed", i)
		}
	}
}

func TestProxyScrubsACompressedResponseAndCutsOneItCannotDecode(t *testing.T) {
	t.Parallel()
	u := startTLSUpstream(t, false)
	h := startIntercepting(t, u, Config{})
	secret := runner.Secret{Name: "tok", Hosts: []string{"example.com"}, Inject: runner.SecretPlace{Header: "Authorization"}, Value: runner.NewHidden("zipped-secret-789")}
	sentinels := NewSentinels([]runner.Secret{secret})
	h.registerInspecting(t, &fakeJudge{}, runner.Network{Secrets: []runner.Secret{secret}}, sentinels)
	c := h.proxyClient(t, nil, false, nil)

	req := newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/gz", u.port), nil)
	req.Header.Set("Authorization", sentinels["tok"])
	req.Header.Set("Accept-Encoding", "gzip") // asked for, so the client does not decode it itself
	resp, body := do(t, c, req)
	if resp.StatusCode != 200 || body != sentinels["tok"] || resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("gzip-capable client got %q %q (Content-Encoding %q); want the sentinel, decoded", resp.Status, body, resp.Header.Get("Content-Encoding"))
	}

	req = newReq(t, http.MethodGet, fmt.Sprintf("https://example.com:%d/br", u.port), nil)
	req.Header.Set("Authorization", sentinels["tok"])
	resp, body = do(t, c, req)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Gatekeeper-Rule") != RuleUndecodable || strings.Contains(body, "zipped-secret-789") {
		t.Errorf("undecodable response = %q %q; want 502 %s without the value", resp.Status, body, RuleUndecodable)
	}
}
