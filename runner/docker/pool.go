package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// LabelPool is on every warm container of the pool, with the key of the
// sandbox it was made for; such a container has no run or query label.
const LabelPool = "gatekeeper.pool"

// Defaults for the zero fields of PoolConfig.
const (
	DefaultPoolIdle         = 5 * time.Minute
	DefaultPoolMaxSandboxes = 8
)

// poolGrace is how long past its idle lifetime a warm container's launcher
// waits for a run before it ends itself; the pool replaces it at Idle.
const poolGrace = 30 * time.Second

// PoolMaxTimeout is the longest run timeout a warm container serves; a
// longer run starts a cold container. A warm container's PID 1 ends it,
// whatever its program does, at most Idle + 30s + PoolMaxTimeout + 10s +
// 30s (for its snapshot of /workspace) after it started.
const PoolMaxTimeout = 10 * time.Minute

// PoolConfig configures the warm pool: containers created and started
// ahead of time, each waiting for its code on standard input with no clock
// running, so that a run skips the container's creation and start. A run
// takes one warm container of its sandbox, if there is one, and the pool
// makes a replacement in the background; a container serves one run only
// and is removed after it. Every limit applies as in a cold run: the
// timeout counts from the moment the code is sent. Sandboxes with a
// network or a deps directory are never pooled (their network, or the
// bind of the directory, is made for one run), nor runs with a timeout
// over PoolMaxTimeout.
//
// A warm container carries the instance label and LabelPool, but not the
// run and query ids (labels cannot be added to a container that exists),
// nor the Spec's labels: the Runner logs them, with the container's id,
// when a run takes it. The zero PoolConfig (Size 0) disables the pool.
type PoolConfig struct {
	// Size is how many warm containers are kept for each pooled sandbox.
	Size int
	// Idle is how long a warm container waits for a run before the pool
	// removes and replaces it; its launcher ends it by itself 30s later
	// should the sidecar be gone (Cleanup removes the stopped container).
	// 0 means DefaultPoolIdle.
	Idle time.Duration
	// Sandboxes are pooled from Warm on, for as long as the Runner lives
	// (the sidecar passes its base policy's sandbox). Each must be a valid,
	// poolable sandbox; New refuses one that is not.
	Sandboxes []runner.Sandbox
	// All also pools every other poolable sandbox once a run used it (that
	// run is a miss). Such a sandbox stops being pooled when no run used it
	// for Idle, or when MaxSandboxes others were used since.
	All bool
	// MaxSandboxes bounds how many sandboxes All pools at once, besides
	// Sandboxes; 0 means DefaultPoolMaxSandboxes.
	MaxSandboxes int
}

// poolable reports whether runs of sb may use warm containers.
func poolable(sb runner.Sandbox) bool { return !sb.Network.Enabled && sb.DepsDir == "" }

// poolKey identifies the container settings of a poolable sandbox: every
// field that reaches the container, with the image and runtime resolved.
func poolKey(sb runner.Sandbox, p *plan) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%q %q %d %d %g %d %d %d %d", p.image, p.runtime,
		sb.UID, sb.GID, sb.CPUs, sb.MemoryBytes, sb.PIDs, sb.WorkspaceBytes, sb.TmpBytes))
	return hex.EncodeToString(sum[:8])
}

// pool keeps warm containers per sandbox key. Its goroutines (the reaper
// and the makers) start with the first Warm or Run and end in close.
type pool struct {
	r       *Runner
	size    int
	idle    time.Duration
	grace   time.Duration
	all     bool
	maxSets int
	m       *poolMetrics

	ctx     context.Context // ends in close
	cancel  context.CancelFunc
	started sync.Once
	wg      sync.WaitGroup // the reaper, makers and discards

	mu      sync.Mutex
	closed  bool
	sets    map[string]*warmSet
	taken   map[string]bool // containers handed to runs, until removed
	changed chan struct{}   // closed and replaced when a set changes
}

// warmSet is the pool of one sandbox.
type warmSet struct {
	key      string
	plan     *plan // the warm containers' settings
	pinned   bool  // from PoolConfig.Sandboxes: never dropped
	ready    []*warm
	making   int
	lastUsed time.Time
	lastErr  error     // the last failure to make a container, until one is made
	retryAt  time.Time // no new attempt before, after a failure
	failures int
}

// warm is one started container waiting for its code.
type warm struct {
	key     string
	id      string
	imageID string
	sess    *session
	born    time.Time
}

// dead reports whether w's container has ended (or its wait failed). It
// consumes the wait's result, so w must not be run afterwards.
func (w *warm) dead() bool {
	select {
	case <-w.sess.waitC:
		return true
	case <-w.sess.errC:
		return true
	default:
		return false
	}
}

func newPool(r *Runner, cfg PoolConfig) (*pool, error) {
	if cfg.Idle < 0 || cfg.MaxSandboxes < 0 {
		return nil, fmt.Errorf("pool: idle %v, max sandboxes %d: neither may be negative", cfg.Idle, cfg.MaxSandboxes)
	}
	if cfg.Idle == 0 {
		cfg.Idle = DefaultPoolIdle
	}
	if cfg.MaxSandboxes == 0 {
		cfg.MaxSandboxes = DefaultPoolMaxSandboxes
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{
		r: r, size: cfg.Size, idle: cfg.Idle, grace: poolGrace, all: cfg.All, maxSets: cfg.MaxSandboxes,
		m: r.metrics, ctx: ctx, cancel: cancel,
		sets: map[string]*warmSet{}, taken: map[string]bool{}, changed: make(chan struct{}),
	}
	var errs []error
	for i, sb := range cfg.Sandboxes {
		if !poolable(sb) {
			errs = append(errs, fmt.Errorf("pool sandbox %d has a network or a deps directory, which are never pooled", i))
			continue
		}
		if _, err := p.addSet(sb, true); err != nil {
			errs = append(errs, fmt.Errorf("pool sandbox %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		cancel()
		return nil, err
	}
	return p, nil
}

// templateSpec is the Spec a warm container of sb is planned from: the
// language, timeout and code are the run's, sent on standard input.
func templateSpec(sb runner.Sandbox) runner.Spec {
	return runner.Spec{Language: runner.Python, Timeout: time.Second, Sandbox: sb}
}

// addSet adds (or pins) the set of sb and returns it. Lock held or not
// needed (newPool).
func (p *pool) addSet(sb runner.Sandbox, pinned bool) (*warmSet, error) {
	spec := templateSpec(sb)
	pl, err := p.r.plan(spec)
	if err != nil {
		return nil, err
	}
	key := poolKey(sb, pl)
	if s, ok := p.sets[key]; ok {
		s.pinned = s.pinned || pinned
		return s, nil
	}
	pl.poolKey, pl.wait = key, p.idle+p.grace
	pl.life = pl.wait + PoolMaxTimeout + backstopGrace + snapshotGrace
	pl.config, pl.host = p.r.containerSettings(spec, pl)
	s := &warmSet{key: key, plan: pl, pinned: pinned, lastUsed: time.Now()}
	p.sets[key] = s
	if !pinned {
		p.evict()
	}
	return s, nil
}

// evict drops the least recently used unpinned sets beyond maxSets. Lock
// held.
func (p *pool) evict() {
	var unpinned []*warmSet
	for _, s := range p.sets {
		if !s.pinned {
			unpinned = append(unpinned, s)
		}
	}
	slices.SortFunc(unpinned, func(a, b *warmSet) int { return b.lastUsed.Compare(a.lastUsed) })
	for _, s := range unpinned[min(len(unpinned), p.maxSets):] {
		p.drop(s)
	}
}

// drop forgets s and discards its warm containers. Lock held.
func (p *pool) drop(s *warmSet) {
	delete(p.sets, s.key)
	for _, w := range s.ready {
		p.discard(w)
	}
	s.ready = nil
	p.broadcast()
}

// start starts the reaper once, unless the pool is closed.
func (p *pool) start() {
	p.started.Do(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return
		}
		p.wg.Add(1)
		go p.reap()
	})
}

// take hands out a warm container for a run of sb planned as pl with
// timeout, or nil (a miss) when there is none. Replacements are made in the background:
// after the run, or at once when the sandbox has no warm container left.
// With All, a miss makes sb pooled.
func (p *pool) take(sb runner.Sandbox, pl *plan, timeout time.Duration) *warm {
	if !poolable(sb) || timeout > PoolMaxTimeout {
		return nil
	}
	p.start()
	key := poolKey(sb, pl)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	s := p.sets[key]
	if s == nil {
		if !p.all {
			return nil
		}
		var err error
		if s, err = p.addSet(sb, false); err != nil {
			return nil // the run's own plan failed the same way
		}
	}
	s.lastUsed = time.Now()
	for len(s.ready) > 0 {
		w := s.ready[0]
		s.ready = s.ready[1:]
		if time.Since(w.born) >= p.idle || w.dead() {
			p.discard(w)
			continue
		}
		p.taken[w.id] = true
		p.m.hits.Inc()
		if len(s.ready) == 0 {
			// Refill now; otherwise after the run (release), so that
			// making a container does not compete with the run for the
			// engine and the CPU.
			p.fill(s)
		}
		return w
	}
	p.m.misses.Inc()
	p.fill(s)
	return nil
}

// release removes a container a run took, once the run ended, with the
// runner's other removals: in the background, off the run's path (the
// container has stopped, or is killed by the removal). Runner.Close waits
// for it before closing the pool.
func (p *pool) release(w *warm) {
	w.sess.close()
	p.r.removeLater(w.id)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.taken, w.id)
	if s := p.sets[w.key]; s != nil {
		p.fill(s) // nothing once the pool is closed
	}
}

// fill starts makers until s has Size warm containers, ready or being
// made. Lock held.
func (p *pool) fill(s *warmSet) {
	if p.closed || p.size == 0 || time.Now().Before(s.retryAt) || p.sets[s.key] != s {
		return
	}
	for len(s.ready)+s.making < p.size {
		s.making++
		p.wg.Add(1)
		go p.makeOne(s)
	}
}

// makeOne creates and starts one warm container of s.
func (p *pool) makeOne(s *warmSet) {
	defer p.wg.Done()
	begin := time.Now()
	w, err := p.warmUp(s)
	p.mu.Lock()
	defer p.mu.Unlock()
	s.making--
	defer p.broadcast()
	if err != nil {
		if p.closed {
			return
		}
		s.failures++
		s.lastErr = err
		s.retryAt = time.Now().Add(min(time.Duration(1<<min(s.failures, 6))*time.Second, p.idle))
		p.m.refillErrors.Inc()
		p.r.log.Warn("make a warm sandbox container", "pool", s.key, "failures", s.failures, "err", err)
		return
	}
	if p.closed || p.sets[s.key] != s {
		p.discard(w)
		return
	}
	s.failures, s.lastErr = 0, nil
	s.ready = append(s.ready, w)
	p.m.refill.Observe(time.Since(begin).Seconds())
}

// warmUp creates and starts a container of s's plan. On error nothing of
// it is left.
func (p *pool) warmUp(s *warmSet) (*warm, error) {
	ctx, cancel := context.WithTimeout(p.ctx, cleanupTimeout)
	defer cancel()
	img, err := p.r.cli.ImageInspect(ctx, s.plan.image)
	if err != nil {
		return nil, engineErr("inspect image "+s.plan.image, err)
	}
	id, err := p.r.create(ctx, s.plan)
	if err != nil {
		return nil, err
	}
	sess, err := p.r.startContainer(ctx, id)
	if err != nil {
		p.r.remove(id)
		return nil, err
	}
	return &warm{key: s.key, id: id, imageID: img.ID, sess: sess, born: time.Now()}, nil
}

// discard removes a warm container in the background. Lock held.
func (p *pool) discard(w *warm) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		w.sess.close()
		p.r.remove(w.id)
	}()
}

// broadcast wakes whoever waits for a change (Warm). Lock held.
func (p *pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// reap replaces warm containers older than Idle or dead, drops sets no run
// used for Idle (unless pinned), and retries failed fills, until close.
func (p *pool) reap() {
	defer p.wg.Done()
	tick := time.NewTicker(min(max(p.idle/10, 100*time.Millisecond), 10*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
		}
		p.mu.Lock()
		for _, s := range p.sets {
			if !s.pinned && time.Since(s.lastUsed) >= p.idle {
				p.drop(s)
				continue
			}
			fresh := s.ready[:0]
			for _, w := range s.ready {
				if time.Since(w.born) >= p.idle || w.dead() {
					p.discard(w)
				} else {
					fresh = append(fresh, w)
				}
			}
			clear(s.ready[len(fresh):])
			s.ready = fresh
			p.fill(s)
		}
		p.mu.Unlock()
	}
}

// warm fills the pinned sets and waits until each has Size warm
// containers. It returns a set's error when making its containers failed,
// or ctx's error.
func (p *pool) warm(ctx context.Context) error {
	p.start()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return errors.New("pool closed")
		}
		full := true
		var errs []error
		for _, s := range p.sets {
			if !s.pinned {
				continue
			}
			p.fill(s)
			if len(s.ready) < p.size {
				full = false
				if s.lastErr != nil {
					errs = append(errs, fmt.Errorf("warm sandbox %s: %w", s.key, s.lastErr))
				}
			}
		}
		changed := p.changed
		p.mu.Unlock()
		if full {
			return nil
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// readyCount is the number of warm containers waiting for a run.
func (p *pool) readyCount() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.sets {
		n += len(s.ready)
	}
	return float64(n)
}

// owns reports whether the container with labels and id is the pool's:
// warm, being made, or being removed after its run; not running one.
func (p *pool) owns(id string, labels map[string]string) bool {
	if labels[LabelPool] == "" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.taken[id]
}

// close stops the pool, removes its warm containers and waits for its
// goroutines; then it removes any container of the instance still
// labelled as the pool's and not taken by a run.
func (p *pool) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, s := range p.sets {
		p.drop(s)
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	list, err := p.r.cli.ContainerList(ctx, container.ListOptions{
		All: true,
		Filters: filters.NewArgs(
			filters.Arg("label", LabelInstance+"="+p.r.cfg.Instance),
			filters.Arg("label", LabelPool),
		),
	})
	if err != nil {
		return engineErr("list warm containers", err)
	}
	var errs []error
	for _, c := range list {
		p.mu.Lock()
		inUse := p.taken[c.ID]
		p.mu.Unlock()
		if inUse {
			continue
		}
		err := p.r.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, engineErr("remove warm container "+short(c.ID), err))
		}
	}
	return errors.Join(errs...)
}

// poolMetrics are the pool's Prometheus collectors.
type poolMetrics struct {
	hits, misses, refillErrors prometheus.Counter
	refill                     prometheus.Histogram
}

func newPoolMetrics() *poolMetrics {
	return &poolMetrics{
		hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_hits_total", Help: "Sandboxed runs that took a warm container.",
		}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_misses_total", Help: "Runs of a pooled sandbox that found no warm container and started a cold one.",
		}),
		refillErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_refill_errors_total", Help: "Failures to make a warm container.",
		}),
		refill: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gatekeeper_pool_refill_seconds", Help: "Time to create and start one warm container.",
			Buckets: []float64{0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4},
		}),
	}
}

func (m *poolMetrics) collectors(ready func() float64) []prometheus.Collector {
	return []prometheus.Collector{m.hits, m.misses, m.refillErrors, m.refill,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gatekeeper_pool_warm_containers", Help: "Warm containers waiting for a run.",
		}, ready),
	}
}
