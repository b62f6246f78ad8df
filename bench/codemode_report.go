package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The query kinds of row 9, as walkthroughs/bench/codemode.ts names them.
const (
	kindCode      = "code"
	kindSerial    = "direct_serial"
	kindParallel  = "direct_parallel"
	kindSeeCode   = "see_code"
	kindSeeDirect = "see_direct"
)

// LatencyModel turns a query measured with a model that answers at once
// into one with a model's timing: each turn costs TTFTMS, then its output
// at TokensPerSecond, BytesPerToken bytes a token. The prefill of a larger
// input is not in it: that would only add to the side that reads more.
type LatencyModel struct {
	TTFTMS          float64 `json:"ttft_ms"`
	TokensPerSecond float64 `json:"output_tokens_per_second"`
	BytesPerToken   float64 `json:"bytes_per_token"`
	Source          string  `json:"source"`
}

// PublishedLatency is the model row 9 uses: Artificial Analysis's medians
// for Claude Sonnet 4.5 on Anthropic's API.
var PublishedLatency = LatencyModel{
	TTFTMS:          1800,
	TokensPerSecond: 63,
	BytesPerToken:   4,
	Source: "Artificial Analysis, Claude Sonnet 4.5 on Anthropic's API: median time to first token 1.80 s, output speed 63 tokens/s " +
		"(artificialanalysis.ai/models/claude-4-5-sonnet, as quoted in https://lattice.uptownhr.com/claude-opus-4-5/speed-analysis, Nov 2025); " +
		"4 bytes a token, the usual approximation for English and code",
}

// TurnMS is the model's time for one turn: the first token, then out bytes of output.
func (m LatencyModel) TurnMS(out int64) float64 {
	if m.TokensPerSecond <= 0 || m.BytesPerToken <= 0 {
		return m.TTFTMS
	}
	return m.TTFTMS + float64(out)/m.BytesPerToken/m.TokensPerSecond*1000
}

// WallMS is a query's task time under the model: every turn's model time
// added to the measured time of the tools, the sandbox and Claude Code
// between the turns (TaskMS, measured with a model answering at once).
func (m LatencyModel) WallMS(s CodeModeSample) float64 {
	t := s.TaskMS
	for _, turn := range s.Turns {
		t += m.TurnMS(turn.OutBytes)
	}
	return t
}

// sum adds f over a sample's turns.
func (s CodeModeSample) sum(f func(CodeModeTurn) int64) float64 {
	var n int64
	for _, t := range s.Turns {
		n += f(t)
	}
	return float64(n)
}

// codeModeMeasure is one figure of a sample; all are costs (lower is better).
type codeModeMeasure struct {
	id, name string
	kb       bool // shown in KB
	of       func(LatencyModel, CodeModeSample) float64
}

var codeModeMeasures = []codeModeMeasure{
	{"input", "input bytes: every model request (tool listing, system prompt, the conversation, resent each turn)", true,
		func(_ LatencyModel, s CodeModeSample) float64 {
			return s.sum(func(t CodeModeTurn) int64 { return t.InBytes })
		}},
	{"uncached", "input bytes a prompt cache would not serve (each request less its prefix equal to the previous request's)", true,
		func(_ LatencyModel, s CodeModeSample) float64 {
			return s.sum(func(t CodeModeTurn) int64 { return t.InBytes - t.CachedBytes })
		}},
	{"output", "output bytes: what the model writes (tool names and inputs, the programs, the answer)", true,
		func(_ LatencyModel, s CodeModeSample) float64 {
			return s.sum(func(t CodeModeTurn) int64 { return t.OutBytes })
		}},
	{"turns", "model turns (requests)", false,
		func(_ LatencyModel, s CodeModeSample) float64 { return float64(len(s.Turns)) }},
	{"listing", "tool listing bytes in the first request", true,
		func(_ LatencyModel, s CodeModeSample) float64 {
			if len(s.Turns) == 0 {
				return 0
			}
			return float64(s.Turns[0].ToolsBytes)
		}},
	{"results", "tool-result bytes the model reads (each once)", true,
		func(_ LatencyModel, s CodeModeSample) float64 { return float64(s.ToolResultBytes) }},
	{"wall", "task wall time under the latency model (per turn: first token, then the output; plus the measured tools and sandbox)", false,
		func(m LatencyModel, s CodeModeSample) float64 { return m.WallMS(s) }},
	{"wall0", "task wall time with a model answering at once (measured)", false,
		func(_ LatencyModel, s CodeModeSample) float64 { return s.TaskMS }},
}

// codeModeTargets are the targets of row 9 by task and figure: against the
// better direct agent, discovery included; the see task's ≤ 1.2× on every
// figure a user pays for.
var codeModeTargets = map[string]map[string]float64{
	"data": {"input": 0.5, "turns": 1, "wall": 0.8},
	"see":  {"input": 1.2, "output": 1.2, "turns": 1.2, "wall": 1.2, "wall0": 1.2},
}

// Spread is a ratio over rounds: the median of the rounds' ratios and
// their least and greatest.
type Spread struct {
	Median float64 `json:"median"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
}

// BestRatios is code[i] ÷ min over direct sides of side[i], round by
// round: each round's code query against that round's better direct one.
// It returns nil when the series are empty, of unequal length, or a
// direct figure is 0.
func BestRatios(code []float64, direct ...[]float64) []float64 {
	if len(code) == 0 || len(direct) == 0 {
		return nil
	}
	out := make([]float64, len(code))
	for i, c := range code {
		best := math.Inf(1)
		for _, d := range direct {
			if len(d) != len(code) {
				return nil
			}
			best = min(best, d[i])
		}
		if best <= 0 {
			return nil
		}
		out[i] = c / best
	}
	return out
}

// SpreadOf is the median (the mean of the middle two for an even count),
// least and greatest of ratios; zeros for none.
func SpreadOf(ratios []float64) Spread {
	if len(ratios) == 0 {
		return Spread{}
	}
	s := slices.Clone(ratios)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: med, Low: s[0], High: s[n-1]}
}

// Clears says whether the whole interval is at or under target: a target
// is met only when every round's ratio meets it. An empty spread clears nothing.
func (s Spread) Clears(target float64) bool {
	return s.High > 0 && s.Low > 0 && s.High <= target
}

// CodeModeFigure is one comparison of row 9.
type CodeModeFigure struct {
	Task string `json:"task"` // data or see
	ID   string `json:"id"`
	Name string `json:"name"`
	// Code and Direct are medians over rounds; Direct of the better direct
	// side by this figure's medians, named in DirectKind (the ratio itself
	// takes the better side round by round).
	Code       float64 `json:"code"`
	Direct     float64 `json:"direct"`
	DirectKind string  `json:"direct_kind"`
	Ratio      Spread  `json:"ratio"`
	// Target is the bound on Ratio.High, 0 when there is none.
	Target float64 `json:"target,omitempty"`
}

// figures computes row 9's comparisons from the samples.
func (c *CodeModeResult) figures() []CodeModeFigure {
	var out []CodeModeFigure
	tasks := []struct {
		task   string
		code   string
		direct []string
	}{{"data", kindCode, []string{kindSerial, kindParallel}}, {"see", kindSeeCode, []string{kindSeeDirect}}}
	for _, t := range tasks {
		for _, m := range codeModeMeasures {
			series := func(kind string) []float64 {
				var v []float64
				for _, s := range c.Samples[kind] {
					v = append(v, m.of(c.Latency, s))
				}
				return v
			}
			var direct [][]float64
			bestKind, best := "", math.Inf(1)
			for _, k := range t.direct {
				d := series(k)
				direct = append(direct, d)
				if med := SpreadOf(d).Median; med < best {
					bestKind, best = k, med
				}
			}
			code := series(t.code)
			out = append(out, CodeModeFigure{
				Task: t.task, ID: m.id, Name: m.name, Code: SpreadOf(code).Median, Direct: best, DirectKind: bestKind,
				Ratio: SpreadOf(BestRatios(code, direct...)), Target: codeModeTargets[t.task][m.id],
			})
		}
	}
	return out
}

// goal is a figure's target as text.
func (f CodeModeFigure) goal() string {
	if f.Target == 1 && f.ID == "turns" {
		return "≤ direct's"
	}
	return fmt.Sprintf("≤ %.1f×", f.Target)
}

func (f CodeModeFigure) targetID() string { return "codemode_" + f.Task + "_" + f.ID }

// value shows v in the figure's unit, found by its ID (a figure read back from results.json has only that).
func (f CodeModeFigure) value(v float64) string {
	i := slices.IndexFunc(codeModeMeasures, func(m codeModeMeasure) bool { return m.id == f.ID })
	switch {
	case i >= 0 && codeModeMeasures[i].kb:
		return fmt.Sprintf("%.1f KB", v/1000)
	case f.ID == "turns":
		return fmt.Sprintf("%.0f", v)
	default:
		return FormatMS(v)
	}
}

func (s Spread) String() string {
	if s.High == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f× (rounds %.2f–%.2f×)", s.Median, s.Low, s.High)
}

var codeModeTaskNames = map[string]string{
	"data": "data task (500 records from each of two MCP servers, paged and joined)",
	"see":  "see task (five records the model reads and judges)",
}

const goalCodeGate = "code mode: the gate's overhead per nested call, p50 ≤ 1 ms"

func (r *Results) evaluateCodeMode() {
	c := r.CodeMode
	if c == nil || c.Samples == nil {
		for _, task := range []string{"data", "see"} {
			for _, m := range codeModeMeasures {
				if _, ok := codeModeTargets[task][m.id]; ok {
					r.target("codemode_"+task+"_"+m.id, "code mode, "+task+" task: "+m.id, "not measured", nil)
				}
			}
		}
	} else {
		c.Figures = c.figures()
		for _, f := range c.Figures {
			if f.Target > 0 {
				r.target(f.targetID(), "code mode, "+codeModeTaskNames[f.Task]+", vs the better direct agent, discovery included, every round: "+f.Name+" "+f.goal(),
					f.Ratio.String(), ptr(f.Ratio.Clears(f.Target)))
			}
		}
	}
	if c == nil || c.Gate.Calls == 0 {
		r.target("codemode_gate", goalCodeGate, "not measured", nil)
	} else {
		r.target("codemode_gate", goalCodeGate, FormatMS(c.Gate.OverheadP50), ptr(c.Gate.OverheadP50 <= 1))
	}
}

// codeModeRows are row 9 of the table.
func (r *Results) codeModeRows(row func(...string)) {
	c := r.CodeMode
	if c == nil {
		row("9", "code mode: one program vs the model calling MCP tools itself", "not measured", "", "", "", "")
		return
	}
	task := ""
	for _, f := range c.Figures {
		target, result := "—", ""
		if f.Target > 0 {
			target, result = f.goal()+" every round", r.met(f.targetID())
		}
		direct := f.value(f.Direct) + " (" + strings.TrimPrefix(f.DirectKind, "see_") + ")"
		what := "the same: " + f.Name
		if f.Task != task {
			task = f.Task
			what = fmt.Sprintf("code mode, %s, real Agent SDK, scripted model, the same tools on both sides, discovery included; median of %d rounds, the ratio against the better direct agent each round (rounds' least–greatest): %s",
				codeModeTaskNames[f.Task], c.Rounds, f.Name)
		}
		row("9", what, f.value(f.Code), direct, f.Ratio.String(), target, result)
	}
	if g := c.Gate; g.Calls > 0 {
		ratio := func(a, b float64) string { return fmt.Sprintf("%.2f×", Ratio(a, b)) }
		row("9", fmt.Sprintf("a nested call (stdio server's lookup) through the gate (Rego decision, call, chained audit line) vs straight to the server's MCP client: extra latency p50 (%d pairs, order alternating)", g.Calls),
			FormatMS(g.Through.P50)+" (+"+FormatMS(g.OverheadP50)+")", FormatMS(g.Direct.P50), ratio(g.Through.P50, g.Direct.P50), "≤ 1 ms extra", r.met("codemode_gate"))
		row("9", "the same, p99",
			FormatMS(g.Through.P99)+" (+"+FormatMS(g.OverheadP99)+")", FormatMS(g.Direct.P99), ratio(g.Through.P99, g.Direct.P99), "—", "")
	}
}

// codeModeEvidence is row 9's detail: every query kind's medians, per turn, and the latency model.
func (r *Results) codeModeEvidence(b *strings.Builder) {
	c := r.CodeMode
	if c == nil || c.Samples == nil {
		return
	}
	fmt.Fprintf(b, "\n#### Code mode (row 9), every query kind (medians of %d rounds; order per round %s)\n\n", c.Rounds, orderText(c.Order))
	b.WriteString("| kind | turns | calls per turn | input KB | cached KB | output KB | listing KB | tool results KB | task (model at once) | task (latency model) |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range codeModeKinds {
		ss := c.Samples[k]
		if len(ss) == 0 {
			continue
		}
		med := func(f func(CodeModeSample) float64) float64 {
			var v []float64
			for _, s := range ss {
				v = append(v, f(s))
			}
			return SpreadOf(v).Median
		}
		var calls []string
		for _, t := range ss[0].Turns {
			calls = append(calls, fmt.Sprint(t.Calls))
		}
		kb := func(f func(CodeModeTurn) int64) string {
			return fmt.Sprintf("%.1f", med(func(s CodeModeSample) float64 { return s.sum(f) })/1000)
		}
		fmt.Fprintf(b, "| %s | %.0f | %s | %s | %s | %s | %.1f | %.1f | %s | %s |\n", k, med(func(s CodeModeSample) float64 { return float64(len(s.Turns)) }), strings.Join(calls, ", "),
			kb(func(t CodeModeTurn) int64 { return t.InBytes }), kb(func(t CodeModeTurn) int64 { return t.CachedBytes }), kb(func(t CodeModeTurn) int64 { return t.OutBytes }),
			float64(ss[0].Turns[0].ToolsBytes)/1000, med(func(s CodeModeSample) float64 { return float64(s.ToolResultBytes) })/1000,
			FormatMS(med(func(s CodeModeSample) float64 { return s.TaskMS })), FormatMS(med(c.Latency.WallMS)))
	}
	fmt.Fprintf(b, "\nLatency model: %.0f ms to the first token and %.0f output tokens/s at %.0f bytes a token, per turn, added to the measured time between turns. Source: %s.\n",
		c.Latency.TTFTMS, c.Latency.TokensPerSecond, c.Latency.BytesPerToken, c.Latency.Source)
}

func orderText(order [][]string) string {
	var parts []string
	for _, o := range order {
		parts = append(parts, strings.Join(o, " → "))
	}
	if len(parts) > 2 {
		parts = append(parts[:2], "…")
	}
	return strings.Join(parts, "; ")
}
