package server

import (
	"context"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// endSessionWait bounds one EndSession call: removing a session's sandbox
// and what runs in it.
const endSessionWait = 30 * time.Second

// querySession is the session of one query (runner.Session): its ID is
// made with the query and never given to another query, connection or
// later query. Its runs tell it when they start and end, so that the
// session is ended once more after a run that was still running when the
// query closed: that run may have started the session anew after the
// close ended it.
type querySession struct {
	id string

	mu      sync.Mutex
	ended   bool // the query closed: no run may start in the session
	running int  // runs between begin and done
	used    bool // a run asked for the session: there may be one to end
}

func newQuerySession() *querySession { return &querySession{id: newID("s_")} }

// begin registers a run about to run in the session; false once the
// query closed.
func (s *querySession) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.running++
	s.used = true
	return true
}

// done ends a run registered by begin; true when the session must be
// ended again (the query closed while it ran).
func (s *querySession) done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	return s.ended && s.running == 0
}

// end marks the query closed; true when a run ever asked for the session.
func (s *querySession) end() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	return s.used
}

// endSession ends q's session, at its query's close: no run of q starts
// in it afterwards, and the runner, when it keeps sessions
// (runner.SessionEnder), removes its sandbox now. A query that never ran
// in a session costs nothing.
func (s *Server) endSession(q *query) {
	if q.session.end() {
		s.removeSession(q.session.id)
	}
}

// removeSession asks the runner to remove session id's sandbox.
func (s *Server) removeSession(id string) {
	ender, ok := s.cfg.Runner.(runner.SessionEnder)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), endSessionWait)
	defer cancel()
	if err := ender.EndSession(ctx, id); err != nil {
		s.log.Warn("a session's sandbox was not removed at its query's end", "session_id", id, "err", err)
	}
}

// sessionEvents is the runner.Session.Events of query queryID's runs: each
// start and end of its session becomes a "session" audit line, which the
// console and gatekeeper tail show.
func (s *Server) sessionEvents(queryID, client string) func(runner.SessionEvent) {
	return func(ev runner.SessionEvent) {
		rec := audit.Record{Kind: audit.KindSession, Event: string(ev.Kind), QueryID: queryID, Client: client,
			SessionID: ev.SessionID, Sandbox: ev.Sandbox, Revision: ev.Revision, Started: ev.Started.UTC()}
		if ev.Kind == runner.SessionEnded {
			rec.Reason, rec.Runs = string(ev.End), ev.Runs
		}
		if err := s.cfg.Auditor.Write(rec); err != nil {
			s.log.Error("audit write failed for a session line", "session_id", ev.SessionID, "event", ev.Kind, "err", err)
		}
	}
}
