package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
)

// A session (runner.Session) is one sandbox held for a query's runs: an
// Instance that outlives one run. Its first run creates it as a run's
// sandbox is created (never from the pool: its command differs,
// launch.SessionCommand); each later run sends its header, code and files
// to the same sandbox, whose /workspace already holds the saved workspace,
// and reads its output from the same streams (sessionInstance hands each
// run streams of its own). The run loop is the one of every run (execute);
// only its deadline and its reading of the end marks differ.
//
// A session ends (its sandbox removed, with the network made for it) at
// EndSession, after its idle timeout, at its lifetime, when a run needs
// other sandbox settings, when a run loses it (the sandbox was killed or
// ended, or its end marks say the session is lost), and at Close. Only
// the first is not reported: the next run under the same ID reports the
// others (StateLost, Fresh), unless the run that lost it already did.

// sessionMargin is how long past a session's idle timeout its init waits
// for a run by itself, should the sidecar be gone (the runner's own timer
// ends it first).
const sessionMargin = time.Minute

// interruptMargin is how long past the run's timeout and the session's
// interrupt grace the runner waits for the end marks before it kills the
// sandbox (and so the session).
const interruptMargin = 2 * time.Second

// DefaultMaxIdleSessions is Config.MaxIdleSessions's default.
const DefaultMaxIdleSessions = 32

// sessionSet is a Runner's sessions by ID.
type sessionSet struct {
	r       *Runner
	maxIdle int

	mu     sync.Mutex
	m      map[string]*session
	closed bool
}

// session is one session's state. Its runs are serialized by turn; its
// fields are guarded by the set's mu.
type session struct {
	id   string
	turn chan struct{} // holds one token: the right to run or end

	cfg      runner.Session
	inst     *sessionInstance // nil: no live sandbox
	key      string           // the settings inst was made for
	started  time.Time
	deadline time.Time // started + MaxLifetime
	lastEnd  time.Time
	runs     int
	restarts int
	langs    map[runner.Language]bool
	running  bool
	pending  *runner.StateLost // to report in the next run (Fresh)
	timer    *time.Timer       // the idle or lifetime timer between runs
}

func newSessionSet(r *Runner, maxIdle int) *sessionSet {
	if maxIdle <= 0 {
		maxIdle = DefaultMaxIdleSessions
	}
	return &sessionSet{r: r, maxIdle: maxIdle, m: map[string]*session{}}
}

// get returns session id, made if it is new; nil once the set is closed.
func (ss *sessionSet) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return nil
	}
	s := ss.m[id]
	if s == nil {
		s = &session{id: id, turn: make(chan struct{}, 1), langs: map[runner.Language]bool{}}
		s.turn <- struct{}{}
		ss.m[id] = s
	}
	return s
}

// sessionKey identifies the settings a session's sandbox was made with:
// every field of the Sandbox that reaches the sandbox or its network,
// not the bounds of each run (output, files, calls).
func sessionKey(p *Plan) string {
	sb := p.Sandbox
	allow := append([]string(nil), sb.Network.Allow...)
	deny := append([]string(nil), sb.Network.Deny...)
	globs := append([]string(nil), sb.DenyGlobs...)
	sort.Strings(allow)
	sort.Strings(deny)
	sort.Strings(globs)
	return fmt.Sprintf("%s %v %t %q %q %q %q %s", poolKey(p), p.Runtime, sb.Network.Enabled, allow, deny, sb.DepsDir, globs, egressKey(sb.Network))
}

// runSession runs spec in its session's sandbox, making one when the
// session has none (or its sandbox cannot serve spec), after run checked
// spec and prepared the platform.
func (r *Runner) runSession(ctx context.Context, p *Plan, spec runner.Spec, res runner.Result) (runner.Result, error) {
	ss := r.sessions
	s := ss.get(spec.Session.ID)
	if s == nil {
		return res, fmt.Errorf("%w: the runner is closed", runner.ErrUnavailable)
	}
	select {
	case <-s.turn:
	case <-ctx.Done():
		return notStarted(ctx, res, spec, ctx.Err())
	}
	defer func() { s.turn <- struct{}{} }()

	now := time.Now()
	key := sessionKey(p)
	ss.mu.Lock()
	s.cfg = *spec.Session
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	inst := s.inst
	var why runner.SessionEndReason
	switch {
	case inst == nil:
	case isDone(inst.Done()):
		why = runner.EndSandboxLost
	case s.key != key:
		why = runner.EndPolicyChanged
	case now.Add(spec.Timeout).After(s.deadline):
		why = runner.EndMaxLifetime
	}
	ss.mu.Unlock()
	if why != "" {
		r.endSession(s, why, true)
	}

	ss.mu.Lock()
	inst = s.inst
	ss.mu.Unlock()
	if inst == nil {
		var err error
		if inst, err = r.startSession(ctx, s, p, spec, key); err != nil {
			return notStarted(ctx, res, spec, err)
		}
	} else {
		p.Input.InPlace = true
		if err := checkLanguage(ctx, inst, spec.Language); err != nil {
			r.armIdle(s)
			return notStarted(ctx, res, spec, err)
		}
		if err := inst.BindRun(spec); err != nil {
			// The proxy would decide this run's requests as another's:
			// the session cannot serve it.
			r.endSession(s, runner.EndSandboxLost, true)
			return notStarted(ctx, res, spec, err)
		}
	}

	ss.mu.Lock()
	s.runs++
	s.running = true
	s.langs[spec.Language] = true
	info := runner.SessionInfo{Run: s.runs, Started: s.started, Age: now.Sub(s.started), Restarts: s.restarts}
	if s.runs > 1 {
		info.Idle = now.Sub(s.lastEnd)
	}
	fresh := s.pending
	s.pending = nil
	ss.mu.Unlock()

	r.log.Debug("session run", "run_id", spec.RunID, "query_id", spec.QueryID, "session", s.id, "sandbox", inst.ID(), "run", info.Run)
	sr := &sessionRun{}
	res, err := r.execute(ctx, inst, p, spec, res, sr)
	if m, ok := inst.inner.(PeakMeter); ok {
		info.PeakMemoryBytes = max(m.Peak(), res.PeakMemoryBytes)
	}
	res.Session = &info

	ss.mu.Lock()
	s.running = false
	s.lastEnd = time.Now()
	lost := lostIn(res, sr, err, isDone(inst.Done()))
	if lost == "" && fresh != nil {
		res.StateLost = fresh
	}
	ss.mu.Unlock()
	if lost != "" {
		res.StateLost = &runner.StateLost{Reason: lost, Lost: s.lostWords(), Fresh: false}
		r.endSession(s, lost, false)
		return res, err
	}
	r.armIdle(s)
	return res, err
}

// sessionRun is what execute reports of a run in a session.
type sessionRun struct {
	// state is the session's state after the run, as the end marks said
	// it; 0 when they did not come.
	state launch.MarkState
}

// lostIn says why a run lost its session, or "" when it kept it: the
// marks said so, or the sandbox ended (killed for the timeout, the
// memory limit or a cancellation; or by itself).
func lostIn(res runner.Result, sr *sessionRun, err error, ended bool) runner.SessionEndReason {
	switch {
	case err == nil && !ended && (sr.state == launch.MarkKept || sr.state == launch.MarkInterrupted):
		return ""
	case res.Reason == runner.OOMKilled:
		return runner.EndOOMKilled
	case res.Reason == runner.TimedOut:
		return runner.EndTimedOut
	case res.Reason == runner.Cancelled:
		return runner.EndCancelled
	case sr.state == launch.MarkLost:
		return runner.EndInterpreterExited
	}
	return runner.EndSandboxLost
}

// startSession makes session s's sandbox for spec's plan p.
func (r *Runner) startSession(ctx context.Context, s *session, p *Plan, spec runner.Spec, key string) (*sessionInstance, error) {
	cfg := spec.Session
	p.Idle = cfg.IdleTimeout + sessionMargin
	p.Life = cfg.MaxLifetime + spec.Timeout + launch.InterruptGrace + launch.BackstopGrace + launch.SnapshotGrace + r.cfg.ColdMargin
	if err := r.sessions.makeRoom(s, p.Sandbox.MemoryBytes); err != nil {
		return nil, err
	}
	req := CreateRequest{Plan: p, Spec: spec, Background: r.background}
	if r.pool != nil {
		req.Yield = r.pool.yield
	}
	inner, err := r.pf.Create(ctx, req)
	if err != nil {
		return nil, err
	}
	inst := newSessionInstance(inner, p.Sandbox.MemoryBytes)
	if err := ctx.Err(); err != nil {
		r.dropSandbox(inst)
		return nil, err
	}
	if err := checkLanguage(ctx, inst, spec.Language); err != nil {
		r.dropSandbox(inst)
		return nil, err
	}
	now := time.Now()
	ss := r.sessions
	ss.mu.Lock()
	s.inst, s.key, s.started, s.deadline, s.runs = inst, key, now, now.Add(cfg.MaxLifetime), 0
	s.langs = map[runner.Language]bool{}
	ev := runner.SessionEvent{Kind: runner.SessionStarted, SessionID: s.id, Sandbox: inst.ID(), Revision: cfg.Revision, Started: now, At: now}
	events := cfg.Events
	ss.mu.Unlock()
	r.log.Info("session started", "session", s.id, "query_id", spec.QueryID, "sandbox", inst.ID(), "revision", cfg.Revision)
	if events != nil {
		events(ev)
	}
	return inst, nil
}

// armIdle starts session s's timer between runs: its idle timeout, or
// its lifetime when that comes first.
func (r *Runner) armIdle(s *session) {
	ss := r.sessions
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s.inst == nil || ss.closed {
		return
	}
	wait, why := s.cfg.IdleTimeout, runner.EndExpired
	if left := time.Until(s.deadline); left < wait {
		wait, why = max(left, 0), runner.EndMaxLifetime
	}
	inst := s.inst
	s.timer = time.AfterFunc(wait, func() {
		select {
		case <-s.turn:
		default:
			return // a run started meanwhile; it arms the timer again
		}
		defer func() { s.turn <- struct{}{} }()
		ss.mu.Lock()
		same := s.inst == inst
		ss.mu.Unlock()
		if same {
			r.endSession(s, why, true)
		}
	})
}

// endSession removes session s's sandbox, if it has one, and reports its
// end; report keeps why for the next run. The caller holds s's turn.
func (r *Runner) endSession(s *session, why runner.SessionEndReason, report bool) {
	ss := r.sessions
	ss.mu.Lock()
	inst := s.inst
	if inst == nil {
		ss.mu.Unlock()
		return
	}
	s.inst = nil
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if why != runner.EndClosed {
		s.restarts++
		if report {
			s.pending = &runner.StateLost{Reason: why, Lost: s.lostWords(), Fresh: true}
		}
	}
	ev := runner.SessionEvent{Kind: runner.SessionEnded, SessionID: s.id, Sandbox: inst.ID(), Revision: s.cfg.Revision,
		End: why, Runs: s.runs, Started: s.started, At: time.Now()}
	events := s.cfg.Events
	ss.mu.Unlock()
	r.log.Info("session ended", "session", s.id, "sandbox", inst.ID(), "reason", why, "runs", ev.Runs)
	r.dropSandbox(inst)
	if events != nil {
		events(ev)
	}
}

// dropSandbox kills and removes a session's sandbox, network and all,
// before it returns: what the session ran is gone when its end is
// reported.
func (r *Runner) dropSandbox(inst *sessionInstance) {
	inst.inner.Kill()
	inst.inner.Detach()
	inst.inner.Remove()
}

// lostWords names what a session that ended loses, in words for a model.
// The set's mu is held.
func (s *session) lostWords() string {
	var parts []string
	if s.langs[runner.Python] {
		parts = append(parts, "the Python interpreter's variables, imports and open files")
	}
	if s.langs[runner.Node] {
		parts = append(parts, "Node's top-level bindings and pending work")
	}
	if s.langs[runner.Shell] {
		parts = append(parts, "the shell's working directory, environment, functions and jobs")
	}
	parts = append(parts, "every background process", launch.TmpDir+" and /dev/shm")
	return strings.Join(parts, ", ") + "; " + launch.WorkspaceDir + " is as the last run that saved it left it"
}

// EndSession ends session id now (runner.SessionEnder): its sandbox is
// removed, with everything running in it, and the ID is forgotten. A run
// of it in progress is cancelled first by its caller, or ends first.
func (r *Runner) EndSession(ctx context.Context, id string) error {
	ss := r.sessions
	ss.mu.Lock()
	s := ss.m[id]
	ss.mu.Unlock()
	if s == nil {
		return nil
	}
	select {
	case <-s.turn:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { s.turn <- struct{}{} }()
	r.endSession(s, runner.EndClosed, false)
	ss.mu.Lock()
	if ss.m[id] == s {
		delete(ss.m, id)
	}
	ss.mu.Unlock()
	return nil
}

// makeRoom ends idle sessions, oldest idle first, before s starts a
// sandbox of mem bytes of memory limit: those past the cap on idle
// sessions, and those whose memory would take the idle sessions past the
// pool's memory budget (--pool-max-memory) once s is idle too. They
// report EndEvicted at their next run. A session larger than the budget
// alone still starts, as a run does: the budget bounds what waits.
func (ss *sessionSet) makeRoom(s *session, mem int64) error {
	var budget int64
	if ss.r.pool != nil {
		budget = ss.r.pool.budget
	}
	ss.mu.Lock()
	var idle []*session
	var idleMem int64
	for _, o := range ss.m {
		if o != s && o.inst != nil && !o.running {
			idle = append(idle, o)
			idleMem += o.inst.memory
		}
	}
	ss.mu.Unlock()
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastEnd.Before(idle[j].lastEnd) })
	for i, o := range idle {
		overCap := len(idle)-i >= ss.maxIdle
		overBudget := budget > 0 && idleMem+mem > budget
		if !overCap && !overBudget {
			break
		}
		select {
		case <-o.turn:
		default:
			continue // it runs now: no longer idle
		}
		idleMem -= o.inst.memory
		ss.r.endSession(o, runner.EndEvicted, true)
		o.turn <- struct{}{}
	}
	return nil
}

// closeAll ends every session (Close).
func (ss *sessionSet) closeAll() {
	ss.mu.Lock()
	ss.closed = true
	all := make([]*session, 0, len(ss.m))
	for _, s := range ss.m {
		all = append(all, s)
	}
	ss.mu.Unlock()
	for _, s := range all {
		<-s.turn
		ss.r.endSession(s, runner.EndClosed, false)
		s.turn <- struct{}{}
	}
}

// idleMemory is the memory limits of the sessions' sandboxes that wait
// for a run, which the pool's budget counts.
func (ss *sessionSet) idleMemory() int64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var n int64
	for _, s := range ss.m {
		if s.inst != nil && !s.running {
			n += s.inst.memory
		}
	}
	return n
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
