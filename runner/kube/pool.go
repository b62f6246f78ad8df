package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gatekeeper-ai/gatekeeper/internal/poolmetrics"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
)

// Defaults for the zero fields of PoolConfig: the Docker backend's.
const (
	DefaultPoolIdle         = 5 * time.Minute
	DefaultPoolMaxSandboxes = 8
)

// poolGrace is how long past its idle lifetime a warm Pod's launcher waits
// for a run before it ends itself; the pool replaces it at Idle.
const poolGrace = 30 * time.Second

// PoolMaxTimeout is the longest run timeout a warm Pod serves; a longer
// run starts a cold Pod. A warm Pod's PID 1 (and its
// activeDeadlineSeconds) ends it at most Idle + 30s + PoolMaxTimeout +
// 10s + 30s after it started.
const PoolMaxTimeout = 10 * time.Minute

// PoolConfig configures the warm pool, as the Docker backend's does: Pods
// created ahead of time, their container running and waiting for its
// code on standard input with no clock running, so that a run skips the
// Pod's scheduling, sandbox and start. A run takes one warm Pod of its
// sandbox, if there is one, and the pool makes a replacement in the
// background; a Pod serves one run only and is deleted after it. Every
// limit applies as in a cold run. Sandboxes with a network are never
// pooled, nor runs with a timeout over PoolMaxTimeout.
//
// A warm Pod carries the instance label and runner.LabelPool; the run that takes
// it adds its run and query labels and annotations (a patch, in the
// background) and the Runner logs them with the Pod's name.
type PoolConfig struct {
	// Size is how many warm Pods are kept for each pooled sandbox.
	Size int
	// Idle is how long a warm Pod waits for a run before the pool
	// replaces it; 0 means DefaultPoolIdle.
	Idle time.Duration
	// Sandboxes are pooled from Warm on, for as long as the Runner lives.
	// Each must be a valid, poolable sandbox; New refuses one that is not.
	Sandboxes []runner.Sandbox
	// All also pools every other poolable sandbox once a run used it.
	All bool
	// MaxSandboxes bounds how many sandboxes All pools at once, besides
	// Sandboxes; 0 means DefaultPoolMaxSandboxes.
	MaxSandboxes int
}

// poolable reports whether runs of sb may use warm Pods.
func poolable(sb runner.Sandbox) bool { return !sb.Network.Enabled && sb.DepsDir == "" }

// poolKey identifies the Pod settings of a poolable sandbox: every field
// that reaches the Pod, with the image, runtime and class resolved.
func poolKey(sb runner.Sandbox, p *plan) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%q %q %q %d %d %g %d %d %d %d", p.image, p.runtime, p.class,
		sb.UID, sb.GID, sb.CPUs, sb.MemoryBytes, sb.PIDs, sb.WorkspaceBytes, sb.TmpBytes))
	return hex.EncodeToString(sum[:8])
}

// pool keeps warm Pods per sandbox key. Its goroutines (the reaper and
// the makers) start with the first Warm or Run and end in close.
type pool struct {
	r       *Runner
	size    int
	idle    time.Duration
	all     bool
	maxSets int
	m       poolmetrics.Metrics

	ctx     context.Context // ends in close
	cancel  context.CancelFunc
	started sync.Once
	wg      sync.WaitGroup // the reaper, makers and discards

	mu      sync.Mutex
	closed  bool
	sets    map[string]*warmSet
	taken   map[string]bool // Pods handed to runs, until deleted
	changed chan struct{}   // closed and replaced when a set changes
}

// warmSet is the pool of one sandbox.
type warmSet struct {
	key      string
	spec     runner.Spec // the template the Pods are made from
	plan     *plan
	pinned   bool
	ready    []*warm
	making   int
	lastUsed time.Time
	lastErr  error
	retryAt  time.Time
	failures int
}

// warm is one running Pod waiting for its code.
type warm struct {
	key  string
	name string
	born time.Time
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
		r: r, size: cfg.Size, idle: cfg.Idle, all: cfg.All, maxSets: cfg.MaxSandboxes, m: r.metrics,
		ctx: ctx, cancel: cancel, sets: map[string]*warmSet{}, taken: map[string]bool{}, changed: make(chan struct{}),
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

// templateSpec is the Spec a warm Pod of sb is planned from: the
// language, timeout and code are the run's, sent on standard input.
func templateSpec(sb runner.Sandbox) runner.Spec {
	return runner.Spec{RunID: "warm", QueryID: "warm", Language: runner.Python, Timeout: time.Second, Sandbox: sb}
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
	pl.poolKey, pl.wait = key, p.idle+poolGrace
	pl.life = pl.wait + PoolMaxTimeout + launch.BackstopGrace + launch.SnapshotGrace
	s := &warmSet{key: key, spec: spec, plan: pl, pinned: pinned, lastUsed: time.Now()}
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

// drop forgets s and discards its warm Pods. Lock held.
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

// dead reports whether w's Pod is gone or its container no longer runs.
func (p *pool) dead(w *warm) bool {
	pod := p.r.watch.get(w.name)
	st := sandboxStatus(pod)
	return pod == nil || pod.DeletionTimestamp != nil || st == nil || st.State.Running == nil
}

// take hands out a warm Pod for spec's run, planned as pl, or nil (a
// miss) when there is none. Replacements are made in the background.
func (p *pool) take(spec runner.Spec, pl *plan) *warm {
	if !poolable(spec.Sandbox) || spec.Timeout > PoolMaxTimeout {
		return nil
	}
	p.start()
	key := poolKey(spec.Sandbox, pl)
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
		if s, err = p.addSet(spec.Sandbox, false); err != nil {
			return nil
		}
	}
	s.lastUsed = time.Now()
	for len(s.ready) > 0 {
		w := s.ready[0]
		s.ready = s.ready[1:]
		if time.Since(w.born) >= p.idle || p.dead(w) {
			p.discard(w)
			continue
		}
		p.taken[w.name] = true
		p.m.Hits.Inc()
		if len(s.ready) == 0 {
			p.fill(s)
		}
		return w
	}
	p.m.Misses.Inc()
	p.fill(s)
	return nil
}

// yieldPause is how long the pool makes no warm Pod after one gave its
// place to a run, so that the run's Pod is scheduled first.
const yieldPause = 10 * time.Second

// yield discards the oldest ready warm Pod, so that a run's Pod the
// cluster has no room for can take its place, and pauses the refill of its
// set for yieldPause. It reports whether there was one.
func (p *pool) yield() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var from *warmSet
	at := -1
	for _, s := range p.sets {
		for i, w := range s.ready {
			if at < 0 || w.born.Before(from.ready[at].born) {
				from, at = s, i
			}
		}
	}
	if at < 0 {
		return false
	}
	p.discard(from.ready[at])
	from.ready = slices.Delete(from.ready, at, at+1)
	from.retryAt = time.Now().Add(yieldPause)
	p.broadcast()
	return true
}

// release deletes a Pod a run took, once the run ended, in the background
// with the runner's other removals.
func (p *pool) release(w *warm) {
	p.r.removeLater(w.name)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.taken, w.name)
	if s := p.sets[w.key]; s != nil {
		p.fill(s)
	}
}

// fill starts makers until s has Size warm Pods, ready or being made.
// Lock held.
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

// makeOne creates one warm Pod of s and waits until it runs.
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
		p.m.RefillErrors.Inc()
		if errors.Is(err, errNoRoom) {
			p.r.log.Debug("no room for a warm sandbox pod; trying again later", "pool", s.key, "retry_at", s.retryAt)
			return
		}
		p.r.log.Warn("make a warm sandbox pod", "pool", s.key, "failures", s.failures, "err", err)
		return
	}
	if p.closed || p.sets[s.key] != s {
		p.discard(w)
		return
	}
	s.failures, s.lastErr = 0, nil
	s.ready = append(s.ready, w)
	p.m.Refill.Observe(time.Since(begin).Seconds())
}

// warmUp checks s's class and image (a canary and a probe, once), creates
// a Pod of s's plan and waits until its container runs. On error nothing
// of it is left.
func (p *pool) warmUp(s *warmSet) (*warm, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.r.cfg.StartTimeout+cleanupTimeout)
	defer cancel()
	if err := p.r.watch.start(ctx); err != nil {
		return nil, err
	}
	if err := p.r.checks.require(ctx, s.plan); err != nil {
		return nil, err
	}
	if err := p.r.images.require(ctx, s.plan, s.spec.Language); err != nil {
		return nil, err
	}
	name := newPodName()
	if err := p.r.createPod(ctx, s.spec, s.plan, name, netip.AddrPort{}); err != nil {
		return nil, err
	}
	if _, err := p.r.waitStarted(ctx, name, s.plan); err != nil {
		p.r.removeLater(name)
		return nil, err
	}
	return &warm{key: s.key, name: name, born: time.Now()}, nil
}

// discard deletes a warm Pod in the background. Lock held.
func (p *pool) discard(w *warm) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.r.remove(w.name)
	}()
}

// broadcast wakes whoever waits for a change (Warm). Lock held.
func (p *pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// reap replaces warm Pods older than Idle or dead, drops sets no run used
// for Idle (unless pinned), and retries failed fills, until close.
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
				if time.Since(w.born) >= p.idle || p.dead(w) {
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

// warm fills the pinned sets and waits until each has Size warm Pods. It
// returns a set's error when making its Pods failed, or ctx's error.
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

// counts returns the warm Pods waiting for a run, those being made and
// those the pool aims to hold (its size per sandbox), all sandboxes
// together.
func (p *pool) counts() (ready, making, target int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sets {
		ready += len(s.ready)
		making += s.making
		target += p.size
	}
	return ready, making, target
}

// owns reports whether the object (a Pod or its NetworkPolicy, both named
// after the Pod) with labels is the pool's: warm, being made, or being
// deleted after its run; not running one.
func (p *pool) owns(name string, labels map[string]string) bool {
	if labels[runner.LabelPool] == "" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.taken[name]
}

// close stops the pool, deletes its warm Pods and waits for its
// goroutines; then it deletes any Pod of the instance still labelled as
// the pool's and not taken by a run.
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
	list, err := p.r.cs.CoreV1().Pods(p.r.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: runner.LabelInstance + "=" + p.r.cfg.Instance + "," + runner.LabelPool,
	})
	if err != nil {
		return apiErr("list warm pods", err)
	}
	for _, pod := range list.Items {
		p.mu.Lock()
		inUse := p.taken[pod.Name]
		p.mu.Unlock()
		if !inUse {
			p.r.remove(pod.Name)
		}
	}
	return nil
}

// runWarm runs spec in warm Pod w, taken from the pool; the pool deletes
// it after the run, in the background. The run labels the Pod with its
// ids (a patch, beside the run) and logs them with the Pod's name.
func (r *Runner) runWarm(ctx context.Context, w *warm, p *plan, spec runner.Spec, res runner.Result) (runner.Result, error) {
	defer r.pool.release(w)
	r.log.Info("pooled sandbox run", "run_id", spec.RunID, "query_id", spec.QueryID, "pod", w.name, "pool", w.key, "labels", spec.Labels)
	labelled := make(chan struct{})
	go func() {
		defer close(labelled)
		r.labelRun(w.name, spec)
	}()
	defer func() { <-labelled }()
	// The warm Pod's plan has the pool's lifetimes; the run's input (its
	// code, tag and saved workspace) is the run's own.
	return r.execute(ctx, w.name, p, spec, res)
}

// labelRun adds the run's labels and annotations to a warm Pod it took.
func (r *Runner) labelRun(name string, spec runner.Spec) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	ann, _ := runAnnotations(spec)
	patch, err := jsonMerge(runLabels(spec), ann)
	if err == nil {
		_, err = r.cs.CoreV1().Pods(r.cfg.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		r.log.Warn("label a warm sandbox pod with its run", "pod", name, "run_id", spec.RunID, "err", err)
	}
}

// jsonMerge is a merge patch adding labels and annotations.
func jsonMerge(labels, annotations map[string]string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
}
