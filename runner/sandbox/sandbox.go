// Package sandbox is gatekeeper's one sandbox runner, written once over a
// small Platform interface that each backend implements (runner/docker:
// Docker containers; runner/kube: Kubernetes Pods). It holds everything
// that does not depend on where a sandbox runs: the validation of a Spec
// and its Plan, the warm pool (its floor, demand sizing, memory budget and
// interpreters started ahead), the run loop (the launch protocol of
// runner/launch: header and workspace in, output, end marks and snapshot
// out, the timeout, cancellation), the pool's metrics and the removal of
// what a run used.
//
// The seam is a sandbox's lifecycle, as containerd's runtime draws it:
// a Platform creates a sandbox from a Plan, started and attached, waiting
// for its input (Create); the Instance it returns offers its streams,
// can be killed, says how it ended (Exit) and is removed; and the Platform
// sweeps what a previous runner of the same instance left (Sweep). What
// only some platforms can do is an optional interface tested at run time
// (LanguageChecker, PeakMeter, StallMeter, RunLabeler, RunBinder,
// MemoryReporter, LeftoverCounter, CollectorSource, EgressPlatform), as net/http tests for http.Flusher.
//
// A third backend implements Platform and Instance, wraps its Runner
// around New, and passes runner/runnertest's conformance and adversarial
// suites; nothing else needs copying.
package sandbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Platform is where sandboxes run. Its methods are safe for concurrent use.
type Platform interface {
	// Validate adds the platform's own problems with a planned Spec
	// (a deps directory it cannot mount, say) to those the runner found,
	// or returns an error refusing the Spec outright (a network policy it
	// cannot enforce: runner.ErrNetworkUnsupported).
	Validate(spec runner.Spec, p *Plan) (problems []string, err error)
	// Prepare makes sure the platform can run sandboxes of p now, before
	// a sandbox is taken from the pool or made: that the runtime exists,
	// and, with lang not empty, that the image has lang's interpreter
	// where the platform can only tell before it creates the sandbox.
	Prepare(ctx context.Context, p *Plan, lang runner.Language) error
	// Create makes a sandbox of req.Plan and starts it, its streams
	// attached from before its launcher's first byte. It returns once the
	// sandbox waits for its input. On error nothing of it is left, or its
	// removal runs in req.Background.
	Create(ctx context.Context, req CreateRequest) (Instance, error)
	// Sweep removes the sandboxes of this runner's instance, and what was
	// made for them, except those keep keeps (nil keeps none), and returns
	// how many it removed. pooled says whether a sandbox was made for the
	// pool.
	Sweep(ctx context.Context, keep func(id string, pooled bool) bool) (int, error)
	// Close releases the platform's own resources (clients, watches,
	// listeners); every sandbox is removed by then.
	Close() error
}

// CreateRequest is what Platform.Create makes.
type CreateRequest struct {
	// Plan is the sandbox's settings; Plan.PoolKey is set for a warm
	// sandbox of the pool, which serves a run not known yet.
	Plan *Plan
	// Spec is the run's (its ids, labels and network); for a warm
	// sandbox, a template with the sandbox only.
	Spec runner.Spec
	// Yield, when not nil, asks the pool to give up one warm sandbox, so
	// that a run's sandbox the platform has no room for can take its
	// place; it reports whether there was one.
	Yield func() bool
	// Background runs f, a removal of what a failed Create left, in the
	// background, where the runner's Close, Cleanup and Leftovers wait
	// for it.
	Background func(f func())
}

// Instance is one sandbox a Platform created. The runner owns it: it
// reads its streams, writes its input, and removes it once.
type Instance interface {
	// ID names the sandbox in logs and labels.
	ID() string
	// Streams are the sandbox's standard streams. The run loop owns
	// them until the run ends.
	Streams() Streams
	// Done is closed once the sandbox ended, or the platform lost sight
	// of it (its streams or its wait failed; Exit then says why).
	Done() <-chan struct{}
	// Kill stops the sandbox now. Killing one that ended is fine.
	Kill()
	// Exit says how the sandbox ended; the runner calls it once, after
	// Done, or at once when the program's end marks said it exited by
	// itself (e.ByItself), when only its memory is asked.
	Exit(ctx context.Context, e Ending) (Exit, error)
	// Detach ends the streams, and whatever tied the sandbox to its run
	// (its registration with the egress proxy). The runner calls it when
	// the run ended, before Remove.
	Detach()
	// Remove removes the sandbox and what was made for it, blocking until
	// it is done; the runner calls it in the background.
	Remove()
}

// Streams are a sandbox's standard streams.
type Streams struct {
	Stdin  io.WriteCloser
	Stdout io.Reader
	Stderr io.Reader
}

// Ending is what the run loop knows of a sandbox's end when it asks Exit.
type Ending struct {
	// ByItself: the program's end marks came in with its own exit code;
	// only the memory it used is asked.
	ByItself bool
	// Killed: the runner killed the sandbox (timeout, cancellation, a
	// refused snapshot).
	Killed bool
	// Since is when the run's code was sent.
	Since time.Time
}

// Exit is how a sandbox ended, as its platform saw it (containerd's Exit).
type Exit struct {
	// Code is the exit status (137 after a SIGKILL).
	Code int
	// OOMKilled: the memory limit killed it.
	OOMKilled bool
	// PeakMemoryBytes is the highest memory use seen; 0 if unknown.
	PeakMemoryBytes int64
}

// LanguageChecker is an Instance that can tell, once created, whether
// its image has a language's interpreter.
type LanguageChecker interface {
	CheckLanguage(ctx context.Context, lang runner.Language) error
}

// PeakMeter is an Instance whose memory use can be read during its run.
type PeakMeter interface {
	// StartMeter starts following the sandbox's memory use; the runner
	// calls it as the run begins.
	StartMeter()
	// Peak reports the highest memory use so far, while the sandbox
	// lives (the runner reads it when the end marks arrive, before the
	// sandbox ends and its accounting may be gone).
	Peak() int64
}

// RunLabeler is an Instance that can be labelled with the run a warm
// sandbox serves after it was made.
type RunLabeler interface {
	LabelRun(spec runner.Spec)
}

// MemoryReporter is a Platform that knows its memory: the pool's default
// budget is half of it.
type MemoryReporter interface {
	Memory(ctx context.Context) (int64, error)
}

// LeftoverCounter is a Platform that can count what its instance left:
// sandboxes not kept by keep, and what was made for them.
type LeftoverCounter interface {
	Leftovers(ctx context.Context, keep func(id string, labels map[string]string) bool) (int, error)
}

// EgressPlatform is a Platform with an egress proxy: EgressCA is the
// proxy's CA certificate (Egress.CACert), which sandboxes whose traffic
// it intercepts trust. A run whose network needs it on a platform
// without one is refused.
type EgressPlatform interface {
	EgressCA() []byte
}

// CollectorSource is a Platform with Prometheus collectors of its own.
type CollectorSource interface {
	Collectors() []prometheus.Collector
}

// Config configures a Runner.
type Config struct {
	// Instance is the runner's instance name (runner.LabelInstance), which
	// the platform already carries; it is logged.
	Instance string
	// DefaultImage is the image of a Sandbox whose Image is empty; empty
	// refuses such a Sandbox.
	DefaultImage string
	// ColdMargin is how long past the run's backstop a sandbox made for
	// one run lives, counted from its start: the time from its start to
	// its code (Docker: none to speak of; Kubernetes: an attach).
	ColdMargin time.Duration
	// DrainTimeout bounds the wait for the output to end after the
	// sandbox ended or was killed.
	DrainTimeout time.Duration
	// MinMemoryBytes is the smallest memory limit the platform accepts.
	MinMemoryBytes int64
	// Pool configures the warm pool; the zero value disables it.
	Pool PoolConfig
	// MaxIdleSessions bounds the sessions whose sandbox waits for a run
	// (runner.Session): a session that starts past it ends the one idle
	// longest (runner.EndEvicted). 0 means DefaultMaxIdleSessions.
	MaxIdleSessions int
	// Logger receives what happens outside a run's Result. nil discards.
	Logger *slog.Logger
}

// Defaults of the rlimits every platform sets (its Config's Nofile and
// HostNproc).
const (
	// DefaultNofile is RLIMIT_NOFILE.
	DefaultNofile = 1024
	// DefaultHostNproc is RLIMIT_NPROC where the kernel counts the uid's
	// processes across the host (a backstop, not the per-run bound).
	DefaultHostNproc = 4096
)

// cleanupTimeout bounds the calls that must happen after the caller's
// context ended (killing, asking how a sandbox ended).
const cleanupTimeout = 30 * time.Second

// Runner runs Specs in sandboxes of a Platform. It is safe for concurrent
// use; it does not bound concurrency itself (see runner.Queue).
type Runner struct {
	cfg      Config
	pf       Platform
	log      *slog.Logger
	pool     *pool // nil: no pool
	sessions *sessionSet
	metrics  Metrics
	removals sync.WaitGroup // removals of ended runs' sandboxes
}

// New returns a Runner over pf. It does not contact the platform.
func New(pf Platform, cfg Config) (*Runner, error) {
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{cfg: cfg, pf: pf, log: log, metrics: newMetrics()}
	r.sessions = newSessionSet(r, cfg.MaxIdleSessions)
	if cfg.Pool.Size > 0 {
		p, err := newPool(r, cfg.Pool)
		if err != nil {
			return nil, err
		}
		r.pool = p
	}
	return r, nil
}

// Metrics returns the pool's counters (tests read them).
func (r *Runner) Metrics() Metrics { return r.metrics }

// Close ends every session (removing its sandbox), waits for the removal of ended runs' sandboxes, stops the warm
// pool and removes its warm sandboxes, then closes the platform. It does
// not stop runs in progress or remove their sandboxes; call it once they
// ended.
func (r *Runner) Close() error {
	r.sessions.closeAll()
	r.removals.Wait()
	var err error
	if r.pool != nil {
		err = r.pool.close()
		// Closing the pool hands its warm sandboxes to removeLater too.
		r.removals.Wait()
	}
	return errors.Join(err, r.pf.Close())
}

// Warm starts the warm pool: it makes the warm sandboxes of
// Config.Pool.Sandboxes and waits until each has Config.Pool.Min, ctx
// ends (its error is returned; the pool goes on filling), or making them
// fails (that error is returned; the pool retries in the background). The
// pool also starts with the first Run. Call Cleanup before, not after:
// Cleanup removes warm sandboxes too. Without a pool Warm does nothing.
func (r *Runner) Warm(ctx context.Context) error {
	if r.pool == nil {
		return nil
	}
	return r.pool.warm(ctx)
}

// Collectors returns the runner's Prometheus collectors, for the sidecar's
// registry: the warm pool's gatekeeper_pool_hits_total,
// gatekeeper_pool_interpreter_hits_total, gatekeeper_pool_waits_total,
// gatekeeper_pool_misses_total, gatekeeper_pool_refill_seconds,
// gatekeeper_pool_refill_errors_total, gatekeeper_pool_wait_seconds,
// gatekeeper_pool_warm_containers, gatekeeper_pool_making_containers and
// gatekeeper_pool_target_containers (at zero without a pool), and the
// platform's own (CollectorSource).
func (r *Runner) Collectors() []prometheus.Collector {
	cs := r.metrics.collectors(func() (ready, making, target int) {
		if r.pool == nil {
			return 0, 0, 0
		}
		return r.pool.counts()
	})
	if src, ok := r.pf.(CollectorSource); ok {
		cs = append(cs, src.Collectors()...)
	}
	return cs
}

// Cleanup removes every sandbox of this runner's instance, running or not
// (warm ones of the pool included), and what was made for them, and
// returns how many things it removed. Call it when the sidecar starts, to
// remove what a killed predecessor of the same instance left, before
// Warm, and not while this runner has runs in progress. It first waits
// for the removals of ended runs' sandboxes, which run in the background.
func (r *Runner) Cleanup(ctx context.Context) (int, error) {
	r.removals.Wait()
	return r.pf.Sweep(ctx, nil)
}

// Leftovers returns how many sandboxes of this runner's instance, and
// things made for them, exist once the removals of ended runs have
// finished; the warm pool's sandboxes not taken by a run are not counted.
// Tests use it (see runnertest.Leftovers). A platform that cannot count
// them is an error.
func (r *Runner) Leftovers(ctx context.Context) (int, error) {
	r.removals.Wait()
	lc, ok := r.pf.(LeftoverCounter)
	if !ok {
		return 0, errors.New("the platform cannot count leftovers")
	}
	return lc.Leftovers(ctx, func(id string, labels map[string]string) bool {
		return r.pool != nil && r.pool.owns(id, labels)
	})
}

// removeLater removes a sandbox in the background, off the run's path.
// Close, Cleanup and Leftovers wait for these removals.
func (r *Runner) removeLater(inst Instance) {
	r.removals.Go(inst.Remove)
}
