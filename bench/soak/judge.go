package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// decisionTimedOut is the fail-closed outcome of a decision whose
// evaluation ran past --decision-timeout (1 s): on a machine starved of
// CPU, now and then. account bounds how often.
const decisionTimedOut = "denied: its evaluation ran past the decision timeout"

// maxTimeoutRate bounds decisionTimedOut: at most one decision in this
// many.
const maxTimeoutRate = 10000

// Fault window names that allow outcomes other than the policy's.
const (
	wEngineRestart = "engine restart"
	wEngineFrozen  = "engine frozen"
	wDiskFull      = "audit disk full"
	wKill          = "sidecar SIGKILL"
)

// overlaps lists the windows whose time overlaps the request's, each
// stretched 2 s past its end (a fault's effects settle).
func (s *soak) overlaps(from, to time.Time) []string {
	var names []string
	for _, w := range s.windows {
		if !from.After(w.End.Add(2*time.Second)) && !to.Before(w.Start) {
			names = append(names, w.Name)
		}
	}
	return names
}

func end(r Record) time.Time {
	if r.Ended.IsZero() {
		return r.Sent
	}
	return r.Ended
}

// verdict judges one record: "" when it is the policy's answer, a
// fail-closed reason when a fault in force allowed a refusal instead, or
// a violation (prefixed "wrong: ") otherwise.
type verdict struct {
	failClosed string
	wrong      string
}

// variantOf is the variant of a revision; ok false for one the soak never
// served.
func (s *soak) variantOf(rev string) (Variant, bool) {
	v, ok := s.revisions[rev]
	return v, ok
}

// judge judges a replied or cut record; runs are judged again against
// the audit log by account.
func (s *soak) judge(r Record) verdict {
	in := s.overlaps(r.Sent, end(r))
	has := func(n string) bool { return slices.Contains(in, n) }
	engine := has(wEngineRestart) || has(wEngineFrozen)
	switch {
	case r.Stopped:
		return verdict{failClosed: "in flight when the load stopped"}
	case r.Hang:
		return verdict{wrong: "no reply within its bound (a hang): " + r.Err}
	case r.Cut:
		// Cut by the kill: sent before the new sidecar was up (a client
		// learns of the death only when it writes or reads), seen after
		// the kill.
		if !s.kill.kill.IsZero() && r.Sent.Before(s.kill.up) && !end(r).Before(s.kill.kill) {
			return verdict{failClosed: "in flight when the sidecar was killed"}
		}
		return verdict{wrong: "lost: " + r.Err}
	case r.Err != "":
		return verdict{wrong: r.Err}
	}
	f := r.Reply
	auditFull := func() bool { return s.auditFull(r) }
	switch r.Kind {
	case "decide":
		if f.Type != "decision" {
			return verdict{wrong: fmt.Sprintf("decide answered with %s %s: %s", f.Type, f.Code, f.Message)}
		}
		v, ok := s.variantOf(f.PolicyRevision)
		if !ok {
			return verdict{wrong: "a decision names a revision never served: " + f.PolicyRevision}
		}
		want := s.want(r.Action, v)
		if f.Decision == want.Decision && f.Rule == want.Rule {
			return verdict{}
		}
		if f.Decision == "deny" && f.Rule == "gatekeeper.error" && auditFull() {
			return verdict{failClosed: "denied: the audit log's disk was full"}
		}
		if f.Decision == "deny" && f.Rule == "gatekeeper.error" && strings.Contains(f.Reason, "context deadline exceeded") {
			return verdict{failClosed: decisionTimedOut} // counted and bounded by account
		}
		return verdict{wrong: fmt.Sprintf("%s under %s: %s by %s, want %s by %s (%s)", r.Action, v, f.Decision, f.Rule, want.Decision, want.Rule, f.Reason)}
	case "open_query":
		want := "query_opened"
		if r.Action == "-2" {
			want = "policy_override_rejected"
		}
		got := f.Type
		if f.Type == "error" {
			got = f.Code
		}
		switch {
		case got == want && (want != "policy_override_rejected" || len(f.Violations) > 0 && strings.Contains(f.Violations[0], "memory")):
			return verdict{}
		case f.Code == "internal" && auditFull():
			return verdict{failClosed: "no query opened: the audit log's disk was full"}
		}
		return verdict{wrong: fmt.Sprintf("open_query %s answered with %s: %s %v", r.Action, got, f.Message, f.Violations)}
	case "close_query":
		if f.Type == "query_closed" {
			return verdict{}
		}
		return verdict{wrong: fmt.Sprintf("close_query answered with %s %s: %s", f.Type, f.Code, f.Message)}
	case "run":
		switch {
		case f.Type == "run_result":
			return verdict{} // judged against its audit line (judgeRun), which names its revision
		case f.Type == "error" && engine && (f.Code == "runner_unavailable" || f.Code == "internal") && f.Message != "":
			return verdict{failClosed: "run refused: the engine was down (" + f.Code + ")"}
		case f.Type == "error" && f.Code == "internal" && auditFull():
			return verdict{failClosed: "run result withheld: the audit log's disk was full"}
		}
		return verdict{wrong: fmt.Sprintf("run %s answered with %s %s: %s", r.Action, f.Type, f.Code, f.Message)}
	}
	return verdict{wrong: "unknown kind " + r.Kind}
}

// auditFull reports whether r's reply was a refusal the audit log's full
// disk explains: its text names the audit log, and the disk-full window
// overlaps r.
func (s *soak) auditFull(r Record) bool {
	return slices.Contains(s.overlaps(r.Sent, end(r)), wDiskFull) && strings.Contains(r.Reply.Message+r.Reply.Reason, "audit log")
}

// want is the expected decision of an action under variant v.
func (s *soak) want(action string, v Variant) Want {
	if strings.HasPrefix(action, "run_") {
		return Want{"allow", "tools.allow_list"}
	}
	if a := actionByName(action); a != nil {
		return a.Want[v]
	}
	return Want{"?", "unknown action " + action}
}

// runKind finds a run kind by name.
func runKind(name string) *RunKind {
	for i := range Runs {
		if Runs[i].Name == name {
			return &Runs[i]
		}
	}
	return nil
}

// account matches the load's records with the audit log and counts
// everything.
func (s *soak) account(ctx context.Context, recs []Record) Accounting {
	lines, files, err := readAudit(s.auditDir + "/audit.jsonl")
	if err != nil {
		s.check("accounting", "the audit set reads", false, "%v", err)
	}
	s.sidecarLog = s.sidecar.Logs()
	a := s.reconcile(recs, lines)
	a.AuditFiles = len(files)
	if a.Verify, err = s.verifyAudit(ctx); err != nil {
		s.check("accounting", "gatekeeper audit verify --head passes over the whole rotated set", false, "%v: %s", err, a.Verify)
	} else {
		s.check("accounting", "gatekeeper audit verify --head passes over the whole rotated set", true, "%s", a.Verify)
	}
	return a
}

// reconcile judges the load's records, matches them with the audit
// log's lines and checks the accounting, each check on its own count.
func (s *soak) reconcile(recs []Record, lines []auditLine) Accounting {
	a := Accounting{FailClosed: map[string]int{}}
	a.Unsolicited = s.rec.unsolicited.Load()
	a.UnsolicitedSamples = s.rec.unsolicitedSamples()
	a.Late = s.rec.late.Load()
	a.DialFails = s.rec.dialFailures.Load()
	// Each check counts its own violations.
	var answers, decided, ran, orphans violations
	for _, r := range recs {
		a.Requests++
		v := s.judge(r)
		switch {
		case v.wrong != "":
			if r.Cut && !r.Hang {
				a.Lost++
			}
			if r.Hang {
				a.Hangs++
			}
			answers.add("session %d %s %s at +%s: %s", r.Session, r.Kind, r.Action, r.Sent.Sub(s.begin).Round(time.Millisecond), v.wrong)
		case r.Stopped:
			a.Stopped++
		case r.Cut:
			a.CutByKill++
			a.FailClosed[v.failClosed]++
		default:
			a.Answered++
			if v.failClosed != "" {
				a.FailClosed[v.failClosed]++
			}
		}
	}

	nDecided := 0
	for _, r := range recs {
		if r.Kind == "decide" && r.Reply.Type == "decision" {
			nDecided++
		}
	}
	timeouts := a.FailClosed[decisionTimedOut]
	s.check("accounting", fmt.Sprintf("decisions that ran past the decision timeout (and were denied) are rare: at most 1 in %d", maxTimeoutRate),
		timeouts*maxTimeoutRate <= nDecided, "%d of %d decisions", timeouts, nDecided)

	a.AuditLines = len(lines)
	decisions := map[string][]auditLine{}
	runs := map[string][]auditLine{}
	load := func(client string) bool { return strings.HasPrefix(client, "soak-load-") || client == "soak-probe" }
	for _, l := range lines {
		switch {
		case l.Kind == "rotate":
			a.Rotations++
		case l.Kind == "decision" && load(l.Client):
			decisions[l.DecisionID] = append(decisions[l.DecisionID], l)
		case l.Kind == "run" && load(l.Client):
			runs[l.QueryID+" "+l.ToolUseID] = append(runs[l.QueryID+" "+l.ToolUseID], l)
		}
	}
	explained := map[string]bool{} // tool_use_ids of decides sent
	for _, r := range recs {
		if r.Kind == "decide" {
			explained[r.ToolUseID] = true
		}
	}
	for _, r := range recs {
		f := r.Reply
		switch {
		case r.Kind == "decide" && f.Type == "decision":
			got := decisions[f.DecisionID]
			switch {
			case f.Rule == "gatekeeper.error" && len(got) == 0 && s.auditFull(r):
				a.DecisionsUnaudited++ // denied because its line could not be written
			case len(got) != 1:
				decided.add("decision %s (%s, %s by %s: %s) is in the audit log %d times", f.DecisionID, r.Action, f.Decision, f.Rule, f.Reason, len(got))
			case got[0].Decision != f.Decision || got[0].Rule != f.Rule || got[0].PolicyRevision != f.PolicyRevision || got[0].ToolUseID != r.ToolUseID:
				decided.add("decision %s: the audit log says %s by %s under %s, the client got %s by %s under %s",
					f.DecisionID, got[0].Decision, got[0].Rule, short(got[0].PolicyRevision), f.Decision, f.Rule, short(f.PolicyRevision))
			default:
				a.DecisionsMatch++
			}
		case r.Kind == "run":
			got := runs[r.QueryID+" "+r.ToolUseID]
			switch {
			case r.Cut || r.Stopped || f.Type == "error" && s.auditFull(r):
				// Cut, stopped, or withheld because its line could not be
				// written (naming the audit log, while the disk was full):
				// a line at most.
				if len(got) > 1 {
					ran.add("run %s is in the audit log %d times", r.ToolUseID, len(got))
				}
				if len(got) == 0 {
					a.RunsUnaudited++
				} else {
					a.RunsAudited++
				}
			case len(got) != 1:
				ran.add("run %s (%s, answered %s %s) is in the audit log %d times", r.ToolUseID, r.Action, f.Type, f.Code, len(got))
			case f.Type == "run_result" && (string(got[0].Outcome) != f.Reason || got[0].RunID != f.RunID):
				ran.add("run %s: the audit log says %s (%s), the client got %s (%s)", r.ToolUseID, got[0].Outcome, got[0].RunID, f.Reason, f.RunID)
			case f.Type == "error" && got[0].Outcome != "error" && got[0].Decision != "deny":
				ran.add("run %s: answered with error %s, but the audit log says %s", r.ToolUseID, f.Code, got[0].Outcome)
			default:
				a.RunsAudited++
				if why := s.judgeRun(r, got[0], ran.add); why != "" {
					a.FailClosed[why]++
				}
			}
		}
	}
	for id, ls := range decisions {
		for _, l := range ls {
			if !explained[l.ToolUseID] {
				orphans.add("audit line %s:%d (decision %s, tool_use_id %s) answers no request", l.file, l.Seq, id, l.ToolUseID)
			}
		}
	}
	asked := map[string]bool{}
	for _, r := range recs {
		if r.Kind == "run" {
			asked[r.QueryID+" "+r.ToolUseID] = true
		}
	}
	for k, ls := range runs {
		if !asked[k] {
			for _, l := range ls {
				orphans.add("audit run line %s:%d (%s) answers no run request", l.file, l.Seq, k)
			}
		}
	}
	s.check("accounting", "the log rotated several times (at least 3)", a.Rotations >= 3, "%d rotations, %d lines", a.Rotations, a.AuditLines)
	s.check("accounting", "every request answered exactly once, or cut by the sidecar's kill", a.Lost == 0 && a.Hangs == 0 && a.Unsolicited == 0,
		"%d requests: %d answered, %d cut by the kill, %d in flight when the load stopped (%d of their replies came after), %d lost, %d hangs, %d unsolicited replies%s",
		a.Requests, a.Answered, a.CutByKill, a.Stopped, a.Late, a.Lost, a.Hangs, a.Unsolicited, samples(a.UnsolicitedSamples))
	a.WrongAnswers, a.DecisionMismatches, a.RunMismatches, a.AuditOrphans = answers.n, decided.n, ran.n, orphans.n
	a.Wrong = answers.n + decided.n + ran.n + orphans.n
	s.check("accounting", "every answer is the policy's, or a refusal a fault in force explains", answers.n == 0, "%d wrong%s", answers.n, answers)
	s.check("accounting", "every decision answered is in the audit log once, as answered (but those denied because the log's disk was full)",
		decided.n == 0 && a.DecisionsMatch > 0, "%d matched, %d denied without a line while the disk was full, %d not matched%s",
		a.DecisionsMatch, a.DecisionsUnaudited, decided.n, decided)
	s.check("accounting", "every run is in the audit log with its outcome (or was cut, or withheld when the log could not be written)",
		ran.n == 0 && a.RunsAudited > 0, "%d audited, %d without a line (%v), %d not matched%s", a.RunsAudited, a.RunsUnaudited, a.FailClosed, ran.n, ran)
	s.check("accounting", "no audit line of the load is unexplained", orphans.n == 0, "%d orphans%s", orphans.n, orphans)
	return a
}

// bombStarved is the outcome a memory bomb may have instead of its own:
// timed out, starved of CPU before it reached its limit, as the sidecar's
// log says (docs/SANDBOX.md, "At the memory limit").
const bombStarved = "memory bomb timed out starved of CPU (the sidecar's log says so)"

// judgeRun checks a run's result against its kind under the variant its
// audit line names. It returns why a result other than the kind's is
// excused ("" when none is).
func (s *soak) judgeRun(r Record, l auditLine, addWrong func(string, ...any)) string {
	k := runKind(r.Action)
	if k == nil || r.Reply.Type != "run_result" {
		return ""
	}
	engine := slices.ContainsFunc(s.overlaps(r.Sent, end(r)), func(n string) bool { return n == wEngineRestart || n == wEngineFrozen })
	if engine {
		return "" // any end is fine while the engine is down; it ended
	}
	v, ok := s.variantOf(l.PolicyRevision)
	if !ok {
		addWrong("run %s names a revision never served: %s", r.ToolUseID, l.PolicyRevision)
		return ""
	}
	msg := k.Check(r.Reply, v)
	switch {
	case msg == "":
		return ""
	case k.Name == "memory_bomb" && r.Reply.Reason == "timed_out" && r.Reply.ExitCode == 137 && s.starved(r.Reply.RunID):
		return bombStarved
	}
	addWrong("run %s (%s) under %s: %s", r.ToolUseID, k.Name, v, msg)
	return ""
}

// starved reports whether the sidecar logged that run id's timeout as
// starved of CPU: it waited for a CPU half its time or more.
func (s *soak) starved(runID string) bool {
	if runID == "" {
		return false
	}
	for line := range strings.Lines(s.sidecarLog) {
		if strings.Contains(line, `msg="sandbox run timed out"`) && strings.Contains(line, " run_id="+runID+" ") && strings.Contains(line, " cpu_starved=true") {
			return true
		}
	}
	return false
}

// judgeSwap checks the policy swap's ordering: decisions sent before the
// stricter policy was written carry the base revision, those sent once
// /healthz reported the stricter one (until it was replaced) carry it, and
// those sent once the base was back carry the base.
func (s *soak) judgeSwap(recs []Record) {
	t := s.swaps
	if t.seen.IsZero() {
		s.check(wPolicy, "the stricter policy decides every decision sent after it was reported, and the base every one before and after (at least one decision in each)",
			false, "the stricter policy was never reported")
		return
	}
	var bad []string
	var n [3]int // before the stricter policy, under it, once the base was back
	for _, r := range recs {
		if r.Kind != "decide" || r.Reply.Type != "decision" {
			continue
		}
		var want string
		var part int
		switch {
		case r.Sent.After(t.broken.Add(-5*time.Second)) && r.Sent.Before(t.strict):
			want, part = t.base, 0
		case r.Sent.After(t.seen) && r.Sent.Before(t.restore):
			want, part = t.stricter, 1
		case r.Sent.After(t.back) && r.Sent.Before(t.back.Add(5*time.Second)):
			want, part = t.base, 2
		default:
			continue
		}
		n[part]++
		if r.Reply.PolicyRevision != want && len(bad) < 5 {
			bad = append(bad, fmt.Sprintf("%s sent at +%s carries %s, want %s", r.Action, r.Sent.Sub(s.begin).Round(time.Millisecond), short(r.Reply.PolicyRevision), short(want)))
		}
	}
	s.check(wPolicy, "the stricter policy decides every decision sent after it was reported, and the base every one before and after (at least one decision in each)",
		len(bad) == 0 && slices.Min(n[:]) > 0,
		"%d decisions before the stricter policy was written, %d under it, %d once the base was back; %v", n[0], n[1], n[2], bad)
}

const wPolicy = "policy swap"

// judgeSDK judges the SDK sessions' calls: outside the faults each is
// the policy's; during a fault a refusal the fault explains is fine.
func (s *soak) judgeSDK(res []SDKResult) (calls, ok, failClosed, wrongN int) {
	var wrong, errs []string
	explained := 0
	for _, r := range res {
		if r.Err != "" {
			errs = append(errs, r.Err)
		}
		for _, e := range r.Errors {
			// A query the sidecar could not open (down, or its audit log
			// full) fails closed: it ends with an error before any call.
			in := s.overlaps(time.UnixMilli(e.From), time.UnixMilli(e.To))
			if slices.Contains(in, wKill) || slices.Contains(in, wDiskFull) {
				explained++
				continue
			}
			errs = append(errs, e.Text)
		}
		for _, c := range r.Calls {
			calls++
			from, to := time.UnixMilli(c.Emitted), time.UnixMilli(c.Resulted)
			if c.Resulted == 0 {
				to = from
			}
			in := s.overlaps(from, to)
			// The faults that may turn a call into a refusal: any call
			// while the sidecar is down or its audit log full; a run
			// while the engine is down.
			engineDown := slices.Contains(in, wEngineRestart) || slices.Contains(in, wEngineFrozen)
			fault := slices.Contains(in, wKill) || slices.Contains(in, wDiskFull) || c.Kind == "run_hello" && engineDown
			tag := wire.RuleTag(c.Rule)
			if c.Rule == "client: Bash left out" {
				tag = "No such tool available: Bash"
			}
			switch {
			case !c.Got:
				if !fault {
					wrongN++
					wrong = append(wrong, fmt.Sprintf("%s: no tool_result", c.ID))
				} else {
					failClosed++
				}
			case c.Rule != "" && c.IsError && strings.Contains(c.Text, tag):
				ok++
			case c.Rule == "" && !c.IsError && (c.Kind != "run_hello" || strings.Contains(c.Text, "hello sdk")):
				ok++
			case c.Kind == "run_hello" && !c.IsError && engineDown:
				failClosed++ // a result, not the usual one: the engine stopped or froze under it
			case c.IsError && fault:
				failClosed++ // denied or refused while a fault was in force
			default:
				wrongN++
				if len(wrong) < 8 {
					wrong = append(wrong, fmt.Sprintf("%s (%s) at +%s: is_error %v: %.200s", c.ID, c.Kind, from.Sub(s.begin).Round(time.Millisecond), c.IsError, c.Text))
				}
			}
		}
	}
	if s.cfg.SDKSessions > 0 {
		s.check("SDK sessions", "every Agent SDK tool call got the policy's answer, or a refusal while a fault was in force", wrongN == 0 && calls > 0,
			"%d calls: %d as the policy says, %d refused during a fault, %d wrong: %v", calls, ok, failClosed, wrongN, wrong)
		s.check("SDK sessions", "the SDK sessions' queries ended without errors, but those refused while the sidecar was down or its audit log full", len(errs) == 0,
			"%d refused during those faults; other errors: %v", explained, errs)
	}
	return
}

// violations are one check's failures: how many, and the first few to
// say which.
type violations struct {
	n     int
	first []string
}

func (v *violations) add(format string, args ...any) {
	v.n++
	if len(v.first) < 12 {
		v.first = append(v.first, fmt.Sprintf(format, args...))
	}
}

// String lists the first few, for a check's detail.
func (v violations) String() string { return samples(v.first) }

// samples says which replies were unsolicited, for a check's detail.
func samples(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return ": " + strings.Join(s, "; ")
}
