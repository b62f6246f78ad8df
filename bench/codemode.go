package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

// CodeModeResult is row 9: code mode (issue 22, section 6). One data task
// (500 records paged from each of two MCP servers and joined) and a
// one-lookup control task, each done both ways through the real Agent SDK
// with the scripted model (walkthroughs/bench/codemode.ts): direct, the
// model calling the tools itself, and code, one program calling them
// through the bridge. And the gate's own cost on a nested call.
type CodeModeResult struct {
	Rounds  int `json:"rounds"`
	Records int `json:"records_per_server"`
	Page    int `json:"page_size"`
	// Per query kind (direct, code, control_direct, control_code): one
	// sample per round, the rounds interleaving the four.
	Samples map[string][]CodeModeSample `json:"samples"`
	// Gate is a nested call through the gate (decision, forwarding, audit
	// line) vs the same call straight to the server's MCP client.
	Gate CodeModeGate `json:"gate_overhead"`
}

// CodeModeSample is one query of the Agent SDK.
type CodeModeSample struct {
	WallMS          float64 `json:"wall_ms"`
	TaskMS          float64 `json:"task_ms"`
	Requests        int     `json:"requests"`
	ToolResultBytes int64   `json:"tool_result_bytes"`
	RequestBytes    int64   `json:"request_bytes"`
	ToolResults     int     `json:"tool_results"`
}

// CodeModeGate is the gate's overhead on a nested call: Calls pairs, each a
// call of the stdio test server's lookup through the gate's CodeCaller (the
// sidecar's ToolCaller: Rego decision, the call, a chained audit line to a
// real log) and the same call through mcpservers.Servers.CallTool, in turn.
type CodeModeGate struct {
	Calls   int     `json:"calls"`
	Through Summary `json:"through_gate"`
	Direct  Summary `json:"direct"`
	// Overhead is the p50 and p99 of the through-gate series minus the direct one's.
	OverheadP50 float64 `json:"overhead_p50_ms"`
	OverheadP99 float64 `json:"overhead_p99_ms"`
}

// codeModeRounds bounds the Agent SDK queries: 4 per round, each starting
// Claude Code, after one untimed round.
const codeModeRounds = 5

// codeModeGateCalls is how many pairs the gate overhead takes, after a tenth as many unmeasured.
const codeModeGateCalls = 2000

// codemode measures row 9.
func (e *env) codemode(ctx context.Context) error {
	res := &CodeModeResult{}
	if err := e.codeModeGate(ctx, &res.Gate); err != nil {
		return fmt.Errorf("gate overhead: %w", err)
	}
	e.res.CodeMode = res
	script := filepath.Join(e.cfg.Repo, "walkthroughs", "build", "bench", "codemode.js")
	nctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(nctx, e.cfg.Node, script, "--rounds", fmt.Sprint(codeModeRounds))
	cmd.Dir = filepath.Join(e.cfg.Repo, "walkthroughs")
	bin, err := filepath.Abs(e.cfg.Gatekeeper) // the script runs in walkthroughs/
	if err != nil {
		return err
	}
	cmd.Env = append(os.Environ(), "GATEKEEPER_BIN="+bin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", script, err, tail(errOut.String(), 3000))
	}
	var got struct {
		Rounds  int                         `json:"rounds"`
		Records int                         `json:"records"`
		Page    int                         `json:"page"`
		Samples map[string][]CodeModeSample `json:"samples"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		return fmt.Errorf("%s printed no result: %w\n%s", script, err, tail(errOut.String(), 3000))
	}
	for _, k := range codeModeKinds {
		if len(got.Samples[k]) == 0 {
			return fmt.Errorf("%s measured no %s query", script, k)
		}
	}
	res.Rounds, res.Records, res.Page, res.Samples = got.Rounds, got.Records, got.Page, got.Samples
	e.cfg.Log.Info("bench: code mode", "direct_task_ms", res.median("direct", taskMS), "code_task_ms", res.median("code", taskMS),
		"direct_bytes", res.median("direct", resultBytes), "code_bytes", res.median("code", resultBytes))
	return nil
}

var codeModeKinds = []string{"direct", "code", "control_direct", "control_code"}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// codeModeGatePolicy lets code call the test server's lookup.
const codeModeGatePolicy = `version: 1
workspace_root: %s
tools:
  allow: [mcp__sandboxed_code__run]
code_calls:
  callable:
    crm: [lookup]
  max_calls: 10000
`

// codeModeGate measures the gate's overhead on a nested call.
func (e *env) codeModeGate(ctx context.Context, g *CodeModeGate) error {
	dir, err := os.MkdirTemp(e.tmp, "codemode-")
	if err != nil {
		return err
	}
	bin, err := mcptest.Build(dir)
	if err != nil {
		return err
	}
	servers, err := mcpservers.New([]mcpservers.Config{mcptest.Stdio(bin, "crm", 500, nil)}, mcpservers.Options{})
	if err != nil {
		return err
	}
	defer servers.Close()
	for name, err := range servers.Connect(ctx) {
		if err != nil {
			return fmt.Errorf("connect %s: %w", name, err)
		}
	}
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, fmt.Appendf(nil, codeModeGatePolicy, dir), 0o644); err != nil {
		return err
	}
	eng, err := gate.New(ctx, gate.Config{PolicyFile: policyFile, Home: dir, Logger: e.cfg.Log.With("part", "gate")})
	if err != nil {
		return err
	}
	q, err := eng.OpenQuery(ctx, "q_bench", nil)
	if err != nil {
		return err
	}
	eff, err := q.Effective(ctx)
	if err != nil {
		return err
	}
	log, err := audit.Open(filepath.Join(dir, "audit.jsonl"), audit.Options{})
	if err != nil {
		return err
	}
	defer log.Close()
	caller := gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "r_bench", QueryID: "q_bench", ToolUseID: "toolu_bench", Servers: servers, Auditor: log})
	var through, direct []time.Duration
	warm := codeModeGateCalls / 10
	for i := range warm + codeModeGateCalls {
		args := json.RawMessage(fmt.Sprintf(`{"id":%d}`, i%500+1))
		t0 := time.Now()
		r := caller.CallTool(ctx, runner.ToolCall{Server: "crm", Tool: "lookup", Arguments: args, Seq: i + 1, InFlight: 1})
		d1 := time.Since(t0)
		if r.Err != nil {
			return fmt.Errorf("through the gate: %s %s: %s", r.Err.Kind, r.Err.Rule, r.Err.Message)
		}
		t0 = time.Now()
		raw, err := servers.CallTool(ctx, "crm", "lookup", args)
		d2 := time.Since(t0)
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		// Both answers must be the same record: the gate forwards what the server says.
		if !bytes.Equal(r.Result, raw) && !strings.Contains(string(r.Result), fmt.Sprintf(`"crm-%d"`, i%500+1)) {
			return fmt.Errorf("the gate's answer %s is not the server's %s", r.Result, raw)
		}
		if i >= warm {
			through, direct = append(through, d1), append(direct, d2)
		}
	}
	g.Calls, g.Through, g.Direct = codeModeGateCalls, Summarize(through), Summarize(direct)
	g.OverheadP50, g.OverheadP99 = g.Through.P50-g.Direct.P50, g.Through.P99-g.Direct.P99
	e.cfg.Log.Info("bench: code mode gate", "through_p50_ms", g.Through.P50, "direct_p50_ms", g.Direct.P50, "overhead_p50_ms", g.OverheadP50, "overhead_p99_ms", g.OverheadP99)
	return nil
}

func taskMS(s CodeModeSample) float64      { return s.TaskMS }
func wallMS(s CodeModeSample) float64      { return s.WallMS }
func resultBytes(s CodeModeSample) float64 { return float64(s.ToolResultBytes) }
func requestBytes(s CodeModeSample) float64 {
	return float64(s.RequestBytes)
}
func requests(s CodeModeSample) float64 { return float64(s.Requests) }

// median is the median of one measure over a query kind's samples.
func (c *CodeModeResult) median(kind string, f func(CodeModeSample) float64) float64 {
	var ds []time.Duration
	for _, s := range c.Samples[kind] {
		ds = append(ds, time.Duration(f(s)*float64(time.Millisecond)))
	}
	return Summarize(ds).P50
}

// The code-mode targets (issue 22, section 6).
const (
	goalCodeBytes   = "code mode: tool-result bytes in the model's requests ≤ 0.2× direct (data task)"
	goalCodeWall    = "code mode: task wall time ≤ 0.5× direct (data task)"
	goalCodeGate    = "code mode: the gate's overhead per nested call, p50 ≤ 1 ms"
	goalCodeControl = "code mode: a one-lookup task no slower than 1.3× direct"
)

func (r *Results) evaluateCodeMode() {
	c := r.CodeMode
	if c == nil || c.Samples == nil {
		for id, goal := range map[string]string{"codemode_bytes": goalCodeBytes, "codemode_wall": goalCodeWall, "codemode_control": goalCodeControl} {
			r.target(id, goal, "not measured", nil)
		}
	} else {
		b := Ratio(c.median("code", resultBytes), c.median("direct", resultBytes))
		r.target("codemode_bytes", goalCodeBytes, fmt.Sprintf("%.3f×", b), ptr(b <= 0.2))
		w := Ratio(c.median("code", taskMS), c.median("direct", taskMS))
		r.target("codemode_wall", goalCodeWall, fmt.Sprintf("%.2f×", w), ptr(w <= 0.5))
		k := Ratio(c.median("control_code", taskMS), c.median("control_direct", taskMS))
		r.target("codemode_control", goalCodeControl, fmt.Sprintf("%.2f×", k), ptr(k <= 1.3))
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
	ratio := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	if c == nil {
		row("9", "code mode: one program vs the model calling MCP tools itself", "not measured", "", "", "", "")
		return
	}
	if c.Samples != nil {
		task := fmt.Sprintf("%d records from each of two MCP servers, %d a page, joined", c.Records, c.Page)
		kb := func(v float64) string { return fmt.Sprintf("%.1f KB", v/1000) }
		row("9", "code mode, data task ("+task+"), real Agent SDK, scripted model: bytes of tool results in the model's requests, code vs direct (median of "+fmt.Sprint(c.Rounds)+" rounds)",
			kb(c.median("code", resultBytes)), kb(c.median("direct", resultBytes)), fmt.Sprintf("%.3f×", Ratio(c.median("code", resultBytes), c.median("direct", resultBytes))), "≤ 0.2×", r.met("codemode_bytes"))
		row("9", "the same: bytes of every model request (the context, sent again each turn)",
			kb(c.median("code", requestBytes)), kb(c.median("direct", requestBytes)), ratio(c.median("code", requestBytes), c.median("direct", requestBytes)), "—", "")
		row("9", "the same: model requests",
			fmt.Sprintf("%.0f", c.median("code", requests)), fmt.Sprintf("%.0f", c.median("direct", requests)), ratio(c.median("code", requests), c.median("direct", requests)), "—", "")
		row("9", "the same: task wall time, the model's first request to the result",
			FormatMS(c.median("code", taskMS)), FormatMS(c.median("direct", taskMS)), ratio(c.median("code", taskMS), c.median("direct", taskMS)), "≤ 0.5×", r.met("codemode_wall"))
		row("9", "the same: query wall time, Claude Code's start (and the direct query's MCP connections) included",
			FormatMS(c.median("code", wallMS)), FormatMS(c.median("direct", wallMS)), ratio(c.median("code", wallMS), c.median("direct", wallMS)), "—", "")
		row("9", "control task, one lookup: task wall time, a program making the call vs the model calling the tool",
			FormatMS(c.median("control_code", taskMS)), FormatMS(c.median("control_direct", taskMS)), ratio(c.median("control_code", taskMS), c.median("control_direct", taskMS)), "≤ 1.3×", r.met("codemode_control"))
	}
	if g := c.Gate; g.Calls > 0 {
		row("9", fmt.Sprintf("a nested call (stdio server's lookup) through the gate (Rego decision, call, chained audit line) vs straight to the server's MCP client: extra latency p50 (%d pairs, in turn)", g.Calls),
			FormatMS(g.Through.P50)+" (+"+FormatMS(g.OverheadP50)+")", FormatMS(g.Direct.P50), ratio(g.Through.P50, g.Direct.P50), "≤ 1 ms extra", r.met("codemode_gate"))
		row("9", "the same, p99",
			FormatMS(g.Through.P99)+" (+"+FormatMS(g.OverheadP99)+")", FormatMS(g.Direct.P99), ratio(g.Through.P99, g.Direct.P99), "—", "")
	}
}
