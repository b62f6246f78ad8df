package sandbox

// Waiting for warm sandboxes (Warm, AwaitWarm), and what tests ask of the
// pool: the ready ones, the runs waiting, its warm-ups held.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

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
