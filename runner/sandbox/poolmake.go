package sandbox

// Making warm sandboxes: the makers the pool starts up to its target,
// each creating a sandbox and reading its ready mark.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
)

// poolReadyTimeout bounds how long a new warm sandbox may take to say
// it is ready (its interpreter started and its modules preloaded); past
// it the pool removes it and counts a refill error.
const poolReadyTimeout = 2 * time.Minute

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
