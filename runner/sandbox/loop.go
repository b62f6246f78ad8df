package sandbox

import (
	"context"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
)

// loop is what the supervision states of one run share.
type loop struct {
	r      *Runner
	inst   Instance
	ctx    context.Context
	snap   *launch.Snapshot
	marks  *launch.EndMarks
	endedC <-chan struct{}
	timer  *time.Timer
	timerC <-chan time.Time // nil once the program ended
	begin  time.Time
	// thrashC is closed when the sandbox thrashes at its memory limit
	// (stallWatch); nil once the program ended, or when not followed.
	thrashC <-chan struct{}

	snapDone <-chan struct{} // nil when no snapshot is awaited
	sess     *sessionRun     // nil outside a session

	gone      bool              // the sandbox ended (Done)
	marked    bool              // the program exited by itself, its output and snapshot complete
	ended     bool              // the program's end marks came in
	killed    bool              // the runner killed the sandbox
	killedFor runner.ExitReason // TimedOut, Cancelled, or OOMKilled (thrashing)
	code      int               // the marks' exit code, when codeOK
	codeOK    bool
	snapLate  bool
	duration  time.Duration
	peak      int64 // the sandbox's peak when the marks came (PeakMeter)
}

// state is one state of a run's supervision. The loop waits for the
// next event (step) and hands it to the state, which returns the next
// state, or nil when supervision is over. Some events end it in every
// state: the sandbox ended, the timeout passed (until the program ended),
// or ctx ended.
type state interface {
	// ended: the program's end marks came in.
	ended(l *loop) state
	// snapshot: the snapshot's receiver finished (l.snap.Err says how).
	snapshot(l *loop) state
	// deadline is the state's own deadline (nil: none), and expired what
	// happens when it passes.
	deadline() <-chan time.Time
	expired(l *loop) state
}

// step waits for the run's next event and returns the state after it.
func (l *loop) step(st state) state {
	select {
	case <-l.inst.Done():
		l.gone = true
		return nil
	case <-l.timerC:
		l.killedFor = runner.TimedOut
		return nil
	case <-l.ctx.Done():
		l.killedFor = runner.Cancelled
		return nil
	case <-l.thrashC:
		l.killedFor = runner.OOMKilled // thrashing at its memory limit (stallWatch)
		return nil
	case <-l.endedC:
		return st.ended(l)
	case <-l.snapDone:
		l.snapDone = nil
		return st.snapshot(l)
	case <-st.deadline():
		return st.expired(l)
	}
}

// running: the program runs; its timeout counts.
type running struct{ noDeadline }

func (running) ended(l *loop) state { return l.onEnded() }

func (running) snapshot(l *loop) state {
	if l.snap.Err == nil {
		return running{}
	}
	return refused{grace: time.After(time.Second)}
}

// refused: the snapshot was refused before the program's end marks were
// both in (its stdout mark comes before the snapshot, its stderr mark may
// come after): they get a moment, since killing at once would report the
// run as ended early instead of its snapshot as refused.
type refused struct{ grace <-chan time.Time }

func (refused) ended(l *loop) state {
	l.takeMarks()
	return l.kill() // its refused snapshot may still be sending
}
func (s refused) snapshot(*loop) state       { return s }
func (s refused) deadline() <-chan time.Time { return s.grace }
func (refused) expired(l *loop) state        { return l.kill() }

// saving: the program ended by itself; its snapshot has a deadline of its
// own.
type saving struct{ until <-chan time.Time }

func (s saving) ended(*loop) state { return s }

func (saving) snapshot(l *loop) state {
	if l.snap.Err != nil {
		return l.kill() // it may still be sending
	}
	return l.afterEnd()
}
func (s saving) deadline() <-chan time.Time { return s.until }

func (saving) expired(l *loop) state {
	l.snapDone, l.snapLate = nil, true
	return l.kill()
}

// exiting: the program ended or was killed; the sandbox is ending.
type exiting struct{ noDeadline }

func (exiting) ended(l *loop) state {
	l.takeMarks()
	return exiting{}
}
func (exiting) snapshot(*loop) state { return exiting{} }

// noDeadline is a state without a deadline of its own.
type noDeadline struct{}

func (noDeadline) deadline() <-chan time.Time { return nil }
func (noDeadline) expired(*loop) state        { return nil }

// onEnded takes the program's end marks and returns the next state.
func (l *loop) onEnded() state {
	l.takeMarks()
	if l.snapDone != nil {
		return saving{until: time.After(launch.SnapshotGrace)}
	}
	return l.afterEnd()
}

// takeMarks notes the program's end: its duration, exit code and peak.
func (l *loop) takeMarks() {
	l.endedC, l.ended = nil, true
	l.duration = time.Since(l.begin)
	// The sandbox lives on for its launcher: its accounting still holds
	// the program's high-water mark.
	if m, ok := l.inst.(PeakMeter); ok {
		l.peak = m.Peak()
	}
	l.code, l.codeOK = l.marks.ExitCode()
	if l.sess != nil {
		l.sess.state, _ = l.marks.State()
	}
	l.timer.Stop() // the program has ended: the snapshot has a deadline of its own
	l.timerC, l.thrashC = nil, nil
}

// afterEnd is the state once the program ended and its snapshot (if any)
// is in. An exit by signal (137 for the OOM killer) is left to the
// platform, which alone knows whether the memory limit did it.
func (l *loop) afterEnd() state {
	if l.codeOK && l.code < 128 && l.sess == nil {
		l.marked = true
		return nil
	}
	if l.codeOK && l.sess != nil && (l.sess.state == launch.MarkKept || l.sess.state == launch.MarkInterrupted) {
		// The session lives on: whatever the code, the program's own
		// interpreter reported it.
		l.marked = true
		return nil
	}
	return exiting{}
}

// kill kills the sandbox; it is then exiting.
func (l *loop) kill() state {
	l.inst.Kill()
	l.killed = true
	return exiting{}
}
