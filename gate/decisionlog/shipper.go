package decisionlog

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// Shipper ships the audit log's lines to the receiver. Run does the
// shipping, in one goroutine; Hold, Backlog, Status and the collectors
// are safe to call from any goroutine meanwhile.
type Shipper struct {
	o      Options
	labels map[string]string
	post   *poster
	m      *metrics

	acked atomic.Int64 // the cursor's seq

	mu          sync.Mutex
	lastSuccess time.Time
	lastErr     string
	failing     bool
	stopped     string
}

// New checks o and returns a Shipper; nothing is read or sent until Run.
func New(o Options) (*Shipper, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := newPoster(o)
	if err != nil {
		return nil, err
	}
	s := &Shipper{o: o, labels: eventLabels(o), post: p}
	s.m = newMetrics(s)
	return s, nil
}

// pending is one encoded event of the batch being sent.
type pending struct {
	seq  int64
	hash string
	json []byte
	// announced are the lines a decision_log line says were dropped,
	// none for other lines: dropping this line folds them into the next
	// announcement.
	announced [][2]int64
}

// Run ships until ctx ends (it then returns nil: what was acknowledged
// is in the cursor, the rest is shipped by the next Run) or the log
// cannot be read on: a broken chain, a cursor that does not match the
// log, or a cursor that cannot be written. Those stop shipping with an
// error (also in Status), and under Block the backlog then fills and
// new decisions are denied.
func (s *Shipper) Run(ctx context.Context) error {
	err := s.run(ctx)
	if err != nil && ctx.Err() == nil {
		s.mu.Lock()
		s.stopped = err.Error()
		s.mu.Unlock()
		s.o.Logger.Error("decision log shipping stopped", "err", err)
		return err
	}
	return nil
}

func (s *Shipper) run(ctx context.Context) error {
	cur, err := loadCursor(s.o.Cursor)
	if err != nil {
		return err
	}
	if head, _ := s.o.Head(); cur.Seq > head {
		return fmt.Errorf("decision log cursor %s is at line %d but the audit log ends at line %d: it belongs to another log; remove it to ship this log from its start", s.o.Cursor, cur.Seq, head)
	}
	s.acked.Store(cur.Seq)
	head, _ := s.o.Head()
	r := newReader(s.o.AuditPath, cur, head)
	defer r.close()
	var (
		batch []pending
		size  int
		held  *line // read but not yet in a batch
	)
	for ctx.Err() == nil {
		for len(batch) < s.o.BatchEvents && size < s.o.BatchBytes {
			var l line
			if held != nil {
				l, held = *held, nil
			} else {
				var ok bool
				if l, ok, err = r.next(); err != nil {
					return err
				} else if !ok {
					break
				}
			}
			if l.gapFrom > 0 {
				if len(batch) > 0 {
					held = &l // ship what came before the gap first
					break
				}
				if cur, err = s.announce(cur, [][2]int64{{l.gapFrom, l.gapTo}}, l.prev, RulePruned, l.gapTo-l.gapFrom+1); err != nil {
					return err
				}
				l.gapFrom, l.gapTo = 0, 0
			}
			p, err := s.encode(l)
			if err != nil {
				return err
			}
			if len(batch) > 0 && size+len(p.json) > s.o.BatchBytes {
				held = &l
				break
			}
			batch, size = append(batch, p), size+len(p.json)+1
		}
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(s.o.Poll):
			}
			continue
		}
		var sent bool
		if cur, sent, err = s.deliver(ctx, r, cur, batch, &held); err != nil || !sent {
			return err
		}
		batch, size = batch[:0], 0
	}
	return nil
}

// encode makes a line's event.
func (s *Shipper) encode(l line) (pending, error) {
	ev, err := s.event(l.text, l.hash)
	if err != nil {
		return pending{}, fmt.Errorf("decision log: audit line %d: %w", l.seq, err)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return pending{}, fmt.Errorf("decision log: audit line %d: %w", l.seq, err)
	}
	return pending{seq: l.seq, hash: l.hash, json: b, announced: announcedRanges(l.text)}, nil
}

// announcedRanges are the lines a decision_log line says were dropped,
// none for any other line.
func announcedRanges(text []byte) [][2]int64 {
	var rec audit.Record
	if json.Unmarshal(text, &rec) != nil || rec.Kind != audit.KindDecisionLog || rec.Dropped == nil {
		return nil
	}
	if len(rec.Dropped.Ranges) > 0 {
		return rec.Dropped.Ranges
	}
	return [][2]int64{{rec.Dropped.From, rec.Dropped.To}}
}

// mergeRanges sorts rs and joins those that overlap or touch.
func mergeRanges(rs [][2]int64) [][2]int64 {
	slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]int64
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// deliver sends batch until the receiver acknowledges it, and moves the
// cursor past it. Under Drop, a backlog past the bound while it retries
// drops the oldest lines (of the batch, then beyond it from the reader)
// and announces them. sent is false when ctx ended first.
func (s *Shipper) deliver(ctx context.Context, r *reader, cur Cursor, batch []pending, held **line) (Cursor, bool, error) {
	for attempt := 0; ; attempt++ {
		if s.o.Overflow == Drop {
			var err error
			if cur, batch, err = s.dropOver(r, cur, batch, held); err != nil {
				return cur, false, err
			}
			if len(batch) == 0 {
				return cur, true, nil
			}
		}
		err := s.sendOnce(ctx, batch)
		if err == nil {
			last := batch[len(batch)-1]
			next := Cursor{Seq: last.seq, Hash: last.hash}
			if err := saveCursor(s.o.Cursor, next); err != nil {
				return cur, false, err
			}
			s.m.shipped.Add(float64(len(batch)))
			s.acked.Store(next.Seq)
			s.succeeded()
			return next, true, nil
		}
		if ctx.Err() != nil {
			return cur, false, nil
		}
		s.m.failed.Inc()
		s.failed(err, attempt)
		if !sleep(ctx, s.backoff(attempt)) {
			return cur, false, nil
		}
	}
}

// sendOnce sends batch once. A stop (ctx ending) does not cut an attempt
// short: it gets StopGrace more to be answered, so that a clean stop
// leaves nothing acknowledged by the receiver and not by the cursor.
func (s *Shipper) sendOnce(ctx context.Context, batch []pending) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(s.o.StopGrace, cancel)
		<-sctx.Done()
		t.Stop()
	})
	defer stop()
	return s.post.send(sctx, batch)
}

// dropOver drops the oldest unacknowledged lines beyond the bound: the
// batch's first, then lines still on disk, and writes one decision_log
// line saying which.
func (s *Shipper) dropOver(r *reader, cur Cursor, batch []pending, held **line) (Cursor, []pending, error) {
	head, _ := s.o.Head()
	if head-cur.Seq <= s.o.MaxBacklog {
		return cur, batch, nil
	}
	// Drop down to the bound less one: the announcement takes that place.
	target := head - s.o.MaxBacklog + 1 // the newest line to drop
	to, toHash := cur.Seq, cur.Hash
	// An announcement dropped in turn is folded into the new one, which
	// then covers its lines as well: a receiver gets every dropped line
	// in exactly one announcement that arrives. Its lines are added as
	// they are, not as a span: lines between them may have been shipped,
	// or announced by a later line that will arrive.
	var folded [][2]int64
	for len(batch) > 0 && batch[0].seq <= target {
		to, toHash = batch[0].seq, batch[0].hash
		folded = append(folded, batch[0].announced...)
		batch = batch[1:]
	}
	if len(batch) == 0 {
		for to < target {
			var l line
			if *held != nil {
				l, *held = **held, nil
			} else {
				var ok bool
				var err error
				if l, ok, err = r.next(); err != nil {
					return cur, nil, err
				} else if !ok {
					break
				}
			}
			if l.seq > target {
				*held = &l
				break
			}
			to, toHash = l.seq, l.hash
			folded = append(folded, announcedRanges(l.text)...)
		}
	}
	if to <= cur.Seq {
		return cur, batch, nil
	}
	cur, err := s.announce(cur, append(folded, [2]int64{cur.Seq + 1, to}), toHash, RuleDropped, to-cur.Seq)
	return cur, batch, err
}

// announce writes the decision_log line for lines from..to that will
// never be shipped, then moves the cursor past them (to's hash is
// toHash) and counts the fresh ones, those after the cursor (the others
// were counted when an earlier announcement, now folded in, was made).
func (s *Shipper) announce(cur Cursor, lines [][2]int64, toHash, rule string, fresh int64) (Cursor, error) {
	lines = mergeRanges(lines)
	from, to := lines[0][0], lines[len(lines)-1][1]
	var n int64
	for _, r := range lines {
		n += r[1] - r[0] + 1
	}
	reason := fmt.Sprintf("the decision-log receiver could not take %d audit lines between %d and %d before the backlog passed its bound of %d lines, so they were dropped from shipping (this line's ranges name them); the local audit log still holds them", n, from, to, s.o.MaxBacklog)
	if rule == RulePruned {
		reason = fmt.Sprintf("audit lines %d to %d (%d lines) were removed from disk by the audit log's retention (--audit-keep) before they were shipped", from, to, n)
	}
	rec := audit.Record{Kind: audit.KindDecisionLog, Rule: rule, Reason: reason, Dropped: &audit.Dropped{From: from, To: to, Lines: n, Ranges: lines}}
	if err := s.o.Writer.Write(rec); err != nil {
		return cur, fmt.Errorf("decision log: write the line that counts %d dropped lines: %w", n, err)
	}
	next := Cursor{Seq: to, Hash: toHash}
	if err := saveCursor(s.o.Cursor, next); err != nil {
		return cur, err
	}
	s.acked.Store(to)
	s.m.dropped.Add(float64(fresh))
	s.o.Logger.Error("decision log dropped lines", "rule", rule, "from", from, "to", to, "lines", n)
	return next, nil
}

// backoff is the wait after attempt (from 0): MinBackoff doubled per
// attempt up to MaxBackoff, drawn between half of it and all of it.
func (s *Shipper) backoff(attempt int) time.Duration {
	d := s.o.MinBackoff
	for i := 0; i < attempt && d < s.o.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.o.MaxBackoff)
	return d/2 + jitter(d/2)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (s *Shipper) succeeded() {
	now := time.Now()
	s.m.lastSuccess.Set(float64(now.UnixNano()) / 1e9)
	s.mu.Lock()
	s.lastSuccess, s.failing, s.lastErr = now, false, ""
	s.mu.Unlock()
}

func (s *Shipper) failed(err error, attempt int) {
	s.mu.Lock()
	s.failing, s.lastErr = true, err.Error()
	s.mu.Unlock()
	if attempt == 0 || attempt%10 == 0 {
		s.o.Logger.Warn("decision log receiver failed; retrying", "url", s.o.URL, "attempt", attempt+1, "backlog", s.Backlog(), "err", err)
	}
}

// Backlog is how many lines of the log the receiver has not acknowledged
// (nor were dropped and announced).
func (s *Shipper) Backlog() int64 {
	head, _ := s.o.Head()
	return max(0, head-s.acked.Load())
}

// Hold says whether a new tool-call decision must be denied: under
// Block, while the backlog is at its bound. The reason is for the model.
func (s *Shipper) Hold() (rule, reason string, held bool) {
	if s.o.Overflow != Block {
		return "", "", false
	}
	if b := s.Backlog(); b >= s.o.MaxBacklog {
		return RuleBacklogFull, fmt.Sprintf("gatekeeper must ship every decision to its decision-log service, which has not acknowledged the last %d (the bound is %d): the service cannot be reached, so new tool calls are denied until it catches up. This is not about the call itself; it may be allowed later.", b, s.o.MaxBacklog), true
	}
	return "", "", false
}

// Status is the shipper's state for /readyz.
type Status struct {
	Backlog    int64    `json:"backlog"`
	MaxBacklog int64    `json:"max_backlog"`
	Overflow   Overflow `json:"overflow"`
	// Full: the backlog is at its bound. KeepingUp: the last attempt
	// succeeded (or none failed yet), the backlog is below its bound and
	// shipping has not stopped.
	Full        bool       `json:"full"`
	KeepingUp   bool       `json:"keeping_up"`
	LastSuccess *time.Time `json:"last_success,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	// Stopped is why shipping stopped (a broken chain), "" while it runs.
	Stopped string `json:"stopped,omitempty"`
}

// Status returns the shipper's state now.
func (s *Shipper) Status() Status {
	b := s.Backlog()
	st := Status{Backlog: b, MaxBacklog: s.o.MaxBacklog, Overflow: s.o.Overflow, Full: b >= s.o.MaxBacklog}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lastSuccess.IsZero() {
		t := s.lastSuccess.UTC()
		st.LastSuccess = &t
	}
	st.LastError, st.Stopped = s.lastErr, s.stopped
	st.KeepingUp = !s.failing && !st.Full && s.stopped == ""
	return st
}

// Ready says whether the sidecar should take traffic as far as the
// decision log goes: not while shipping has stopped, nor, under Block,
// while the backlog is full (every tool call would be denied).
func (st Status) Ready() bool {
	return st.Stopped == "" && !(st.Overflow == Block && st.Full)
}
