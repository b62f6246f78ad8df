package console

import (
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// SessionView is the query view's session: the query's latest sandbox
// session as its audit lines tell it (session lines and the run lines of
// the session), at the console's clock.
type SessionView struct {
	SessionID string `json:"session_id"`
	Sandbox   string `json:"sandbox,omitempty"`
	// Open: no session_end followed its start; Ended is that end's reason.
	Open  bool   `json:"open"`
	Ended string `json:"ended,omitempty"`
	// Started is when its sandbox started (zero when the start is older
	// than the console's history); AgeMS its age now, or at its end.
	Started time.Time `json:"started,omitzero"`
	AgeMS   int64     `json:"age_ms"`
	// IdleMS is how long it has waited since its last run ended (or it
	// started), while open.
	IdleMS int64 `json:"idle_ms"`
	// Runs are its runs; PeakMemoryBytes the highest peak of their lines.
	Runs            int   `json:"runs"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// Restarts counts the query's sessions that ended other than by
	// closing it (each a loss of state).
	Restarts int `json:"restarts"`
}

// sessionOf returns the session of a query whose records, oldest first,
// are es; nil when none of them is of a session.
func sessionOf(es []*entry, now time.Time) *SessionView {
	var (
		cur      *SessionView
		last     time.Time // the end of the session's last run, or its start
		endedAt  time.Time
		restarts int
	)
	for _, e := range es {
		rec := &e.rec
		switch {
		case rec.Kind == audit.KindSession && rec.Event == audit.SessionStart:
			cur = &SessionView{SessionID: rec.SessionID, Sandbox: rec.Sandbox, Open: true, Started: rec.Started}
			last = rec.Time
		case rec.Kind == audit.KindSession && rec.Event == audit.SessionEnd:
			if cur == nil || !cur.Open {
				cur = &SessionView{SessionID: rec.SessionID, Sandbox: rec.Sandbox, Started: rec.Started}
			}
			cur.Open, cur.Ended, endedAt = false, rec.Reason, rec.Time
			if rec.Reason != "closed" {
				restarts++
			}
		case rec.Kind == audit.KindRun && rec.SessionID != "":
			if cur == nil || !cur.Open {
				// Its start is older than the history, or was not written.
				cur = &SessionView{SessionID: rec.SessionID, Open: true}
			}
			cur.Runs++
			cur.PeakMemoryBytes = max(cur.PeakMemoryBytes, rec.PeakMemoryBytes)
			last = rec.Time
		}
	}
	if cur == nil {
		return nil
	}
	cur.Restarts = restarts
	end := now
	if !cur.Open {
		end = endedAt
	} else {
		cur.IdleMS = max(0, now.Sub(last).Milliseconds())
	}
	if !cur.Started.IsZero() {
		cur.AgeMS = max(0, end.Sub(cur.Started).Milliseconds())
	}
	return cur
}
