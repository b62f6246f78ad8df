// Package egress is the egress proxy of networked sandboxes. A sandbox with
// sandbox.net.enabled sits on an internal network whose only reachable
// endpoint is this proxy, and its HTTP_PROXY/HTTPS_PROXY point here. The
// proxy speaks HTTP CONNECT and plain HTTP forwarding, and decides every
// request by the run's runner.Network:
//
//  1. the source address must belong to a registered run (Register);
//  2. the host is normalized (internal/nethost.Normalize): a host that cannot be is
//     refused;
//  3. cloud metadata endpoints (nethost.MetadataHosts) and model vendor
//     APIs (nethost.ModelVendorHosts) are refused whatever the policy says,
//     by the same tables and functions the gate applies to WebFetch;
//  4. net.deny refuses, then net.allow must match (nethost.Pattern's
//     Match and Allows, the same functions the gate judges WebFetch with);
//  5. the name is resolved here, once; if any address is private,
//     loopback, link-local and the like, and that literal address is not
//     itself in net.allow, the request is refused; the proxy then dials
//     exactly the addresses it checked, so DNS rebinding gains nothing.
//
// A refusal is a 403 (429 over the connection limit, 400 for a malformed
// request, 502 for a name that does not resolve) with an X-Gatekeeper-Rule
// header and a one-line plain-text body naming the rule and the host, which
// is also the reason phrase, since many clients show only the status line
// of a failed request (a CONNECT's, or Python urllib's "HTTP Error 403:
// ..."); the connection is then closed. Every request produces one audit
// Event.
//
// A CONNECT to an allowed host that net.inspect or a secret's hosts name is
// intercepted (see intercept.go): the proxy answers 200, completes TLS
// with a leaf for the host signed by its CA (Config.CA; the sandbox trusts
// CACert), refuses an SNI, Host or :authority that is not the CONNECT
// host, and decides each HTTP/1.1 or HTTP/2 request on the connection with
// the run's RequestJudge after the secrets' checks (package swap). An
// allowed request gets its secrets injected and is sent over the proxy's
// own verified TLS connection to the addresses checked above; the response
// comes back with every injected value scrubbed. A refused one gets a 403
// whose body says why and not to retry. Each intercepted request is one
// Event (bounded per run: MaxRequestLines). Plain http:// requests to such
// a host are decided the same way, and may carry no sentinel.
//
// Every other CONNECT is a tunnel the proxy does not look inside: it may
// carry any SNI or Host (domain fronting through a shared CDN is not
// prevented). Plain HTTP is forwarded to the checked name whatever the
// Host header says; Upgrade (ws://) is not forwarded.
package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/swap"
)

// Defaults for the zero Config fields.
const (
	DefaultMaxConnsPerSandbox = 16
	DefaultIdleTimeout        = 60 * time.Second
	DefaultMaxBytesPerConn    = 64 << 20
	DefaultHeaderTimeout      = 10 * time.Second
	DefaultDialTimeout        = 10 * time.Second
)

// maxHeaderBytes bounds a request's header block.
const maxHeaderBytes = 64 << 10

// Resolver resolves host names; *net.Resolver satisfies it. The proxy calls
// it with network "ip" and a normalized name, once per request.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens upstream connections; *net.Dialer satisfies it. The proxy
// only ever passes network "tcp" and a literal "ip:port" it has checked.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Config configures a Proxy. Only Auditor is required; a zero limit takes
// its Default value, a negative one is refused.
type Config struct {
	// Auditor receives one Event per request.
	Auditor Auditor
	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver Resolver
	// Dialer opens upstream connections; nil means a net.Dialer.
	Dialer Dialer
	// ExtraVendorHosts are added to nethost.ModelVendorHosts, in the same
	// syntax, for this proxy only.
	ExtraVendorHosts []string
	// MaxConnsPerSandbox caps the TCP connections one source address may
	// hold open to the proxy at once, idle keep-alive ones included;
	// further ones are answered 429 (rule egress.conn_limit) and closed.
	MaxConnsPerSandbox int
	// IdleTimeout closes a tunnel or forwarded request with no traffic in
	// either direction for this long, and idle keep-alive client
	// connections.
	IdleTimeout time.Duration
	// MaxBytesPerConn caps the bytes sent upstream and, separately, the
	// bytes received from upstream for one tunnel or forwarded request; the
	// connection is cut when either is reached.
	MaxBytesPerConn int64
	// HeaderTimeout bounds reading a request's header block.
	HeaderTimeout time.Duration
	// DialTimeout bounds connecting upstream (all addresses together).
	DialTimeout time.Duration
	// Logger receives audit failures and connection errors; nil discards.
	Logger *slog.Logger
	// CA signs the certificates of intercepted hosts; nil means the proxy
	// intercepts nothing, and Register refuses a Network that would need
	// it (ErrNoCA).
	CA *CA
	// UpstreamRoots verifies the upstreams of intercepted requests; nil
	// means the system's roots.
	UpstreamRoots *x509.CertPool
}

// Proxy is the egress proxy. Create it with New, tell it which source
// address is which run with Register and Unregister, and run it with
// Serve. A Proxy is safe for concurrent use; Serve may run on several
// listeners at once, all sharing the registrations and limits.
type Proxy struct {
	cfg      Config
	resolver Resolver
	dialer   Dialer
	vendors  []nethost.Glob
	log      *slog.Logger

	mu        sync.Mutex
	sandboxes map[netip.Addr]sandbox
	conns     map[netip.Addr]map[*trackedConn]struct{}
}

// sandbox is one registration.
type sandbox struct {
	id      RunIdentity
	net     netPolicy
	secrets *swap.Set
	stats   *runStats // of the run id; replaced by Bind
}

// New checks cfg, fills in its defaults and returns a Proxy with no runs
// registered. Errors wrap ErrInvalidConfig.
func New(cfg Config) (*Proxy, error) {
	var errs []error
	if cfg.Auditor == nil {
		errs = append(errs, errors.New("auditor is required"))
	}
	defaults := []struct {
		name string
		neg  bool
		zero bool
		set  func()
	}{
		{"max conns per sandbox", cfg.MaxConnsPerSandbox < 0, cfg.MaxConnsPerSandbox == 0, func() { cfg.MaxConnsPerSandbox = DefaultMaxConnsPerSandbox }},
		{"idle timeout", cfg.IdleTimeout < 0, cfg.IdleTimeout == 0, func() { cfg.IdleTimeout = DefaultIdleTimeout }},
		{"max bytes per conn", cfg.MaxBytesPerConn < 0, cfg.MaxBytesPerConn == 0, func() { cfg.MaxBytesPerConn = DefaultMaxBytesPerConn }},
		{"header timeout", cfg.HeaderTimeout < 0, cfg.HeaderTimeout == 0, func() { cfg.HeaderTimeout = DefaultHeaderTimeout }},
		{"dial timeout", cfg.DialTimeout < 0, cfg.DialTimeout == 0, func() { cfg.DialTimeout = DefaultDialTimeout }},
	}
	for _, d := range defaults {
		switch {
		case d.neg:
			errs = append(errs, fmt.Errorf("%s is negative", d.name))
		case d.zero:
			d.set()
		}
	}
	vendors := nethost.ModelVendorGlobs()
	for i, s := range cfg.ExtraVendorHosts {
		g, err := nethost.ParseGlob(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("extra vendor hosts[%d]: %w", i, err))
			continue
		}
		vendors = append(vendors, g)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	p := &Proxy{
		cfg:       cfg,
		resolver:  cfg.Resolver,
		dialer:    cfg.Dialer,
		vendors:   vendors,
		log:       cfg.Logger,
		sandboxes: make(map[netip.Addr]sandbox),
		conns:     make(map[netip.Addr]map[*trackedConn]struct{}),
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.dialer == nil {
		p.dialer = &net.Dialer{}
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// Register tells the proxy that connections from addr belong to the
// sandbox reg describes, used now by reg.Run, with network policy
// reg.Network (which should be Enabled; a disabled policy denies
// everything). It returns an error wrapping nethost.ErrBadPattern when the
// network has an invalid pattern (see ValidateNetwork), and one wrapping
// ErrAlreadyRegistered when addr is still registered.
func (p *Proxy) Register(addr netip.Addr, reg Registration) error {
	id, n := reg.Run, reg.Network
	if !addr.IsValid() {
		return errors.New("register egress source: invalid address")
	}
	addr = addr.Unmap().WithZone("")
	np, err := compileNetwork(n)
	if err != nil {
		return fmt.Errorf("register egress source %s for run %s: %w", addr, id.RunID, err)
	}
	if (len(n.Inspect) > 0 || len(n.Secrets) > 0) && p.cfg.CA == nil {
		return fmt.Errorf("register egress source %s for run %s: net.inspect or secrets: %w", addr, id.RunID, ErrNoCA)
	}
	for _, s := range n.Secrets {
		if reg.Sentinels[s.Name] == "" {
			return fmt.Errorf("register egress source %s for run %s: secret %q has no sentinel", addr, id.RunID, s.Name)
		}
	}
	set, err := swap.New(n.Secrets, reg.Sentinels)
	if err != nil {
		return fmt.Errorf("register egress source %s for run %s: %w", addr, id.RunID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.sandboxes[addr]; ok {
		return fmt.Errorf("register egress source %s for run %s: held by run %s: %w", addr, id.RunID, old.id.RunID, ErrAlreadyRegistered)
	}
	p.sandboxes[addr] = sandbox{id: id, net: np, secrets: set, stats: &runStats{}}
	return nil
}

// CACert returns the PEM certificate of the proxy's CA, which a sandbox
// whose hosts are intercepted must trust; nil without a CA.
func (p *Proxy) CACert() []byte {
	if p.cfg.CA == nil {
		return nil
	}
	return p.cfg.CA.CertPEM()
}

// Bind tells the proxy that the sandbox registered at addr now serves the
// run id (a session's next run): requests from now on are decided by
// id.Judge and audited under id, and the previous run's summary Event is
// written if it had request lines omitted. It returns an error wrapping
// ErrNotRegistered when addr is not registered.
func (p *Proxy) Bind(addr netip.Addr, id RunIdentity) error {
	addr = addr.Unmap().WithZone("")
	p.mu.Lock()
	sb, ok := p.sandboxes[addr]
	if !ok {
		p.mu.Unlock()
		return fmt.Errorf("bind egress source %s to run %s: %w", addr, id.RunID, ErrNotRegistered)
	}
	old, oldID := sb.stats, sb.id
	sb.id, sb.stats = id, &runStats{}
	p.sandboxes[addr] = sb
	p.mu.Unlock()
	p.summarize(addr, oldID, old)
	return nil
}

// Unregister forgets addr and closes every connection from it, which ends
// its tunnels and forwarded requests (their audit events are still
// written, then the run's summary Event, if any). Unregistering an unknown
// address does nothing.
func (p *Proxy) Unregister(addr netip.Addr) {
	addr = addr.Unmap().WithZone("")
	p.mu.Lock()
	sb, registered := p.sandboxes[addr]
	delete(p.sandboxes, addr)
	var doomed []*trackedConn
	for c := range p.conns[addr] {
		doomed = append(doomed, c)
	}
	p.mu.Unlock()
	for _, c := range doomed {
		c.Close()
	}
	if registered {
		p.summarize(addr, sb.id, sb.stats)
	}
}

// lookup returns the registration of src.
func (p *Proxy) lookup(src netip.Addr) (sandbox, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sb, ok := p.sandboxes[src]
	return sb, ok
}

// Serve accepts connections on ln and proxies them until ctx ends. It then
// closes ln and every connection it accepted, tunnels included, waits for
// their handlers to return, and returns nil. If ln fails first, Serve
// cleans up the same way and returns the error. Serve owns ln.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	s := &server{p: p}
	hs := p.httpServer(ctx, s)
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)

	stopped := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(stopped)
		s.shutdown(hs)
	})
	err := hs.Serve(&listener{Listener: ln, s: s})
	if stop() {
		s.shutdown(hs)
	} else {
		<-stopped
	}
	s.handlers.Wait()
	if ctx.Err() != nil && errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve egress proxy on %s: %w", ln.Addr(), err)
}

// httpServer is an http.Server for h with the proxy's timeouts and limits,
// whose requests' contexts derive from ctx.
func (p *Proxy) httpServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: p.cfg.HeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
}

// server is the state of one Serve call.
type server struct {
	p *Proxy

	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup // running ServeHTTP calls; Add only while !closed
}

// enter registers a running handler; false once the server is shutting down.
func (s *server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}

// exit marks a handler entered with enter as returned.
func (s *server) exit() { s.handlers.Done() }

// isClosed reports whether shutdown has begun.
func (s *server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// shutdown stops hs and closes every connection this server accepted,
// including hijacked ones, which http.Server does not track.
func (s *server) shutdown(hs *http.Server) {
	hs.Close()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	for _, c := range s.p.connsOf(s) {
		c.Close()
	}
}

// connKey is the context key of the *trackedConn a request arrived on.
type connKey struct{}

// listener tracks every accepted connection by source address.
type listener struct {
	net.Listener
	s *server
}

// Accept returns the next connection, tracked. A source already holding
// MaxConnsPerSandbox connections gets its next ones marked over the limit
// (they are answered 429); beyond twice the limit they are closed at once.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.s.p.track(c, l.s); tc != nil {
			return tc, nil
		}
		c.Close()
	}
}

// trackedConn is an accepted connection the proxy can find by source.
type trackedConn struct {
	net.Conn
	p         *Proxy
	owner     *server
	src       netip.Addr
	overLimit bool
	once      sync.Once
}

// Close closes the connection and forgets it; it is safe to call twice.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.p.forget(c) })
	return err
}

// CloseWrite half-closes the connection when the underlying one can.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// track records c, or returns nil when its source has too many or owner is
// shutting down. Lock order: p.mu, then server.mu.
func (p *Proxy) track(c net.Conn, owner *server) *trackedConn {
	tc := &trackedConn{Conn: c, p: p, owner: owner, src: sourceAddr(c)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if owner.isClosed() {
		return nil
	}
	set := p.conns[tc.src]
	var live, over int
	for o := range set {
		if o.overLimit {
			over++
		} else {
			live++
		}
	}
	switch {
	case live < p.cfg.MaxConnsPerSandbox:
	case over < p.cfg.MaxConnsPerSandbox:
		tc.overLimit = true
	default:
		return nil
	}
	if set == nil {
		set = make(map[*trackedConn]struct{})
		p.conns[tc.src] = set
	}
	set[tc] = struct{}{}
	return tc
}

// forget drops c from the connection table.
func (p *Proxy) forget(c *trackedConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := p.conns[c.src]
	delete(set, c)
	if len(set) == 0 {
		delete(p.conns, c.src)
	}
}

// connsOf lists the connections owner accepted.
func (p *Proxy) connsOf(owner *server) []*trackedConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*trackedConn
	for _, set := range p.conns {
		for c := range set {
			if c.owner == owner {
				out = append(out, c)
			}
		}
	}
	return out
}

// sourceAddr is the remote IP of c, unmapped; invalid when c is not IP.
func sourceAddr(c net.Conn) netip.Addr {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap().WithZone("")
	case nil:
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

// audit hands ev to the Auditor, logging a failure.
func (p *Proxy) audit(ev Event) {
	if err := p.cfg.Auditor.Egress(ev); err != nil {
		p.log.Error("egress audit failed", "run_id", ev.RunID, "host", ev.Host, "err", err)
	}
}
