package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

// Defaults for the zero fields of PoolConfig.
const (
	DefaultPoolIdle         = 5 * time.Minute
	DefaultPoolMaxSandboxes = 8
	DefaultPoolMaxMaking    = 2
)

// poolGrace is how long past its idle lifetime a warm sandbox's launcher
// waits for a run before it ends itself; the pool replaces it at Idle.
const poolGrace = 30 * time.Second

// PoolMaxTimeout is the longest run timeout a warm sandbox serves; a
// longer run starts a cold sandbox. A warm sandbox's PID 1 ends it,
// whatever its program does, at most Idle + 30s + PoolMaxTimeout + 10s +
// 30s (for its snapshot of /workspace) after it started.
const PoolMaxTimeout = 10 * time.Minute

// PoolConfig configures the warm pool: sandboxes created and started
// ahead of time, each waiting for its code on standard input with no clock
// running, so that a run skips the sandbox's creation and start. A run
// takes one warm sandbox made for its runner.Sandbox, if there is one, and the pool
// makes a replacement in the background; a sandbox serves one run only
// and is removed after it. Every limit applies as in a cold run: the
// timeout counts from the moment the code is sent. Sandboxes with a
// network or a deps directory are never pooled (their network, or the
// bind of the directory, is made for one run), nor runs with a timeout
// over PoolMaxTimeout.
//
// The pool holds between Min and Size warm sandboxes per runner.Sandbox, as
// many as the runs arriving during one refill need (see demand.go),
// and never more, across sandboxes, than MaxMemoryBytes of memory limits.
// It makes at most MaxMaking sandboxes at once. A run that finds no warm
// sandbox waits for one being made when that one will be ready sooner
// than a cold sandbox would start; otherwise it runs cold.
//
// With Interpreters, a warm sandbox of a profile's image (see
// profile.Profile.Interpreters) also starts a language's interpreter
// ahead and preloads the profile's modules (launch.Warm): the language of
// the last run of the sandbox, which is the one its replacement will
// likely serve. A run of another language takes it all the same; its
// launcher then drops the interpreter and starts the run's own.
//
// A warm sandbox carries the instance label and runner.LabelPool, but not
// the run and query ids, nor the Spec's labels: the Runner logs them, with
// the sandbox's id, when a run takes it, and a platform that can label a
// sandbox that exists (RunLabeler) adds them. The zero PoolConfig (Size 0)
// disables the pool.
type PoolConfig struct {
	// Size is the most warm sandboxes kept for each pooled sandbox.
	Size int
	// Min is the fewest warm sandboxes kept for each pooled sandbox when
	// no run asks for more; 0 means Size (a pool of fixed size).
	Min int
	// Idle is how long a warm sandbox waits for a run before the pool
	// removes and replaces it; its launcher ends it by itself 30s later
	// should the sidecar be gone (Cleanup removes the stopped sandbox).
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
	// Interpreters starts interpreters ahead in warm sandboxes of the
	// profiles' images (see above).
	Interpreters bool
	// MaxMemoryBytes bounds the memory limits of all warm sandboxes
	// together, ready or being made; 0 means half the engine's memory.
	MaxMemoryBytes int64
	// MaxMaking bounds the sandboxes being made at once, across
	// sandboxes; 0 means DefaultPoolMaxMaking.
	MaxMaking int
}

// pool keeps warm sandboxes per sandbox key. Its goroutines (the reaper
// and the makers) start with the first Warm or Run and end in close.
type pool struct {
	r            *Runner
	size, min    int
	idle         time.Duration
	grace        time.Duration
	all          bool
	maxSets      int
	interpreters bool
	maxMaking    int
	now          func() time.Time
	m            Metrics

	ctx     context.Context // ends in close
	cancel  context.CancelFunc
	started sync.Once
	wg      sync.WaitGroup // the reaper, makers and discards

	mu      sync.Mutex
	closed  bool
	budget  int64 // bytes of memory limits warm sandboxes may hold; 0: unbounded
	sets    map[string]*warmSet
	taken   map[string]bool // sandboxes handed to runs, until removed
	making  int             // makers running, across sets
	changed chan struct{}   // closed and replaced when a set changes
	hold    *warmHold       // holds the makers started while not nil (HoldWarmUps)
}

// warmSet is the pool of one sandbox.
type warmSet struct {
	key    string
	sb     runner.Sandbox
	plans  map[runner.Language]*Plan // the sandboxes' settings, by the language started ahead ("": none)
	next   runner.Language           // started ahead in the next sandbox made
	failed map[runner.Language]bool  // starting it ahead failed: made without
	pinned bool                      // from PoolConfig.Sandboxes: never dropped
	mem    int64                     // each sandbox's memory limit

	ready    []*warm
	making   []*maker
	lastUsed time.Time
	lastErr  error     // the last failure to make a sandbox, until one is made
	retryAt  time.Time // no new attempt before, after a failure
	failures int

	demand demand
	// start: a sandbox's creation and start (what a cold run spends
	// before its interpreter starts); made: that and its ready mark; run:
	// from a take to the release of the sandbox.
	start, made, run ewma
}

// warm is one started sandbox waiting for its code.
type warm struct {
	key     string
	inst    Instance
	lang    runner.Language // its interpreter started ahead; "": none
	born    time.Time       // when it said it was ready
	takenAt time.Time
}

// maker is a warm sandbox being made; a run that found none ready may
// claim it (claim non-nil) and receives it, or nil when making it failed.
type maker struct {
	lang  runner.Language
	began time.Time
	claim chan *warm // buffered 1
	hold  *warmHold  // holds it before it creates its sandbox; nil: none
}

// dead reports whether w's sandbox has ended (or its platform lost it).
func (w *warm) dead() bool {
	select {
	case <-w.inst.Done():
		return true
	default:
		return false
	}
}

func newPool(r *Runner, cfg PoolConfig) (*pool, error) {
	if cfg.Idle < 0 || cfg.MaxSandboxes < 0 || cfg.Min < 0 || cfg.MaxMemoryBytes < 0 || cfg.MaxMaking < 0 {
		return nil, fmt.Errorf("pool: idle %v, min %d, max sandboxes %d, max memory %d, max making %d: none may be negative",
			cfg.Idle, cfg.Min, cfg.MaxSandboxes, cfg.MaxMemoryBytes, cfg.MaxMaking)
	}
	if cfg.Min > cfg.Size {
		return nil, fmt.Errorf("pool: min %d is over the size %d", cfg.Min, cfg.Size)
	}
	if cfg.Idle == 0 {
		cfg.Idle = DefaultPoolIdle
	}
	if cfg.MaxSandboxes == 0 {
		cfg.MaxSandboxes = DefaultPoolMaxSandboxes
	}
	if cfg.Min == 0 {
		cfg.Min = cfg.Size
	}
	if cfg.MaxMaking == 0 {
		cfg.MaxMaking = DefaultPoolMaxMaking
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{
		r: r, size: cfg.Size, min: cfg.Min, idle: cfg.Idle, grace: poolGrace, all: cfg.All, maxSets: cfg.MaxSandboxes,
		interpreters: cfg.Interpreters, maxMaking: cfg.MaxMaking, budget: cfg.MaxMemoryBytes, now: time.Now,
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

// templateSpec is the Spec a warm sandbox of sb is planned from: the
// language, timeout and code are the run's, sent on standard input.
func templateSpec(sb runner.Sandbox) runner.Spec {
	return runner.Spec{RunID: "warm", QueryID: "warm", Language: runner.Python, Timeout: time.Second, Sandbox: sb}
}

// warmStarts returns what warm sandboxes of image may start ahead: per
// language of its profile's Interpreters (the first one first), the
// interpreter and, for Python, the modules the tools' wrappers import
// when the profile's Python has them (profile.Stdlib;
// toolwrap.PythonImports: a run that calls tools imports them first) and
// the profile's preloads. An image that is no profile's starts
// nothing ahead.
func warmStarts(image string) ([]runner.Language, map[runner.Language]launch.Warm, error) {
	prof, ok := profile.ByTag(image)
	if !ok {
		return nil, nil, nil
	}
	var langs []runner.Language
	out := map[runner.Language]launch.Warm{}
	for _, name := range prof.Interpreters {
		w := launch.Warm{Language: runner.Language(name)}
		if w.Language == runner.Python {
			w.Preload, w.Reads = prof.Preload, prof.PreloadReads
			if prof.Stdlib {
				w.Preload = append(toolwrap.PythonImports(), prof.Preload...)
			}
		}
		if err := w.Check(); err != nil {
			return nil, nil, fmt.Errorf("profile %s: %w", prof.Name, err)
		}
		langs = append(langs, w.Language)
		out[w.Language] = w
	}
	return langs, out, nil
}

// addSet adds (or pins) the set of sb and returns it. Lock held or not
// needed (newPool).
func (p *pool) addSet(sb runner.Sandbox, pinned bool) (*warmSet, error) {
	base, err := p.r.Plan(templateSpec(sb))
	if err != nil {
		return nil, err
	}
	key := poolKey(base)
	if s, ok := p.sets[key]; ok {
		s.pinned = s.pinned || pinned
		return s, nil
	}
	s := &warmSet{key: key, sb: sb, plans: map[runner.Language]*Plan{}, failed: map[runner.Language]bool{},
		pinned: pinned, mem: sb.MemoryBytes, lastUsed: p.now()}
	starts := map[runner.Language]launch.Warm{"": {}}
	if p.interpreters {
		langs, more, err := warmStarts(base.Image)
		if err != nil {
			return nil, err
		}
		for l, w := range more {
			starts[l] = w
		}
		if len(langs) > 0 {
			s.next = langs[0]
		}
	}
	for lang, w := range starts {
		pl := *base
		pl.PoolKey, pl.Wait = key, p.idle+p.grace
		pl.Life = pl.Wait + PoolMaxTimeout + launch.BackstopGrace + launch.SnapshotGrace
		pl.Warm = &w
		s.plans[lang] = &pl
	}
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

// drop forgets s and discards its warm sandboxes; its makers discard
// theirs when done. Lock held.
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

// target is how many warm sandboxes s should hold (see demand.go).
// Lock held.
func (p *pool) target(s *warmSet) int {
	if p.min >= p.size {
		return p.size
	}
	refill := s.made.high(time.Second) + s.run.get(0)
	return target(s.demand.rate(p.now()), refill, p.min, p.size)
}

// memUsed is the memory limits of the warm sandboxes, ready or being
// made, and of the sessions' sandboxes that wait for a run. Lock held
// (the pool's, then the sessions').
func (p *pool) memUsed() int64 {
	n := p.r.sessions.idleMemory() // idle sessions hold their sandbox's memory too
	for _, s := range p.sets {
		n += int64(len(s.ready)+len(s.making)) * s.mem
	}
	return n
}

// broadcast wakes whoever waits for a change (Warm). Lock held.
func (p *pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// counts returns the warm sandboxes ready, being made, and the sum of
// the sets' targets.
func (p *pool) counts() (ready, making, targets int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sets {
		ready += len(s.ready)
		targets += p.target(s)
	}
	return ready, p.making, targets
}

// owns reports whether the sandbox with labels and id is the pool's:
// warm, being made, or being removed after its run; not running one.
func (p *pool) owns(id string, labels map[string]string) bool {
	if labels[runner.LabelPool] == "" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.taken[id]
}

// close stops the pool, removes its warm sandboxes and waits for its
// goroutines; then it removes any sandbox of the instance still
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
	_, err := p.r.pf.Sweep(ctx, func(id string, pooled bool) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !pooled || p.taken[id]
	})
	return err
}
