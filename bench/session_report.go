package bench

import "fmt"

// Goals of row 10.
const (
	sessionHelloGoal     = "hello world in a live session ≤ 1× a warm single-use run, p50, every round"
	sessionCreationsGoal = "no container created for a run after a session's first, and none lost (32 sessions thinking ~1 s)"
	sessionTTFOGoal      = "time to first output p99 at 32 sessions with sessions ≤ 3× the single-session p50"
)

// evaluateSessions adds the targets of row 10. In the scale's window a
// container may be created for a run only as its session's first, and the
// pool may make a warm one at most for each session whose first run
// claimed one before the window (its refill lagging); anything more is a
// creation per run.
func (r *Results) evaluateSessions() {
	s := r.Sessions
	if s == nil || s.Hello == nil {
		r.target("session_hello", sessionHelloGoal, "not measured", nil)
	} else {
		h := s.Hello
		r.target("session_hello", sessionHelloGoal, fmt.Sprintf("%.2f× (rounds %.2f–%.2f×), %s vs %s", h.Ratio, h.Low, h.High, FormatMS(h.Session.P50), FormatMS(h.Single.P50)), ptr(h.High > 0 && h.High <= 1))
	}
	if s == nil || s.Scale == nil {
		r.target("session_creations", sessionCreationsGoal, "not measured", nil)
		r.target("session_first_output_p99", sessionTTFOGoal, "not measured", nil)
		return
	}
	sc := s.Scale
	made := sc.OnCreations
	r.target("session_creations", sessionCreationsGoal, fmt.Sprintf("%d containers created for runs and %d warm ones by the pool over %d runs, %d of them a session's first, %d state lost",
		made.Cold(), made.Warm, sc.On.Runs, sc.On.SessionStarts, sc.On.StateLost),
		ptr(sc.On.Runs > 0 && made.Cold() <= sc.On.SessionStarts && made.Warm <= sc.On.Sessions && sc.On.StateLost == 0))
	ratio := Ratio(sc.On.FirstOutput.P99, sc.Single.FirstOutput.P50)
	r.target("session_first_output_p99", sessionTTFOGoal, fmt.Sprintf("%.2f×, %s vs %s", ratio, FormatMS(sc.On.FirstOutput.P99), FormatMS(sc.Single.FirstOutput.P50)), ptr(sc.On.Runs > 0 && ratio <= 3))
}

// sessionRows renders row 10.
func (r *Results) sessionRows(row func(...string)) {
	s := r.Sessions
	if s == nil {
		row("10", "sessions (a sandbox kept for a query's runs)", "not measured", "", "", "", "")
		return
	}
	pp := func(x Summary) string { return FormatMS(x.P50) + " (p99 " + FormatMS(x.P99) + ")" }
	spread := func(p *SessionPair) string {
		return fmt.Sprintf("%.2f× (rounds %.2f–%.2f×)", p.Ratio, p.Low, p.High)
	}
	missing := func(what string) { row("10", what, "not measured", "", "", "", "") }
	if p := s.Data; p == nil {
		missing("second call of a session (`print(len(df))`) vs a warm single-use run reading the CSV again")
	} else {
		row("10", fmt.Sprintf("second call of a session, `%s` after a first run read a %.1f MB CSV into `df` (profile `%s`) vs the same without a session: a warm single-use run reading the CSV again, end to end, p50",
			p.Code, float64(p.CSVBytes)/1e6, p.Profile), pp(p.Session), pp(p.Single), spread(p), "—", "")
	}
	if p := s.Hello; p == nil {
		missing("hello world in a live session vs a warm single-use run")
	} else {
		row("10", "Python hello world in a live session vs a warm single-use run, default profile, end to end, p50", pp(p.Session), pp(p.Single), spread(p), "≤ 1× every round", r.met("session_hello"))
	}
	if sc := s.Scale; sc == nil {
		missing("32 sessions thinking ~1 s, sessions on vs off")
	} else {
		perRun := func(made Creations, runs int) float64 { return Ratio(float64(made.Total), float64(runs)) }
		row("10", fmt.Sprintf("%d sessions thinking ~1 s, sessions on vs off: runs/s %.1f vs %.1f; containers created per run %.2f vs %.2f (%d and %d in the windows, of which %d and %d warm by the pool); time to first output",
			sc.On.Sessions, sc.On.PerSec, sc.Off.PerSec, perRun(sc.OnCreations, sc.On.Runs), perRun(sc.OffCreations, sc.Off.Runs),
			sc.OnCreations.Total, sc.OffCreations.Total, sc.OnCreations.Warm, sc.OffCreations.Warm),
			pp(sc.On.FirstOutput), pp(sc.Off.FirstOutput), fmt.Sprintf("%.2f× (p99 %.2f×)", Ratio(sc.On.FirstOutput.P50, sc.Off.FirstOutput.P50), Ratio(sc.On.FirstOutput.P99, sc.Off.FirstOutput.P99)),
			"no creation after a session's first", r.met("session_creations"))
		row("10", fmt.Sprintf("%d sessions with sessions on: time to first output p99 vs 1 session's p50", sc.On.Sessions),
			FormatMS(sc.On.FirstOutput.P99), FormatMS(sc.Single.FirstOutput.P50), fmt.Sprintf("%.2f×", Ratio(sc.On.FirstOutput.P99, sc.Single.FirstOutput.P50)), "≤ 3×", r.met("session_first_output_p99"))
	}
	if m := s.Memory; m == nil {
		missing("idle sessions' memory per image profile")
	} else {
		for _, u := range m.Profiles {
			row("10", fmt.Sprintf("idle session after a hello world, profile `%s`: memory used (`docker stats`) vs its sandbox's limit; idle sessions in the budget (%.1f GiB, half the engine's memory; --max-sessions caps them at %d): %d by limit, %d by use",
				u.Profile, float64(m.BudgetBytes)/(1<<30), m.MaxSessions, u.FitByLimit, u.FitByUse),
				fmt.Sprintf("%.1f MiB", mib(u.UsedBytes)), fmt.Sprintf("%.0f MiB", mib(u.LimitBytes)), fmt.Sprintf("%.2f×", Ratio(float64(u.UsedBytes), float64(u.LimitBytes))), "—", "")
		}
	}
}
