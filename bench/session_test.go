package bench

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

func TestRoundRatios(t *testing.T) {
	t.Parallel()
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	cases := []struct {
		name      string
		a, b      []time.Duration
		rounds    int
		low, high float64
	}{
		{name: "equal series have a spread of exactly one", a: ms(10, 10, 10, 10), b: ms(10, 10, 10, 10), rounds: 2, low: 1, high: 1},
		{name: "each round's p50 is taken over its own samples", a: ms(5, 5, 30, 30), b: ms(10, 10, 10, 10), rounds: 2, low: 0.5, high: 3},
		{name: "a round that is slower shows in the high end only", a: ms(10, 10, 10, 40), b: ms(20, 20, 20, 20), rounds: 4, low: 0.5, high: 2},
		{name: "fewer samples than rounds give no spread", a: ms(1), b: ms(1), rounds: 2},
		{name: "no rounds give no spread", a: ms(1, 2), b: ms(1, 2), rounds: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			low, high := RoundRatios(c.a, c.b, c.rounds)
			if low != c.low || high != c.high {
				t.Errorf("RoundRatios = %.3f–%.3f, want %.3f–%.3f", low, high, c.low, c.high)
			}
		})
	}
}

func TestParseDockerBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "12.5MiB", want: 12.5 * (1 << 20)},
		{in: " 980KiB ", want: 980 << 10},
		{in: "1GiB", want: 1 << 30},
		{in: "512B", want: 512},
		{in: "3kB", want: 3000},
		{in: "12", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "-1MiB", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDockerBytes(c.in)
			if (err != nil) != c.wantErr || got != c.want {
				t.Errorf("ParseDockerBytes(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.wantErr)
			}
		})
	}
}

func TestCheckSessionRun(t *testing.T) {
	t.Parallel()
	live := &wire.RunSession{Run: 2}
	cases := []struct {
		name      string
		report    wire.RunReport
		inSession bool
		wantErr   string // "" for none
	}{
		{name: "a run in a live session that printed what was wanted passes", report: wire.RunReport{Stdout: "3\n", Session: live}, inSession: true},
		{name: "a single-use run that printed what was wanted passes", report: wire.RunReport{Stdout: "3\n"}},
		{name: "a session run without session info fails", report: wire.RunReport{Stdout: "3\n"}, inSession: true, wantErr: "no session"},
		{name: "a session run that lost its state fails", report: wire.RunReport{Stdout: "3\n", Session: live, StateLost: &wire.StateLost{Reason: "expired", Lost: "variables"}}, inSession: true, wantErr: "lost its state"},
		{name: "a single-use run reporting a session fails", report: wire.RunReport{Stdout: "3\n", Session: live}, wantErr: "reported one"},
		{name: "a session whose globals are gone is named", report: wire.RunReport{ExitCode: 1, Stderr: "NameError: name 'df' is not defined", Session: live}, inSession: true, wantErr: "globals"},
		{name: "other output fails", report: wire.RunReport{Stdout: "4\n", Session: live}, inSession: true, wantErr: "stdout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := checkSessionRun(RunOutcome{Result: c.report}, "3\n", c.inSession)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("checkSessionRun: %v, want nil", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("checkSessionRun: %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}

func TestEvaluateSessions(t *testing.T) {
	t.Parallel()
	scale := func(cold, warm, starts, lost int, p99 float64) *SessionScale {
		return &SessionScale{
			Single:      PoolLoad{Runs: 30, FirstOutput: Summary{P50: 10}},
			On:          PoolLoad{Sessions: 32, Runs: 900, SessionStarts: starts, StateLost: lost, FirstOutput: Summary{P50: 12, P99: p99}},
			OnCreations: Creations{Total: cold + warm, Warm: warm},
		}
	}
	cases := []struct {
		name string
		s    *SessionResult
		want map[string]string // target id → met
	}{
		{name: "nothing measured leaves every target unmeasured", s: nil,
			want: map[string]string{"session_hello": "not measured", "session_creations": "not measured", "session_first_output_p99": "not measured"}},
		{name: "a hello pair whose every round is under one meets its target", s: &SessionResult{Hello: &SessionPair{Ratio: 0.5, Low: 0.4, High: 0.9}},
			want: map[string]string{"session_hello": "met"}},
		{name: "a hello pair with one round over one misses, whatever its overall ratio", s: &SessionResult{Hello: &SessionPair{Ratio: 0.8, Low: 0.4, High: 1.1}},
			want: map[string]string{"session_hello": "**missed**"}},
		{name: "no creation in the window and a p99 within 3× meet both", s: &SessionResult{Scale: scale(0, 0, 0, 0, 29)},
			want: map[string]string{"session_creations": "met", "session_first_output_p99": "met"}},
		{name: "a cold creation for a session's first run in the window is allowed", s: &SessionResult{Scale: scale(1, 0, 1, 0, 29)},
			want: map[string]string{"session_creations": "met"}},
		{name: "the pool refilling once per session is allowed", s: &SessionResult{Scale: scale(0, 32, 0, 0, 29)},
			want: map[string]string{"session_creations": "met"}},
		{name: "a cold creation beyond the sessions started in the window misses", s: &SessionResult{Scale: scale(2, 0, 1, 0, 29)},
			want: map[string]string{"session_creations": "**missed**"}},
		{name: "more warm creations than sessions misses: runs claim containers", s: &SessionResult{Scale: scale(0, 33, 0, 0, 29)},
			want: map[string]string{"session_creations": "**missed**"}},
		{name: "a session that lost its state misses, as its new sandbox was a creation", s: &SessionResult{Scale: scale(0, 0, 0, 1, 29)},
			want: map[string]string{"session_creations": "**missed**"}},
		{name: "a p99 over 3× the single session's p50 misses", s: &SessionResult{Scale: scale(0, 0, 0, 0, 31)},
			want: map[string]string{"session_first_output_p99": "**missed**"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := &Results{Sessions: c.s}
			r.evaluateSessions()
			for id, want := range c.want {
				if got := r.met(id); got != want {
					t.Errorf("target %s: %q, want %q", id, got, want)
				}
			}
		})
	}
}

func TestSessionRowsRenderEveryPart(t *testing.T) {
	t.Parallel()
	r := &Results{Sessions: &SessionResult{
		Data:   &SessionPair{Profile: "python-data", Code: dataSecond, CSVBytes: 3e6},
		Hello:  &SessionPair{},
		Scale:  &SessionScale{On: PoolLoad{Sessions: 32}},
		Memory: &SessionMemory{Profiles: []SessionMemoryUsed{{Profile: "minimal"}, {Profile: "node"}}},
	}}
	r.evaluateSessions()
	var rows []string
	r.sessionRows(func(cells ...string) { rows = append(rows, strings.Join(cells, "|")) })
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6 (data, hello, scale twice, two profiles):\n%s", len(rows), strings.Join(rows, "\n"))
	}
	for _, want := range []string{"print(len(df))", "live session", "sessions on vs off", "p99 vs 1 session", "`minimal`", "`node`"} {
		if !strings.Contains(strings.Join(rows, "\n"), want) {
			t.Errorf("no row mentions %q", want)
		}
	}
}

func TestDataCSVHoldsItsRows(t *testing.T) {
	t.Parallel()
	csv := dataCSV()
	if n := strings.Count(csv, "\n"); n != csvRows+1 {
		t.Errorf("%d lines, want a header and %d rows", n, csvRows)
	}
	if len(csv) < 1<<20 || len(csv) > dataFrameLimit/2 {
		t.Errorf("%d bytes: want a few MB, well within the frame limit %d", len(csv), dataFrameLimit)
	}
}

func TestSessionRowsSayWhatWasNotMeasured(t *testing.T) {
	t.Parallel()
	r := &Results{Sessions: &SessionResult{Hello: &SessionPair{}}}
	var missing int
	r.sessionRows(func(cells ...string) {
		if cells[2] == "not measured" {
			missing++
		}
	})
	if missing != 3 {
		t.Errorf("%d rows not measured, want 3 (data, scale, memory)", missing)
	}
}

func TestCountCreations(t *testing.T) {
	t.Parallel()
	from := time.Unix(100, 0)
	span := [2]time.Time{from, from.Add(10 * time.Second)}
	ns := func(s int) string { return strconv.FormatInt(time.Unix(int64(s), 0).UnixNano(), 10) }
	events := strings.Join([]string{
		ns(99) + " pool=",       // before the window
		ns(100) + " pool=",      // for a run
		ns(105) + " pool=abc12", // the pool's
		ns(110) + " pool=abc12", // the pool's, at the end
		ns(111) + " pool=",      // after the window
		"garbage",
		"",
	}, "\n")
	if got, want := countCreations(events, span), (Creations{Total: 3, Warm: 2}); got != want {
		t.Errorf("countCreations = %+v, want %+v", got, want)
	}
	if got := (Creations{Total: 3, Warm: 2}).Cold(); got != 1 {
		t.Errorf("Cold = %d, want 1", got)
	}
}
