package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Record is one request a load session made and how it ended. The
// soak judges records after the run, against the faults' windows and the
// policy revision each decision names.
type Record struct {
	Session int
	Kind    string // "decide", "run", "open_query", "close_query"
	Action  string // the Action or RunKind name; for open_query the override's index
	Sent    time.Time
	Got     time.Time // zero when Err is set
	Ended   time.Time // when the reply came or the error was seen
	Reply   Frame
	Outputs int // output frames of a run
	Err     string
	// Cut is set when the connection ended before the reply; Hang when no
	// reply came within the request's bound; Stopped when the soak ended
	// while the request was in flight (its connection closes with it).
	Cut, Hang, Stopped bool
	QueryID            string
	ToolUseID          string
}

// Latency is the round trip of a replied request.
func (r *Record) Latency() time.Duration { return r.Got.Sub(r.Sent) }

// Recorder collects the records of every session. Safe for concurrent
// use.
type Recorder struct {
	mu      sync.Mutex
	records []Record
	// dialFailures counts failed (re)connections, each a moment an agent
	// would have had every tool call denied.
	dialFailures atomic.Int64
	unsolicited  atomic.Int64
	unsolSamples []string
	// late counts replies that came after the load stopped, for requests
	// abandoned then: expected, and not unsolicited.
	late atomic.Int64
}

func (rc *Recorder) add(r Record) {
	rc.mu.Lock()
	rc.records = append(rc.records, r)
	rc.mu.Unlock()
}

// Records returns a copy of the records so far.
func (rc *Recorder) Records() []Record {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Record(nil), rc.records...)
}

// noteConn adds a closed connection's unsolicited and late replies.
func (rc *Recorder) noteConn(c *Conn) {
	n, samples, late := c.Unsolicited()
	rc.late.Add(int64(late))
	if n == 0 {
		return
	}
	rc.unsolicited.Add(int64(n))
	rc.mu.Lock()
	rc.unsolSamples = append(rc.unsolSamples, samples...)
	rc.mu.Unlock()
}

// unsolicitedSamples returns a few of the unsolicited replies.
func (rc *Recorder) unsolicitedSamples() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), first(rc.unsolSamples, 5)...)
}

// Bounds on one request before the soak calls it a hang: far beyond
// anything a working sidecar takes, so that only a request that would
// never end trips them.
const (
	decideBound = 30 * time.Second
	// runBound covers the policy timeout (at most 10 s here) plus the
	// runner's own bounds on engine calls after a kill (30 s each).
	runBound = 10*time.Second + 100*time.Second
)

// Gate lets the orchestrator pause the sessions (each closes its
// connection and waits) and resume them.
type Gate struct {
	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed on resume
	idle   sync.WaitGroup
}

// Pause makes the sessions close their connections and wait; it returns
// once all n have.
func (g *Gate) Pause(n int) {
	g.mu.Lock()
	g.paused = make(chan struct{})
	g.idle.Add(n)
	g.mu.Unlock()
	g.idle.Wait()
}

// Resume lets the sessions go on.
func (g *Gate) Resume() {
	g.mu.Lock()
	close(g.paused)
	g.paused = nil
	g.mu.Unlock()
}

// wait returns at once unless paused; when paused it calls leave (which
// closes the session's connection), marks the session idle and waits for
// Resume. It reports whether it paused.
func (g *Gate) wait(ctx context.Context, leave func()) bool {
	g.mu.Lock()
	p := g.paused
	g.mu.Unlock()
	if p == nil {
		return false
	}
	leave()
	g.idle.Done()
	select {
	case <-p:
	case <-ctx.Done():
	}
	return true
}

// Session is one simulated agent: a connection, a query, and a closed
// loop of tool calls (a decider) or sandboxed runs (a runner).
type Session struct {
	ID     int
	Runner bool
	Dialer Dialer
	World  World
	Rec    *Recorder
	Gate   *Gate
	// NoNet, while set, keeps a runner from starting networked runs;
	// NetRuns counts the networked runs under way (see netRun).
	NoNet   *atomic.Bool
	NetRuns *atomic.Int64
	rnd     *rand.Rand
	conn    *Conn
	query   string // the open query
	netQ    string // a runner's networked query
	n       int    // calls made
}

// Client is the session's client name in hello and the audit log.
func (s *Session) Client() string { return fmt.Sprintf("soak-load-%d", s.ID) }

// Run loops until ctx ends.
func (s *Session) Run(ctx context.Context) {
	s.rnd = rand.New(rand.NewPCG(uint64(s.ID), 14))
	defer s.drop()
	for ctx.Err() == nil {
		if s.Gate.wait(ctx, s.drop) {
			continue
		}
		if s.conn == nil && !s.connect(ctx) {
			continue
		}
		if s.Runner {
			s.runOnce(ctx)
		} else {
			s.decideOnce(ctx)
		}
	}
}

// drop closes the connection, if any.
func (s *Session) drop() {
	if s.conn != nil {
		s.conn.Close()
		<-s.conn.Done()
		s.Rec.noteConn(s.conn)
		s.conn, s.query, s.netQ = nil, "", ""
	}
}

// connect dials, says hello and opens the session's query (and a
// runner's networked one). A failure is counted, then retried after a
// pause.
func (s *Session) connect(ctx context.Context) bool {
	c, err := s.Dialer.Dial(ctx, s.Client())
	if err != nil {
		s.Rec.dialFailures.Add(1)
		sleep(ctx, 200*time.Millisecond)
		return false
	}
	s.conn = c
	override := 0
	if !s.Runner {
		override = s.ID % len(Overrides)
	}
	if s.query = s.open(ctx, override, Overrides[override]); s.query == "" {
		s.drop()
		sleep(ctx, 200*time.Millisecond)
		return false
	}
	if s.Runner {
		if s.netQ = s.open(ctx, -1, netOverride); s.netQ == "" {
			s.drop()
			sleep(ctx, 200*time.Millisecond)
			return false
		}
	}
	return true
}

// open opens a query with override (index i of Overrides; -1 for the
// network override, -2 for the rejected one) and returns its id, or "".
func (s *Session) open(ctx context.Context, i int, override map[string]any) string {
	frame := map[string]any{"type": "open_query"}
	if override != nil {
		frame["sandbox_policy"] = override
	}
	r := s.request(ctx, "open_query", fmt.Sprint(i), frame, decideBound)
	if r.Reply.Type == "query_opened" {
		return r.Reply.QueryID
	}
	return ""
}

// request sends frame, waits for its reply and records it. A connection
// that was cut or hung is dropped.
func (s *Session) request(ctx context.Context, kind, action string, frame map[string]any, bound time.Duration) Record {
	r := Record{Session: s.ID, Kind: kind, Action: action, Sent: time.Now()}
	if q, ok := frame["query_id"].(string); ok {
		r.QueryID = q
	}
	if t, ok := frame["tool_use_id"].(string); ok {
		r.ToolUseID = t
	}
	id, err := s.conn.Send(frame)
	if err == nil {
		var out int
		r.Reply, out, _, err = s.conn.Wait(ctx, id, bound)
		r.Outputs = out
	} else {
		err = fmt.Errorf("%w: %v", ErrCut, err)
	}
	r.Ended = time.Now()
	switch {
	case err == nil:
		r.Got = r.Ended
	case ctx.Err() != nil:
		r.Err, r.Stopped = "in flight when the load stopped", true
	default:
		r.Err, r.Cut, r.Hang = err.Error(), errors.Is(err, ErrCut), errors.Is(err, ErrHang)
		s.drop()
	}
	s.Rec.add(r)
	return r
}

// decideOnce makes one tool call, now and then reopening the query or
// trying an override over the ceilings.
func (s *Session) decideOnce(ctx context.Context) {
	s.n++
	switch {
	case s.n%400 == 0:
		r := s.request(ctx, "open_query", "-2", map[string]any{"type": "open_query", "sandbox_policy": rejectedOverride}, decideBound)
		_ = r // judged with the rest
	case s.n%100 == 0:
		r := s.request(ctx, "close_query", "", map[string]any{"type": "close_query", "query_id": s.query}, decideBound)
		if s.conn != nil && r.Reply.Type == "query_closed" {
			i := (s.ID + s.n/100) % len(Overrides)
			s.query = s.open(ctx, i, Overrides[i])
			if s.query == "" {
				s.drop()
			}
		}
	default:
		a := pick(s.rnd)
		s.request(ctx, "decide", a.Name, map[string]any{
			"type": "decide", "query_id": s.query, "event": "PreToolUse", "tool_name": a.Tool,
			"tool_input": a.Input(s.World, s.n), "tool_use_id": fmt.Sprintf("toolu_soak_%d_%d", s.ID, s.n),
		}, decideBound)
	}
	sleep(ctx, time.Duration(5+s.rnd.IntN(20))*time.Millisecond)
}

// runOnce asks for one sandboxed run the way @gatekeeper/client does: a
// decide of mcp__sandboxed_code__run, then, if allowed, the run with the
// same tool_use_id.
func (s *Session) runOnce(ctx context.Context) {
	s.n++
	k := pickRun(s.rnd)
	for k.Net && !s.netRun() {
		k = pickRun(s.rnd)
	}
	if k.Net {
		defer s.NetRuns.Add(-1)
	}
	q := s.query
	if k.Net {
		q = s.netQ
	}
	input := map[string]any{"language": k.Language, "code": k.Code}
	if k.TimeoutMS > 0 {
		input["timeout_ms"] = k.TimeoutMS
	}
	tu := fmt.Sprintf("toolu_soak_%d_%d", s.ID, s.n)
	d := s.request(ctx, "decide", "run_"+k.Name, map[string]any{
		"type": "decide", "query_id": q, "event": "PreToolUse", "tool_name": "mcp__sandboxed_code__run",
		"tool_input": input, "tool_use_id": tu, "mcp_server": map[string]any{"name": "sandboxed_code", "source": "sdk"},
	}, decideBound)
	if s.conn != nil && d.Reply.Decision == "allow" {
		frame := map[string]any{"type": "run", "query_id": q, "tool_use_id": tu, "language": k.Language, "code": k.Code}
		if k.TimeoutMS > 0 {
			frame["timeout_ms"] = k.TimeoutMS
		}
		s.request(ctx, "run", k.Name, frame, runBound)
	}
	sleep(ctx, time.Duration(50+s.rnd.IntN(150))*time.Millisecond)
}

// netRun counts a networked run about to start and reports true, unless
// networked runs are held back. It counts first and checks second, so that
// once the orchestrator has set NoNet and then seen NetRuns at zero, no
// networked run starts.
func (s *Session) netRun() bool {
	if s.NoNet == nil {
		return true
	}
	s.NetRuns.Add(1)
	if s.NoNet.Load() {
		s.NetRuns.Add(-1)
		return false
	}
	return true
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
