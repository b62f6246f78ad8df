package console_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/console"
)

func TestQueryDetailShowsItsSession(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	t1 := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	run := func(peak int64, n int) audit.Record {
		return audit.Record{Kind: audit.KindRun, QueryID: "q_s", SessionID: "s_1", SessionRun: n, Decision: "allow", Outcome: audit.OutcomeExited, PeakMemoryBytes: peak}
	}
	h.write(t,
		audit.Record{Kind: audit.KindQuery, QueryID: "q_s", Decision: "allow"},
		audit.Record{Kind: audit.KindSession, Event: audit.SessionStart, QueryID: "q_s", SessionID: "s_1", Sandbox: "sbx_a", Started: t0},
		run(10<<20, 1), run(30<<20, 2),
		audit.Record{Kind: audit.KindSession, Event: audit.SessionEnd, QueryID: "q_s", SessionID: "s_1", Sandbox: "sbx_a", Started: t0, Reason: "expired", Runs: 2},
		audit.Record{Kind: audit.KindSession, Event: audit.SessionStart, QueryID: "q_s", SessionID: "s_1", Sandbox: "sbx_b", Started: t1},
		run(5<<20, 1),
		audit.Record{Kind: audit.KindQuery, QueryID: "q_plain", Decision: "allow"},
	)
	h.waitRecords(t, 8)
	wrote := time.Now()
	h.clock.mu.Lock()
	h.clock.now = wrote.Add(10 * time.Minute)
	h.clock.mu.Unlock()
	view := func(id string) *console.SessionView {
		var got struct {
			Session *console.SessionView `json:"session"`
		}
		must(t, json.NewDecoder(h.do(t, "GET", "/ui/api/queries/"+id, map[string]string{"Authorization": "Bearer " + token}, "").Body).Decode(&got))
		return got.Session
	}
	s := view("q_s")
	if s == nil {
		t.Fatal("the query view of a query with a session has none")
	}
	if !s.Open || s.Ended != "" || s.SessionID != "s_1" || s.Sandbox != "sbx_b" || !s.Started.Equal(t1) || s.Runs != 1 || s.PeakMemoryBytes != 5<<20 || s.Restarts != 1 {
		t.Errorf("session = %+v, want the open second session (sbx_b, 1 run, 5 MiB, 1 restart)", s)
	}
	// Age and idle time are counted to the console's clock, 10 minutes on.
	if age := time.Duration(s.AgeMS) * time.Millisecond; age < 11*time.Minute || age > 12*time.Minute {
		t.Errorf("age = %s, want about 11m (from its sandbox's start)", age)
	}
	if idle := time.Duration(s.IdleMS) * time.Millisecond; idle < 10*time.Minute || idle > 11*time.Minute {
		t.Errorf("idle = %s, want about 10m (since its last run)", idle)
	}
	if s := view("q_plain"); s != nil {
		t.Errorf("a query without a session shows one: %+v", s)
	}
}

func TestQueryDetailShowsHowItsSessionEnded(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	h.write(t,
		audit.Record{Kind: audit.KindQuery, QueryID: "q_c", Decision: "allow"},
		audit.Record{Kind: audit.KindSession, Event: audit.SessionStart, QueryID: "q_c", SessionID: "s_2", Sandbox: "sbx_c", Started: t0},
		audit.Record{Kind: audit.KindRun, QueryID: "q_c", SessionID: "s_2", SessionRun: 1, Decision: "allow", Outcome: audit.OutcomeExited, PeakMemoryBytes: 1 << 20},
		audit.Record{Kind: audit.KindSession, Event: audit.SessionEnd, QueryID: "q_c", SessionID: "s_2", Sandbox: "sbx_c", Started: t0, Reason: "closed", Runs: 1},
	)
	h.waitRecords(t, 4)
	var got struct {
		Session *console.SessionView `json:"session"`
	}
	must(t, json.NewDecoder(h.do(t, "GET", "/ui/api/queries/q_c", map[string]string{"Authorization": "Bearer " + token}, "").Body).Decode(&got))
	s := got.Session
	if s == nil || s.Open || s.Ended != "closed" || s.Runs != 1 || s.Restarts != 0 || s.IdleMS != 0 {
		t.Fatalf("session = %+v, want one closed session of 1 run, no restart, no idle time", s)
	}
	// Its age is counted to its end, not to the console's clock.
	if age := time.Duration(s.AgeMS) * time.Millisecond; age < time.Hour || age > time.Hour+time.Minute {
		t.Errorf("age = %s, want about 1h (its start to its end)", age)
	}
}
