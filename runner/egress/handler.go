package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
)

// hopHeaders are the hop-by-hop headers (RFC 9110 section 7.6.1, plus the
// proxy credentials) never passed on in either direction.
var hopHeaders = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

const (
	// maxInformational bounds the 1xx responses skipped before the final one.
	maxInformational = 8
	// lingerTimeout and lingerBytes bound lingerClose.
	lingerTimeout = time.Second
	lingerBytes   = 64 << 10
)

// ServeHTTP handles one request on a tracked connection. The handler runs
// in http.Server's connection goroutine; a CONNECT tunnel adds one goroutine
// that ends before ServeHTTP returns.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		// Shutting down: cut the connection rather than let http.Server
		// answer 200, which a CONNECT client would take for a tunnel.
		panic(http.ErrAbortHandler)
	}
	defer s.exit()
	tc, _ := r.Context().Value(connKey{}).(*trackedConn)
	ev := &Event{Time: time.Now(), Method: r.Method}
	if tc != nil {
		ev.Source = tc.src
	}
	if r.Method == http.MethodConnect {
		s.p.serveConnect(s, w, r, tc, ev)
		return
	}
	s.p.serveForward(s, w, r, tc, ev)
}

// ask is what one request asks of the policy.
type ask struct {
	hostport    string // the CONNECT authority or the URI's host[:port]
	defaultPort uint16 // 0: the port is required
	malformed   string // when not empty, why the request is refused as malformed
}

// admit runs the checks both kinds of request share and the policy, filling
// in ev as it learns. A malformed request is refused once its source is
// known.
func (p *Proxy) admit(ctx context.Context, tc *trackedConn, ev *Event, a ask) (verdict, target) {
	v, t := p.admitInner(ctx, tc, ev, a)
	ev.Decision, ev.Rule, ev.Reason = v.decision, v.rule, v.reason
	return v, t
}

func (p *Proxy) admitInner(ctx context.Context, tc *trackedConn, ev *Event, a ask) (verdict, target) {
	hostport := a.hostport
	sb, ok := p.lookup(ev.Source)
	if tc == nil || !ok {
		return deny(http.StatusForbidden, RuleUnknownSource, "connection from %s belongs to no registered sandbox", ev.Source), target{}
	}
	ev.RunID, ev.QueryID = sb.id.RunID, sb.id.QueryID
	if tc.overLimit {
		return deny(http.StatusTooManyRequests, RuleConnLimit, "the sandbox already has %d connections open to the proxy, the limit", p.cfg.MaxConnsPerSandbox), target{}
	}
	if a.malformed != "" {
		ev.Host = fmt.Sprintf("%.128s", hostport)
		return deny(http.StatusBadRequest, RuleBadRequest, "%s", a.malformed), target{}
	}
	host, port, err := nethost.SplitHostPort(hostport, a.defaultPort)
	if err != nil {
		ev.Host = fmt.Sprintf("%.128s", hostport)
		return deny(http.StatusForbidden, RuleBadHost, "host %+.128q is not a valid host name or IP address with a port: %v", hostport, err), target{}
	}
	t := target{host: host, port: port}
	ev.Host, ev.Port = host, port
	return p.decide(ctx, sb.net, t), t
}

// serveConnect handles CONNECT host:port: every reply is written on the
// hijacked connection, so that a refusal's reason phrase can carry the rule.
func (p *Proxy) serveConnect(s *server, w http.ResponseWriter, r *http.Request, tc *trackedConn, ev *Event) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.log.Warn("egress connect: hijack failed", "err", err)
		return
	}
	defer conn.Close()
	act := newActivity(p.cfg.IdleTimeout)
	client := &meteredConn{Conn: conn, act: act}

	a := ask{hostport: r.URL.Host}
	if r.URL.Host == "" {
		a.malformed = "CONNECT needs a host:port target"
	}
	v, t := p.admit(r.Context(), tc, ev, a)
	if v.decision != Allow {
		p.audit(*ev)
		if writeRaw(client, v.status, v.rule, v.body()) == nil {
			lingerClose(client)
		}
		return
	}
	if sb, ok := p.lookup(ev.Source); ok && sb.net.intercepts(t) {
		p.intercept(r.Context(), s, conn, brw, ev, v, t)
		return
	}
	up, addr, err := p.dial(r.Context(), v.addrs, t)
	if err != nil {
		ev.Error = err.Error()
		ev.Duration = time.Since(ev.Time)
		p.audit(*ev)
		if writeRaw(client, http.StatusBadGateway, "", fmt.Sprintf("gatekeeper egress error: %v\n", err)) == nil {
			lingerClose(client)
		}
		return
	}
	defer up.Close()
	ev.Addr = addr
	act.touch() // the idle clock starts once the tunnel can carry traffic
	upstream := &meteredConn{Conn: up, act: act, max: p.cfg.MaxBytesPerConn}

	_, err = io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n")
	if n := brw.Reader.Buffered(); err == nil && n > 0 {
		// Bytes the client sent right after its CONNECT (a TLS ClientHello)
		// may already sit in the server's read buffer.
		b, _ := brw.Reader.Peek(n)
		_, err = upstream.Write(b)
	}
	if err == nil {
		err = tunnel(client, upstream)
	}
	p.finish(ev, upstream, err)
}

// serveForward handles an absolute-URI http:// request: it is sent on a
// fresh upstream connection (never pooled, so that no connection checked
// for one request serves another) and the response streamed back. A
// refusal is written as serveConnect writes one, and ends the connection.
func (p *Proxy) serveForward(s *server, w http.ResponseWriter, r *http.Request, tc *trackedConn, ev *Event) {
	ctx := r.Context()
	a := ask{hostport: r.URL.Host, defaultPort: 80}
	switch {
	case r.URL.Host == "" || !r.URL.IsAbs():
		a.malformed = "the proxy forwards only absolute http:// URIs; use CONNECT for https"
	case r.URL.Scheme != "http":
		a.malformed = fmt.Sprintf("scheme %+.128q cannot be forwarded; use CONNECT for https", r.URL.Scheme)
	}
	v, t := p.admit(ctx, tc, ev, a)
	if v.decision != Allow {
		p.audit(*ev)
		// As for CONNECT, the reply is written on the hijacked connection
		// so that its reason phrase carries the rule: most clients report
		// a failed request by its status line alone (Python's urllib:
		// "HTTP Error 403: <reason phrase>"), and the model reads that.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			defer conn.Close()
			client := &meteredConn{Conn: conn, act: newActivity(p.cfg.IdleTimeout)}
			if writeRaw(client, v.status, v.rule, v.body()) == nil {
				lingerClose(client)
			}
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("X-Gatekeeper-Rule", v.rule)
		if v.rule == RuleConnLimit || v.rule == RuleUnknownSource {
			h.Set("Connection", "close")
		}
		w.WriteHeader(v.status)
		io.WriteString(w, v.body())
		return
	}
	if sb, ok := p.lookup(ev.Source); ok && sb.net.intercepts(t) {
		// Decided like a request on an intercepted connection, and sent
		// on a connection of its own.
		ic := &interception{p: p, s: s, src: ev.Source, t: t, scheme: "http"}
		ic.rt = p.upstreamTransport(v.addrs, t, true, ic.dialed.Store)
		defer ic.rt.CloseIdleConnections()
		ic.handle(w, r)
		return
	}
	up, addr, err := p.dial(ctx, v.addrs, t)
	if err != nil {
		ev.Error = err.Error()
		ev.Duration = time.Since(ev.Time)
		p.audit(*ev)
		http.Error(w, fmt.Sprintf("gatekeeper egress error: %v", err), http.StatusBadGateway)
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	ev.Addr = addr
	act := newActivity(p.cfg.IdleTimeout)
	upstream := &meteredConn{Conn: up, act: act, max: p.cfg.MaxBytesPerConn}

	started, err := p.roundTrip(w, r, upstream, act)
	p.finish(ev, upstream, err)
	switch {
	case err == nil:
	case !started:
		http.Error(w, fmt.Sprintf("gatekeeper egress error: forwarding to %s failed: %v", t, describe(err, p.cfg)), http.StatusBadGateway)
	default:
		// The status line is out; only a cut connection tells the client
		// that the body is incomplete.
		panic(http.ErrAbortHandler)
	}
}

// roundTrip sends r to upstream and copies the response to w. started
// reports whether the response header was written.
func (p *Proxy) roundTrip(w http.ResponseWriter, r *http.Request, upstream *meteredConn, act *activity) (started bool, err error) {
	rc := http.NewResponseController(w)
	defer func() {
		// The connection may serve further requests; drop our deadlines.
		rc.SetReadDeadline(time.Time{})
		rc.SetWriteDeadline(time.Time{})
	}()

	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Host = r.URL.Host // the checked name, whatever the Host header said
	out.Close = true
	out.Trailer = nil
	removeHopHeaders(out.Header)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // stops Write adding Go's
	}
	if r.Body != nil && r.Body != http.NoBody {
		out.Body = &clientBody{r: r.Body, rc: rc, act: act}
	}
	if err := out.Write(upstream); err != nil {
		return false, fmt.Errorf("send request upstream: %w", err)
	}

	br := bufio.NewReader(upstream)
	var resp *http.Response
	for i := 0; ; i++ {
		if resp, err = http.ReadResponse(br, out); err != nil {
			return false, fmt.Errorf("read upstream response: %w", err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body.Close()
			return false, errors.New("upstream switched protocols, which the proxy does not forward")
		}
		if resp.StatusCode >= 200 {
			break
		}
		if i == maxInformational {
			return false, errors.New("upstream sent too many informational responses")
		}
	}
	defer resp.Body.Close()

	removeHopHeaders(resp.Header)
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // no sniffing: pass on what upstream sent
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			rc.SetWriteDeadline(time.Now().Add(act.idle))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return true, fmt.Errorf("write response to client: %w", werr)
			}
			rc.Flush()
			act.touch()
		}
		if rerr == io.EOF {
			return true, nil
		}
		if rerr != nil {
			return true, fmt.Errorf("read upstream response body: %w", rerr)
		}
	}
}

// clientBody reads a forwarded request's body under the idle clock.
type clientBody struct {
	r   io.ReadCloser
	rc  *http.ResponseController
	act *activity
}

func (b *clientBody) Read(p []byte) (int, error) {
	b.rc.SetReadDeadline(b.act.deadline())
	n, err := b.r.Read(p)
	if n > 0 {
		b.act.touch()
	}
	if err == io.EOF {
		// The body is read: a deadline left behind would, on HTTP/2,
		// reset the stream while the response is still coming.
		b.rc.SetReadDeadline(time.Time{})
	}
	if err != nil && n == 0 && isTimeout(err) {
		return 0, errIdleTimeout
	}
	return n, err
}

func (b *clientBody) Close() error { return b.r.Close() }

// dial connects to the first of the checked addrs that answers.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, t target) (net.Conn, netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	var errs []error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, t.port)
		c, err := p.dialer.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return c, ap, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, fmt.Errorf("connect to %s: %w", t, errors.Join(errs...))
}

// finish records how an allowed request ended and audits it.
func (p *Proxy) finish(ev *Event, upstream *meteredConn, err error) {
	ev.BytesUp, ev.BytesDown = upstream.written.Load(), upstream.read.Load()
	ev.Duration = time.Since(ev.Time)
	if err != nil {
		ev.Error = describe(err, p.cfg)
	}
	p.audit(*ev)
}

// describe words a connection-ending error for Event.Error and replies.
func describe(err error, cfg Config) string {
	switch {
	case errors.Is(err, errByteLimit):
		return fmt.Sprintf("byte limit of %d bytes per direction reached", cfg.MaxBytesPerConn)
	case errors.Is(err, errIdleTimeout):
		return fmt.Sprintf("no traffic for %s (idle timeout)", cfg.IdleTimeout)
	case errors.Is(err, net.ErrClosed):
		return "closed by the proxy: run unregistered or proxy shutting down"
	}
	return err.Error()
}

// writeRaw writes a complete plain-text response on a hijacked connection.
// The reason phrase is the body's first line, so that clients which only
// report the status line of a failed CONNECT still show the rule.
func writeRaw(w io.Writer, status int, rule, body string) error {
	var b strings.Builder
	phrase := strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f {
			return '?'
		}
		return r
	}, strings.TrimSuffix(body, "\n"))
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, phrase)
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	if rule != "" {
		fmt.Fprintf(&b, "X-Gatekeeper-Rule: %s\r\n", rule)
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	_, err := io.WriteString(w, b.String())
	return err
}

// lingerClose half-closes c after a refusal and reads what the client
// still sends, briefly, so that closing does not reset the connection
// before the client has read the reply.
func lingerClose(c *meteredConn) {
	if c.closeWrite() != nil {
		c.Conn.Close()
		return
	}
	c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.CopyN(io.Discard, c.Conn, lingerBytes)
}

// removeHopHeaders deletes the hop-by-hop headers, including those the
// Connection header names.
func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}
