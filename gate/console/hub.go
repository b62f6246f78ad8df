package console

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

// entry is one audit line the hub read.
type entry struct {
	rec audit.Record
	raw []byte // the line exactly as written, without its newline
	hay string // what Filter.Search looks through
	// event is what a subscriber gets: {"v": verdict, "line": raw}.
	event []byte
	// epoch counts the files the hub started over with (a new or
	// truncated log restarts seq at 1); an event id is "epoch.seq".
	epoch int
}

// size is what an entry holds in bytes (its line twice, with the event).
func (e *entry) size() int64 { return int64(2*len(e.raw) + len(e.hay) + 64) }

// eventJSON is the stream's view of a line: {"v": its Verdict, "line": the
// line exactly as written}.
func eventJSON(rec *audit.Record, line []byte) []byte {
	v, _ := json.Marshal(VerdictOf(rec))
	out := make([]byte, 0, len(line)+len(v)+16)
	out = append(out, `{"v":`...)
	out = append(out, v...)
	out = append(out, `,"line":`...)
	out = append(out, line...)
	return append(out, '}')
}

// subBuffer is how many records a subscriber may fall behind by before it
// is dropped; a dropped subscriber reconnects and resumes from the history.
const subBuffer = 512

// sub is one live subscriber (an SSE stream).
type sub struct {
	f  Filter
	ch chan *entry // closed when the subscriber is dropped or the hub stops
	// lagged is set (before ch is closed) when the subscriber fell behind.
	lagged bool
}

// ChainStatus is what the hub knows about the audit chain: it checks every
// line it reads, across rotated files, from the first line of its history
// on (the newest lines of the log at start; the chain before them is
// `gatekeeper audit verify`'s to check).
type ChainStatus struct {
	// State is "reading" until the hub has read to the end of the log
	// once, then "ok" or "broken".
	State string `json:"state"`
	// Lines, FirstSeq and LastSeq are what verified; Break says where
	// (file and line) and why it did not.
	Lines    int               `json:"lines"`
	FirstSeq int64             `json:"first_seq"`
	LastSeq  int64             `json:"last_seq"`
	Break    *audit.BreakError `json:"break,omitempty"`
	// WriterSeq is the seq of the writer's last line when the log's writer
	// tells it (Head); HeadMatches is false when the file's line with that
	// seq is not the one the writer wrote (an edit or truncation at the
	// end, which the chain alone cannot show).
	WriterSeq   int64  `json:"writer_seq,omitempty"`
	HeadMatches *bool  `json:"head_matches,omitempty"`
	ReadError   string `json:"read_error,omitempty"`
}

// hub reads the audit log as it grows, across its rotations, keeps a
// bounded history of its records and fans each new one out to
// subscribers. The audit log is the one source: what a subscriber gets is
// the line as written (masked, with seq and time), whether it was written
// a second or a week ago. At start it reads the newest lines that fit the
// history from the rotated set, and no older ones.
type hub struct {
	path       string
	maxRecords int
	maxBytes   int64
	poll       time.Duration
	head       func() (int64, string) // the writer's head; nil if unknown

	poke chan struct{} // a write happened: read now
	// loaded is closed once the file has been read to its end the first
	// time: a subscriber waits for it, so that its history is whole.
	loaded chan struct{}

	mu      sync.Mutex
	ring    []*entry // oldest first
	bytes   int64
	epoch   int
	read    int // lines read in this epoch
	subs    map[*sub]struct{}
	chain   audit.Chain
	ready   bool // read to the end of the file once
	readErr error
	stopped bool
}

func newHub(path string, maxRecords int, maxBytes int64, poll time.Duration) *hub {
	return &hub{
		path: path, maxRecords: maxRecords, maxBytes: maxBytes, poll: poll, poke: make(chan struct{}, 1), loaded: make(chan struct{}), subs: map[*sub]struct{}{},
		chain: audit.Chain{Partial: true},
	}
}

// follower reads the log from the newest lines the history can hold: an
// entry holds its line at least twice.
func (h *hub) follower() *audit.Follower {
	return audit.NewFollower(h.path, audit.FollowOptions{Backlog: h.maxRecords, BacklogBytes: h.maxBytes / 2})
}

// notify tells the hub a line was written; it never blocks.
func (h *hub) notify() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// run reads the log until ctx ends, then drops every subscriber.
func (h *hub) run(ctx context.Context) {
	fl := h.follower()
	defer fl.Close()
	t := time.NewTicker(h.poll)
	defer t.Stop()
	h.drain(fl)
	close(h.loaded)
	for {
		select {
		case <-ctx.Done():
			h.mu.Lock()
			h.stopped = true
			for s := range h.subs {
				close(s.ch)
				delete(h.subs, s)
			}
			h.mu.Unlock()
			return
		case <-h.poke:
		case <-t.C:
		}
		h.drain(fl)
	}
}

// drain reads every complete line appended since the last call.
func (h *hub) drain(fl *audit.Follower) {
	for {
		lines, err := fl.Next()
		h.mu.Lock()
		h.readErr = err
		for _, l := range lines {
			h.add(l)
		}
		if err != nil || len(lines) == 0 {
			h.ready = true
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
}

// add checks l against the chain, keeps it and fans it out. A line with
// seq 1 at the start of a file, after lines were read, begins a new log
// (a new file at the path, not a rotation): a new chain and history. h.mu
// is held.
func (h *hub) add(l audit.Line) {
	e := &entry{raw: l.Text}
	parsed := json.Unmarshal(l.Text, &e.rec) == nil
	if parsed && l.Number == 1 && e.rec.Seq == 1 && h.read > 0 {
		h.chain = audit.Chain{Partial: true}
		h.epoch++
		h.read = 0
		h.ring, h.bytes = nil, 0
	}
	h.read++
	_ = h.chain.NextLine(l) // a break shows in status
	if !parsed {
		return // the chain check has noted it
	}
	e.epoch = h.epoch
	e.hay = haystack(&e.rec)
	e.event = eventJSON(&e.rec, l.Text)
	h.ring = append(h.ring, e)
	h.bytes += e.size()
	for len(h.ring) > 1 && (len(h.ring) > h.maxRecords || h.bytes > h.maxBytes) {
		h.bytes -= h.ring[0].size()
		h.ring[0] = nil
		h.ring = h.ring[1:]
	}
	for s := range h.subs {
		if !s.f.match(e) {
			continue
		}
		select {
		case s.ch <- e:
		default:
			s.lagged = true
			close(s.ch)
			delete(h.subs, s)
		}
	}
}

// waitLoaded waits until the log has been read to its end once, or ctx
// ends.
func (h *hub) waitLoaded(ctx context.Context) error {
	select {
	case <-h.loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// subscribe registers a subscriber for f and returns the history it
// missed: with after (an event id the subscriber saw last) the matching
// records after it, else the last limit matching ones. gap is true when
// records after `after` are no longer held. The subscriber must be
// unsubscribed.
func (h *hub) subscribe(f Filter, after *eventID, limit int) (backfill []*entry, s *sub, gap bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s = &sub{f: f, ch: make(chan *entry, subBuffer)}
	if h.stopped {
		close(s.ch)
		return nil, s, false
	}
	h.subs[s] = struct{}{}
	if after != nil && after.epoch == h.epoch {
		for _, e := range h.ring {
			if e.rec.Seq > after.seq && f.match(e) {
				backfill = append(backfill, e)
			}
		}
		gap = len(h.ring) > 0 && h.ring[0].rec.Seq > after.seq+1
		return backfill, s, gap
	}
	for i := len(h.ring) - 1; i >= 0 && len(backfill) < limit; i-- {
		if f.match(h.ring[i]) {
			backfill = append(backfill, h.ring[i])
		}
	}
	for i, j := 0, len(backfill)-1; i < j; i, j = i+1, j-1 {
		backfill[i], backfill[j] = backfill[j], backfill[i]
	}
	return backfill, s, false
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
}

// find returns the held records that match keep, oldest first.
func (h *hub) find(keep func(*audit.Record) bool) []*entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*entry
	for _, e := range h.ring {
		if keep(&e.rec) {
			out = append(out, e)
		}
	}
	return out
}

// HistoryStatus says what the hub holds.
type HistoryStatus struct {
	Records  int   `json:"records"`
	Bytes    int64 `json:"bytes"`
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
	// MaxRecords and MaxBytes bound the history.
	MaxRecords  int   `json:"max_records"`
	MaxBytes    int64 `json:"max_bytes"`
	Subscribers int   `json:"subscribers"`
}

func (h *hub) status() (HistoryStatus, ChainStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := HistoryStatus{Records: len(h.ring), Bytes: h.bytes, MaxRecords: h.maxRecords, MaxBytes: h.maxBytes, Subscribers: len(h.subs)}
	if len(h.ring) > 0 {
		hs.FirstSeq, hs.LastSeq = h.ring[0].rec.Seq, h.ring[len(h.ring)-1].rec.Seq
	}
	rep, err := h.chain.Report()
	cs := ChainStatus{State: "reading", Lines: rep.Lines, FirstSeq: h.chain.FirstSeq(), LastSeq: rep.LastSeq}
	var be *audit.BreakError
	switch {
	case errors.As(err, &be):
		cs.State, cs.Break = "broken", be
	case h.ready:
		cs.State = "ok"
	}
	if h.readErr != nil {
		cs.ReadError = h.readErr.Error()
	}
	if h.head != nil && cs.Break == nil {
		seq, hash := h.head()
		cs.WriterSeq = seq
		if seq == rep.LastSeq {
			ok := hash == rep.LastHash
			cs.HeadMatches = &ok
			if !ok {
				cs.State = "broken"
			}
		}
	}
	return hs, cs
}

// tee is the server's Auditor with the hub told after each line written.
type tee struct {
	inner server.Auditor
	h     *hub
}

func (t tee) Write(rec audit.Record) error {
	err := t.inner.Write(rec)
	if err == nil {
		t.h.notify()
	}
	return err
}
