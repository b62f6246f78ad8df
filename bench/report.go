package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Results is everything one harness run measured; it is written to
// bench/results.json, and rendered as bench/results.md and bench/latency.svg.
type Results struct {
	Generated    string             `json:"generated"`
	Seconds      float64            `json:"seconds"`
	PhaseSeconds map[string]float64 `json:"phase_seconds"`
	Machine      Machine            `json:"machine"`
	Targets      []Target           `json:"targets"`
	Decision     *DecisionResult    `json:"decision_round_trip,omitempty"`
	Throughput   []ThroughputResult `json:"throughput,omitempty"`
	Runs         []RunResult        `json:"runs,omitempty"`
	Profiles     []ProfileRun       `json:"profiles,omitempty"`
	Interpreters *InterpreterRun    `json:"warm_interpreters,omitempty"`
	Pool         []PoolResult       `json:"pool_concurrency,omitempty"`
	Kube         *KubeRun           `json:"kube,omitempty"`
	Seccomp      *SeccompResult     `json:"runsc_seccomp,omitempty"`
	CodeMode     *CodeModeResult    `json:"code_mode,omitempty"`
	Sessions     *SessionResult     `json:"sessions,omitempty"`
	Egress       *EgressResult      `json:"egress,omitempty"`
	DecisionLog  *DecisionLogResult `json:"decision_log,omitempty"`
	Memory       *MemoryResult      `json:"memory,omitempty"`
	Trace        []RunTrace         `json:"cold_run_trace,omitempty"`
	Perf         *PerfProfile       `json:"sidecar_profile,omitempty"`
	Compare      *CompareResult     `json:"compare,omitempty"`
	PprofTop     string             `json:"pprof_top,omitempty"`
	RegoBench    string             `json:"rego_bench,omitempty"`
	Notes        []string           `json:"notes,omitempty"`
	// Failed names the phases that failed; their rows say "not measured".
	Failed []string `json:"failed_phases,omitempty"`

	samples map[string][]time.Duration // raw samples, for the chart
}

// Machine is the context of a run.
type Machine struct {
	CPUs       int    `json:"cpus"`
	Kernel     string `json:"kernel"`
	LoadStart  string `json:"loadavg_start"`
	LoadEnd    string `json:"loadavg_end"`
	Go         string `json:"go"`
	Node       string `json:"node"`
	OPA        string `json:"opa"`
	Docker     string `json:"docker_engine"`
	Gatekeeper string `json:"gatekeeper"`
	Image      string `json:"image"`
}

// DecisionResult is row 1: series gatekeeper (the TypeScript client),
// raw_ws, opa and js (the floor).
type DecisionResult struct {
	Client            string             `json:"client"`
	Call              Call               `json:"call"`
	Expected          Decision           `json:"expected"`
	Series            map[string]Summary `json:"series"`
	Samples           int                `json:"samples_per_series"`
	Warmup            int                `json:"warmup_per_series"`
	Batch             int                `json:"batch"`
	FloorCases        int                `json:"floor_cases_checked"`
	GatekeeperPeakRSS int64              `json:"gatekeeper_peak_rss_bytes"`
	// Where the time went: the sidecar's CPU per decision and how long its
	// threads and Node's waited for a CPU, per call (schedstat).
	SidecarCPUPerDecisionUS float64        `json:"sidecar_cpu_per_decision_us"`
	SidecarRunQueueWaitUS   float64        `json:"sidecar_run_queue_wait_per_decision_us"`
	NodeRunQueueWaitUS      float64        `json:"node_run_queue_wait_per_call_us"`
	ClientProfile           *ClientProfile `json:"client_profile,omitempty"`
}

// ClientProfile is V8's CPU profile of the TypeScript client's calls,
// taken after the measurement: self time per call by where code lives.
type ClientProfile struct {
	Calls     int     `json:"calls"`
	WallUS    float64 `json:"wall_us_per_call"`
	ProfileUS float64 `json:"profiled_us_per_call"`
	Places    []struct {
		Name string  `json:"name"`
		US   float64 `json:"us_per_call"`
	} `json:"places"`
	Top []struct {
		Name string  `json:"name"`
		US   float64 `json:"us_per_call"`
	} `json:"top"`
}

// ThroughputResult is row 2 at one concurrency level.
type ThroughputResult struct {
	Conns        int     `json:"connections"`
	SliceSeconds float64 `json:"slice_seconds"`
	Rounds       int     `json:"rounds"`
	Gatekeeper   Rate    `json:"gatekeeper"`
	OPA          Rate    `json:"opa"`
	// AuditSync is the same sidecar with --audit-sync (an fsync per batch
	// of audit lines), measured at the heaviest level only.
	AuditSync *Rate `json:"gatekeeper_audit_sync,omitempty"`
}

// Rate is decisions per second over all of one side's slices, with where
// the CPU went: the server's CPU time per decision, and the cores the
// server and the load generator (this process) used.
type Rate struct {
	PerSecond             float64 `json:"per_second"`
	Requests              int64   `json:"requests"`
	Seconds               float64 `json:"seconds"`
	ServerCPUPerRequestUS float64 `json:"server_cpu_per_request_us"`
	ServerCores           float64 `json:"server_cores"`
	ClientCores           float64 `json:"load_generator_cores"`
}

// RunResult is row 3 for one runtime.
type RunResult struct {
	Runtime  string   `json:"runtime"`
	Warm     *Summary `json:"warm,omitempty"`
	WarmNote string   `json:"warm_note,omitempty"`
	// WarmNoSnapshot is the warm run with no snapshot of /workspace sent
	// back (no workspace kept, no files returned).
	WarmNoSnapshot *Summary `json:"warm_no_snapshot,omitempty"`
	PoolMetrics    []string `json:"pool_metrics,omitempty"`
	Cold           Summary  `json:"cold"`
	Docker         Summary  `json:"docker_run"`
	// WarmProgram and ColdProgram are the runner's own duration_ms of the
	// same runs: from the code sent to the container until the program
	// exited. The rest of a sample is the sidecar, the engine and the wire.
	WarmProgram *Summary    `json:"warm_program,omitempty"`
	ColdProgram Summary     `json:"cold_program"`
	DockerArgs  []string    `json:"docker_run_args"`
	Flags       *FlagsCheck `json:"flags_check,omitempty"`
}

// MemoryResult is row 4, in bytes.
type MemoryResult struct {
	IdleGatekeeper int64   `json:"idle_gatekeeper"`
	IdleOPA        int64   `json:"idle_opa"`
	LoadGatekeeper int64   `json:"load_gatekeeper_peak"`
	LoadOPA        int64   `json:"load_opa_peak"`
	FloodBefore    int64   `json:"flood_before"`
	FloodPeak      int64   `json:"flood_peak"`
	FloodHWM       int64   `json:"flood_vmhwm_after"`
	FloodSamples   int     `json:"flood_samples"`
	FloodPrinted   int64   `json:"flood_printed_per_run"`
	FloodReceived  int64   `json:"flood_output_frames_bytes"`
	FloodCap       int64   `json:"flood_output_max_bytes"`
	FloodTruncated bool    `json:"flood_truncated"`
	FloodSeconds   float64 `json:"flood_seconds_per_run"`
	FloodGC        GCTrace `json:"flood_gc"`
	BeforeGC       GCTrace `json:"before_flood_gc"`
}

// Target is one goal of the issue and whether this run met it. Met is nil
// when it was not measured.
type Target struct {
	ID    string `json:"id"`
	Goal  string `json:"goal"`
	Value string `json:"value"`
	Met   *bool  `json:"met"`
}

func newResults(cfg Config) *Results {
	return &Results{
		Generated:    time.Now().UTC().Format(time.RFC3339),
		PhaseSeconds: map[string]float64{},
		Machine:      Machine{CPUs: runtime.NumCPU(), Kernel: kernel(), LoadStart: loadavg(), Go: runtime.Version()},
		PprofTop:     cfg.PprofTop,
		RegoBench:    cfg.RegoBench,
		samples:      map[string][]time.Duration{},
	}
}

func (r *Results) memory() *MemoryResult {
	if r.Memory == nil {
		r.Memory = &MemoryResult{}
	}
	return r.Memory
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func (r *Results) target(id, goal, value string, met *bool) {
	r.Targets = append(r.Targets, Target{ID: id, Goal: goal, Value: value, Met: met})
}

func ptr(b bool) *bool { return &b }

// The decision targets (issue 15).
const (
	maxP50Ratio         = 0.35
	minThroughput64     = 15000
	maxCPUPerDecisionUS = 100

	goalP50        = "decision p50 ≤ 0.35× OPA REST p50 (TS client)"
	goalP99        = "decision p99 < 1 ms (bare protocol client, on the shared machine)"
	goalThroughput = "≥ 15,000 decisions/s with 64 connections (load generator on the same CPUs)"
	goalCPU        = "sidecar CPU per allowed workspace Read ≤ 100 µs (64 connections)"
)

// evaluate fills Targets from the measurements.
func (r *Results) evaluate() {
	r.Targets = nil
	if d := r.Decision; d != nil {
		gk, raw, opa := d.Series["gatekeeper"], d.Series["raw_ws"], d.Series["opa"]
		ratio := Ratio(gk.P50, opa.P50)
		r.target("decision_p50_ratio", goalP50, fmt.Sprintf("%.2f×", ratio), ptr(ratio <= maxP50Ratio))
		r.target("decision_p99", goalP99, FormatMS(raw.P99), ptr(raw.P99 < 1))
	} else {
		r.target("decision_p50_ratio", goalP50, "not measured", nil)
		r.target("decision_p99", goalP99, "not measured", nil)
	}
	if t := r.throughputAt(64); t != nil {
		r.target("throughput_64", goalThroughput, fmt.Sprintf("%.0f/s", t.Gatekeeper.PerSecond), ptr(t.Gatekeeper.PerSecond >= minThroughput64))
		cpu := t.Gatekeeper.ServerCPUPerRequestUS
		r.target("cpu_per_decision", goalCPU, fmt.Sprintf("%.0f µs", cpu), ptr(cpu <= maxCPUPerDecisionUS))
	} else {
		r.target("throughput_64", goalThroughput, "not measured", nil)
		r.target("cpu_per_decision", goalCPU, "not measured", nil)
	}
	for _, rt := range []string{"runc", "runsc"} {
		run := r.run(rt)
		switch {
		case run == nil:
			r.target("warm_"+rt, "warm p50 ≤ 0.2× docker run --rm and < 60 ms ("+rt+")", "not measured", nil)
			r.target("cold_"+rt, "cold p50 ≤ 0.8× docker run --rm ("+rt+")", "not measured", nil)
			continue
		case run.Warm == nil:
			r.target("warm_"+rt, "warm p50 ≤ 0.2× docker run --rm and < 60 ms ("+rt+")", "warm pool "+run.WarmNote, nil)
		default:
			ratio := Ratio(run.Warm.P50, run.Docker.P50)
			r.target("warm_"+rt, "warm p50 ≤ 0.2× docker run --rm and < 60 ms ("+rt+")",
				fmt.Sprintf("%.2f×, %s", ratio, FormatMS(run.Warm.P50)), ptr(ratio <= 0.2 && run.Warm.P50 < 60))
		}
		ratio := Ratio(run.Cold.P50, run.Docker.P50)
		r.target("cold_"+rt, "cold p50 ≤ 0.8× docker run --rm ("+rt+")", fmt.Sprintf("%.2f×", ratio), ptr(ratio <= 0.8))
	}
	r.evaluateProfiles()
	r.evaluatePool()
	r.evaluateCodeMode()
	r.evaluateSessions()
	r.evaluateEgress()
	r.evaluateDecisionLog()
	if m := r.Memory; m != nil && m.IdleGatekeeper > 0 {
		r.target("rss_idle", "sidecar RSS idle < 60 MiB", fmt.Sprintf("%.1f MiB", mib(m.IdleGatekeeper)), ptr(mib(m.IdleGatekeeper) < 60))
	} else {
		r.target("rss_idle", "sidecar RSS idle < 60 MiB", "not measured", nil)
	}
	if m := r.Memory; m != nil && m.FloodPeak > 0 {
		growth := mib(m.FloodPeak - m.FloodBefore)
		r.target("rss_flood", "sidecar RSS flat (within 10 MiB) through an output flood", fmt.Sprintf("%+.1f MiB", growth), ptr(growth <= 10))
	} else {
		r.target("rss_flood", "sidecar RSS flat (within 10 MiB) through an output flood", "not measured", nil)
	}
}

func (r *Results) throughputAt(n int) *ThroughputResult {
	for i := range r.Throughput {
		if r.Throughput[i].Conns == n {
			return &r.Throughput[i]
		}
	}
	return nil
}

func (r *Results) run(rt string) *RunResult {
	for i := range r.Runs {
		if r.Runs[i].Runtime == rt {
			return &r.Runs[i]
		}
	}
	return nil
}

func (r *Results) met(id string) string {
	for _, t := range r.Targets {
		if t.ID == id {
			switch {
			case t.Met == nil:
				return "not measured"
			case *t.Met:
				return "met"
			default:
				return "**missed**"
			}
		}
	}
	return ""
}

// Markdown renders the table and the evidence under it. It is what
// BENCHMARKS.md holds between its markers.
func (r *Results) Markdown() string {
	var b strings.Builder
	b.WriteString(r.Table())
	r.evidence(&b)
	return b.String()
}

// Table renders the table with the run's context and notes.
func (r *Results) Table() string {
	var b strings.Builder
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	ratio := func(a, c float64) string {
		if a == 0 || c == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", a/c)
	}
	pp := func(s Summary) string { return FormatMS(s.P50) + " (p99 " + FormatMS(s.P99) + ")" }

	row("#", "measurement (each pair measured in the same run, interleaved)", "gatekeeper", "alternative", "ratio", "target", "result")
	row("---", "---", "---:", "---:", "---:", "---", "---")
	if d := r.Decision; d != nil {
		gk, raw, opa, js := d.Series["gatekeeper"], d.Series["raw_ws"], d.Series["opa"], d.Series["js"]
		row("1", "decision round trip p50: TS client hook → sidecar vs Node → `opa run --server` REST", FormatMS(gk.P50), FormatMS(opa.P50), ratio(gk.P50, opa.P50), "≤ 0.35×", r.met("decision_p50_ratio"))
		row("1", "decision round trip p99, same samples", FormatMS(gk.P99), FormatMS(opa.P99), ratio(gk.P99, opa.P99), "—", "")
		row("1", "sidecar alone p50: bare WebSocket (no client library) vs OPA REST", FormatMS(raw.P50), FormatMS(opa.P50), ratio(raw.P50, opa.P50), "—", "")
		row("1", "sidecar alone p99: bare WebSocket vs OPA REST, same samples", FormatMS(raw.P99), FormatMS(opa.P99), ratio(raw.P99, opa.P99), "gatekeeper < 1 ms", r.met("decision_p99"))
		row("1", "in-process floor p50: TS client vs the same decision as a plain JS function", FormatMS(gk.P50), FormatMS(js.P50)+" (p99 "+FormatMS(js.P99)+")", ratio(gk.P50, js.P50), "—", "")
	} else {
		row("1", "decision round trip", "not measured", "", "", "", "")
	}
	for _, t := range r.Throughput {
		target, result := "—", ""
		if t.Conns == 64 {
			target, result = "≥ 15,000/s", r.met("throughput_64")
		}
		row("2", fmt.Sprintf("decisions/s, %d connection%s: sidecar (Go client, Unix socket) vs OPA REST (Go client, kept-alive)", t.Conns, plural(t.Conns)),
			fmt.Sprintf("%.0f/s", t.Gatekeeper.PerSecond), fmt.Sprintf("%.0f/s", t.OPA.PerSecond), ratio(t.Gatekeeper.PerSecond, t.OPA.PerSecond), target, result)
	}
	if t := r.throughputAt(64); t != nil {
		g, o := t.Gatekeeper, t.OPA
		row("2", "server CPU per decision, 64 connections: sidecar vs OPA REST, same slices", fmt.Sprintf("%.0f µs", g.ServerCPUPerRequestUS), fmt.Sprintf("%.0f µs", o.ServerCPUPerRequestUS),
			ratio(g.ServerCPUPerRequestUS, o.ServerCPUPerRequestUS), "≤ 100 µs", r.met("cpu_per_decision"))
		if x := t.AuditSync; x != nil {
			row("2", "decisions/s, 64 connections: sidecar with `--audit-sync` (an fsync per batch of lines) vs without", fmt.Sprintf("%.0f/s", x.PerSecond), fmt.Sprintf("%.0f/s", g.PerSecond), ratio(x.PerSecond, g.PerSecond), "—", "")
		}
	}
	if len(r.Throughput) == 0 {
		row("2", "decision throughput", "not measured", "", "", "", "")
	}
	for _, run := range r.Runs {
		if run.Warm != nil {
			row("3", fmt.Sprintf("Python hello world end to end, %s: warm pool vs `docker run --rm`, p50", run.Runtime), pp(*run.Warm), pp(run.Docker), ratio(run.Warm.P50, run.Docker.P50), "≤ 0.2× and < 60 ms", r.met("warm_"+run.Runtime))
		} else {
			row("3", fmt.Sprintf("Python hello world end to end, %s: warm pool vs `docker run --rm`, p50", run.Runtime), "warm pool "+run.WarmNote, pp(run.Docker), "—", "≤ 0.2× and < 60 ms", r.met("warm_"+run.Runtime))
		}
		if run.Warm != nil && run.WarmNoSnapshot != nil {
			row("3", fmt.Sprintf("Python hello world end to end, %s: warm, its workspace saved and files returned vs warm with no snapshot, p50", run.Runtime), pp(*run.Warm), pp(*run.WarmNoSnapshot), ratio(run.Warm.P50, run.WarmNoSnapshot.P50), "—", "")
		}
		row("3", fmt.Sprintf("Python hello world end to end, %s: cold (no pool) vs `docker run --rm`, p50", run.Runtime), pp(run.Cold), pp(run.Docker), ratio(run.Cold.P50, run.Docker.P50), "≤ 0.8×", r.met("cold_"+run.Runtime))
	}
	if len(r.Runs) == 0 {
		row("3", "sandboxed Python hello world", "not measured", "", "", "", "")
	}
	r.profileRows(row)
	r.poolRows(row)
	if sc := r.Seccomp; sc != nil {
		row("8", "Python hello world, runsc, `docker run --rm` with the sidecar's settings: runner/seccomp's profile applied inside gVisor (`--oci-seccomp`) vs none (`seccomp=unconfined`), p50", pp(sc.Cold), pp(sc.ColdOff), ratio(sc.Cold.P50, sc.ColdOff.P50), "—", "")
		row("8", "the same in a started container (as a warm one; code sent until the end mark): profile vs none, p50", pp(sc.Started), pp(sc.StartedOff), ratio(sc.Started.P50, sc.StartedOff.P50), "—", "")
		row("8", fmt.Sprintf("%d `getppid` calls from Python in a started container: profile vs none, p50", sc.LoopCalls), pp(sc.Loop), pp(sc.LoopOff), ratio(sc.Loop.P50, sc.LoopOff.P50), "—", "")
	} else {
		row("8", "runsc with runner/seccomp's profile vs without", "not measured", "", "", "", "")
	}
	r.codeModeRows(row)
	r.sessionRows(row)
	r.egressRows(row)
	r.decisionLogRows(row)
	if m := r.Memory; m != nil {
		if m.IdleGatekeeper > 0 {
			row("4", "resident memory (VmRSS) idle: sidecar vs OPA REST", fmt.Sprintf("%.1f MiB", mib(m.IdleGatekeeper)), fmt.Sprintf("%.1f MiB", mib(m.IdleOPA)), ratio(float64(m.IdleGatekeeper), float64(m.IdleOPA)), "< 60 MiB", r.met("rss_idle"))
		}
		if m.LoadGatekeeper > 0 {
			row("4", fmt.Sprintf("resident memory, peak under decision load (%d connections)", r.maxConns()), fmt.Sprintf("%.1f MiB", mib(m.LoadGatekeeper)), fmt.Sprintf("%.1f MiB", mib(m.LoadOPA)), ratio(float64(m.LoadGatekeeper), float64(m.LoadOPA)), "—", "")
		}
		if m.FloodPeak > 0 {
			row("4", fmt.Sprintf("resident memory through a run printing %.0f MiB (output.max_bytes %s): before → peak", mib(m.FloodPrinted), fmtBytes(m.FloodCap)),
				fmt.Sprintf("%.1f → %.1f MiB (%+.1f)", mib(m.FloodBefore), mib(m.FloodPeak), mib(m.FloodPeak-m.FloodBefore)), "—", "—", "within 10 MiB", r.met("rss_flood"))
		}
	} else {
		row("4", "resident memory", "not measured", "", "", "", "")
	}
	fmt.Fprintf(&b, "\nRun %s on %d CPUs (kernel %s), load average %s at the start and %s at the end; %.0f s in all. gatekeeper `%s`, OPA %s, Docker engine %s, Node %s, %s. Ratios are gatekeeper ÷ alternative: under 1 is faster for times, over 1 is more for rates.\n",
		r.Generated, r.Machine.CPUs, r.Machine.Kernel, r.Machine.LoadStart, r.Machine.LoadEnd, r.Seconds,
		r.Machine.Gatekeeper, strings.TrimPrefix(r.Machine.OPA, "Version: "), r.Machine.Docker, r.Machine.Node, r.Machine.Go)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n> %s\n", strings.ReplaceAll(strings.TrimSpace(n), "\n", "\n> "))
	}
	return b.String()
}

func (r *Results) maxConns() int {
	n := 0
	for _, t := range r.Throughput {
		n = max(n, t.Conns)
	}
	return n
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func fmtBytes(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// evidence is the detail under the table: every series, where the CPU
// went under load, where a cold run's time went, the flags check.
func (r *Results) evidence(b *strings.Builder) {
	r.codeModeEvidence(b)
	if d := r.Decision; d != nil {
		fmt.Fprintf(b, "\n#### Decision round trip, all series (%d samples each after %d warm-up calls, rounds of %d per series)\n\n", d.Samples, d.Warmup, d.Batch)
		b.WriteString("| series | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|\n")
		for _, k := range []struct{ key, name string }{
			{"gatekeeper", "gatekeeper via `@gatekeeper/client` (" + d.Client + ")"},
			{"raw_ws", "gatekeeper via a bare `ws` WebSocket"},
			{"opa", "OPA REST (`POST /v1/data/gatekeeper/decision`, kept-alive)"},
			{"js", "plain JS function (in-process floor)"},
		} {
			s := d.Series[k.key]
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", k.name, FormatMS(s.P50), FormatMS(s.P90), FormatMS(s.P99), FormatMS(s.Max))
		}
		fmt.Fprintf(b, "\nThe call: `%s` of a file in the workspace (decided `%s` by rule `%s`). OPA and the JS function get the exact Rego input the sidecar builds for it; every answer of every series was checked against the sidecar's decision, and the JS function against %d calls of other kinds.\n",
			d.Call.ToolName, d.Expected.Decision, d.Expected.Rule, d.FloorCases)
		fmt.Fprintf(b, "\nDuring this phase the sidecar used %.0f µs of CPU per decision, its threads waited %.0f µs per decision for a CPU, and Node's %.0f µs per call (run-queue time from /proc/…/schedstat).\n",
			d.SidecarCPUPerDecisionUS, d.SidecarRunQueueWaitUS, d.NodeRunQueueWaitUS)
		if p := d.ClientProfile; p != nil {
			fmt.Fprintf(b, "\nNode's side of one TS client call (V8 CPU profile of %d more calls after the measurement, %.0f µs wall per call):\n\n| where | µs per call |\n|---|---:|\n", p.Calls, p.WallUS)
			for _, pl := range p.Places {
				fmt.Fprintf(b, "| %s | %.1f |\n", pl.Name, pl.US)
			}
			b.WriteString("\n<details><summary>top functions (self time, idle excluded)</summary>\n\n```\n")
			for _, f := range p.Top {
				fmt.Fprintf(b, "%7.1f µs  %s\n", f.US, f.Name)
			}
			b.WriteString("```\n</details>\n")
		}
	}
	if len(r.Throughput) > 0 {
		b.WriteString("\n#### Throughput: where the CPU went\n\n")
		b.WriteString("| connections | gatekeeper/s | sidecar CPU per decision | sidecar cores | load-generator cores | OPA/s | OPA CPU per decision | OPA cores | load-generator cores |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, t := range r.Throughput {
			g, o := t.Gatekeeper, t.OPA
			fmt.Fprintf(b, "| %d | %.0f | %.0f µs | %.2f | %.2f | %.0f | %.0f µs | %.2f | %.2f |\n", t.Conns, g.PerSecond, g.ServerCPUPerRequestUS, g.ServerCores, g.ClientCores, o.PerSecond, o.ServerCPUPerRequestUS, o.ServerCores, o.ClientCores)
		}
		fmt.Fprintf(b, "\nCPU from /proc/PID/stat over each side's slices (%d rounds of %.1f s per side and level); the load generator shares the machine's %d CPUs.\n", r.Throughput[0].Rounds, r.Throughput[0].SliceSeconds, r.Machine.CPUs)
		for _, t := range r.Throughput {
			if x := t.AuditSync; x != nil {
				fmt.Fprintf(b, "\nInterleaved with the %d-connection slices: the same sidecar with `--audit-sync` (every decision waits for an fsync of its audit line; lines written together share one) served %.0f decisions/s at %.0f µs of CPU per decision, against %.0f/s at %.0f µs without (%.2f×).\n",
					t.Conns, x.PerSecond, x.ServerCPUPerRequestUS, t.Gatekeeper.PerSecond, t.Gatekeeper.ServerCPUPerRequestUS, Ratio(x.PerSecond, t.Gatekeeper.PerSecond))
			}
		}
	}
	if p := r.Perf; p != nil {
		fmt.Fprintf(b, "\n#### Profile of the running sidecar under the heaviest load (perf, %d samples)\n\n", p.Samples)
		p.markdown(b)
	}
	if r.RegoBench != "" {
		b.WriteString("\nThe Rego evaluation alone, in-process (`go test ./bench -bench RegoDecision -benchmem`: OPA's rego package, prepared once, the sidecar's input for the same Read, then that input with the deny globs removed, then a denied tool with no paths):\n\n```\n")
		for _, l := range strings.Split(r.RegoBench, "\n") {
			if strings.HasPrefix(l, "Benchmark") {
				b.WriteString(l + "\n")
			}
		}
		b.WriteString("```\n")
	}
	if c := r.Compare; c != nil {
		c.markdown(b)
	}
	if r.PprofTop != "" {
		b.WriteString("\n<details><summary>Go CPU profile of the server under parallel decide load (go test -bench BenchmarkSidecarDecide -cpuprofile; pprof -top, server goroutines only)</summary>\n\n```\n")
		b.WriteString(strings.TrimRight(r.PprofTop, "\n"))
		b.WriteString("\n```\n</details>\n")
	}
	for _, t := range r.Trace {
		kind := "cold (no pool)"
		if t.Warm {
			kind = "warm (pool of 2, full before each run)"
		}
		fmt.Fprintf(b, "\n#### Where a %s %s run's time goes (gatekeeper's Docker runner in-process, %d traced runs, p50 %s)\n\n", kind, t.Runtime, t.Runs, FormatMS(t.Total.P50))
		b.WriteString("| engine API call | per run | p50 | max |\n|---|---:|---:|---:|\n")
		for _, c := range t.Calls {
			fmt.Fprintf(b, "| `%s` | %.1f | %s | %s |\n", c.Call, c.PerRun, FormatMS(c.P50), FormatMS(c.Max))
		}
		fmt.Fprintf(b, "\nFrom the run's start, p50 (p90): the program's first statement ran at %s (%s), after the engine, the launcher (sh, timeout, tar, env) and the Python interpreter's start; its output reached the runner at %s (%s); the run returned at %s (%s), once the launcher's end marks (or, for an exit by signal, the engine's `wait`) and `inspect` were in; the container is removed after that, off the run's path.\n",
			FormatMS(t.FirstLine.P50), FormatMS(t.FirstLine.P90), FormatMS(t.Output.P50), FormatMS(t.Output.P90), FormatMS(t.Total.P50), FormatMS(t.Total.P90))
		if len(t.Timeline) > 0 {
			fmt.Fprintf(b, "\nThe median run (%s), every engine call that overlapped it, in ms from its start:\n\n```\n", FormatMS(t.Median))
			for _, e := range t.Timeline {
				fmt.Fprintf(b, "%8.1f → %8.1f  %s\n", e.Start, e.End, e.Call)
			}
			b.WriteString("```\n")
		}
	}
	if len(r.Trace) > 0 {
		b.WriteString("\nTimes run from request sent to response body closed: `wait` and `stats` stream for as long as their container lives, so a warm container's `wait` began when the pool made it; attach (a hijacked connection) is not listed.\n")
	}
	for _, run := range r.Runs {
		if f := run.Flags; f != nil {
			if len(f.Diffs) == 0 {
				fmt.Fprintf(b, "\nFlags check (%s): the container `docker run` creates matches the sidecar's in all %d settings compared (argv, user, env, mounts, limits, security options, runtime).\n", f.Runtime, f.Compared)
			} else {
				fmt.Fprintf(b, "\nFlags check (%s): %d of %d settings differ:\n\n", f.Runtime, len(f.Diffs), f.Compared)
				for _, d := range f.Diffs {
					fmt.Fprintf(b, "- %s\n", d)
				}
			}
		}
		fmt.Fprintf(b, "\nInside the %s runs: the runner's own `duration_ms` (code sent to the container until the program exited) was p50 %s of the cold runs' %s end to end",
			run.Runtime, FormatMS(run.ColdProgram.P50), FormatMS(run.Cold.P50))
		if run.WarmProgram != nil && run.Warm != nil {
			fmt.Fprintf(b, ", and p50 %s of the warm runs' %s", FormatMS(run.WarmProgram.P50), FormatMS(run.Warm.P50))
		}
		b.WriteString(" (whole milliseconds).\n")
		if len(run.PoolMetrics) > 0 {
			fmt.Fprintf(b, "\nWarm pool metrics (%s) after the run:\n\n```\n%s\n```\n", run.Runtime, strings.Join(run.PoolMetrics, "\n"))
		}
	}
	if m := r.Memory; m != nil && m.FloodPeak > 0 {
		fmt.Fprintf(b, "\nOutput flood (a sidecar of its own, after one ordinary run): each of two runs printed %.0f MiB in %.1f s; the client received %.2f MiB of output frames (truncated: %v); VmRSS sampled every 10 ms (%d samples), VmHWM afterwards %.1f MiB. Go heap (GODEBUG=gctrace=1): %d MB live before the flood; during it %d collections, heap at most %d MB, live after a collection at most %d MB, goal at most %d MB, goroutine stacks at most %d MB.\n",
			mib(m.FloodPrinted), m.FloodSeconds, mib(m.FloodReceived), m.FloodTruncated, m.FloodSamples, mib(m.FloodHWM),
			m.BeforeGC.LastLiveMB, m.FloodGC.Cycles, m.FloodGC.MaxHeapMB, m.FloodGC.MaxLiveMB, m.FloodGC.MaxGoalMB, m.FloodGC.MaxStacks)
	}
}

// markdown renders the profile's tables: self time by package, the key
// functions' inclusive shares, the top symbols.
func (p *PerfProfile) markdown(b *strings.Builder) {
	b.WriteString("| where (self time, by package) | share of sidecar CPU |\n|---|---:|\n")
	for _, e := range p.Buckets {
		if e.Percent >= 0.5 {
			fmt.Fprintf(b, "| %s | %.1f%% |\n", e.Name, e.Percent)
		}
	}
	if len(p.Paths) > 0 {
		b.WriteString("\n| key function, including what it calls | share of sidecar CPU |\n|---|---:|\n")
		for _, e := range p.Paths {
			fmt.Fprintf(b, "| %s | %.1f%% |\n", e.Name, e.Percent)
		}
	}
	b.WriteString("\n<details><summary>top symbols (self time)</summary>\n\n```\n")
	for _, e := range p.Top {
		fmt.Fprintf(b, "%6.2f%%  %s\n", e.Percent, e.Name)
	}
	b.WriteString("```\n</details>\n")
}

// Chart renders bench/latency.svg from the raw samples.
func (r *Results) Chart() []byte {
	var panels []ChartPanel
	if r.Decision != nil {
		p := ChartPanel{Title: "Decision round trip from Node", Marks: []ChartMark{{At: 1, Label: "p99 target 1 ms"}}}
		for _, s := range []struct{ key, name, color string }{
			{"js", "plain JS function (floor)", "#2ca02c"},
			{"raw_ws", "gatekeeper, bare WebSocket", "#17becf"},
			{"gatekeeper", "gatekeeper, TS client hook", "#1f77b4"},
			{"opa", "OPA REST server", "#d62728"},
		} {
			p.Series = append(p.Series, ChartSeries{Name: s.name, Color: s.color, Samples: r.samples["decide/"+s.key]})
		}
		panels = append(panels, p)
	}
	if len(r.Runs) > 0 {
		p := ChartPanel{Title: "Python hello world, end to end", Marks: []ChartMark{{At: 60, Label: "warm target 60 ms"}}}
		for _, run := range r.Runs {
			dashed := run.Runtime == "runsc"
			for _, s := range []struct{ key, name, color string }{
				{"warm", "gatekeeper warm", "#9467bd"},
				{"cold", "gatekeeper cold", "#1f77b4"},
				{"docker", "docker run --rm", "#d62728"},
			} {
				if ds := r.samples["run/"+run.Runtime+"/"+s.key]; len(ds) > 0 {
					p.Series = append(p.Series, ChartSeries{Name: s.name + " (" + run.Runtime + ")", Color: s.color, Dashed: dashed, Samples: ds})
				}
			}
		}
		panels = append(panels, p)
	}
	if len(r.Profiles) > 0 {
		p := ChartPanel{Title: "Hello world per image profile, runc, end to end"}
		colors := []string{"#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"}
		for i, pr := range r.Profiles {
			for _, kind := range []string{"warm", "cold"} {
				if ds := r.samples["profile/"+pr.Profile+"/"+kind]; len(ds) > 0 {
					p.Series = append(p.Series, ChartSeries{Name: pr.Profile + " " + kind, Color: colors[i%len(colors)], Dashed: kind == "cold", Samples: ds})
				}
			}
		}
		panels = append(panels, p)
	}
	return RenderChart("gatekeeper vs the alternatives: latency distributions ("+r.Generated+")", panels)
}

// Table markers in BENCHMARKS.md: scripts/bench replaces what lies between.
const (
	MarkBegin = "<!-- bench:results:begin (generated by make bench; do not edit) -->"
	MarkEnd   = "<!-- bench:results:end -->"
)

// write saves results.json, results.md and latency.svg under cfg.Out, and
// replaces the results section of BENCHMARKS.md if cfg asks.
func (r *Results) write(cfg Config) error {
	if err := writeJSON(filepath.Join(cfg.Out, "results.json"), r); err != nil {
		return err
	}
	md := r.Markdown()
	if err := os.WriteFile(filepath.Join(cfg.Out, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	if !cfg.Merge { // a merged run lacks the other phases' samples
		if err := os.WriteFile(filepath.Join(cfg.Out, "latency.svg"), r.Chart(), 0o644); err != nil {
			return err
		}
	}
	raw := map[string][]float64{}
	keys := make([]string, 0, len(r.samples))
	for k := range r.samples {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, d := range r.samples[k] {
			raw[k] = append(raw[k], ms(d))
		}
	}
	return writeJSON(filepath.Join(cfg.Work, "samples-ms.json"), raw)
}

// SpliceMarkdown replaces the text between MarkBegin and MarkEnd in doc
// with md.
func SpliceMarkdown(doc []byte, md string) ([]byte, error) {
	return SpliceBetween(doc, MarkBegin, MarkEnd, md)
}

// SpliceBetween replaces the text between the markers begin and end in
// doc with md.
func SpliceBetween(doc []byte, begin, end, md string) ([]byte, error) {
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, errors.New("no results markers")
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(begin)])
	out.WriteString("\n\n" + strings.TrimSpace(md) + "\n\n")
	out.Write(doc[j:])
	return out.Bytes(), nil
}
