package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/bench"
)

// Phase is the other sessions' decision latency in one stretch of the run.
type Phase struct {
	Name    string        `json:"name"`
	Seconds float64       `json:"seconds"`
	Latency bench.Summary `json:"latency"`
	// PerSec is decisions answered per second in the phase.
	PerSec float64 `json:"per_sec"`
	// Ratio is the phase's p99 over the quiet p99; Bound the most it may be
	// (0: not bounded, with the reason in Note).
	Ratio float64 `json:"p99_ratio"`
	Bound float64 `json:"bound"`
	OK    bool    `json:"ok"`
	Note  string  `json:"note,omitempty"`
}

// Results is one soak run.
type Results struct {
	Generated   string         `json:"generated"`
	Profile     string         `json:"profile"`
	Machine     string         `json:"machine"`
	Seconds     float64        `json:"seconds"`
	Sessions    int            `json:"sessions"`
	Runners     int            `json:"runners"`
	SDKSessions int            `json:"sdk_sessions"`
	Decisions   int            `json:"decisions"`
	Runs        int            `json:"runs"`
	RunOutcomes map[string]int `json:"run_outcomes"`
	Phases      []Phase        `json:"phases"`
	Bad         []BadResult    `json:"misbehaving_clients"`
	Accounting  Accounting     `json:"accounting"`
	Resources   []Resources    `json:"resources"`
	Checks      []Check        `json:"checks"`
	Notes       []string       `json:"notes,omitempty"`
	Windows     []Window       `json:"windows"`
	Timeline    []Sample       `json:"-"` // drawn in timeline.svg
	begin       time.Time
	samples     []Record
	byPhase     map[string][]time.Duration // decision latencies, by phase name
}

// Failed lists the checks that failed.
func (r *Results) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c.Fault+": "+c.What+" — "+c.Detail)
		}
	}
	return out
}

// finish compares the idle sidecar with the baseline once more, stops it,
// checks what it left, and accounts for every request.
func (s *soak) finish(ctx context.Context, end time.Time) (*Results, error) {
	if after, err := s.idle(ctx, "end"); err != nil {
		s.check("end", "the sidecar answers at the end", false, "%v", err)
	} else {
		s.leaks = append(s.leaks, s.compare(ctx, fEndLeak, after))
	}
	err := s.sidecar.Stop()
	s.check("end", "the sidecar stops cleanly on SIGTERM", err == nil, "%v", err)
	left, lerr := s.engine.Leftovers(ctx, instance)
	all, aerr := s.engine.AllContainers(ctx)
	s.check("end", "nothing is left in the engine: no container, network or firewall rule", lerr == nil && aerr == nil && left.Total() == 0 && all == 0,
		"%d containers in the engine, %d networks and %d firewall rules of the instance (%v %v)", all, len(left.Networks), left.Rules, lerr, aerr)

	recs := s.rec.Records()
	acc := s.account(ctx, recs)
	s.judgeSwap(recs)
	acc.SDKCalls, acc.SDKOK, acc.SDKFailClosed, acc.SDKWrong = s.judgeSDK(s.sdkResults)

	res := &Results{
		Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Profile: s.cfg.Profile, Machine: machine(),
		Seconds: end.Sub(s.begin).Seconds(), Sessions: s.cfg.Sessions, Runners: max(2, s.cfg.Sessions/3), SDKSessions: s.cfg.SDKSessions,
		RunOutcomes: map[string]int{}, Accounting: acc, Resources: s.leaks, Bad: s.bad, Windows: s.windows, Timeline: s.samples,
		begin: s.begin, samples: recs,
	}
	for _, r := range recs {
		switch {
		case r.Kind == "decide" && r.Reply.Type == "decision":
			res.Decisions++
		case r.Kind == "run" && r.Reply.Type == "run_result":
			res.Runs++
			res.RunOutcomes[r.Reply.Reason]++
		case r.Kind == "run" && r.Reply.Type == "error":
			res.RunOutcomes["error: "+r.Reply.Code]++
		}
	}
	res.Phases, res.byPhase = s.phases(recs, end)
	s.checkCount()
	res.Checks, res.Notes = s.checks, s.notes
	return res, nil
}

// Bounds on the decisions of a fault's window (the kill's excepted): at
// least minWindowDecisions answered to the load sessions (enough for a
// p99), at least a quarter of the quiet rate, and no stretch longer than
// maxStall with none answered. A stall shorter than the 30 s hang bound
// would otherwise pass every other check.
const (
	minWindowDecisions = 20
	maxStall           = 5 * time.Second
)

// phases computes the load sessions' decision latency in the quiet
// stretches and in each fault's window, and checks, for each fault but
// the sidecar's kill, that decisions flowed through it and that its p99
// stayed within the bound of the quiet p99.
func (s *soak) phases(recs []Record, end time.Time) ([]Phase, map[string][]time.Duration) {
	var quiet []time.Duration
	var quietSpan time.Duration
	in := map[string][]time.Duration{}
	answered := map[string][]time.Time{}
	for _, r := range recs {
		if r.Kind != "decide" || r.Session < 1 || r.Reply.Type != "decision" {
			continue
		}
		ws := s.overlaps(r.Sent, r.Got)
		if len(ws) == 0 {
			quiet = append(quiet, r.Latency())
		}
		for _, w := range ws {
			in[w] = append(in[w], r.Latency())
			answered[w] = append(answered[w], r.Got)
		}
	}
	// The quiet span: the load's time outside every window (and its 2 s
	// of settling).
	quietSpan = end.Sub(s.begin)
	for _, w := range s.windows {
		quietSpan -= w.End.Add(2 * time.Second).Sub(w.Start)
	}
	q := Phase{Name: "quiet (no fault in force)", Seconds: quietSpan.Seconds(), Latency: bench.Summarize(quiet), OK: true, Ratio: 1}
	q.PerSec = float64(q.Latency.N) / max(1, q.Seconds)
	out := []Phase{q}
	for _, w := range s.windows {
		p := Phase{Name: w.Name, Seconds: w.End.Sub(w.Start).Seconds(), Latency: bench.Summarize(in[w.Name]), Bound: s.cfg.LatencyFactor}
		p.PerSec = float64(p.Latency.N) / max(1, p.Seconds+2)
		p.Ratio = bench.Ratio(p.Latency.P99, q.Latency.P99)
		if w.Name == wKill {
			p.Bound, p.OK, p.Note = 0, true, "the sidecar is down for 3 s: the sessions reconnect; not bounded"
			out = append(out, p)
			continue
		}
		stall := longestStall(answered[w.Name], w.Start, w.End.Add(2*time.Second))
		s.check(w.Name, fmt.Sprintf("decisions flowed: at least %d, at least a quarter of the quiet rate, none unanswered for more than %s", minWindowDecisions, maxStall),
			p.Latency.N >= minWindowDecisions && p.PerSec >= q.PerSec/4 && stall <= maxStall,
			"%d decisions, %.0f/s during, %.0f/s quiet; the longest stretch without an answer %s", p.Latency.N, p.PerSec, q.PerSec, stall.Round(time.Millisecond))
		if p.Latency.N < minWindowDecisions {
			p.OK, p.Note = false, fmt.Sprintf("only %d decisions: too few for a p99", p.Latency.N)
			s.check(w.Name, fmt.Sprintf("the other sessions' p99 decision latency ≤ %g× the quiet p99", p.Bound), false, "%s", p.Note)
		} else {
			p.OK = p.Ratio <= p.Bound
			s.check(w.Name, fmt.Sprintf("the other sessions' p99 decision latency ≤ %g× the quiet p99", p.Bound), p.OK,
				"p99 %.2f ms vs quiet %.2f ms (%.1f×), %d decisions", p.Latency.P99, q.Latency.P99, p.Ratio, p.Latency.N)
		}
		out = append(out, p)
	}
	in[q.Name] = quiet
	return out, in
}

// longestStall is the longest stretch of [from, to] in which none of the
// answers at times came (the whole span when none did).
func longestStall(times []time.Time, from, to time.Time) time.Duration {
	ts := slices.Clone(times)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	longest, last := time.Duration(0), from
	for _, t := range ts {
		if t.Before(from) {
			continue
		}
		if t.After(to) {
			break
		}
		longest, last = max(longest, t.Sub(last)), t
	}
	return max(longest, to.Sub(last))
}

// machine describes the machine the run was on.
func machine() string {
	load, _ := os.ReadFile("/proc/loadavg")
	l := strings.Fields(string(load))
	avg := ""
	if len(l) >= 3 {
		avg = fmt.Sprintf(", load average %s %s %s at the end", l[0], l[1], l[2])
	}
	return fmt.Sprintf("%d cores%s", runtime.NumCPU(), avg)
}

// Markers of the generated section of RELIABILITY.md.
const (
	MarkBegin = "<!-- soak:results:begin (generated by make soak; do not edit) -->"
	MarkEnd   = "<!-- soak:results:end -->"
)

// writeReport writes results.json and the chart under Out, and the
// results section of Report.
func (s *soak) writeReport(res *Results) error {
	if s.cfg.Out == "" {
		return nil
	}
	if err := os.MkdirAll(s.cfg.Out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.cfg.Out, "results.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.cfg.Out, "timeline.svg"), res.Chart(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.cfg.Out, "latency.svg"), res.LatencyChart(), 0o644); err != nil {
		return err
	}
	if s.cfg.Report == "" {
		return nil
	}
	doc, err := os.ReadFile(s.cfg.Report)
	if err != nil {
		return err
	}
	out, err := bench.SpliceBetween(doc, MarkBegin, MarkEnd, res.Markdown())
	if err != nil {
		return fmt.Errorf("%s: %w", s.cfg.Report, err)
	}
	return os.WriteFile(s.cfg.Report, out, 0o644)
}

// Markdown is the generated section of RELIABILITY.md.
func (r *Results) Markdown() string {
	var b strings.Builder
	a := r.Accounting
	passed := len(r.Checks) - len(r.Failed())
	fmt.Fprintf(&b, "Run of %s, profile `%s`, on %s.\n\n", r.Generated, r.Profile, r.Machine)
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| load held | %d raw protocol sessions (%d of them asking for sandboxed runs) and %d Agent SDK sessions for %s |\n",
		r.Sessions, r.Runners, r.SDKSessions, (time.Duration(r.Seconds) * time.Second).String())
	fmt.Fprintf(&b, "| decisions | %d answered to the load sessions (%.0f/s over the run) |\n", r.Decisions, float64(r.Decisions)/max(1, r.Seconds))
	fmt.Fprintf(&b, "| sandboxed runs | %d results (%.2f/s): %s |\n", r.Runs, float64(r.Runs)/max(1, r.Seconds), outcomes(r.RunOutcomes))
	for _, p := range r.Phases {
		if p.Name == r.Phases[0].Name {
			fmt.Fprintf(&b, "| decision latency, quiet | p50 %.2f ms, p99 %.2f ms (%d decisions) |\n", p.Latency.P50, p.Latency.P99, p.Latency.N)
		}
	}
	faults, survived := r.faults()
	fmt.Fprintf(&b, "| faults survived | %d of %d (every check of the fault passed): the engine restarted, the engine frozen 8 s, the audit log's disk full, the policy swapped, six misbehaving clients, the sidecar SIGKILLed |\n", survived, faults)
	fmt.Fprintf(&b, "| bad inputs tried | %s |\n", r.badInputs())
	fmt.Fprintf(&b, "| lost | %d requests lost, %d hangs, %d unsolicited replies, %d wrong answers, %d unexplained audit lines |\n",
		a.Lost, a.Hangs, a.Unsolicited, a.Wrong, a.AuditOrphans)
	fmt.Fprintf(&b, "| answered exactly once | %d of %d requests; %d cut by the sidecar's SIGKILL (the client failed closed) |\n", a.Answered, a.Requests, a.CutByKill)
	fmt.Fprintf(&b, "| failed closed (a refusal where the policy would have answered, each explained) | %s |\n", outcomes(a.FailClosed))
	fmt.Fprintf(&b, "| audit log | %d lines in %d files (%d rotations), every decision answered found once (%d), %d runs with their outcome; `audit verify --head`: %s |\n",
		a.AuditLines, a.AuditFiles, a.Rotations, a.DecisionsMatch, a.RunsAudited, firstLine(a.Verify))
	if r.SDKSessions > 0 {
		fmt.Fprintf(&b, "| Agent SDK tool calls | %d: %d as the policy says, %d refused while a fault was in force, %d wrong |\n", a.SDKCalls, a.SDKOK, a.SDKFailClosed, a.SDKWrong)
	}
	for _, l := range r.Resources {
		fmt.Fprintf(&b, "| resources, %s | goroutines %.0f → %.0f, fds %.0f → %.0f, live heap %.1f → %.1f MiB, RSS %d → %d MiB; %d containers (%d warm), %d networks, %d firewall rules |\n",
			l.Name, l.GoroutinesBefore, l.GoroutinesAfter, l.FDsBefore, l.FDsAfter, l.HeapBefore/(1<<20), l.HeapAfter/(1<<20), l.RSSBefore>>20, l.RSSAfter>>20,
			l.Containers, l.Warm, l.Networks, l.Rules)
	}
	fmt.Fprintf(&b, "| checks | %d of %d passed (%s) |\n\n", passed, len(r.Checks), r.countDetail())

	b.WriteString("Decision latency of the load sessions, by phase (a decision belongs to every fault window its round trip overlaps, each window stretched 2 s past its end):\n\n")
	b.WriteString("| phase | s | decisions | /s | p50 ms | p99 ms | max ms | p99 ÷ quiet p99 | bound |\n|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, p := range r.Phases {
		bound := "—"
		switch {
		case p.Bound > 0 && p.OK:
			bound = fmt.Sprintf("≤ %g× ✓", p.Bound)
		case p.Bound > 0:
			bound = fmt.Sprintf("≤ %g× ✗", p.Bound)
		case p.Note != "":
			bound = p.Note
		}
		fmt.Fprintf(&b, "| %s | %.0f | %d | %.0f | %.2f | %.2f | %.1f | %.1f | %s |\n", p.Name, p.Seconds, p.Latency.N, p.PerSec, p.Latency.P50, p.Latency.P99, p.Latency.Max, p.Ratio, bound)
	}
	b.WriteString("\nMisbehaving clients, one after another under the load:\n\n| client | inputs | what the sidecar did | RSS before → peak |\n|---|--:|---|---|\n")
	for _, x := range r.Bad {
		fmt.Fprintf(&b, "| %s | %d | %s | %d → %d MiB |\n", x.Name, x.Tried, x.Outcome, x.RSSBefore>>20, x.PeakRSS>>20)
	}
	b.WriteString("\nEvery check, by fault:\n\n")
	for _, c := range r.Checks {
		mark := "✓"
		if !c.OK {
			mark = "✗"
		}
		fmt.Fprintf(&b, "- %s **%s**: %s — %s\n", mark, c.Fault, c.What, oneLine(c.Detail))
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	b.WriteString("\n![Decision latency, sidecar memory and goroutines over the run, faults shaded](bench/soak/timeline.svg)\n")
	b.WriteString("\n![The other sessions' decision latency during each fault, against the quiet stretches](bench/soak/latency.svg)\n")
	return b.String()
}

// faults counts the faults (the misbehaving clients as one) and those
// whose every check passed.
func (r *Results) faults() (n, ok int) {
	group := func(name string) string {
		if strings.HasPrefix(name, "bad: ") {
			return "misbehaving clients"
		}
		return name
	}
	var names []string
	for _, w := range r.Windows {
		if g := group(w.Name); !slices.Contains(names, g) {
			names = append(names, g)
		}
	}
	for _, name := range names {
		n++
		good := true
		for _, c := range r.Checks {
			if group(c.Fault) == name && !c.OK {
				good = false
			}
		}
		if good {
			ok++
		}
	}
	return n, ok
}

// countDetail is what the count check found: the checks made against
// those expected, and which fault differs.
func (r *Results) countDetail() string {
	for _, c := range r.Checks {
		if c.Fault == fChecks {
			return oneLine(c.Detail)
		}
	}
	return "the count of checks was not compared"
}

func (r *Results) badInputs() string {
	var parts []string
	for _, x := range r.Bad {
		parts = append(parts, fmt.Sprintf("%d (%s)", x.Tried, x.Name))
	}
	return strings.Join(parts, ", ")
}

func outcomes(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return oneLine(l)
}

func oneLine(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", "\\|")
}
