package sandbox

// The pool's upkeep: the reaper that replaces and trims warm sandboxes,
// the memory budget, and a warm sandbox's room given up to a run.

import (
	"context"
	"errors"
	"slices"
	"time"
)

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
