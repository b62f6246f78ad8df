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

// CodeModeResult is row 9: code mode (issue 31, section 1). Two tasks, each
// done both ways through the real Agent SDK with the scripted model
// (walkthroughs/bench/codemode.ts), both sides offered the same tools: a
// data task (500 records paged from each of two MCP servers and joined),
// where the code side first reads the wrappers in a run of its own and the
// direct side is measured one page per turn and with parallel pages; and a
// see task (five records the model reads and judges). Figures compares code
// with the better direct agent, round by round. And the gate's own cost on
// a nested call.
type CodeModeResult struct {
	Rounds  int `json:"rounds"`
	Records int `json:"records_per_server"`
	Page    int `json:"page_size"`
	See     int `json:"see_records"`
	// Order is each timed round's order of the queries (ABBA: forward, then reversed).
	Order [][]string `json:"order"`
	// Per query kind (code, direct_serial, direct_parallel, see_code,
	// see_direct): one sample per round.
	Samples map[string][]CodeModeSample `json:"samples"`
	// Latency is the model the wall figures add to the measured times.
	Latency LatencyModel `json:"latency_model"`
	// Figures are the comparisons, computed from Samples by figures().
	Figures []CodeModeFigure `json:"figures"`
	// Gate is a nested call through the gate (decision, forwarding, audit
	// line) vs the same call straight to the server's MCP client.
	Gate CodeModeGate `json:"gate_overhead"`
}

// CodeModeSample is one query of the Agent SDK.
type CodeModeSample struct {
	// WallMS runs from query() to its result, Claude Code's start included.
	WallMS float64 `json:"wall_ms"`
	// TaskMS runs from the model's first request to the result, the model answering at once.
	TaskMS          float64        `json:"task_ms"`
	ToolResultBytes int64          `json:"tool_result_bytes"`
	Tools           []string       `json:"tools"`
	Turns           []CodeModeTurn `json:"turns"`
}

// CodeModeTurn is one model request and the model's answer to it.
type CodeModeTurn struct {
	// InBytes is the request body: all the model reads this turn.
	InBytes int64 `json:"in_bytes"`
	// ToolsBytes is its tool listing (schemas, or the run tool's description).
	ToolsBytes int64 `json:"tools_bytes"`
	// CachedBytes is its prefix equal to the previous request's.
	CachedBytes int64 `json:"cached_bytes"`
	// OutBytes is what the model wrote: tool names and inputs (a program), or text.
	OutBytes int64 `json:"out_bytes"`
	// AfterMS runs from this request to the next (or to the result): tools, sandbox, Claude Code.
	AfterMS float64 `json:"after_ms"`
	Calls   int     `json:"calls"`
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
		See     int                         `json:"see"`
		Order   [][]string                  `json:"order"`
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
	res.Rounds, res.Records, res.Page, res.See, res.Order, res.Samples = got.Rounds, got.Records, got.Page, got.See, got.Order, got.Samples
	res.Latency = PublishedLatency
	res.Figures = res.figures()
	for _, f := range res.Figures {
		e.cfg.Log.Info("bench: code mode", "task", f.Task, "figure", f.Name, "code", f.Code, "direct", f.Direct, "ratio", f.Ratio.Median, "low", f.Ratio.Low, "high", f.Ratio.High)
	}
	return nil
}

var codeModeKinds = []string{kindCode, kindSerial, kindParallel, kindSeeCode, kindSeeDirect}

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
		var r runner.ToolResult
		var raw json.RawMessage
		var d1, d2 time.Duration
		var err error
		viaGate := func() {
			t0 := time.Now()
			r = caller.CallTool(ctx, runner.NestedCall{Server: "crm", Tool: "lookup", Arguments: args, Seq: i + 1, InFlight: 1})
			d1 = time.Since(t0)
		}
		straight := func() {
			t0 := time.Now()
			raw, err = servers.CallTool(ctx, "crm", "lookup", args)
			d2 = time.Since(t0)
		}
		// The pair's order alternates (ABBA), so that neither side always follows the other.
		if i%2 == 0 {
			viaGate()
			straight()
		} else {
			straight()
			viaGate()
		}
		if r.Err != nil {
			return fmt.Errorf("through the gate: %s %s: %s", r.Err.Kind, r.Err.Rule, r.Err.Message)
		}
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
