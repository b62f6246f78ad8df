// Package server serves gatekeeper's wire protocol (docs/protocol.md) over
// WebSocket: it authenticates clients, keeps each connection's queries,
// asks the gate for decisions, hands allowed runs to the runner, and writes
// every decision and run to the audit log before replying.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/artifacts"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// Runner runs one sandboxed program.
type Runner interface {
	Run(ctx context.Context, spec runner.Spec) (runner.Result, error)
}

// Artifacts writes the record of one run and returns its name and the
// SHA-256 of its content.
type Artifacts interface {
	Write(a artifacts.Artifact) (name, sum string, err error)
}

// Auditor writes one audit line; an error means the line is not written.
type Auditor interface {
	Write(rec audit.Record) error
}

// DefaultMaxFrameBytes is the read limit when Config.MaxFrameBytes is zero:
// 1 MiB.
const DefaultMaxFrameBytes = 1 << 20

// DefaultGCPercent is the collector's usual target (GOGC) for the sidecar.
// Decisions allocate short-lived garbage, almost all of it in OPA's
// evaluator; at Go's default of 100 the collector took a fifth of the
// sidecar's CPU per decision, at 200 about half of that (BENCHMARKS.md),
// for a few MiB more of heap; 300 took another 5% off the CPU per
// decision at 64 connections (93 → 89 µs, 4% more decisions/s) for 6 MiB
// more peak RSS (scripts/bench-compare, interleaved rounds), and 400 no
// more CPU for 7 MiB more again. Output floods switch to FloodGCPercent.
const DefaultGCPercent = 300

// RunObserver is told about each run the runner finished, after its audit
// line is written and before its result is sent (the live console keeps
// recent runs' output this way). ObserveRun is called from the run's
// goroutine: it must not block, and must copy what it keeps of info.
type RunObserver interface {
	ObserveRun(info RunInfo)
}

// ApprovalObserver is told when an ask on a nested call is relayed to a
// client and when it stops waiting (answered, timed out, cancelled or the
// connection lost), so that the live console can show calls that wait for
// a human. ApprovalWaiting comes before ApprovalDone of the same id;
// ApprovalDone comes as the wait ends, and the call's code_call audit line
// (with the answer) follows once the call itself has ended. Both are called from the run's bridge goroutine: they must not
// block.
type ApprovalObserver interface {
	ApprovalWaiting(p PendingApproval)
	ApprovalDone(id string)
}

// PendingApproval is an ask relayed to a client and not yet answered. It
// holds no arguments: the console shows what waits, not with what.
type PendingApproval struct {
	ID        string    `json:"id"`
	QueryID   string    `json:"query_id"`
	RunID     string    `json:"run_id"`
	ToolUseID string    `json:"tool_use_id"`
	Server    string    `json:"server"`
	Tool      string    `json:"tool"`
	CallSeq   int       `json:"call_seq"`
	Rule      string    `json:"rule"`
	Reason    string    `json:"reason"`
	AskedAt   time.Time `json:"asked_at"`
	TimeoutMS int64     `json:"timeout_ms"`
}

// RunInfo is one finished run as the server saw it.
type RunInfo struct {
	// Spec is what ran: code, files, timeout and the resolved sandbox.
	Spec      runner.Spec
	Result    runner.Result
	ToolUseID string
	// Policy is the query's effective policy (canonical JSON, as in
	// query_opened) and PolicyHash its hash.
	Policy     json.RawMessage
	PolicyHash string
}

// Config wires a Server. Engine, Auditor and Token are required.
type Config struct {
	Engine  *gate.Engine
	Auditor Auditor
	// Readiness, when set, answers /readyz: a JSON-encodable status and
	// whether the sidecar is ready (serve --bundle: a bundle is in force).
	// Nil means always ready.
	Readiness func() (status any, ready bool)
	// Hold, when set, is asked before each tool-call decision (the
	// WebSocket's decide and the Claude Code hook endpoint): held denies
	// the call with rule and reason, audited as any decision, without
	// asking the policy. serve --decision-log holds while its backlog is
	// full under --decision-log-overflow block (gate/decisionlog).
	Hold func() (rule, reason string, held bool)
	// Runner executes allowed runs; nil answers every run with runner_unavailable.
	Runner Runner
	// Workspaces keeps each query's /workspace between its runs, removed
	// when the query closes or its connection ends; nil starts every run
	// from an empty /workspace.
	Workspaces *workspace.Store
	// Artifacts, when set, keeps a record of every run that ran (see
	// gate/artifacts), named in its audit line; StoreCode says when it
	// keeps the run's code.
	Artifacts Artifacts
	StoreCode artifacts.StoreCode
	// Token is the bearer token every upgrade and /metrics request needs.
	Token string
	// AllowedOrigins are the browser origins accepted; any other Origin is refused.
	AllowedOrigins []string
	// RunObserver, when set, is told about each finished run.
	RunObserver RunObserver
	// ApprovalObserver, when set, is told of each ask relayed to a client
	// while it waits.
	ApprovalObserver ApprovalObserver
	// ToolServers are the operator's MCP servers that sandboxed code may
	// call (code mode); nil gives no run a bridge. When they are also a
	// gate.ToolLister (as mcpservers.Servers is), each run gets the typed
	// wrappers of the tools its code may call (gate.Wrappers).
	ToolServers gate.ToolServers
	// Registry is the Prometheus registry /metrics serves and the server's
	// own collectors join; nil means a new one.
	Registry *prometheus.Registry
	// UI, when set, is served under /ui/ (the live console); it does its
	// own authentication.
	UI http.Handler
	// Debug serves Go's runtime profiles under /debug/pprof/, behind the
	// token (goroutine dumps, heap and CPU profiles).
	Debug bool
	// Version is reported in welcome ("gatekeeper/<Version>").
	Version string
	// MaxFrameBytes is the read limit; a larger frame closes the connection
	// with 1009. Zero means DefaultMaxFrameBytes.
	MaxFrameBytes int64
	// MaxInFlight bounds concurrent requests per connection
	// (DefaultMaxInFlight); MaxRunsPerConn bounds concurrent runs per
	// connection (DefaultMaxRunsPerConn). A request past either is answered
	// with too_many_requests.
	MaxInFlight, MaxRunsPerConn int
	// MaxConns bounds the WebSocket connections served at once
	// (DefaultMaxConns); an upgrade past it gets HTTP 503.
	MaxConns int
	// MaxQueriesPerConn bounds the queries open on one connection
	// (DefaultMaxQueriesPerConn) and MaxQueries those open on all
	// connections together (DefaultMaxQueries); an open_query past either
	// is answered with too_many_queries.
	MaxQueriesPerConn, MaxQueries int
	// GCPercent is the collector's usual target (GOGC, default
	// DefaultGCPercent) and FloodGCPercent the lower one used while any run
	// streams more than 256 KiB of output (default 25; negative disables
	// the switch).
	GCPercent, FloodGCPercent int
	// DecisionWorkerIdle is how long a connection's decision worker waits
	// for a decision before it ends (default 10s): an idle connection holds
	// no worker, nor its stack.
	DecisionWorkerIdle time.Duration
	// PingInterval (default 20s) and ReadTimeout (default 60s) keep
	// connections alive and drop dead ones.
	PingInterval, ReadTimeout time.Duration
	// ClaudeCode bounds the Claude Code CLI sessions of the hook endpoint.
	ClaudeCode ClaudeCodeConfig
	Logger     *slog.Logger
}

// Server serves the protocol. Create it with New; it is safe for
// concurrent use and owns every connection goroutine it starts.
type Server struct {
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	upgrader websocket.Upgrader

	floods floods
	cli    *cliSessions
	// wrappers makes runs' ToolFiles; nil when ToolServers cannot list.
	wrappers *gate.Wrappers
	// anyWrappers is wrappers, or one over no servers when it is nil:
	// what a query with in-process servers of its client makes its view
	// of (gate.Wrappers.Over), sharing the cache.
	anyWrappers *gate.Wrappers
	// connCount and queries count what MaxConns and MaxQueries bound.
	connCount, queries capped

	mu      sync.Mutex
	conns   map[*conn]struct{}
	closing bool
	wg      sync.WaitGroup
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Engine == nil:
		return nil, errors.New("server: no engine")
	case cfg.Auditor == nil:
		return nil, errors.New("server: no audit log")
	case cfg.Token == "":
		return nil, errors.New("server: empty token")
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	applyLimitDefaults(&cfg)
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 20 * time.Second
	}
	if cfg.DecisionWorkerIdle <= 0 {
		cfg.DecisionWorkerIdle = 10 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.GCPercent <= 0 {
		cfg.GCPercent = DefaultGCPercent
	}
	if cfg.FloodGCPercent == 0 {
		cfg.FloodGCPercent = 25
	}
	s := &Server{cfg: cfg, log: cfg.Logger, metrics: newMetrics(cfg.Registry), conns: map[*conn]struct{}{}}
	s.cfg.Auditor = codeCallCounter{cfg.Auditor, s.metrics} // nested calls' lines count as decisions
	s.floods = floods{normal: cfg.GCPercent, flooding: cfg.FloodGCPercent}
	if l, ok := cfg.ToolServers.(gate.ToolLister); ok {
		s.wrappers = gate.NewWrappers(l, gate.WrapperOptions{Logger: cfg.Logger})
	}
	s.anyWrappers = s.wrappers
	if s.anyWrappers == nil {
		s.anyWrappers = gate.NewWrappers(nil, gate.WrapperOptions{Logger: cfg.Logger})
	}
	s.cli = newCLISessions(s, cfg.ClaudeCode)
	s.connCount.max, s.queries.max = int64(cfg.MaxConns), int64(cfg.MaxQueries)
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		// Origin is checked in ServeHTTP, before the upgrade, with a 403.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	return s, nil
}

// Handler returns the HTTP handler: /v1/ws, /healthz, /metrics, the
// Claude Code hook endpoint and, with Config.UI, /ui/.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.authorized(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
	mux.Handle("GET /v1/ws", s.authorized(http.HandlerFunc(s.upgrade)))
	mux.Handle("POST "+wire.HookPath, s.authorized(http.HandlerFunc(s.hook)))
	if s.cfg.Debug {
		mux.Handle("GET /debug/pprof/", s.authorized(debugHandler()))
	}
	if s.cfg.UI != nil {
		mux.Handle("/ui/", s.cfg.UI)
		mux.Handle("/ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	}
	return mux
}

// Serve accepts connections on ln until ctx ends, then closes every
// connection and returns once their goroutines have ended: each
// connection's runs and decisions are cancelled (a run in flight ends as
// cancelled, and its audit line says so), its client gets a close frame
// (1001) and its socket is closed, whether or not the client answers.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.Handler())
}

// serve serves h on ln until ctx ends or serving fails.
func (s *Server) serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.closeAll()
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdown)
	s.closeAll()
	<-errc
	return nil
}

func (s *Server) closeAll() {
	s.mu.Lock()
	s.closing = true
	for c := range s.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok","policy_revision":"` + s.cfg.Engine.Revision() + `"}`))
}

// readyz answers 200 when the sidecar has a policy to decide by, 503 when
// it denies every call for want of one (Config.Readiness), with the
// status as JSON either way. Like /healthz it needs no token.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	var status any = map[string]any{"ready": true, "policy_revision": s.cfg.Engine.Revision(), "decision_log_backlog": nil}
	ready := true
	if s.cfg.Readiness != nil {
		status, ready = s.cfg.Readiness()
	}
	w.Header().Set("Content-Type", "application/json")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(status)
}

// authorized refuses requests without the bearer token (401) and browser
// requests from an origin not listed (403).
func (s *Server) authorized(next http.Handler) http.Handler {
	want := []byte("Bearer " + s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(s.cfg.AllowedOrigins, origin) {
			http.Error(w, "gatekeeper: origin "+origin+" is not allowed", http.StatusForbidden)
			return
		}
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gatekeeper"`)
			http.Error(w, "gatekeeper: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	if !s.connCount.take() {
		s.refuseConn(w)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.connCount.give(1)
		return // the upgrader has answered
	}
	c := newConn(s, ws)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.connCount.give(1)
		_ = ws.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.metrics.connections.Inc()
	go func() {
		defer s.wg.Done()
		defer s.metrics.connections.Dec()
		defer s.connCount.give(1)
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
}

// removeWorkspace removes the workspace of query id, if the sidecar keeps
// workspaces and the query had one: when the query ends.
func (s *Server) removeWorkspace(id string) {
	if s.cfg.Workspaces == nil {
		return
	}
	if err := s.cfg.Workspaces.Remove(id); err != nil {
		s.log.Warn("remove a query's workspace", "query_id", id, "err", err)
	}
}
