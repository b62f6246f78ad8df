// Package console is gatekeeper's live console: a read-only browser view
// (served at /ui/ by `gatekeeper serve --ui`) and the stream behind
// `gatekeeper tail`, showing every decision, query, sandboxed run and
// egress request as it happens.
//
// The audit log is its one source of records: a Console follows the log
// file (told at once of each write by the tee Auditor it wraps around the
// server's), checks its hash chain as it reads, keeps a bounded history
// for pages opened late and fans new lines out to subscribers over
// server-sent events. Run output and code, which the audit log does not
// hold, come from a bounded store of recent runs fed by the server as a
// server.RunObserver. Asks on nested calls that wait for a human, which
// the log gets only once answered, come from the server too (as a
// server.ApprovalObserver) and go out on the stream as `pending` events.
// Everything shown is masked as the audit log masks.
package console

import (
	"context"
	"embed"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

//go:embed web
var webFiles embed.FS

// Engine is what the console reads of the policy engine.
type Engine interface {
	Revision() string
	Reloads() []gate.ReloadEvent
	OpenQuery(ctx context.Context, id string, override []byte) (*gate.Query, error)
}

// RunnerStatus is what the sandbox backend says about itself.
type RunnerStatus struct {
	Backend      string   `json:"backend"`
	Instance     string   `json:"instance,omitempty"`
	DefaultImage string   `json:"default_image,omitempty"`
	Engine       string   `json:"engine,omitempty"`
	Runtimes     []string `json:"runtimes,omitempty"`
	Error        string   `json:"error,omitempty"`
}

// Config wires a Console. Token, AuditPath and Engine are required.
type Config struct {
	// Token is the sidecar's bearer token: the login form exchanges it
	// for a session cookie, and `gatekeeper tail` sends it as a bearer.
	Token string
	// AuditPath is the audit log file the console follows.
	AuditPath string
	Engine    Engine
	// Gatherer is the registry /metrics serves; the overview reads it.
	Gatherer prometheus.Gatherer
	// Runner reports the sandbox backend's status; nil means no runner.
	Runner func(context.Context) RunnerStatus
	// AllowRemote accepts a Host header that is not loopback (the sidecar
	// listens beyond loopback with --allow-remote); otherwise such a
	// request is refused, against DNS rebinding.
	AllowRemote bool
	// Version is shown in the overview.
	Version string
	// MaxRecords and MaxHistoryBytes bound the history of records held
	// for backfill (defaults 20000 and 64 MiB); MaxRuns and MaxRunBytes
	// bound the run details held (defaults 200 and 64 MiB).
	MaxRecords      int
	MaxHistoryBytes int64
	MaxRuns         int
	MaxRunBytes     int64
	// Poll is how often the log file is read when no write was announced
	// (lines written by another writer); default 1s.
	Poll time.Duration
	// Now is the clock of sessions and login limits; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Console serves the console. Create it with New, start Run, and mount
// Handler; it is safe for concurrent use.
type Console struct {
	cfg     Config
	log     *slog.Logger
	hub     *hub
	runs    *runStore
	pending *pendingSet
	auth    *auth
	started time.Time
	status  *statusCache
}

// New checks cfg and returns a Console.
func New(cfg Config) (*Console, error) {
	switch {
	case cfg.Token == "":
		return nil, errors.New("console: empty token")
	case cfg.AuditPath == "":
		return nil, errors.New("console: no audit log path")
	case cfg.Engine == nil:
		return nil, errors.New("console: no engine")
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 20000
	}
	if cfg.MaxHistoryBytes <= 0 {
		cfg.MaxHistoryBytes = 64 << 20
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 200
	}
	if cfg.MaxRunBytes <= 0 {
		cfg.MaxRunBytes = 64 << 20
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.NewRegistry()
	}
	c := &Console{
		cfg: cfg, log: cfg.Logger,
		hub:     newHub(cfg.AuditPath, cfg.MaxRecords, cfg.MaxHistoryBytes, cfg.Poll),
		runs:    newRunStore(cfg.MaxRuns, cfg.MaxRunBytes),
		pending: newPendingSet(),
		auth:    newAuth(cfg.Token, cfg.Now),
		started: cfg.Now(),
		status:  &statusCache{},
	}
	return c, nil
}

// Run follows the audit log until ctx ends; then every live stream ends.
// The data endpoints of Handler answer once Run has read the log to its
// end the first time, so that a page opened at start gets the whole
// history.
func (c *Console) Run(ctx context.Context) { c.hub.run(ctx) }

// Auditor wraps the server's Auditor so that the console reads each line
// as soon as it is written. If inner reports its head (as *audit.Log does
// with Head), the overview also checks the file's last line against it.
func (c *Console) Auditor(inner server.Auditor) server.Auditor {
	if hd, ok := inner.(interface{ Head() (int64, string) }); ok {
		c.hub.head = hd.Head
	}
	return tee{inner: inner, h: c.hub}
}

// ObserveRun keeps a finished run's details; it implements
// server.RunObserver.
func (c *Console) ObserveRun(info server.RunInfo) { c.runs.ObserveRun(info) }

// ApprovalWaiting shows an ask on a nested call as waiting for its
// client's answer; it implements server.ApprovalObserver.
func (c *Console) ApprovalWaiting(p server.PendingApproval) { c.pending.ApprovalWaiting(p) }

// ApprovalDone stops showing the ask id as waiting; it implements
// server.ApprovalObserver.
func (c *Console) ApprovalDone(id string) { c.pending.ApprovalDone(id) }

// LoginURL returns a one-time path (/ui/login?code=…), valid for 15
// minutes, that logs a browser in once; `serve --ui` prints one.
func (c *Console) LoginURL() string { return "/ui/login?code=" + c.auth.newCode() }
