package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/swap"
)

// maxConcurrentStreams bounds the HTTP/2 streams of one intercepted
// connection.
const maxConcurrentStreams = 64

// interception is what the requests on one intercepted CONNECT (or one
// forwarded plain request to an inspected host) share: the checked target
// and the transport that reaches exactly the addresses checked for it.
type interception struct {
	p      *Proxy
	s      *server
	src    netip.Addr
	t      target
	scheme string // "https", or "http" for a forwarded plain request
	rt     *http.Transport
	dialed atomic.Pointer[netip.AddrPort] // the upstream address last dialed
}

// errSNIMismatch fails a handshake whose server name is not the CONNECT host.
var errSNIMismatch = errors.New("TLS server name is not the CONNECT host")

// intercept serves a CONNECT that admit allowed to a host the run
// inspects: 200, a TLS handshake as t with a leaf from the CA, then every
// HTTP/1.1 or HTTP/2 request on the connection through handle, until the
// client closes it or the proxy shuts down. A failed handshake is audited
// (egress.tls_refused or egress.host_mismatch) and ends the connection:
// the proxy never falls back to a tunnel.
func (p *Proxy) intercept(ctx context.Context, s *server, conn net.Conn, brw *bufio.ReadWriter, ev *Event, v verdict, t target) {
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	raw := &bufferedConn{Conn: conn, done: make(chan struct{})}
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		raw.pending = append([]byte(nil), b...)
	}
	var badSNI string
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "" {
				if h, err := nethost.Normalize(hello.ServerName); err != nil || h != t.host {
					badSNI = hello.ServerName
					return nil, errSNIMismatch
				}
			}
			return p.cfg.CA.Leaf(t.host)
		},
	}
	tconn := tls.Server(raw, cfg)
	hctx, cancel := context.WithTimeout(ctx, p.cfg.HeaderTimeout)
	err := tconn.HandshakeContext(hctx)
	cancel()
	if err != nil {
		ev.Intercepted, ev.Decision, ev.Duration = true, Deny, time.Since(ev.Time)
		if badSNI != "" {
			ev.Rule = RuleHostMismatch
			ev.Reason = fmt.Sprintf("the TLS server name %+.128q is not %s, the host the CONNECT named", badSNI, t)
		} else {
			ev.Rule = RuleTLSRefused
			ev.Reason = fmt.Sprintf("the TLS handshake with the client failed (%v): requests to %s are inspected, so a client must trust the sandbox's gatekeeper CA; one that pins certificates cannot reach it", err, t)
		}
		if sb, ok := p.lookup(ev.Source); ok {
			p.auditRequest(sb.stats, *ev)
		} else {
			p.audit(*ev)
		}
		tconn.Close()
		return
	}
	ic := &interception{p: p, s: s, src: ev.Source, t: t, scheme: "https"}
	ic.rt = p.upstreamTransport(v.addrs, t, false, ic.dialed.Store)
	defer ic.rt.CloseIdleConnections()
	hs := p.httpServer(ctx, ic)
	hs.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: maxConcurrentStreams}
	var served net.Conn = tconn // HTTP/2: the server must see the *tls.Conn
	if tconn.ConnectionState().NegotiatedProtocol != "h2" {
		served = &h1Framer{Conn: tconn}
		hs.ConnContext = withFramer
	}
	hs.Serve(&oneConnListener{c: served, done: raw.done})
}

// ServeHTTP decides one request on an intercepted connection.
func (ic *interception) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !ic.s.enter() {
		panic(http.ErrAbortHandler)
	}
	defer ic.s.exit()
	ic.handle(w, r)
}

// exchange is one intercepted request in progress.
type exchange struct {
	ic *interception
	w  http.ResponseWriter
	r  *http.Request
	ev Event
	st *runStats // nil for an unknown source
}

// handle decides r and, when it is allowed, forwards it and streams the
// response back. Every outcome is one Event.
func (ic *interception) handle(w http.ResponseWriter, r *http.Request) {
	p := ic.p
	conflict := r.ProtoMajor == 1 && conflictingFraming(r) // first: it counts every request
	x := &exchange{ic: ic, w: w, r: r, ev: Event{
		Time: time.Now(), Source: ic.src, Method: r.Method, Host: ic.t.host, Port: ic.t.port,
		Intercepted: true, Path: r.URL.EscapedPath(), Proto: r.Proto,
	}}
	sb, ok := p.lookup(ic.src)
	if !ok {
		x.refuse(http.StatusForbidden, RuleUnknownSource, fmt.Sprintf("connection from %s belongs to no registered sandbox", ic.src))
		return
	}
	x.ev.RunID, x.ev.QueryID, x.st = sb.id.RunID, sb.id.QueryID, sb.stats
	if x.st.overRefusals() {
		x.refuse(http.StatusForbidden, RuleMaxRefusals, fmt.Sprintf("this run has had %d requests refused, the limit, and every further one is refused", MaxRequestRefusals))
		return
	}
	if r.Method == http.MethodConnect {
		x.refuse(http.StatusBadRequest, RuleBadRequest, "CONNECT inside an intercepted connection is not forwarded")
		return
	}
	host, port, err := nethost.SplitHostPort(r.Host, defaultPort(ic.scheme))
	if err != nil || host != ic.t.host || port != ic.t.port {
		x.refuse(http.StatusMisdirectedRequest, RuleHostMismatch, fmt.Sprintf("the request's host %+.128q is not %s, the host this connection was opened to", r.Host, ic.t))
		return
	}
	if conflict {
		x.refuse(http.StatusBadRequest, RuleBadRequest, "the request has both Content-Length and Transfer-Encoding, which a proxy and a server may read differently (request smuggling), or could not be framed")
		return
	}
	x.serve(sb)
}

// serve runs the checks that need the body's first bytes, the judge, and
// the forwarding.
func (x *exchange) serve(sb sandbox) {
	p, ic, r := x.ic.p, x.ic, x.r
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	act := newActivity(p.cfg.IdleTimeout)
	defer watchIdle(act, func() { cancel(errIdleTimeout) })()
	rc := http.NewResponseController(x.w)
	defer rc.SetReadDeadline(time.Time{})
	up := &meteredBody{r: &clientBody{r: r.Body, rc: rc, act: act}, max: p.cfg.MaxBytesPerConn}

	hostport := net.JoinHostPort(ic.t.host, strconv.Itoa(int(ic.t.port)))
	limit := sb.net.preview
	if sb.secrets.BuffersBody(hostport) {
		limit = max(limit, MaxSecretBody)
	}
	prefix, complete, err := readPrefix(up, limit)
	if err != nil {
		x.ev.BytesUp = up.n
		x.ev.Error = describe(err, p.cfg)
		x.refuse(http.StatusBadRequest, RuleBadRequest, "reading the request body failed: "+x.ev.Error)
		return
	}
	req := runner.HTTPRequest{
		Method: r.Method, Scheme: ic.scheme, Host: ic.t.host, Port: ic.t.port,
		Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Proto: r.Proto,
		Headers:   headerNames(r.Header),
		BodyBytes: r.ContentLength,
		Body:      prefix[:min(int64(len(prefix)), sb.net.preview)],
	}
	if complete {
		req.BodyBytes = int64(len(prefix))
	}
	var names []string
	var ref *swap.Refusal
	if ic.scheme == "https" {
		names, ref = sb.secrets.Plan(r, hostport, prefix, complete)
	} else {
		ref = sb.secrets.Plaintext(r, prefix) // the rest is watched below
	}
	if ref != nil {
		x.refuse(http.StatusForbidden, ref.Rule, ref.Reason)
		return
	}
	req.Secrets = names
	switch {
	case sb.secrets.BodyPlaced(names) && !complete:
		x.refuse(http.StatusForbidden, RuleSecretBodyTooLarge, fmt.Sprintf("a body that carries a secret may be at most %d bytes", MaxSecretBody))
		return
	}
	verdict := judge(ctx, sb.id.Judge, req, p.cfg.HeaderTimeout)
	if !verdict.Allow {
		if verdict.Rule == "" {
			verdict.Rule = RuleJudgeDenied
		}
		x.refuse(http.StatusForbidden, verdict.Rule, verdict.Reason)
		return
	}
	x.ev.Decision, x.ev.Rule, x.ev.Reason, x.ev.Secrets = Allow, verdict.Rule, verdict.Reason, names

	out := r.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme = ic.scheme
	out.URL.Host = hostport
	out.Host = r.Host
	out.Close = false
	out.Trailer = nil
	removeHopHeaders(out.Header)
	if len(names) > 0 {
		// The transport asks for gzip and decodes it itself, so that the
		// response can be scrubbed; see RuleUndecodable.
		out.Header.Del("Accept-Encoding")
	}
	watched := &firstError{}
	switch {
	case sb.secrets.BodyPlaced(names):
		b := sb.secrets.InjectBody(prefix, names)
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	case complete && len(prefix) == 0:
		out.Body, out.ContentLength = http.NoBody, 0
	case complete:
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(prefix)), int64(len(prefix))
	default:
		watched.r = sb.secrets.Watch(io.MultiReader(bytes.NewReader(prefix), up), hostport)
		out.Body = io.NopCloser(watched)
	}
	sb.secrets.Inject(out, names)

	resp, err := ic.rt.RoundTrip(out)
	x.ev.BytesUp = up.n
	if a := ic.dialed.Load(); a != nil {
		x.ev.Addr = *a
	}
	if err != nil {
		var sref *swap.Refusal
		var unv *unverifiedError
		switch {
		case errors.As(watched.err, &sref):
			x.refuse(http.StatusForbidden, sref.Rule, sref.Reason)
		case errors.As(err, &unv):
			x.refuse(http.StatusBadGateway, RuleUpstreamUnverified, unv.Error())
		default:
			if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
				err = c
			}
			if watched.err != nil {
				err = watched.err
			}
			x.ev.Error = describe(err, p.cfg)
			x.fail(fmt.Sprintf("forwarding to %s failed: %s", ic.t, x.ev.Error))
		}
		return
	}
	defer resp.Body.Close()
	if ce := resp.Header.Get("Content-Encoding"); len(names) > 0 && ce != "" && !strings.EqualFold(ce, "identity") {
		x.refuse(http.StatusBadGateway, RuleUndecodable, fmt.Sprintf("the response came back with Content-Encoding %+.64q, which the proxy cannot decode to remove the secret from it", ce))
		return
	}
	removeHopHeaders(resp.Header)
	h := x.w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // no sniffing: pass on what upstream sent
	}
	var body io.Reader = resp.Body
	if len(names) > 0 {
		sb.secrets.ScrubHeader(h, names)
		h.Del("Content-Length") // scrubbing changes the length
		body = sb.secrets.Scrub(body, names)
	}
	down := &meteredBody{r: body, act: act, max: p.cfg.MaxBytesPerConn}
	x.ev.Status = resp.StatusCode
	x.w.WriteHeader(resp.StatusCode)
	err = copyResponse(x.w, rc, down, act)
	x.ev.BytesDown = down.n
	if err != nil {
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			err = c
		}
		x.ev.Error = describe(err, p.cfg)
	}
	x.ev.Duration = time.Since(x.ev.Time)
	p.auditRequest(x.st, x.ev)
	if err != nil {
		// The status line is out; only a cut stream tells the client
		// that the body is incomplete.
		panic(http.ErrAbortHandler)
	}
}

// copyResponse streams src to w, flushing as it goes, each write bounded
// by the idle time.
func copyResponse(w http.ResponseWriter, rc *http.ResponseController, src io.Reader, act *activity) error {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			// The deadline bounds this write only: on HTTP/2 one left
			// behind resets the stream when it passes, idle or not.
			rc.SetWriteDeadline(time.Now().Add(act.idle))
			_, werr := w.Write(buf[:n])
			if werr == nil {
				werr = rc.Flush()
			}
			rc.SetWriteDeadline(time.Time{})
			if werr != nil {
				return fmt.Errorf("write response to client: %w", werr)
			}
			act.touch()
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("read upstream response body: %w", rerr)
		}
	}
}

// judge asks j about req within timeout (Config.HeaderTimeout, and never
// past the request's own end); nil, a panic or an ended context is a
// refusal.
func judge(ctx context.Context, j runner.RequestJudge, req runner.HTTPRequest, timeout time.Duration) (v runner.HTTPVerdict) {
	if j == nil {
		return runner.HTTPVerdict{Rule: RuleNoJudge, Reason: "no request policy is set for this run, so no request to an inspected host can be allowed"}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if e := recover(); e != nil {
			v = runner.HTTPVerdict{Rule: RuleJudgeDenied, Reason: fmt.Sprintf("the request policy failed: %v", e)}
		}
	}()
	v = j.JudgeRequest(ctx, req)
	if v.Allow && ctx.Err() != nil {
		return runner.HTTPVerdict{Rule: RuleJudgeDenied, Reason: "the request policy did not answer in time"}
	}
	return v
}

// refuse answers the request with status and the refusal text, and audits it.
func (x *exchange) refuse(status int, rule, reason string) {
	x.ev.Decision, x.ev.Rule, x.ev.Reason, x.ev.Status = Deny, rule, reason, status
	x.ev.Secrets = nil
	body := refusalText(x.r.Method, x.ic.scheme, x.ic.t, x.r.URL.EscapedPath(), rule, reason)
	h := x.w.Header()
	clear(h)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Gatekeeper-Rule", rule)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if status == http.StatusBadRequest {
		h.Set("Connection", "close") // the rest of the stream cannot be trusted
	}
	x.w.WriteHeader(status)
	io.WriteString(x.w, body)
	x.ev.Duration = time.Since(x.ev.Time)
	x.audit()
}

// fail answers an allowed request whose forwarding failed before a
// response came back with 502, and audits it (Decision stays Allow).
func (x *exchange) fail(msg string) {
	x.ev.Status = http.StatusBadGateway
	http.Error(x.w, "gatekeeper egress error: "+msg, http.StatusBadGateway)
	x.ev.Duration = time.Since(x.ev.Time)
	x.audit()
}

func (x *exchange) audit() {
	if x.st == nil {
		x.ic.p.audit(x.ev)
		return
	}
	x.ic.p.auditRequest(x.st, x.ev)
}

// refusalText is the body of a refused intercepted request: what was
// refused, the rule and reason, and that retrying will not help.
func refusalText(method, scheme string, t target, path, rule, reason string) string {
	host := t.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if t.port != defaultPort(scheme) {
		host += ":" + strconv.Itoa(int(t.port))
	}
	reason = strings.TrimRight(strings.TrimSpace(reason), ".")
	if reason == "" {
		reason = "refused by policy"
	}
	return fmt.Sprintf("gatekeeper refused %s %s://%s%s: %s: %s. This request will be refused again; do not retry it.\n", method, scheme, host, path, rule, reason)
}

// defaultPort is the port of scheme.
func defaultPort(scheme string) uint16 {
	if scheme == "http" {
		return 80
	}
	return 443
}

// headerNames lists h's names, canonical, sorted, each once.
func headerNames(h http.Header) []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, http.CanonicalHeaderKey(k))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readPrefix reads up to limit bytes of r, and one more to learn whether
// that was all: complete reports that r ended within limit bytes.
func readPrefix(r io.Reader, limit int64) (b []byte, complete bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	return b, int64(len(b)) <= limit, nil
}

// meteredBody counts the bytes read through it and fails with
// errByteLimit once max have been read (0: no cap).
type meteredBody struct {
	r   io.Reader
	act *activity // touched per read when set
	max int64
	n   int64
}

func (b *meteredBody) Read(p []byte) (int, error) {
	if b.max > 0 {
		left := b.max - b.n
		if left <= 0 {
			return 0, errByteLimit
		}
		if int64(len(p)) > left {
			p = p[:left]
		}
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if n > 0 && b.act != nil {
		b.act.touch()
	}
	return n, err
}

// firstError remembers the first error other than EOF its reader returned.
type firstError struct {
	r   io.Reader
	err error
}

func (f *firstError) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF && f.err == nil {
		f.err = err
	}
	return n, err
}

// watchIdle calls onIdle once act has been idle for its idle time; stop
// ends the watch.
func watchIdle(act *activity, onIdle func()) (stop func()) {
	var mu sync.Mutex
	var stopped bool
	var t *time.Timer
	var check func()
	check = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if d := time.Until(act.deadline()); d > 0 {
			t.Reset(d)
			return
		}
		onIdle()
	}
	mu.Lock()
	t = time.AfterFunc(act.idle, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

// unverifiedError is an upstream whose certificate did not verify.
type unverifiedError struct {
	t   target
	err error
}

func (e *unverifiedError) Error() string {
	return fmt.Sprintf("the certificate of %s did not verify (%v), so the proxy did not send the request", e.t, e.err)
}

func (e *unverifiedError) Unwrap() error { return e.err }

// upstreamTransport reaches t at addrs only (the addresses admit
// checked), verifying TLS against Config.UpstreamRoots for t's host
// unless plain, and tells dialed each address it connected to. HTTP/2 is
// used when the upstream offers it.
func (p *Proxy) upstreamTransport(addrs []netip.Addr, t target, plain bool, dialed func(*netip.AddrPort)) *http.Transport {
	dial := func(ctx context.Context) (net.Conn, error) {
		c, ap, err := p.dial(ctx, addrs, t)
		if err == nil {
			dialed(&ap)
		}
		return c, err
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx)
		},
		ResponseHeaderTimeout:  p.cfg.IdleTimeout,
		IdleConnTimeout:        p.cfg.IdleTimeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		ForceAttemptHTTP2:      true,
	}
	if plain {
		tr.DisableKeepAlives = true
		return tr
	}
	tr.DialTLSContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, &tls.Config{
			RootCAs:    p.cfg.UpstreamRoots,
			ServerName: t.host,
			NextProtos: []string{"h2", "http/1.1"},
			MinVersion: tls.VersionTLS12,
		})
		hctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			c.Close()
			var cv *tls.CertificateVerificationError
			if errors.As(err, &cv) {
				return nil, &unverifiedError{t: t, err: err}
			}
			return nil, fmt.Errorf("TLS handshake with %s: %w", t, err)
		}
		return tc, nil
	}
	return tr
}

// bufferedConn first returns the bytes the CONNECT's bufio.Reader held
// beyond the request (the ClientHello may already sit there), then reads
// the connection itself (not through the bufio.Reader, which would keep
// a read deadline's error for the next read). It signals done when closed.
type bufferedConn struct {
	net.Conn
	pending []byte
	once    sync.Once
	done    chan struct{}
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *bufferedConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// oneConnListener hands http.Server one connection, then blocks until it
// is closed, so that Serve returns only when the connection is done.
type oneConnListener struct {
	c    net.Conn
	done <-chan struct{}
	mu   sync.Mutex
	sent bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	sent := l.sent
	l.sent = true
	l.mu.Unlock()
	if !sent {
		return l.c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }
