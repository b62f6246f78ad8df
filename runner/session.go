package runner

import (
	"context"
	"time"
)

// Session asks that a run happen in its query's session: one sandbox kept
// for the query's runs, whose interpreters keep their state (Python
// globals, Node's top-level bindings, the shell's working directory,
// environment and background jobs) from one run to the next. A Spec
// without one runs in a sandbox of its own (single use).
//
// The backend keeps the sandbox between runs under ID, and never lets
// another ID reach it. It ends the session at EndSession, after
// IdleTimeout without a run, at MaxLifetime, when a run's Spec would need
// another sandbox (the effective policy changed: image, runtime, user,
// limits, network, mounts), and when the session's state is lost in a run
// (a timeout that could not be interrupted, the OOM killer, an
// interpreter that exited). The next run with the same ID then starts a
// fresh session, and its Result's StateLost says why the old one ended,
// unless the session ended at EndSession.
type Session struct {
	// ID is the session's key: the gate makes one per query and
	// connection, and never reuses it.
	ID string
	// IdleTimeout ends the session when no run started for this long,
	// counted from the end of its last run.
	IdleTimeout time.Duration
	// MaxLifetime ends the session this long after its sandbox started,
	// between runs (a run in progress is not cut short by it).
	MaxLifetime time.Duration
	// Revision is the policy revision the run's Spec was resolved under;
	// the backend records the one its session started under in its
	// events.
	Revision string
	// Events, when set, receives the session's starts and ends as they
	// happen, from the backend's goroutines; it must not block long. An
	// end that no run reported (an idle expiry, EndSession) comes only
	// here.
	Events func(SessionEvent)
}

// SessionEventKind says what happened to a session.
type SessionEventKind string

// Session event kinds.
const (
	// SessionStarted: a sandbox was made, or taken from the pool, for the
	// session.
	SessionStarted SessionEventKind = "session_start"
	// SessionEnded: the session's sandbox was removed; SessionEvent.End
	// says why.
	SessionEnded SessionEventKind = "session_end"
)

// SessionEndReason says why a session ended. Every reason but
// EndClosed is also a StateLost's: the run after it starts afresh.
type SessionEndReason string

// Why a session ends.
const (
	// EndClosed: EndSession (the query was closed, or its connection
	// ended).
	EndClosed SessionEndReason = "closed"
	// EndExpired: IdleTimeout passed without a run.
	EndExpired SessionEndReason = "expired"
	// EndMaxLifetime: MaxLifetime passed.
	EndMaxLifetime SessionEndReason = "max_lifetime"
	// EndPolicyChanged: a run's Spec needed another sandbox than the
	// session's (a policy reload changed the query's effective sandbox
	// policy).
	EndPolicyChanged SessionEndReason = "policy_changed"
	// EndTimedOut: a run's timeout passed and interrupting its program did
	// not end it, so the sandbox was killed.
	EndTimedOut SessionEndReason = "timed_out"
	// EndOOMKilled: the memory limit killed the interpreter, or the whole
	// sandbox.
	EndOOMKilled SessionEndReason = "oom_killed"
	// EndInterpreterExited: an interpreter of the session ended (the
	// program exited it: sys.exit, process.exit, the shell's exit; or a
	// signal killed it).
	EndInterpreterExited SessionEndReason = "interpreter_exited"
	// EndCancelled: a run was cancelled while it ran, which kills the
	// sandbox.
	EndCancelled SessionEndReason = "cancelled"
	// EndSandboxLost: the sandbox ended, or the backend lost sight of
	// it, for another reason.
	EndSandboxLost SessionEndReason = "sandbox_lost"
	// EndEvicted: the backend's cap on idle sessions, or its memory
	// budget, needed the room of this idle session for another.
	EndEvicted SessionEndReason = "evicted"
)

// SessionEndReasons returns every SessionEndReason, in the order above.
func SessionEndReasons() []SessionEndReason {
	return []SessionEndReason{EndClosed, EndExpired, EndMaxLifetime, EndPolicyChanged, EndTimedOut,
		EndOOMKilled, EndInterpreterExited, EndCancelled, EndSandboxLost, EndEvicted}
}

// SessionEvent is a session's start or end.
type SessionEvent struct {
	Kind SessionEventKind
	// SessionID is Session.ID; Sandbox the sandbox's id.
	SessionID, Sandbox string
	// Revision is the policy revision the session started under.
	Revision string
	// End says why a session ended (SessionEnded only).
	End SessionEndReason
	// Runs is how many runs the session served (SessionEnded only).
	Runs int
	// Started is when the session's sandbox started; At when this
	// happened.
	Started, At time.Time
}

// StateLost is in the Result of a run that found its session's state
// gone, or lost it: the run started in a fresh session, or ended its own.
type StateLost struct {
	// Reason is why the session ended.
	Reason SessionEndReason
	// Lost names what is gone, in words a model reads ("the Python
	// interpreter's variables and imports, background processes, /tmp
	// and /dev/shm").
	Lost string
	// Fresh: this run ran in a fresh session (the old one ended before
	// it); false: this run's own session ended in it, and the next run
	// starts afresh.
	Fresh bool
}

// SessionInfo is what a run in a session reports of it.
type SessionInfo struct {
	// Run is this run's number in its session, from 1.
	Run int
	// Started is when the session's sandbox started; Age and Idle are
	// how old it was, and how long it had waited, when this run began.
	Started   time.Time
	Age, Idle time.Duration
	// Restarts counts the sessions before this one under the same ID
	// that ended other than at EndSession.
	Restarts int
	// PeakMemoryBytes is the session's peak memory so far (0 if
	// unknown).
	PeakMemoryBytes int64
}

// SessionEnder is an optional ability of a backend that keeps sessions:
// EndSession removes session id's sandbox now, with everything running in
// it, and forgets the ID; ending an unknown id does nothing. The gate
// calls it at close_query and at the connection's end.
type SessionEnder interface {
	EndSession(ctx context.Context, id string) error
}
