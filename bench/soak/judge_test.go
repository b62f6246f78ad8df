package soak

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// judged is a soak whose run is over: its faults' windows and the
// revisions it served are known. The soak judges every record against
// them; these tests feed it records that must pass and records that must
// fail, so that its checks can fail.
func judged() *soak {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &soak{log: slog.New(slog.DiscardHandler), begin: t0, revisions: map[string]Variant{"sha256:base": Base, "sha256:strict": Strict}}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	s.windows = []Window{
		{Name: wEngineRestart, Start: at(10), End: at(20)},
		{Name: wDiskFull, Start: at(30), End: at(40)},
		{Name: wKill, Start: at(60), End: at(70)},
	}
	s.kill = killTimes{kill: at(62), up: at(66)}
	s.swaps = swapTimes{broken: at(80), strict: at(85), seen: at(86), restore: at(90), back: at(91), base: "sha256:base", stricter: "sha256:strict"}
	return s
}

func rec(kind, action string, sent, got float64, reply Frame) Record {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := Record{Session: 1, Kind: kind, Action: action, Sent: t0.Add(time.Duration(sent * float64(time.Second))), Reply: reply}
	if got > 0 {
		r.Got = t0.Add(time.Duration(got * float64(time.Second)))
		r.Ended = r.Got
	}
	return r
}

func decision(d, rule, rev, reason string) Frame {
	return Frame{Type: "decision", Decision: d, Rule: rule, PolicyRevision: rev, Reason: reason}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	s := judged()
	cut := func(sent, ended float64) Record {
		r := rec("run", "hello", sent, 0, Frame{})
		r.Cut, r.Err = true, "connection lost"
		r.Ended = r.Sent.Add(time.Duration((ended - sent) * float64(time.Second)))
		return r
	}
	hang := rec("decide", "bash", 1, 0, Frame{})
	hang.Hang, hang.Err = true, "no reply"
	tests := []struct {
		name      string
		r         Record
		wrong     string // a part of the verdict, "" for none
		failClose bool
	}{
		{"the policy's answer passes", rec("decide", "read_in", 1, 1.1, decision("allow", "host_fs.inside_workspace", "sha256:base", "")), "", false},
		{"Write allowed under the stricter revision is wrong", rec("decide", "write_in", 87, 87.1, decision("allow", "host_fs.inside_workspace", "sha256:strict", "")), "want deny by tools.not_allowlisted", false},
		{"Write denied under the base revision is wrong", rec("decide", "write_in", 1, 1.1, decision("deny", "tools.not_allowlisted", "sha256:base", "")), "want allow", false},
		{"a revision never served is wrong", rec("decide", "bash", 1, 1.1, decision("deny", "tools.deny_list", "sha256:other", "")), "never served", false},
		{"an audit-log deny while the disk is full fails closed", rec("decide", "read_in", 35, 35.1, decision("deny", "gatekeeper.error", "sha256:base", "gatekeeper could not write its audit log")), "", true},
		{"a decision past its timeout fails closed, counted", rec("decide", "read_in", 50, 51.2, decision("deny", "gatekeeper.error", "sha256:base", "gatekeeper could not decide this call (evaluate policy: eval_cancel_error: context deadline exceeded), so it is denied")), "", true},
		{"an audit-log deny with the disk not full is wrong", rec("decide", "read_in", 50, 50.1, decision("deny", "gatekeeper.error", "sha256:base", "gatekeeper could not write its audit log")), "want allow", false},
		{"a run refused while the engine restarts fails closed", rec("run", "hello", 12, 12.5, Frame{Type: "error", Code: "runner_unavailable", Message: "engine down"}), "", true},
		{"a run refused with the engine up is wrong", rec("run", "hello", 50, 50.5, Frame{Type: "error", Code: "runner_unavailable", Message: "engine down"}), "answered with error runner_unavailable", false},
		{"a connection cut by the kill fails closed", cut(61, 62.01), "", true},
		{"a request written to a connection the kill closed fails closed", cut(63, 63.01), "", true},
		{"a connection cut before the kill is lost", cut(50, 51), "lost", false},
		{"a connection cut after the restart is lost", cut(67, 68), "lost", false},
		{"a hang is wrong", hang, "hang", false},
		{"an override over the ceilings refused for memory passes", rec("open_query", "-2", 1, 1.1, Frame{Type: "error", Code: "policy_override_rejected", Violations: []string{"sandbox.proc.memory 8g exceeds ceiling 1g"}}), "", false},
		{"an override over the ceilings opened is wrong", rec("open_query", "-2", 1, 1.1, Frame{Type: "query_opened"}), "answered with query_opened", false},
	}
	for _, tc := range tests {
		v := s.judge(tc.r)
		switch {
		case tc.wrong == "" && v.wrong != "":
			t.Errorf("%s: judged wrong: %s", tc.name, v.wrong)
		case tc.wrong != "" && !strings.Contains(v.wrong, tc.wrong):
			t.Errorf("%s: verdict %+v, want wrong with %q", tc.name, v, tc.wrong)
		case tc.failClose != (v.failClosed != ""):
			t.Errorf("%s: fail-closed %q, want %v", tc.name, v.failClosed, tc.failClose)
		}
	}
}

func TestJudgeSwapFindsADecisionOfTheOldPolicyAfterTheNew(t *testing.T) {
	t.Parallel()
	d := func(sent float64, rev string) Record {
		return rec("decide", "bash", sent, sent+0.1, decision("deny", "tools.deny_list", rev, ""))
	}
	// One decision in each part of the swap: before the stricter policy
	// was written, under it once reported, once the base was back.
	good := []Record{d(82, "sha256:base"), d(87, "sha256:strict"), d(92, "sha256:base")}
	tests := []struct {
		name string
		recs []Record
		ok   bool
	}{
		{"each part's revision passes", good, true},
		{"the base revision once the stricter was reported fails", append(slices.Clone(good), d(87.5, "sha256:base")), false},
		{"the stricter revision before it was written fails", append(slices.Clone(good), d(84, "sha256:strict")), false},
		{"the stricter revision once the base was back fails", append(slices.Clone(good), d(92.5, "sha256:strict")), false},
		{"no decision under the stricter policy fails", []Record{good[0], good[2]}, false},
		{"no decision before the swap fails", []Record{good[1], good[2]}, false},
		{"no decision once the base was back fails", []Record{good[0], good[1]}, false},
		{"no decision at all fails", nil, false},
	}
	for _, tc := range tests {
		s := judged()
		s.judgeSwap(tc.recs)
		if len(s.checks) != 1 || s.checks[0].OK != tc.ok {
			t.Errorf("%s: checks %+v, want ok %v", tc.name, s.checks, tc.ok)
		}
	}
}

func TestJudgeSwapFailsWhenTheStricterPolicyWasNeverReported(t *testing.T) {
	t.Parallel()
	s := judged()
	s.swaps = swapTimes{}
	s.judgeSwap(nil)
	if len(s.checks) != 1 || s.checks[0].OK {
		t.Errorf("checks %+v, want one failed", s.checks)
	}
}

func TestARunIsJudgedUnderTheRevisionItsAuditLineNames(t *testing.T) {
	t.Parallel()
	s := judged()
	flood := func(n int) Record {
		return rec("run", "output_flood", 1, 2, Frame{Type: "run_result", Reason: "exited", Truncated: true, Stdout: strings.Repeat("x", n)})
	}
	tests := []struct {
		name string
		r    Record
		rev  string
		ok   bool
	}{
		{"a flood capped at 1 MiB under the base policy passes", flood(1 << 20), "sha256:base", true},
		{"a flood capped at 1 MiB under the stricter policy fails", flood(1 << 20), "sha256:strict", false},
		{"a flood capped at 256 KiB under the stricter policy passes", flood(256 << 10), "sha256:strict", true},
		{"a memory bomb that exited fails", rec("run", "memory_bomb", 1, 2, Frame{Type: "run_result", Reason: "exited", ExitCode: 1}), "sha256:base", false},
		{"a memory bomb OOM-killed passes", bomb("r_oom", "oom_killed"), "sha256:base", true},
		{"a memory bomb timed out starved of CPU, as the sidecar logged, passes", bomb("r_starved", "timed_out"), "sha256:base", true},
		{"a memory bomb timed out with CPU to spare fails", bomb("r_idle", "timed_out"), "sha256:base", false},
		{"a memory bomb timed out the sidecar did not log fails", bomb("r_unlogged", "timed_out"), "sha256:base", false},
		{"a memory bomb timed out whose run id is a prefix of a starved one fails", bomb("r_starv", "timed_out"), "sha256:base", false},
	}
	s.sidecarLog = `time=2026-01-01T00:00:10Z level=INFO msg="sandbox run timed out" run_id=r_starved query_id=q1 cpu_wait=9.6s memory_stall=12ms span=10s memory_bytes=250000000 limit_bytes=268435456 cpu_starved=true
time=2026-01-01T00:00:20Z level=INFO msg="sandbox run timed out" run_id=r_idle query_id=q1 cpu_wait=1s memory_stall=0s span=10s memory_bytes=250000000 limit_bytes=268435456 cpu_starved=false
`
	for _, tc := range tests {
		var wrong []string
		s.judgeRun(tc.r, auditLine{}.withRevision(tc.rev), func(f string, a ...any) { wrong = append(wrong, f) })
		if (len(wrong) == 0) != tc.ok {
			t.Errorf("%s: wrong %v, want ok %v", tc.name, wrong, tc.ok)
		}
	}
}

// bomb is a memory bomb's result: OOM-killed, or timed out.
func bomb(runID, reason string) Record {
	return rec("run", "memory_bomb", 45, 55, Frame{Type: "run_result", RunID: runID, Reason: reason, ExitCode: 137, OOMKilled: reason == "oom_killed", TimedOut: reason == "timed_out"})
}

func (l auditLine) withRevision(rev string) auditLine {
	l.PolicyRevision = rev
	return l
}
