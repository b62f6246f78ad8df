package soak

import (
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// ledger is a load that reconciles: a decision and a run, each answered
// and in the audit log once, as answered.
func ledger() ([]Record, []auditLine) {
	d := rec("decide", "read_in", 1, 1.1, decision("allow", "host_fs.inside_workspace", "sha256:base", ""))
	d.Reply.DecisionID, d.ToolUseID = "d1", "t1"
	r := rec("run", "hello", 2, 3, Frame{Type: "run_result", Reason: "exited", RunID: "r1", Stdout: "hello soak\n"})
	r.QueryID, r.ToolUseID = "q1", "t2"
	lines := []auditLine{
		{Record: audit.Record{Seq: 1, Kind: audit.KindDecision, Client: "soak-load-1", DecisionID: "d1", ToolUseID: "t1",
			Decision: "allow", Rule: "host_fs.inside_workspace", PolicyRevision: "sha256:base"}, file: "audit.jsonl"},
		{Record: audit.Record{Seq: 2, Kind: audit.KindRun, Client: "soak-load-1", QueryID: "q1", ToolUseID: "t2", RunID: "r1",
			Outcome: audit.OutcomeExited, PolicyRevision: "sha256:base"}, file: "audit.jsonl"},
	}
	return []Record{d, r}, lines
}

// TestReconcileChecksEachCountOnItsOwn feeds the accounting loads that
// must fail one check each, and only that check: the checks of the
// answers, the decisions' audit lines, the runs' audit lines and the
// orphans each have a count of their own.
func TestReconcileChecksEachCountOnItsOwn(t *testing.T) {
	t.Parallel()
	const (
		answers   = "every answer is the policy's"
		decisions = "every decision answered is in the audit log"
		runs      = "every run is in the audit log"
		orphans   = "no audit line of the load is unexplained"
	)
	timedOut := func(sent float64, reason string) Record {
		r := rec("decide", "read_in", sent, sent+0.1, decision("deny", "gatekeeper.error", "sha256:base", reason))
		r.Reply.DecisionID, r.ToolUseID = "d9", "t9"
		return r
	}
	// withheld is a run answered with an internal error and no audit line.
	withheld := func(sent float64, msg string) Record {
		r := rec("run", "hello", sent, sent+0.5, Frame{Type: "error", Code: "internal", Message: msg})
		r.QueryID, r.ToolUseID = "q9", "t9"
		return r
	}
	tests := []struct {
		name   string
		change func(recs []Record, lines []auditLine) ([]Record, []auditLine)
		failed []string // the checks that must fail; every other must pass
	}{
		{"a load that reconciles passes", func(r []Record, l []auditLine) ([]Record, []auditLine) { return r, l }, nil},
		{"a wrong answer fails the answers' check", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			r[0].Reply.Decision, l[0].Decision = "deny", "deny"
			return r, l
		}, []string{answers}},
		{"a decision the audit log records otherwise fails the decisions' check", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			l[0].Rule = "tools.deny_list"
			return r, l
		}, []string{decisions}},
		{"no decision matched fails the decisions' check", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			return r[1:], l[1:]
		}, []string{decisions}},
		{"a run the audit log records otherwise fails the runs' check", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			l[1].Outcome = audit.OutcomeTimedOut
			return r, l
		}, []string{runs}},
		{"no run audited fails the runs' check", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			return r[:1], l[:1]
		}, []string{runs}},
		{"an audit line no request explains fails the orphans' check", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			o := l[0]
			o.DecisionID, o.ToolUseID, o.Seq = "d2", "t-other", 3
			return r, append(l, o)
		}, []string{orphans}},
		{"a timed-out deny missing from the audit log fails the decisions' check", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			return append(r, timedOut(50, "gatekeeper could not decide this call (evaluate policy: eval_cancel_error: context deadline exceeded), so it is denied")), l
		}, []string{decisions}},
		{"a deny naming the audit log, without its line, while the disk is full passes", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			return append(r, timedOut(35, "gatekeeper could not write its audit log")), l
		}, nil},
		{"a deny naming the audit log, without its line, with the disk not full fails", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			return append(r, timedOut(50, "gatekeeper could not write its audit log")), l
		}, []string{answers, decisions}},
		{"a deny not naming the audit log, without its line, while the disk is full fails", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			return append(r, timedOut(35, "gatekeeper could not decide this call (context deadline exceeded)")), l
		}, []string{decisions}},
		{"a run withheld naming the audit log, without its line, while the disk is full passes", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			return append(r, withheld(35, "gatekeeper could not write its audit log")), l
		}, nil},
		{"a run withheld naming the audit log, without its line, with the disk not full fails", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			return append(r, withheld(50, "gatekeeper could not write its audit log")), l
		}, []string{answers, runs}},
		{"a run withheld not naming the audit log, without its line, while the disk is full fails", func(r []Record, l []auditLine) ([]Record, []auditLine) {
			return append(r, withheld(35, "the sandbox failed")), l
		}, []string{answers, runs}},
	}
	for _, tc := range tests {
		s := judged()
		s.rec = &Recorder{}
		a := s.reconcile(tc.change(ledger()))
		for _, what := range []string{answers, decisions, runs, orphans} {
			c, ok := checkNamed(s.checks, what)
			if !ok {
				t.Errorf("%s: no check %q among %d", tc.name, what, len(s.checks))
				continue
			}
			want := !contains(tc.failed, what)
			if c.OK != want {
				t.Errorf("%s: %q ok %v, want %v (%s)", tc.name, what, c.OK, want, c.Detail)
			}
		}
		if tc.failed == nil && a.Wrong != 0 {
			t.Errorf("%s: %d wrong, want 0", tc.name, a.Wrong)
		}
	}
}

func checkNamed(cs []Check, prefix string) (Check, bool) {
	for _, c := range cs {
		if strings.HasPrefix(c.What, prefix) {
			return c, true
		}
	}
	return Check{}, false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestPhasesFailAFaultWindowWithoutDecisions feeds each fault window but
// the kill too few decisions, or a stall: its flow check must fail.
func TestPhasesFailAFaultWindowWithoutDecisions(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Decisions every 50 ms from 0 to 100 s, except in [from, to).
	load := func(from, to float64) []Record {
		var recs []Record
		for ms := 0; ms < 100_000; ms += 50 {
			sec := float64(ms) / 1000
			if sec >= from && sec < to {
				continue
			}
			recs = append(recs, rec("decide", "bash", sec, sec+0.005, decision("deny", "tools.deny_list", "sha256:base", "")))
		}
		return recs
	}
	const flow = "decisions flowed"
	tests := []struct {
		name   string
		recs   []Record
		window string // whose flow check must fail; "" none
	}{
		{"decisions throughout pass", load(0, 0), ""},
		{"none during the disk-full window fails it", load(29, 43), wDiskFull},
		{"a 6 s stall in the disk-full window fails it", load(33, 39), wDiskFull},
		{"a 6 s stall in the engine restart fails it", load(12, 18), wEngineRestart},
		{"none while the sidecar is down checks nothing", load(59, 73), ""},
	}
	for _, tc := range tests {
		s := judged()
		s.cfg.LatencyFactor = 1000
		_, _ = s.phases(tc.recs, t0.Add(100*time.Second))
		var names []string
		for _, w := range s.windows {
			c, ok := checkOf(s.checks, w.Name, flow)
			if w.Name == wKill {
				if ok {
					t.Errorf("%s: the kill's window has a flow check: %+v", tc.name, c)
				}
				continue
			}
			names = append(names, w.Name)
			switch {
			case !ok:
				t.Errorf("%s: no flow check for %s", tc.name, w.Name)
			case c.OK != (w.Name != tc.window):
				t.Errorf("%s: %s: flow ok %v (%s)", tc.name, w.Name, c.OK, c.Detail)
			}
			if _, ok := checkOf(s.checks, w.Name, "the other sessions' p99"); !ok {
				t.Errorf("%s: no latency check for %s", tc.name, w.Name)
			}
		}
		if len(names) != 2 {
			t.Errorf("%s: flow checked for %v, want the engine restart and the disk full", tc.name, names)
		}
	}
}

func checkOf(cs []Check, fault, prefix string) (Check, bool) {
	for _, c := range cs {
		if c.Fault == fault && strings.HasPrefix(c.What, prefix) {
			return c, true
		}
	}
	return Check{}, false
}

func TestLongestStall(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s ...float64) []time.Time {
		var out []time.Time
		for _, x := range s {
			out = append(out, t0.Add(time.Duration(x*float64(time.Second))))
		}
		return out
	}
	tests := []struct {
		name  string
		times []time.Time
		want  time.Duration
	}{
		{"none: the whole span", nil, 10 * time.Second},
		{"a gap in the middle", at(1, 2, 7, 9), 5 * time.Second},
		{"from the start to the first", at(4, 5, 6, 7, 8, 9), 4 * time.Second},
		{"from the last to the end", at(0.5, 1, 2), 8 * time.Second},
		{"out of order, outside the span ignored", at(12, 6, -3, 3), 4 * time.Second},
	}
	for _, tc := range tests {
		if got := longestStall(tc.times, t0, t0.Add(10*time.Second)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
