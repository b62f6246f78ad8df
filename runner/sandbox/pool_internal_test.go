package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

func TestPoolTargetFollowsDemandWithinItsBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		rate   float64
		refill time.Duration
		lo, hi int
		want   int
	}{
		{"no demand keeps the floor", 0, time.Second, 2, 8, 2},
		{"no demand and a floor of one keeps one", 0, time.Second, 1, 8, 1},
		{"a run a second over a one-second refill keeps four (1 + 3√1)", 1, time.Second, 1, 8, 4},
		{"a trickle keeps one", 0.1, 500 * time.Millisecond, 1, 8, 1},
		{"a burst is capped at the ceiling", 5, time.Second, 1, 8, 8},
		{"demand between the bounds is rounded up", 2, time.Second, 1, 8, 7},
		{"a slow refill asks for more at the same rate", 1, 4 * time.Second, 1, 16, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := target(tc.rate, tc.refill, tc.lo, tc.hi); got != tc.want {
				t.Errorf("target(%v, %v, %d, %d) = %d, want %d", tc.rate, tc.refill, tc.lo, tc.hi, got, tc.want)
			}
		})
	}
}

func TestDemandRateTakesTheBusierWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		arrivals []time.Duration // before now
		want     float64
	}{
		{"no arrivals is no demand", nil, 0},
		{"a burst in the last ten seconds counts over ten seconds", []time.Duration{3 * time.Second, 2 * time.Second, time.Second, 0}, 0.4},
		{"a steady load counts over the minute when the last ten seconds were quiet", []time.Duration{50 * time.Second, 40 * time.Second, 30 * time.Second, 20 * time.Second, 15 * time.Second, 12 * time.Second}, 0.1},
		{"arrivals older than a minute are forgotten", []time.Duration{2 * time.Minute, 90 * time.Second, 61 * time.Second}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var d demand
			for _, ago := range tc.arrivals {
				d.add(now.Add(-ago))
			}
			if got := d.rate(now); got < tc.want-1e-9 || got > tc.want+1e-9 {
				t.Errorf("rate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEWMAStartsAtItsFirstSample(t *testing.T) {
	t.Parallel()
	var e ewma
	if got := e.get(time.Second); got != time.Second {
		t.Errorf("no samples: %v, want the default 1s", got)
	}
	e.add(400 * time.Millisecond)
	if got := e.get(time.Second); got != 400*time.Millisecond {
		t.Errorf("one sample: %v, want 400ms", got)
	}
	e.add(800 * time.Millisecond)
	if got := e.get(time.Second); got != 500*time.Millisecond {
		t.Errorf("two samples: %v, want 500ms (a quarter of the way)", got)
	}
}

// TestEWMAHighCoversTheTail checks the refill time the pool plans with:
// the average plus four mean deviations, so one slow refill in a steady
// stream raises it at once and the steady stream brings it back down.
func TestEWMAHighCoversTheTail(t *testing.T) {
	t.Parallel()
	var e ewma
	if got := e.high(time.Second); got != time.Second {
		t.Errorf("no samples: %v, want the default 1s", got)
	}
	e.add(400 * time.Millisecond) // average 400ms, deviation 200ms (half the first)
	if got := e.high(0); got != 1200*time.Millisecond {
		t.Errorf("one sample: %v, want 1.2s", got)
	}
	for range 40 {
		e.add(400 * time.Millisecond)
	}
	steady := e.high(0)
	if steady < 400*time.Millisecond || steady > 401*time.Millisecond {
		t.Errorf("a steady 400ms: %v, want about 400ms (the deviation gone)", steady)
	}
	e.add(1200 * time.Millisecond) // average 600ms, deviation 200ms
	if got := e.high(0); got < 1400*time.Millisecond || got > 1401*time.Millisecond {
		t.Errorf("after one slow refill: %v, want about 1.4s", got)
	}
	if got := e.get(0); got != 600*time.Millisecond {
		t.Errorf("the average after it: %v, want 600ms", got)
	}
}

// TestPoolFillStopsAtEveryBound starts the makers of a pool whose platform
// makes nothing (each maker then fails): how many start at once is the
// smallest of the demand's target within Min and Size, MaxMaking and the
// memory budget.
func TestPoolFillStopsAtEveryBound(t *testing.T) {
	t.Parallel()
	sb := runnertest.Sandbox()
	cases := []struct {
		name string
		cfg  PoolConfig
		want int
	}{
		{"a fixed pool starts as many as its size", PoolConfig{Size: 2, MaxMaking: 8}, 2},
		{"with no demand a pool starts its floor", PoolConfig{Size: 8, Min: 1, MaxMaking: 8}, 1},
		{"makers at once are bounded", PoolConfig{Size: 8, MaxMaking: 3}, 3},
		{"the memory budget bounds the containers", PoolConfig{Size: 8, MaxMaking: 8, MaxMemoryBytes: 2 * sb.MemoryBytes}, 2},
		{"a budget below one container starts none", PoolConfig{Size: 8, MaxMaking: 8, MaxMemoryBytes: sb.MemoryBytes - 1}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Sandboxes = []runner.Sandbox{sb}
			r, err := New(failing{}, Config{Instance: "unit", DefaultImage: "img:test", MinMemoryBytes: 6 << 20, Pool: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			p := r.pool
			p.mu.Lock()
			for _, s := range p.sets {
				p.fill(s)
			}
			got := p.making // the makers cannot end while the lock is held
			p.mu.Unlock()
			if got != tc.want {
				t.Errorf("%d makers started, want %d", got, tc.want)
			}
			p.close() // waits for the makers, which fail on the fake
		})
	}
}

// TestPoolWarmSaysWhenTheBudgetIsTooSmall: Warm cannot fill a pool whose
// memory budget holds fewer containers than its floor; it says so instead
// of waiting for ever.
func TestPoolWarmSaysWhenTheBudgetIsTooSmall(t *testing.T) {
	t.Parallel()
	sb := runnertest.Sandbox()
	r, err := New(failing{}, Config{Instance: "unit", DefaultImage: "img:test", MinMemoryBytes: 6 << 20, Pool: PoolConfig{
		Size: 2, MaxMemoryBytes: sb.MemoryBytes - 1, Sandboxes: []runner.Sandbox{sb},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.pool.close()
	if err := r.pool.warm(t.Context()); err == nil || !strings.Contains(err.Error(), "memory budget") {
		t.Errorf("warm = %v, want the budget named", err)
	}
}

// TestPoolAwaitLosesNoContainerWhenTheRunGivesUp: a run whose context
// ends while it waits for a container being made leaves it to the pool:
// the maker then makes it for the pool, and a container that arrived as
// the run gave up is either the run's or back among the ready ones, never
// lost nor both.
func TestPoolAwaitLosesNoContainerWhenTheRunGivesUp(t *testing.T) {
	t.Parallel()
	sb := runnertest.Sandbox()
	newPoolOf := func(t *testing.T) (*pool, *warmSet, *maker, *claim) {
		t.Helper()
		r, err := New(failing{}, Config{Instance: "unit", DefaultImage: "img:test", MinMemoryBytes: 6 << 20, Pool: PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}}})
		if err != nil {
			t.Fatal(err)
		}
		p := r.pool
		t.Cleanup(func() { p.close() })
		var s *warmSet
		for _, s = range p.sets {
		}
		ch := make(chan *warm, 1)
		m := &maker{began: time.Now(), claim: ch}
		p.mu.Lock()
		s.making = append(s.making, m)
		p.mu.Unlock()
		return p, s, m, &claim{m: m, ch: ch}
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()

	t.Run("before its container is made", func(t *testing.T) {
		t.Parallel()
		p, _, m, c := newPoolOf(t)
		w, err := p.await(cancelled, c)
		if w != nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("await = %v, %v; want nil and the context's error", w, err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if m.claim != nil {
			t.Error("the maker still holds the claim: its container would go to a run that left")
		}
	})
	t.Run("past its bound", func(t *testing.T) {
		t.Parallel()
		p, _, m, c := newPoolOf(t)
		c.bound = time.Nanosecond // the maker sends nothing: the bound passes first
		w, err := p.await(t.Context(), c)
		if w != nil || err != nil {
			t.Fatalf("await = %v, %v; want nil and no error: a miss, the run starts a cold sandbox", w, err)
		}
		if got := counter(t, p.m.Misses); got != 1 {
			t.Errorf("%v misses, want 1", got)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if m.claim != nil {
			t.Error("the maker still holds the claim: its container would go to a run that left")
		}
	})
	t.Run("as its container arrives", func(t *testing.T) {
		t.Parallel()
		for i := range 20 { // await's select goes either way
			p, s, m, c := newPoolOf(t)
			w := &warm{key: s.key, inst: idle(fmt.Sprintf("made-%d", i))}
			p.mu.Lock()
			p.taken[w.inst.ID()] = true // as makeOne hands it over
			m.claim <- w
			p.mu.Unlock()
			got, err := p.await(cancelled, c)
			p.mu.Lock()
			ready := slices.Contains(s.ready, w)
			taken := p.taken[w.inst.ID()]
			p.mu.Unlock()
			switch {
			case got == w && err == nil && !ready && taken:
			case got == nil && errors.Is(err, context.Canceled) && ready && !taken:
			default:
				t.Fatalf("await = %v, %v; ready %v, taken %v: the container is lost or twice handed out", got, err, ready, taken)
			}
		}
	})
}

// TestPoolWaitIsBoundedUnlessHeld: a run's claim on a sandbox being made
// waits at most the pool's measure of a cold start (poolWaitDefault before
// the first), and a claim on a held warm-up (HoldWarmUps) has no bound.
func TestPoolWaitIsBoundedUnlessHeld(t *testing.T) {
	t.Parallel()
	sb := runnertest.Sandbox()
	cases := []struct {
		name   string
		hold   bool
		starts []time.Duration // the set's measured creations and starts
		want   time.Duration
	}{
		{"before the pool made a sandbox the default bounds the wait", false, nil, poolWaitDefault},
		{"a measured start bounds it at its average plus four deviations", false, []time.Duration{2 * time.Second}, 6 * time.Second},
		{"a held warm-up is waited for without a bound", true, []time.Duration{2 * time.Second}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := New(failing{}, Config{Instance: "unit", DefaultImage: "img:test", MinMemoryBytes: 6 << 20, Pool: PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}}})
			if err != nil {
				t.Fatal(err)
			}
			p := r.pool
			t.Cleanup(func() { p.close() })
			var s *warmSet
			for _, s = range p.sets {
			}
			pl, err := r.Plan(runnertest.Spec("print(1)"))
			if err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			for _, d := range tc.starts {
				s.start.add(d)
			}
			m := &maker{began: p.now()}
			if tc.hold {
				m.hold = &warmHold{released: make(chan struct{})}
			}
			s.making = append(s.making, m)
			p.size = 0 // take's refill starts no maker of its own
			p.mu.Unlock()
			w, c := p.take(pl, runner.Python, time.Minute)
			if w != nil || c == nil || c.m != m {
				t.Fatalf("take = %v, %+v; want a claim on the maker", w, c)
			}
			if c.bound != tc.want {
				t.Errorf("the claim's bound is %v, want %v", c.bound, tc.want)
			}
		})
	}
}

// failing is a Platform that makes no sandbox.
type failing struct{}

func (failing) Validate(runner.Spec, *Plan) ([]string, error)               { return nil, nil }
func (failing) Prepare(context.Context, *Plan, runner.Language) error       { return nil }
func (failing) Sweep(context.Context, func(string, bool) bool) (int, error) { return 0, nil }
func (failing) Close() error                                                { return nil }
func (failing) Create(context.Context, CreateRequest) (Instance, error) {
	return nil, errors.New("this platform makes no sandbox")
}

// idle is an Instance that never ends and does nothing.
type idle string

func (i idle) ID() string                               { return string(i) }
func (idle) Streams() Streams                           { return Streams{} }
func (idle) Done() <-chan struct{}                      { return nil }
func (idle) Kill()                                      {}
func (idle) Exit(context.Context, Ending) (Exit, error) { return Exit{}, nil }
func (idle) Detach()                                    {}
func (idle) Remove()                                    {}

// TestWarmPythonPreloadsWhatItsPythonHas: a warm Python interpreter
// preloads the modules code mode's wrappers import only in a profile whose
// Python has them; in minimal (python3-minimal, no json) such a preload
// would fail, and a warm interpreter whose preload fails restarts cold on
// every run.
func TestWarmPythonPreloadsWhatItsPythonHas(t *testing.T) {
	t.Parallel()
	for _, prof := range profile.All() {
		t.Run(prof.Name, func(t *testing.T) {
			_, starts, err := warmStarts(prof.Tag())
			if err != nil {
				t.Fatal(err)
			}
			w, ok := starts[runner.Python]
			if !ok {
				t.Fatalf("no warm Python in %s", prof.Name)
			}
			for _, m := range toolwrap.PythonImports() {
				if got := slices.Contains(w.Preload, m); got != prof.Stdlib {
					t.Errorf("%s preloads %s: %v; its Python has the whole standard library: %v", prof.Name, m, got, prof.Stdlib)
				}
			}
			for _, m := range prof.Preload {
				if !slices.Contains(w.Preload, m) {
					t.Errorf("%s's own preload %s is not preloaded", prof.Name, m)
				}
			}
		})
	}
}

// TestStdlibIsThePython3Package pins profile.Stdlib to what the image
// installs: Debian's python3 (the whole standard library), not
// python3-minimal alone.
func TestStdlibIsThePython3Package(t *testing.T) {
	t.Parallel()
	for _, prof := range profile.All() {
		has := false
		for _, p := range prof.Chain() {
			has = has || slices.Contains(p.Packages, "python3")
		}
		if has != prof.Stdlib {
			t.Errorf("profile %s: Stdlib %v, but python3 installed: %v", prof.Name, prof.Stdlib, has)
		}
	}
}
