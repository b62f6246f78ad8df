package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// poolReadyTimeout bounds how long a new warm sandbox may take to say
// it is ready (its interpreter started and its modules preloaded); past
// it the pool removes it and counts a refill error.
const poolReadyTimeout = 2 * time.Minute

// poolWaitDefault bounds a run's wait for a warm sandbox being made
// before the pool has made a sandbox of its set (see take).
const poolWaitDefault = 10 * time.Second

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

// claim is a run's claim on a sandbox being made.
type claim struct {
	m  *maker
	ch <-chan *warm
	// bound is how long the run waits for it (0: no bound): what the
	// pool measured a sandbox of the set to take to be created and
	// started, its moving average plus four deviations (ewma.high), which
	// is what the run would spend on a cold one; poolWaitDefault before
	// the first. A held maker (HoldWarmUps) is not late: no bound.
	bound time.Duration
}

// take hands out a warm sandbox for a run of lang in sb, planned as pl
// with timeout; or a claim on one being made, to wait for (await); or
// neither (a miss: the run starts a cold sandbox). It prefers a
// sandbox whose interpreter was started for lang, then one with none
// started, then any. Replacements are made in the background: after the
// run (release), or at once when the sandbox has fewer than half its
// target left.
// With All, a miss makes sb pooled.
func (p *pool) take(pl *Plan, lang runner.Language, timeout time.Duration) (*warm, *claim) {
	sb := pl.Sandbox
	if !poolable(sb) || timeout > PoolMaxTimeout {
		return nil, nil
	}
	p.start()
	key := poolKey(pl)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil
	}
	s := p.sets[key]
	if s == nil {
		if !p.all {
			return nil, nil
		}
		var err error
		if s, err = p.addSet(sb, false); err != nil {
			return nil, nil // the run's own plan failed the same way
		}
	}
	now := p.now()
	s.lastUsed = now
	s.demand.add(now)
	s.next = ""
	if s.plans[lang] != nil {
		s.next = lang // its replacement starts the same
	}
	if w := p.pick(s, lang); w != nil {
		w.takenAt = now
		p.taken[w.inst.ID()] = true
		if 2*len(s.ready) < p.target(s) {
			// Running low: refill now. Otherwise after the run
			// (release), so that making a sandbox does not compete
			// with the run for the engine and the CPU.
			p.fill(s)
		}
		return w, nil
	}
	if m := s.claimable(now); m != nil {
		ch := make(chan *warm, 1)
		m.claim = ch
		p.fill(s) // the claimed sandbox no longer counts
		c := &claim{m: m, ch: ch, bound: s.start.high(poolWaitDefault)}
		if m.hold != nil {
			c.bound = 0
		}
		return nil, c
	}
	p.m.Misses.Inc()
	p.fill(s)
	return nil, nil
}

// pick removes and returns s's best ready sandbox for a run of lang:
// one with lang's interpreter started, else one with none, else any; the
// oldest of a kind first. It discards the stale (idle too long, or ended)
// on the way. Lock held.
func (p *pool) pick(s *warmSet, lang runner.Language) *warm {
	rank := func(w *warm) int {
		switch w.lang {
		case lang:
			return 0
		case "":
			return 1
		}
		return 2
	}
	best := -1
	fresh := s.ready[:0]
	for _, w := range s.ready {
		if p.now().Sub(w.born) >= p.idle || w.dead() {
			p.discard(w)
			continue
		}
		fresh = append(fresh, w)
		if best < 0 || rank(w) < rank(fresh[best]) {
			best = len(fresh) - 1
		}
	}
	clear(s.ready[len(fresh):])
	s.ready = fresh
	if best < 0 {
		return nil
	}
	w := s.ready[best]
	s.ready = slices.Delete(s.ready, best, best+1)
	return w
}

// claimable returns the oldest unclaimed maker of s that will likely be
// ready no later than a cold sandbox would have started (from the
// set's averages; before any, any maker), or nil. Lock held.
func (s *warmSet) claimable(now time.Time) *maker {
	for _, m := range s.making {
		if m.claim != nil {
			continue
		}
		if s.made.n == 0 || s.start.n == 0 || s.made.get(0)-now.Sub(m.began) <= s.start.get(0) {
			return m
		}
	}
	return nil
}

// stock is s's ready sandboxes plus those being made for no run.
func (s *warmSet) stock() int {
	n := len(s.ready)
	for _, m := range s.making {
		if m.claim == nil {
			n++
		}
	}
	return n
}

// served counts a run served by warm sandbox w: a hit, and an
// interpreter hit when w started lang's interpreter ahead.
func (p *pool) served(w *warm, lang runner.Language) {
	p.m.Hits.Inc()
	if w.lang != "" && w.lang == lang {
		p.m.InterpreterHits.Inc()
	}
}

// await waits for the sandbox c claims, at most c.bound: it returns it
// (the run's now); or nil, a miss (the run starts a cold one), when making
// it failed or it was not ready within the bound, the sandbox then going
// to the pool once made; or ctx's error, the sandbox then going back to
// the pool: a run that gives up leaves no sandbox and no claim behind.
func (p *pool) await(ctx context.Context, c *claim) (*warm, error) {
	began := p.now()
	var late <-chan time.Time
	if c.bound > 0 {
		timer := time.NewTimer(c.bound)
		defer timer.Stop()
		late = timer.C
	}
	select {
	case w := <-c.ch:
		return p.awaited(w, began), nil
	case <-late:
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case w := <-c.ch:
		if ctx.Err() == nil {
			return p.awaited(w, began), nil // made as the bound passed
		}
		if w != nil {
			delete(p.taken, w.inst.ID())
			if s := p.sets[w.key]; s != nil && !p.closed {
				s.ready = append(s.ready, w)
				p.broadcast()
			} else {
				p.discard(w)
			}
		}
	default:
		c.m.claim = nil // made for the pool after all
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.m.Wait.Observe(p.now().Sub(began).Seconds())
	p.m.Misses.Inc()
	p.r.log.Info("a warm sandbox being made was not ready within the bound; the run starts a cold one",
		"bound", c.bound, "made_for", p.now().Sub(c.m.began))
	return nil, nil
}

// awaited counts a run's wait for a sandbox being made that ended with
// w: a wait, or a miss when making it failed (w nil).
func (p *pool) awaited(w *warm, began time.Time) *warm {
	p.m.Wait.Observe(p.now().Sub(began).Seconds())
	if w == nil {
		p.m.Misses.Inc()
	} else {
		p.m.Waits.Inc()
	}
	return w
}

// release removes a sandbox a run took, once the run ended, with the
// runner's other removals: in the background, off the run's path (the
// sandbox has stopped, or is killed by the removal). Runner.Close waits
// for it before closing the pool.
func (p *pool) release(w *warm) {
	w.inst.Detach()
	p.r.removeLater(w.inst)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.taken, w.inst.ID())
	if s := p.sets[w.key]; s != nil {
		if !w.takenAt.IsZero() {
			s.run.add(p.now().Sub(w.takenAt))
		}
		p.fill(s) // nothing once the pool is closed
	}
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
// made. Lock held.
func (p *pool) memUsed() int64 {
	var n int64
	for _, s := range p.sets {
		n += int64(len(s.ready)+len(s.making)) * s.mem
	}
	return n
}

// fill starts makers until s holds its target, as far as the makers
// running at once and the memory budget allow. Lock held.
func (p *pool) fill(s *warmSet) {
	if p.closed || p.size == 0 || p.now().Before(s.retryAt) || p.sets[s.key] != s {
		return
	}
	want := p.target(s)
	for s.stock() < want && p.making < p.maxMaking && (p.budget == 0 || p.memUsed()+s.mem <= p.budget) {
		lang := s.next
		if s.failed[lang] {
			lang = ""
		}
		m := &maker{lang: lang, began: p.now(), hold: p.hold}
		if m.hold != nil {
			m.hold.makers.Add(1)
		}
		s.making = append(s.making, m)
		p.making++
		p.wg.Add(1)
		go p.makeOne(s, m)
	}
}

// fillAll fills every set, those without a ready sandbox first. Lock
// held.
func (p *pool) fillAll() {
	sets := make([]*warmSet, 0, len(p.sets))
	for _, s := range p.sets {
		sets = append(sets, s)
	}
	slices.SortFunc(sets, func(a, b *warmSet) int { return len(a.ready) - len(b.ready) })
	for _, s := range sets {
		p.fill(s)
	}
}

// makeOne makes the warm sandbox of maker m of s, and hands it to the
// run that claimed it, or to the pool.
func (p *pool) makeOne(s *warmSet, m *maker) {
	defer p.wg.Done()
	if m.hold != nil {
		defer m.hold.makers.Done() // once it is handed over
	}
	w, started, err := p.warmUp(s, m)
	p.mu.Lock()
	defer p.mu.Unlock()
	s.making = slices.DeleteFunc(s.making, func(x *maker) bool { return x == m })
	p.making--
	defer p.broadcast()
	if err != nil {
		if m.claim != nil {
			m.claim <- nil
		}
		if p.closed {
			return
		}
		if m.lang != "" && !started.IsZero() {
			s.failed[m.lang] = true // its interpreter did not come up: start none ahead
		}
		s.failures++
		s.lastErr = err
		s.retryAt = p.now().Add(min(time.Duration(1<<min(s.failures, 6))*time.Second, p.idle))
		p.m.RefillErrors.Inc()
		if errors.Is(err, ErrNoRoom) {
			p.r.log.Debug("no room for a warm sandbox; trying again later", "pool", s.key, "retry_at", s.retryAt)
		} else {
			p.r.log.Warn("make a warm sandbox", "pool", s.key, "language", m.lang, "failures", s.failures, "err", err)
		}
		p.fillAll()
		return
	}
	if m.hold == nil { // a held one's times are the hold's
		s.start.add(started.Sub(m.began))
		s.made.add(w.born.Sub(m.began))
		p.m.Refill.Observe(w.born.Sub(m.began).Seconds())
	}
	if p.closed || p.sets[s.key] != s {
		if m.claim != nil {
			m.claim <- nil
		}
		p.discard(w)
		return
	}
	s.failures, s.lastErr = 0, nil
	if m.claim != nil {
		w.takenAt = p.now()
		p.taken[w.inst.ID()] = true
		m.claim <- w
	} else {
		s.ready = append(s.ready, w)
	}
	p.fillAll()
}

// makeTimeout bounds the making of one warm sandbox, its readiness
// included.
const makeTimeout = 5 * time.Minute

// warmUp makes the sandbox of maker m of s, starting m.lang ahead, and
// waits for its ready mark; a held maker waits for its hold's release
// before it creates the sandbox. It returns when the sandbox had started
// (zero if it did not). On error nothing of it is left.
func (p *pool) warmUp(s *warmSet, m *maker) (*warm, time.Time, error) {
	lang := m.lang
	p.mu.Lock()
	pl := s.plans[lang]
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, makeTimeout)
	defer cancel()
	if err := p.r.pf.Prepare(ctx, pl, ""); err != nil {
		return nil, time.Time{}, err
	}
	if m.hold != nil {
		select {
		case <-m.hold.released:
		case <-ctx.Done():
			return nil, time.Time{}, ctx.Err()
		}
	}
	inst, err := p.r.pf.Create(ctx, CreateRequest{Plan: pl, Spec: templateSpec(s.sb), Background: p.r.background})
	if err != nil {
		return nil, time.Time{}, err
	}
	started := p.now()
	if err := p.awaitReady(inst); err != nil {
		inst.Detach()
		inst.Remove()
		return nil, started, fmt.Errorf("sandbox %s: %w", inst.ID(), err)
	}
	return &warm{key: s.key, inst: inst, lang: lang, born: p.now()}, started, nil
}

// awaitReady reads the sandbox's ready mark, for at most
// poolReadyTimeout or until the pool closes.
func (p *pool) awaitReady(inst Instance) error {
	done := make(chan error, 1)
	go func() { done <- readReady(inst.Streams().Stdout) }()
	timer := time.NewTimer(poolReadyTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		inst.Detach()
		<-done
		return fmt.Errorf("no ready mark after %v", poolReadyTimeout)
	case <-p.ctx.Done():
		inst.Detach()
		<-done
		return p.ctx.Err()
	}
}

// readReady reads the ready mark (launch.ReadyMark) off a sandbox's
// standard output, and not a byte more, so that the stream goes on at the
// run's first byte. Anything else before it is an error.
func readReady(r io.Reader) error {
	mark := []byte(launch.ReadyMark)
	got := make([]byte, 0, len(mark))
	b := make([]byte, 1)
	for len(got) < len(mark) {
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("read the ready mark: %w", err)
		}
		got = append(got, b[0])
		if mark[len(got)-1] != b[0] {
			return fmt.Errorf("output before the ready mark: %q", got)
		}
	}
	return nil
}

// discard removes a warm sandbox in the background. Lock held.
func (p *pool) discard(w *warm) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		w.inst.Detach()
		w.inst.Remove()
	}()
}

// broadcast wakes whoever waits for a change (Warm). Lock held.
func (p *pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// reap replaces warm sandboxes older than Idle or dead, trims sets
// holding more than their target, drops sets no run used for Idle
// (unless pinned), and retries failed fills, until close. It first learns
// the engine's memory, for the default budget.
func (p *pool) reap() {
	defer p.wg.Done()
	p.learnBudget()
	tick := time.NewTicker(min(max(p.idle/10, 100*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
		}
		p.mu.Lock()
		now := p.now()
		for _, s := range p.sets {
			if !s.pinned && now.Sub(s.lastUsed) >= p.idle {
				p.drop(s)
				continue
			}
			fresh := s.ready[:0]
			for _, w := range s.ready {
				if now.Sub(w.born) >= p.idle || w.dead() {
					p.discard(w)
				} else {
					fresh = append(fresh, w)
				}
			}
			clear(s.ready[len(fresh):])
			s.ready = fresh
			if extra := min(s.stock()-p.target(s), len(s.ready)); extra > 0 {
				for _, w := range s.ready[:extra] { // the oldest
					p.discard(w)
				}
				s.ready = slices.Delete(s.ready, 0, extra)
			}
		}
		p.fillAll()
		p.mu.Unlock()
	}
}

// learnBudget sets the memory budget to half the engine's memory, unless
// PoolConfig set one; an engine that does not answer leaves it unbounded
// (Size still bounds each set).
func (p *pool) learnBudget() {
	p.mu.Lock()
	known := p.budget > 0
	p.mu.Unlock()
	if known {
		return
	}
	mr, ok := p.r.pf.(MemoryReporter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, cleanupTimeout)
	defer cancel()
	total, err := mr.Memory(ctx)
	if err != nil || total <= 0 {
		return
	}
	p.mu.Lock()
	if p.budget == 0 {
		p.budget = total / 2
	}
	p.mu.Unlock()
}

// warm fills the pinned sets and waits until each has Min warm
// sandboxes. It returns a set's error when making its sandboxes failed,
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
			if len(s.ready) < p.min {
				full = false
				switch {
				case s.lastErr != nil:
					errs = append(errs, fmt.Errorf("warm sandbox %s: %w", s.key, s.lastErr))
				case len(s.making) == 0 && p.budget > 0 && p.memUsed()+s.mem > p.budget:
					errs = append(errs, fmt.Errorf("warm sandbox %s: the pool's memory budget of %d bytes holds %d of its %d sandboxes",
						s.key, p.budget, len(s.ready), p.min))
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

// ErrNoRoom marks a warm sandbox the platform has no room for now (a
// cluster whose nodes are full); the pool tries again later without
// logging it as a failure.
var ErrNoRoom = errors.New("no room for it now")

// yieldPause is how long the pool makes no warm sandbox after one gave its
// place to a run, so that the run's sandbox is placed first.
const yieldPause = 10 * time.Second

// yield discards the oldest ready warm sandbox, so that a run's sandbox
// the platform has no room for can take its place, and pauses the refill
// of its set for yieldPause. It reports whether there was one.
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
	from.retryAt = p.now().Add(yieldPause)
	p.broadcast()
	return true
}

// AwaitWarm pools sb (as PoolConfig.All would) and waits until it has a
// warm sandbox ready, or making one failed (that error), or ctx ends. It
// returns at once without a pool or for a sandbox that is not poolable,
// and while warm-ups are held (HoldWarmUps) once one of sb's is being
// made, for a run to wait for in the pool.
// Tests and benchmarks use it so that a run finds a warm sandbox (a run
// racing another for it may still miss and run cold).
func (r *Runner) AwaitWarm(ctx context.Context, sb runner.Sandbox) error {
	p := r.pool
	if p == nil || !poolable(sb) {
		return nil
	}
	pl, err := r.Plan(templateSpec(sb))
	if err != nil {
		return nil // Run refuses it the same way
	}
	key := poolKey(pl)
	p.start()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return errors.New("pool closed")
		}
		s := p.sets[key]
		if s == nil {
			if s, err = p.addSet(sb, false); err != nil {
				p.mu.Unlock()
				return err
			}
		}
		p.fill(s)
		n, lastErr, changed := len(s.ready), s.lastErr, p.changed
		held := p.hold != nil && s.claimable(p.now()) != nil
		p.mu.Unlock()
		switch {
		case n > 0, held:
			return nil
		case lastErr != nil:
			return lastErr
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Ready returns the ids of the warm sandboxes waiting for a run.
func (r *Runner) Ready() []string {
	if r.pool == nil {
		return nil
	}
	p := r.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, s := range p.sets {
		for _, w := range s.ready {
			ids = append(ids, w.inst.ID())
		}
	}
	return ids
}

// warmHold holds the warm-ups started while it is the pool's hold
// (HoldWarmUps).
type warmHold struct {
	released chan struct{} // closed by release
	once     sync.Once
	makers   sync.WaitGroup // the makers it holds, until each handed its sandbox over or failed
}

// HoldWarmUps holds the warm-ups the pool starts from now on, so that a
// test can have a run wait in the pool for as long as it likes (runnertest
// cancels one there): each warm-up prepares the platform, then waits for
// release before it creates its sandbox. Meanwhile AwaitWarm returns once
// a warm sandbox of its set is being made, and a run that finds none
// ready waits for a held one without the bound of a wait (see claim).
// release ends the hold and returns once every warm-up it held has handed
// its sandbox over (to a run or the pool) or failed; calling it again
// waits the same. Without a pool it holds nothing. It holds no limit of a
// sandbox: a held warm-up is a slow one, nothing else.
func (r *Runner) HoldWarmUps() (release func()) {
	p := r.pool
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	h := p.hold
	if h == nil {
		h = &warmHold{released: make(chan struct{})}
		p.hold = h
	}
	p.mu.Unlock()
	return func() {
		h.once.Do(func() {
			p.mu.Lock()
			if p.hold == h {
				p.hold = nil
			}
			p.mu.Unlock()
			close(h.released)
		})
		h.makers.Wait()
	}
}

// Awaiting returns how many runs wait for a warm sandbox being made.
func (r *Runner) Awaiting() int {
	if r.pool == nil {
		return 0
	}
	p := r.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.sets {
		for _, m := range s.making {
			if m.claim != nil {
				n++
			}
		}
	}
	return n
}

// Pooled reports whether the runner keeps a warm pool.
func (r *Runner) Pooled() bool { return r.pool != nil }
