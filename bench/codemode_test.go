package bench

import (
	"encoding/json"
	"log/slog"
	"math"
	"strings"
	"testing"
)

// TestCodeModeGate runs row 9's gate measurement against the real stdio
// test server and the real gate: every call through the gate is allowed
// and answered as the server answers it (codeModeGate checks each), and
// the row and its target are reported. It asserts no time.
func TestCodeModeGate(t *testing.T) {
	e := &env{cfg: Config{Log: slog.New(slog.DiscardHandler)}, tmp: t.TempDir(), res: &Results{PhaseSeconds: map[string]float64{}}}
	var g CodeModeGate
	if err := e.codeModeGate(t.Context(), &g); err != nil {
		t.Fatal(err)
	}
	if g.Calls != codeModeGateCalls || g.Through.N != codeModeGateCalls || g.Direct.N != codeModeGateCalls {
		t.Fatalf("measured %d pairs (%d through the gate, %d direct), want %d", g.Calls, g.Through.N, g.Direct.N, codeModeGateCalls)
	}
	e.res.CodeMode = &CodeModeResult{Gate: g}
	e.res.evaluate()
	table := e.res.Table()
	if !strings.Contains(table, "through the gate") || e.res.met("codemode_gate") == "not measured" || e.res.met("codemode_data_input") != "not measured" || e.res.met("codemode_see_wall") != "not measured" {
		t.Fatalf("row 9 not reported as measured gate overhead and unmeasured queries:\n%s", table)
	}
	t.Logf("through the gate p50 %s p99 %s; direct p50 %s p99 %s", FormatMS(g.Through.P50), FormatMS(g.Through.P99), FormatMS(g.Direct.P50), FormatMS(g.Direct.P99))
}

func TestBestRatiosTakesTheBetterDirectSideEachRound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		code   []float64
		direct [][]float64
		want   []float64
	}{
		{"one direct side", []float64{1, 2}, [][]float64{{2, 4}}, []float64{0.5, 0.5}},
		{"the lower of two, round by round", []float64{3, 3}, [][]float64{{6, 4}, {5, 12}}, []float64{0.6, 0.75}},
		{"no samples", nil, [][]float64{{1}}, nil},
		{"no direct side", []float64{1}, nil, nil},
		{"unequal rounds", []float64{1, 2}, [][]float64{{1}}, nil},
		{"a direct figure of zero", []float64{1}, [][]float64{{0}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := BestRatios(c.code, c.direct...)
			if len(got) != len(c.want) {
				t.Fatalf("BestRatios = %v, want %v", got, c.want)
			}
			for i := range got {
				if math.Abs(got[i]-c.want[i]) > 1e-9 {
					t.Fatalf("BestRatios = %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestSpreadMetOnlyWhenTheWholeIntervalClears(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		ratios []float64
		want   Spread
		target float64
		met    bool
	}{
		{"every round under", []float64{0.4, 0.3, 0.45}, Spread{0.4, 0.3, 0.45}, 0.5, true},
		{"median under, one round over", []float64{0.4, 0.3, 0.55}, Spread{0.4, 0.3, 0.55}, 0.5, false},
		{"at the target", []float64{0.5, 0.5}, Spread{0.5, 0.5, 0.5}, 0.5, true},
		{"even count: the middle two's mean", []float64{1, 4, 2, 3}, Spread{2.5, 1, 4}, 4, true},
		{"nothing measured", nil, Spread{}, 0.5, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := SpreadOf(c.ratios)
			if got != c.want {
				t.Fatalf("SpreadOf(%v) = %+v, want %+v", c.ratios, got, c.want)
			}
			if got.Clears(c.target) != c.met {
				t.Fatalf("%+v.Clears(%v) = %v, want %v", got, c.target, !c.met, c.met)
			}
		})
	}
}

func TestLatencyModelAddsFirstTokenAndOutputPerTurn(t *testing.T) {
	t.Parallel()
	m := LatencyModel{TTFTMS: 1000, TokensPerSecond: 50, BytesPerToken: 4}
	// 400 bytes: 100 tokens at 50/s, 2 s after the first token.
	if got := m.TurnMS(400); got != 3000 {
		t.Fatalf("TurnMS(400) = %v, want 3000", got)
	}
	s := CodeModeSample{TaskMS: 250, Turns: []CodeModeTurn{{OutBytes: 400}, {OutBytes: 0}, {OutBytes: 200}}}
	// 250 measured + (1000+2000) + 1000 + (1000+1000).
	if got := m.WallMS(s); got != 6250 {
		t.Fatalf("WallMS = %v, want 6250", got)
	}
	if got := (LatencyModel{TTFTMS: 700}).TurnMS(1 << 20); got != 700 {
		t.Fatalf("a model without an output speed costs its first token only: %v", got)
	}
}

func TestFiguresCountBytesTurnsAndCacheFromTheTurns(t *testing.T) {
	t.Parallel()
	turn := func(in, tools, cached, out int64) CodeModeTurn {
		return CodeModeTurn{InBytes: in, ToolsBytes: tools, CachedBytes: cached, OutBytes: out}
	}
	code := CodeModeSample{TaskMS: 100, ToolResultBytes: 30, Turns: []CodeModeTurn{turn(1000, 200, 0, 40), turn(1500, 200, 900, 400), turn(1600, 200, 1400, 4)}}
	serial := CodeModeSample{TaskMS: 100, ToolResultBytes: 9000, Turns: []CodeModeTurn{turn(1000, 600, 0, 10), turn(4000, 600, 900, 10), turn(8000, 600, 3900, 10), turn(12000, 600, 7900, 4)}}
	parallel := CodeModeSample{TaskMS: 90, ToolResultBytes: 9000, Turns: []CodeModeTurn{turn(1000, 600, 0, 10), turn(4000, 600, 900, 50), turn(12000, 600, 3900, 4)}}
	see := CodeModeSample{TaskMS: 10, Turns: []CodeModeTurn{turn(100, 10, 0, 10)}}
	c := &CodeModeResult{
		Rounds:  1,
		Latency: LatencyModel{TTFTMS: 1000, TokensPerSecond: 100, BytesPerToken: 4},
		Samples: map[string][]CodeModeSample{kindCode: {code}, kindSerial: {serial}, kindParallel: {parallel}, kindSeeCode: {see}, kindSeeDirect: {see}},
	}
	got := map[string]CodeModeFigure{}
	for _, f := range c.figures() {
		got[f.Task+"/"+f.ID] = f
	}
	want := []struct {
		key          string
		code, direct float64
		kind         string
		ratio        float64
	}{
		{"data/input", 4100, 17000, kindParallel, 4100.0 / 17000},
		{"data/uncached", 4100 - 2300, 17000 - 4800, kindParallel, 1800.0 / 12200},
		{"data/output", 444, 34, kindSerial, 444.0 / 34},
		{"data/turns", 3, 3, kindParallel, 1},
		{"data/listing", 200, 600, kindSerial, 200.0 / 600},
		{"data/results", 30, 9000, kindSerial, 30.0 / 9000},
		// code: 100 + 3×1000 + 444/4/100 s; parallel: 90 + 3×1000 + 64/4/100 s.
		{"data/wall", 100 + 3000 + 1110, 90 + 3000 + 160, kindParallel, 4210.0 / 3250},
		{"data/wall0", 100, 90, kindParallel, 100.0 / 90},
		{"see/turns", 1, 1, kindSeeDirect, 1},
	}
	for _, w := range want {
		f, ok := got[w.key]
		if !ok {
			t.Fatalf("no figure %s", w.key)
		}
		if math.Abs(f.Code-w.code) > 1e-6 || math.Abs(f.Direct-w.direct) > 1e-6 || f.DirectKind != w.kind || math.Abs(f.Ratio.Median-w.ratio) > 1e-9 {
			t.Errorf("%s: code %v direct %v (%s) ratio %v, want %v %v (%s) %v", w.key, f.Code, f.Direct, f.DirectKind, f.Ratio.Median, w.code, w.direct, w.kind, w.ratio)
		}
	}
	if got["data/input"].Target != 0.5 || got["data/turns"].Target != 1 || got["data/wall"].Target != 0.8 || got["see/output"].Target != 1.2 || got["data/output"].Target != 0 {
		t.Fatalf("targets: %+v", got)
	}
	// The table and the targets say met and missed as the spreads do.
	r := &Results{CodeMode: c, PhaseSeconds: map[string]float64{}}
	c.Figures = c.figures()
	r.evaluate()
	for id, want := range map[string]string{"codemode_data_input": "met", "codemode_data_turns": "met", "codemode_data_wall": "**missed**", "codemode_see_output": "met", "codemode_gate": "not measured"} {
		if got := r.met(id); got != want {
			t.Errorf("target %s: %s, want %s", id, got, want)
		}
	}
}

func TestMergeResultsKeepsOtherRowsAndReplacesMeasuredOnes(t *testing.T) {
	t.Parallel()
	old := &Results{Generated: "then", PhaseSeconds: map[string]float64{"decisions": 5, "codemode": 1}, Notes: []string{"old note"},
		Seccomp:  &SeccompResult{LoopCalls: 7},
		CodeMode: &CodeModeResult{Rounds: 1}}
	raw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	fresh := &Results{Generated: "now", PhaseSeconds: map[string]float64{"codemode": 9}, CodeMode: &CodeModeResult{Rounds: 5, Gate: CodeModeGate{Calls: 3, Through: Summary{P50: 2}, Direct: Summary{P50: 1}, OverheadP50: 1.5}}}
	got, err := MergeResults(raw, fresh, []string{"codemode"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Seccomp == nil || got.Seccomp.LoopCalls != 7 {
		t.Fatalf("the row not measured again was lost: %+v", got.Seccomp)
	}
	if got.CodeMode == nil || got.CodeMode.Rounds != 5 || got.Generated != "then" {
		t.Fatalf("the measured row was not replaced: %+v, generated %s", got.CodeMode, got.Generated)
	}
	if got.PhaseSeconds["decisions"] != 5 || got.PhaseSeconds["codemode"] != 9 {
		t.Fatalf("phase seconds: %v", got.PhaseSeconds)
	}
	if got.met("codemode_gate") != "**missed**" || !strings.Contains(strings.Join(got.Notes, "\n"), "old note") || !strings.Contains(got.Notes[0], "now") {
		t.Fatalf("targets not evaluated again over the whole, or notes lost: %s %v", got.met("codemode_gate"), got.Notes)
	}
	if _, err := MergeResults([]byte("not json"), fresh, nil); err == nil {
		t.Fatal("merging into a file that is not results.json succeeded")
	}
}

func TestFigureValueUnitFollowsItsID(t *testing.T) {
	t.Parallel()
	// A figure read back from results.json has its ID, not the measure: the unit comes from the ID.
	for _, c := range []struct {
		id   string
		v    float64
		want string
	}{{"input", 28846, "28.8 KB"}, {"output", 415, "0.4 KB"}, {"turns", 3, "3"}, {"wall", 12246, FormatMS(12246)}} {
		if got := (CodeModeFigure{ID: c.id}).value(c.v); got != c.want {
			t.Errorf("figure %s: %q, want %q", c.id, got, c.want)
		}
	}
}
