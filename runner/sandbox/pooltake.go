package sandbox

// A run's side of the warm pool: a warm sandbox taken, or a claim on one
// being made and the bounded wait for it, and its release after the run.

import (
	"context"
	"slices"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// poolWaitDefault bounds a run's wait for a warm sandbox being made
// before the pool has made a sandbox of its set (see take).
const poolWaitDefault = 10 * time.Second

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
