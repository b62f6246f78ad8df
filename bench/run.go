package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Config says what to measure with which programs. The zero values of the
// counts mean the defaults in the comments.
type Config struct {
	// Repo is the repository root: sandbox.policy.yaml, rego/, ts-client/.
	Repo string
	// Programs: bin/gatekeeper, the opa binary, the docker CLI, node.
	Gatekeeper, OPA, Docker, Node string
	// Image is the sandbox image tag (`gatekeeper image build` prints it).
	Image string
	// Work holds logs and intermediate files (bench/out); Out receives
	// results.json, results.md and latency.svg (bench/).
	Work, Out string
	// Decisions is the number of samples per decision series (5000),
	// after Warmup calls each (500), in rounds of Batch calls (10).
	Decisions, Warmup, Batch int
	// Conns are the throughput concurrency levels (1, 16, 64); each is
	// measured in Rounds (3) interleaved slices of Slice (500ms) per side.
	Conns  []int
	Slice  time.Duration
	Rounds int
	// Runs is the number of container runs per series (40); TraceRuns the
	// number of traced runs through the runner, cold and then warm (10 each);
	// ProfileRuns the runs per series of row 5, per image profile (20).
	Runs, TraceRuns, ProfileRuns int
	// FloodMiB is how much the output-flood run prints (100).
	FloodMiB int
	// PoolThink are the pauses of the pool phase's sessions between runs
	// (the model's turn), one set of levels each (5s and 1s).
	PoolThink []time.Duration
	// PoolSessions are its levels of concurrent sessions (8, 32), after a
	// single session, the reference.
	PoolSessions []int
	// Kube also measures rows 6 and 7 on Kubernetes Pods (phase kube):
	// sidecars with --runner kube on the cluster the environment names
	// (scripts/ensure-kube env), the python-data image loaded in it.
	Kube bool
	// Perf records the sidecar with perf(1) during the heaviest throughput
	// level, when perf is installed.
	Perf bool
	// PprofTop is the output of `go tool pprof -top` for the Go benchmark
	// BenchmarkSidecarDecide (scripts/bench makes it); quoted in the report.
	PprofTop string
	// RegoBench is the output of `go test -bench RegoDecision`: the Rego
	// evaluation alone, by input shape; quoted in the report.
	RegoBench string
	// Compare lists sidecar builds to measure against each other (a
	// change's before and after) in the compare phase, which runs only
	// when it is given.
	Compare []Variant
	// Only limits the run to these phases: decisions (row 1 and idle
	// memory), throughput (row 2 and memory under load), runs (row 3),
	// memory (the output flood), trace (a cold run by engine API call),
	// profiles (row 5: hello world per image profile), interpreters (row
	// 6: warm interpreters, a pandas hello world), pool (row 7: the pool
	// under 8 and 32 concurrent sessions), kube (rows 6 and 7 on Pods,
	// with Kube), seccomp (row 8: runsc with and without the container's
	// seccomp profile), codemode (row 9: code mode vs the model calling
	// MCP tools itself, through the Agent SDK, and the gate's overhead on a
	// nested call), sessions (row 10: a sandbox kept for a query's runs
	// against single-use runs, at scale, and idle sessions' memory),
	// egress (row 11: an HTTPS request the egress proxy intercepts against
	// one it tunnels), decisionlog (row 12: decision-log throughput and a
	// receiver outage of DecisionLogOutage), compare (Compare); empty
	// means all.
	Only []string
	// DecisionLogOutage is row 12's receiver outage (5m).
	DecisionLogOutage time.Duration
	// Merge lays this run's rows over Out's results.json instead of
	// replacing it (see MergeResults): with Only, the rows of one phase
	// are measured again and the others kept. latency.svg is then left as it is.
	Merge bool
	Log   *slog.Logger
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Decisions, 5000)
	def(&c.Warmup, 500)
	def(&c.Batch, 10)
	def(&c.Rounds, 3)
	def(&c.Runs, 40)
	def(&c.TraceRuns, 10)
	def(&c.ProfileRuns, 20)
	def(&c.FloodMiB, 100)
	if len(c.Conns) == 0 {
		c.Conns = []int{1, 16, 64}
	}
	if len(c.PoolSessions) == 0 {
		c.PoolSessions = []int{8, 32}
	}
	if len(c.PoolThink) == 0 {
		c.PoolThink = []time.Duration{5 * time.Second, time.Second}
	}
	if c.DecisionLogOutage <= 0 {
		c.DecisionLogOutage = 5 * time.Minute
	}
	if c.Slice <= 0 {
		c.Slice = 500 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if abs, err := filepath.Abs(c.Repo); err == nil {
		c.Repo = abs
	}
}

func (c *Config) wants(phase string) bool {
	if len(c.Only) == 0 {
		return true
	}
	return slices.Contains(c.Only, phase)
}

// env is one harness run's shared state.
type env struct {
	cfg     Config
	tmp     string // sockets and policies (short paths: Unix socket names are limited)
	policy  map[string]string
	call    Call
	input   map[string]any
	want    Decision
	res     *Results
	cleanup []func()
}

// helloCode is the sandboxed hello world.
const helloCode = `print("hello, world")`

// Run measures everything cfg asks for and writes the report. A phase that
// fails is recorded as a note and the others still run; Run returns an
// error only when nothing useful could be measured or written.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	cfg.defaults()
	begin := time.Now()
	if err := os.MkdirAll(cfg.Work, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "gkbench-")
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, tmp: tmp, policy: map[string]string{}, res: newResults(cfg)}
	defer func() {
		for i := len(e.cleanup) - 1; i >= 0; i-- {
			e.cleanup[i]()
		}
		os.RemoveAll(tmp)
	}()
	if err := e.setup(ctx); err != nil {
		return nil, err
	}
	phases := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"decisions", e.decisions},
		{"throughput", e.throughput},
		{"runs", e.runs},
		{"profiles", e.profiles},
		{"memory", e.flood},
		{"trace", e.trace},
		{"interpreters", e.interpreters},
		{"pool", e.pool},
		{"kube", e.kube},
		{"seccomp", e.seccomp},
		{"codemode", e.codemode},
		{"sessions", e.sessions},
		{"egress", e.egress},
		{"decisionlog", e.decisionLog},
		{"compare", e.compare},
	}
	for _, p := range phases {
		if !cfg.wants(p.name) || p.name == "compare" && len(cfg.Compare) == 0 || p.name == "kube" && !cfg.Kube {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		cfg.Log.Info("bench: phase", "phase", p.name)
		t0 := time.Now()
		if err := p.fn(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			cfg.Log.Error("bench: phase failed", "phase", p.name, "err", err)
			e.res.Notes = append(e.res.Notes, fmt.Sprintf("phase %s failed: %v", p.name, err))
			e.res.Failed = append(e.res.Failed, p.name)
		}
		e.res.PhaseSeconds[p.name] = time.Since(t0).Seconds()
	}
	e.res.Machine.LoadEnd = loadavg()
	e.res.Seconds = time.Since(begin).Seconds()
	e.res.evaluate()
	if cfg.Merge {
		old, err := os.ReadFile(filepath.Join(cfg.Out, "results.json"))
		if err != nil {
			return e.res, fmt.Errorf("-merge: %w", err)
		}
		if e.res, err = MergeResults(old, e.res, cfg.Only); err != nil {
			return nil, err
		}
	}
	if err := e.res.write(cfg); err != nil {
		return e.res, err
	}
	return e.res, nil
}

// setup writes the policies and the workspace, and gets the Rego input and
// the expected decision from the sidecar's own code.
func (e *env) setup(ctx context.Context) error {
	shipped, err := os.ReadFile(filepath.Join(e.cfg.Repo, "sandbox.policy.yaml"))
	if err != nil {
		return err
	}
	ws := filepath.Join(e.tmp, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		return err
	}
	for _, rt := range []string{"runc", "runsc"} {
		if e.policy[rt], err = WritePolicy(shipped, e.tmp, rt, rt); err != nil {
			return err
		}
	}
	e.res.Machine.Gatekeeper = versionOf(ctx, e.cfg.Gatekeeper, "version")
	e.res.Machine.OPA = firstLine(versionOf(ctx, e.cfg.OPA, "version"))
	e.res.Machine.Docker = versionOf(ctx, e.cfg.Docker, "version", "--format", "{{.Server.Version}}")
	e.res.Machine.Node = versionOf(ctx, e.cfg.Node, "--version")
	e.res.Machine.Image = e.cfg.Image

	e.call = Call{ToolName: "Read", ToolInput: map[string]any{"file_path": filepath.Join(ws, "notes.txt")}, ToolUseID: "toolu_bench_read", Event: "PreToolUse"}
	e.input, e.want, err = RegoInput(ctx, e.cfg.Gatekeeper, e.policy["runc"], e.tmp, e.call)
	if err != nil {
		return fmt.Errorf("rego input: %w", err)
	}
	if e.want.Decision != "allow" {
		return fmt.Errorf("the benchmark call is not allowed by the shipped policy: %+v", e.want)
	}
	return nil
}

// floorCases are calls whose decisions the JS floor must reproduce.
func (e *env) floorCases(ctx context.Context) ([]map[string]any, error) {
	ws := filepath.Join(e.tmp, "workspace")
	home, _ := os.UserHomeDir()
	calls := map[string]Call{
		"read inside":       e.call,
		"read ~/.ssh":       {ToolName: "Read", ToolInput: map[string]any{"file_path": "~/.ssh/id_rsa"}},
		"read home":         {ToolName: "Read", ToolInput: map[string]any{"file_path": filepath.Join(home, ".bashrc")}},
		"read /etc":         {ToolName: "Read", ToolInput: map[string]any{"file_path": "/etc/passwd"}},
		"write .env":        {ToolName: "Write", ToolInput: map[string]any{"file_path": filepath.Join(ws, "app/.env"), "content": "x"}},
		"write git hooks":   {ToolName: "Write", ToolInput: map[string]any{"file_path": filepath.Join(ws, ".git/hooks/pre-commit"), "content": "x"}},
		"glob":              {ToolName: "Glob", ToolInput: map[string]any{"pattern": "**/*.go"}},
		"grep over a .env":  {ToolName: "Grep", ToolInput: map[string]any{"pattern": "x", "path": ws}},
		"grep beside it":    {ToolName: "Grep", ToolInput: map[string]any{"pattern": "x", "path": filepath.Join(ws, "lib")}},
		"bash":              {ToolName: "Bash", ToolInput: map[string]any{"command": "ls"}},
		"unknown tool":      {ToolName: "Frobnicate", ToolInput: map[string]any{}},
		"malformed name":    {ToolName: "Read ", ToolInput: map[string]any{"file_path": "x"}},
		"webfetch":          {ToolName: "WebFetch", ToolInput: map[string]any{"url": "https://example.com/"}},
		"sandbox run":       {ToolName: "mcp__sandboxed_code__run", ToolInput: map[string]any{"language": "python", "code": "print(1)"}, MCPServer: &MCPServer{Name: "sandboxed_code", Source: "sdk"}},
		"sandbox run stdio": {ToolName: "mcp__sandboxed_code__run", ToolInput: map[string]any{"language": "python", "code": "print(1)"}, MCPServer: &MCPServer{Name: "sandboxed_code", Source: "stdio"}},
		"sandbox bad lang":  {ToolName: "mcp__sandboxed_code__run", ToolInput: map[string]any{"language": "ruby", "code": "1"}, MCPServer: &MCPServer{Name: "sandboxed_code", Source: "sdk"}},
	}
	// A .env for the Grep cases to find below the workspace, and a
	// directory without one.
	for _, d := range []string{filepath.Join(ws, "app"), filepath.Join(ws, "lib")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "app", ".env"), []byte("KEY=x\n"), 0o600); err != nil {
		return nil, err
	}
	var out []map[string]any
	for name, c := range calls {
		if c.ToolUseID == "" {
			c.ToolUseID = "toolu_floor"
		}
		c.Event = "PreToolUse"
		in, want, err := RegoInput(ctx, e.cfg.Gatekeeper, e.policy["runc"], e.tmp, c)
		if err != nil {
			return nil, fmt.Errorf("floor case %s: %w", name, err)
		}
		out = append(out, map[string]any{"name": name, "input": in, "expected": want})
	}
	return out, nil
}

// startSidecar starts a sidecar that is stopped when Run ends (or earlier
// by the caller), serving o.Policy or, when that is empty, the shipped
// policy under runtime.
func (e *env) startSidecar(ctx context.Context, runtime string, o SidecarOptions) (*Sidecar, error) {
	return e.startSidecarBinary(ctx, e.cfg.Gatekeeper, runtime, o)
}

// startSidecarBinary starts binary as a sidecar, as startSidecar does.
func (e *env) startSidecarBinary(ctx context.Context, binary, runtime string, o SidecarOptions) (*Sidecar, error) {
	o.Binary, o.Dir = binary, e.tmp
	if o.Policy == "" {
		o.Policy = e.policy[runtime]
	}
	s, err := StartSidecar(ctx, o)
	if err != nil {
		return nil, err
	}
	e.cleanup = append(e.cleanup, s.Stop)
	return s, nil
}

// sidecarQuery starts a sidecar (see startSidecar), connects to it and
// opens a query without an override; it returns the query's id and
// effective policy. The client closes when Run ends, or earlier by the
// caller.
func (e *env) sidecarQuery(ctx context.Context, runtime string, o SidecarOptions) (*Sidecar, *Client, string, json.RawMessage, error) {
	sc, err := e.startSidecar(ctx, runtime, o)
	if err != nil {
		return nil, nil, "", nil, err
	}
	c, err := Dial(ctx, sc.Socket, sc.Token)
	if err != nil {
		return nil, nil, "", nil, err
	}
	e.cleanup = append(e.cleanup, func() { c.Close() })
	q, eff, err := c.OpenQuery(nil)
	if err != nil {
		return nil, nil, "", nil, err
	}
	return sc, c, q, eff, nil
}

func (e *env) startOPA(ctx context.Context) (*Process, error) {
	dir := filepath.Join(e.tmp, "opa")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Every built-in module but the tests: gatekeeper.rego needs core.rego.
	srcs, err := filepath.Glob(filepath.Join(e.cfg.Repo, "rego", "*.rego"))
	if err != nil {
		return nil, err
	}
	var modules []string
	for _, src := range srcs {
		if strings.HasSuffix(src, "_test.rego") {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		m := filepath.Join(dir, filepath.Base(src))
		if err := os.WriteFile(m, b, 0o644); err != nil {
			return nil, err
		}
		modules = append(modules, m)
	}
	p, err := StartOPA(ctx, e.cfg.OPA, dir, modules...)
	if err != nil {
		return nil, err
	}
	e.cleanup = append(e.cleanup, p.Stop)
	return p, nil
}

// decisions measures row 1 (and the idle memory of row 4): the Node script
// against a fresh sidecar and OPA.
func (e *env) decisions(ctx context.Context) error {
	sc, err := e.startSidecar(ctx, "runc", SidecarOptions{Name: "decide"})
	if err != nil {
		return err
	}
	defer sc.Stop()
	opa, err := e.startOPA(ctx)
	if err != nil {
		return err
	}
	defer opa.Stop()
	time.Sleep(time.Second)
	m := e.res.memory()
	if mem, err := ReadMemory(sc.PID()); err == nil {
		m.IdleGatekeeper = mem.RSS
	}
	if mem, err := ReadMemory(opa.PID()); err == nil {
		m.IdleOPA = mem.RSS
	}

	cases, err := e.floorCases(ctx)
	if err != nil {
		return err
	}
	outPath := filepath.Join(e.cfg.Work, "decide-samples.json")
	nodeCfg := map[string]any{
		"tsClient": filepath.Join(e.cfg.Repo, "ts-client"),
		"url":      "unix://" + sc.Socket, "socket": sc.Socket, "tokenFile": sc.TokenFile,
		"opaSocket": opa.Socket, "cwd": filepath.Join(e.tmp, "workspace"),
		"call": e.call, "input": e.input, "expected": e.want, "floorCases": cases,
		"samples": e.cfg.Decisions, "warmup": e.cfg.Warmup, "batch": e.cfg.Batch, "out": outPath,
		"profileCalls": profileCalls,
	}
	cfgPath := filepath.Join(e.cfg.Work, "decide-config.json")
	if err := writeJSON(cfgPath, nodeCfg); err != nil {
		return err
	}
	logPath := filepath.Join(e.cfg.Work, "decide-node.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	nctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(nctx, e.cfg.Node, filepath.Join(e.cfg.Repo, "bench", "node", "decide.mjs"), cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	sampler := SampleRSS(sc.PID(), 50*time.Millisecond)
	wait0, cpu0 := runQueueWait(sc.PID()), cpuTime(sc.PID())
	err = cmd.Run()
	wait1, cpu1 := runQueueWait(sc.PID()), cpuTime(sc.PID())
	peak, _ := sampler.Stop()
	if err != nil {
		return fmt.Errorf("node decide.mjs: %w; see %s:\n%s", err, logPath, Tail(logPath, 10))
	}
	var out struct {
		Node           string             `json:"node"`
		Client         string             `json:"client"`
		Samples        map[string][]int64 `json:"samples"`
		Profile        *ClientProfile     `json:"profile"`
		RunQueueWaitNS int64              `json:"run_queue_wait_ns"`
	}
	b, err := os.ReadFile(outPath)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("%s: %w", outPath, err)
	}
	d := &DecisionResult{Client: out.Client, Call: e.call, Expected: e.want, Series: map[string]Summary{},
		Samples: e.cfg.Decisions, Warmup: e.cfg.Warmup, Batch: e.cfg.Batch, FloorCases: len(cases), GatekeeperPeakRSS: peak,
		ClientProfile: out.Profile}
	// The sidecar answered the client's and the bare WebSocket's calls.
	decided := float64(2*(e.cfg.Decisions+e.cfg.Warmup) + profileCalls)
	d.SidecarCPUPerDecisionUS = float64((cpu1 - cpu0).Microseconds()) / decided
	d.SidecarRunQueueWaitUS = float64((wait1 - wait0).Microseconds()) / decided
	if out.RunQueueWaitNS >= 0 {
		d.NodeRunQueueWaitUS = float64(out.RunQueueWaitNS) / 1000 / float64(4*(e.cfg.Decisions+e.cfg.Warmup))
	}
	for k, ns := range out.Samples {
		ds := make([]time.Duration, len(ns))
		for i, v := range ns {
			ds[i] = time.Duration(v)
		}
		d.Series[k] = Summarize(ds)
		e.res.samples["decide/"+k] = ds
	}
	e.res.Decision = d
	return nil
}

// profileCalls is how many client calls decide.mjs profiles after measuring.
const profileCalls = 2000

// runQueueWait is how long pid's threads have waited for a CPU, from
// /proc/PID/task/*/schedstat; 0 if it cannot be read.
func runQueueWait(pid int) time.Duration {
	_, wait, _ := schedstat(pid)
	return wait
}

// schedstat sums /proc/PID/task/*/schedstat over pid's threads: the time
// they ran, the time they waited for a CPU, and how many times they were
// put on one. Threads that have exited are not counted; zeros if nothing
// can be read.
func schedstat(pid int) (ran, waited time.Duration, slices int64) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, 0, 0
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		var r, w, n int64
		if _, err := fmt.Sscan(string(b), &r, &w, &n); err == nil {
			ran, waited, slices = ran+time.Duration(r), waited+time.Duration(w), slices+n
		}
	}
	return ran, waited, slices
}

// throughput measures row 2 and the under-load memory of row 4. At the
// heaviest level a third side runs interleaved with the two others: the
// same sidecar with --audit-sync, whose decisions each wait for an fsync of
// their audit line, shared by the lines written together (group commit).
func (e *env) throughput(ctx context.Context) error {
	sc, err := e.startSidecar(ctx, "runc", SidecarOptions{Name: "load"})
	if err != nil {
		return err
	}
	defer sc.Stop()
	synced, err := e.startSidecar(ctx, "runc", SidecarOptions{Name: "load-sync", Args: []string{"--audit-sync"}})
	if err != nil {
		return err
	}
	defer synced.Stop()
	opa, err := e.startOPA(ctx)
	if err != nil {
		return err
	}
	defer opa.Stop()
	mkFrame, wantRule := e.decideFrame(), e.wantRule()
	body, err := json.Marshal(map[string]any{"input": e.input})
	if err != nil {
		return err
	}
	maxConns := 0
	for _, n := range e.cfg.Conns {
		maxConns = max(maxConns, n)
	}
	m := e.res.memory()
	for _, n := range e.cfg.Conns {
		heaviest := n == maxConns
		tr := ThroughputResult{Conns: n, SliceSeconds: e.cfg.Slice.Seconds(), Rounds: e.cfg.Rounds}
		type side struct {
			name    string
			pid     int
			workers []Worker
			rate    *Rate
			peakRSS *int64
			cpu     time.Duration // the server's
			self    time.Duration // the load generator's
		}
		var sides []*side
		var closers []func()
		closeAll := func() {
			for _, c := range closers {
				c()
			}
		}
		gw, closeG, err := GatekeeperWorkers(ctx, sc, n, mkFrame, wantRule)
		if err != nil {
			return err
		}
		closers = append(closers, closeG)
		ow, closeO := OPAWorkers(opa.Socket, n, body, wantRule)
		closers = append(closers, closeO)
		sides = append(sides, &side{name: "gatekeeper", pid: sc.PID(), workers: gw, rate: &tr.Gatekeeper, peakRSS: &m.LoadGatekeeper},
			&side{name: "opa", pid: opa.PID(), workers: ow, rate: &tr.OPA, peakRSS: &m.LoadOPA})
		if heaviest {
			sw, closeS, err := GatekeeperWorkers(ctx, synced, n, mkFrame, wantRule)
			if err != nil {
				closeAll()
				return err
			}
			closers = append(closers, closeS)
			tr.AuditSync = &Rate{}
			var unused int64
			sides = append(sides, &side{name: "gatekeeper --audit-sync", pid: synced.PID(), workers: sw, rate: tr.AuditSync, peakRSS: &unused})
		}
		// Warm every side up (connections, caches) outside the measurement.
		for _, sd := range sides {
			if _, _, err := Slice(sd.workers, 200*time.Millisecond); err != nil {
				closeAll()
				return fmt.Errorf("%s warm-up: %w", sd.name, err)
			}
		}
		var perf *perfRecording
		if heaviest && e.cfg.Perf {
			if perf, err = startPerf(sc.PID(), filepath.Join(e.cfg.Work, "perf.data")); err != nil {
				e.res.Notes = append(e.res.Notes, "perf: "+err.Error())
			}
		}
		for r := range e.cfg.Rounds {
			for k := range sides {
				sd := sides[(r+k)%len(sides)] // the order rotates every round
				var sampler *RSSSampler
				if heaviest {
					sampler = SampleRSS(sd.pid, 25*time.Millisecond)
				}
				c0, s0 := cpuTime(sd.pid), cpuTime(os.Getpid())
				count, elapsed, err := Slice(sd.workers, e.cfg.Slice)
				sd.cpu += cpuTime(sd.pid) - c0
				sd.self += cpuTime(os.Getpid()) - s0
				if sampler != nil {
					peak, _ := sampler.Stop()
					*sd.peakRSS = max(*sd.peakRSS, peak)
				}
				if err != nil {
					closeAll()
					return fmt.Errorf("%s with %d connections: %w", sd.name, n, err)
				}
				sd.rate.Requests += count
				sd.rate.Seconds += elapsed.Seconds()
			}
		}
		if perf != nil {
			top, err := perf.stop(ctx)
			if err != nil {
				e.res.Notes = append(e.res.Notes, "perf: "+err.Error())
			} else {
				e.res.Perf = top
			}
		}
		closeAll()
		for _, sd := range sides {
			sd.rate.PerSecond = float64(sd.rate.Requests) / sd.rate.Seconds
			sd.rate.ServerCPUPerRequestUS = float64(sd.cpu.Microseconds()) / float64(sd.rate.Requests)
			sd.rate.ServerCores = sd.cpu.Seconds() / sd.rate.Seconds
			sd.rate.ClientCores = sd.self.Seconds() / sd.rate.Seconds
		}
		e.res.Throughput = append(e.res.Throughput, tr)
		e.cfg.Log.Info("bench: throughput", "conns", n, "gatekeeper_per_s", int(tr.Gatekeeper.PerSecond), "opa_per_s", int(tr.OPA.PerSecond))
	}
	return nil
}

// decideFrame returns the decide frame of the benchmark call for a query.
func (e *env) decideFrame() func(queryID string) []byte {
	toolInput, _ := json.Marshal(e.call.ToolInput)
	return func(q string) []byte {
		return []byte(fmt.Sprintf(`{"type":"decide","id":"t","query_id":%q,"event":"PreToolUse","tool_name":%q,"tool_input":%s,"tool_use_id":%q}`,
			q, e.call.ToolName, toolInput, e.call.ToolUseID))
	}
}

// wantRule is what every reply to the benchmark call must hold.
func (e *env) wantRule() []byte { return []byte(fmt.Sprintf(`"rule":%q`, e.want.Rule)) }

// runs measures row 3 for runc and runsc: a warm sidecar (when the sidecar
// has a pool), a cold one and `docker run --rm`, interleaved.
func (e *env) runs(ctx context.Context) error {
	has, help, err := HelpMentions(ctx, e.cfg.Gatekeeper, []string{"serve", "--help"}, "--pool-size")
	if err != nil {
		return err
	}
	warmNote := ""
	if !has {
		warmNote = "not available: `gatekeeper serve --help` has no --pool-size flag"
		if strings.Contains(strings.ToLower(help), "pool") {
			warmNote = "not measured: `gatekeeper serve --help` mentions a pool but no --pool-size flag this harness knows"
		}
	}
	var errs []error
	for _, rt := range []string{"runc", "runsc"} {
		if err := e.runtimeRuns(ctx, rt, has, warmNote); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rt, err))
		}
	}
	return errors.Join(errs...)
}

func (e *env) runtimeRuns(ctx context.Context, rt string, warm bool, warmNote string) error {
	coldArgs := []string{}
	if warm {
		coldArgs = []string{"--pool-size", "0"}
	}
	cold, cc, cq, effRaw, err := e.sidecarQuery(ctx, rt, SidecarOptions{Name: "cold-" + rt, Args: coldArgs})
	if err != nil {
		return err
	}
	defer cold.Stop()
	defer cc.Close()
	var eff EffectiveSandbox
	if err := json.Unmarshal(effRaw, &eff); err != nil {
		return fmt.Errorf("effective policy: %w", err)
	}
	if eff.Sandbox.Proc.Runtime != rt {
		return fmt.Errorf("the sidecar's effective runtime is %q, not %q", eff.Sandbox.Proc.Runtime, rt)
	}
	rr := RunResult{Runtime: rt, WarmNote: warmNote}
	// docker run gets every setting of a container the sidecar made for a
	// run, caught while it runs; a check confirms the CLI reproduces them.
	sidecarC, err := e.catchContainer(ctx, cc, cq, rt)
	if err != nil {
		return fmt.Errorf("catch the sidecar's container: %w", err)
	}
	if rr.DockerArgs, err = DockerRunArgs(sidecarC, "bench-docker-"+rt, e.tmp); err != nil {
		return err
	}
	fc, err := CheckDockerFlags(ctx, e.cfg.Docker, sidecarC, rr.DockerArgs)
	if err != nil {
		return fmt.Errorf("flags check: %w", err)
	}
	fc.Runtime, rr.Flags = rt, &fc
	stdin := RunInput(sidecarC, helloCode, time.Duration(eff.Sandbox.Proc.Timeout)*time.Millisecond, eff.Sandbox.Proc.User)

	type series struct {
		name string
		run  func(i int) (time.Duration, error)
	}
	n := 0
	// inner holds the runner's own duration_ms of each sidecar run: from
	// the code sent to the container to the program's exit.
	inner := map[string][]time.Duration{}
	viaSidecar := func(name string, c *Client, q string) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) {
			n++
			t0 := time.Now()
			out, err := c.DecideAndRun(q, fmt.Sprintf("toolu_bench_%s_%d", rt, n), "python", helloCode)
			d := time.Since(t0)
			if err != nil {
				return d, err
			}
			if r := out.Result; r.ExitCode != 0 || r.Stdout != "hello, world\n" {
				return d, fmt.Errorf("run exited %d (%s) with stdout %q stderr %q", r.ExitCode, r.Reason, r.Stdout, r.Stderr)
			}
			inner[name] = append(inner[name], time.Duration(out.Result.DurationMS)*time.Millisecond)
			return d, nil
		}
	}
	all := []series{}
	var warmSC *Sidecar
	if warm {
		var wc *Client
		var wq string
		warmSC, wc, wq, _, err = e.sidecarQuery(ctx, rt, SidecarOptions{Name: "warm-" + rt})
		if err != nil {
			return err
		}
		defer warmSC.Stop()
		defer wc.Close()
		all = append(all, series{"warm", viaSidecar("warm", wc, wq)})
		// The same warm run with nothing sent back: a sidecar keeping no
		// workspaces, and a query returning no files, so the launcher
		// takes no snapshot of /workspace. warm/warm_no_snapshot is what
		// the snapshot costs.
		if has, _, err := HelpMentions(ctx, e.cfg.Gatekeeper, []string{"serve", "--help"}, "--workspaces"); err == nil && has {
			bare, err := e.startSidecar(ctx, rt, SidecarOptions{Name: "warm-nosnap-" + rt, Args: []string{"--workspaces=false"}})
			if err != nil {
				return err
			}
			defer bare.Stop()
			bc, err := Dial(ctx, bare.Socket, bare.Token)
			if err != nil {
				return err
			}
			defer bc.Close()
			bq, _, err := bc.OpenQuery(map[string]any{"output": map[string]any{"max_files": 0}})
			if err != nil {
				return err
			}
			all = append(all, series{"warm_no_snapshot", viaSidecar("warm_no_snapshot", bc, bq)})
		}
	}
	all = append(all,
		series{"cold", viaSidecar("cold", cc, cq)},
		series{"docker", func(int) (time.Duration, error) {
			d, out, err := DockerRun(ctx, e.cfg.Docker, rr.DockerArgs, stdin)
			if err == nil && strings.TrimSuffix(out, EndMark(0)) != "hello, world\n" {
				err = fmt.Errorf("docker run printed %q", out)
			}
			return d, err
		}},
	)
	// Two untimed runs each: caches, page cache, the pool's first fill.
	for _, s := range all {
		for i := range 2 {
			if _, err := s.run(i); err != nil {
				return fmt.Errorf("%s warm-up: %w", s.name, err)
			}
		}
	}
	samples := map[string][]time.Duration{}
	for i := range e.cfg.Runs {
		for j := range all {
			s := all[(i+j)%len(all)]
			d, err := s.run(i)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", s.name, i, err)
			}
			samples[s.name] = append(samples[s.name], d)
		}
	}
	for k, ds := range samples {
		e.res.samples["run/"+rt+"/"+k] = ds
	}
	rr.Cold, rr.Docker = Summarize(samples["cold"]), Summarize(samples["docker"])
	rr.ColdProgram = Summarize(inner["cold"][len(inner["cold"])-len(samples["cold"]):])
	if warm {
		w := Summarize(samples["warm"])
		rr.Warm = &w
		wp := Summarize(inner["warm"][len(inner["warm"])-len(samples["warm"]):])
		rr.WarmProgram = &wp
		rr.PoolMetrics = poolMetrics(ctx, warmSC)
		if ds := samples["warm_no_snapshot"]; len(ds) > 0 {
			b := Summarize(ds)
			rr.WarmNoSnapshot = &b
		}
	}
	e.res.Runs = append(e.res.Runs, rr)
	e.cfg.Log.Info("bench: runs", "runtime", rt, "cold_p50_ms", rr.Cold.P50, "docker_p50_ms", rr.Docker.P50)
	return nil
}

// catchContainer runs a sleeping program through the sidecar and inspects
// its container while it runs.
func (e *env) catchContainer(ctx context.Context, c *Client, q, rt string) (Container, error) {
	done := make(chan error, 1)
	go func() {
		_, err := c.DecideAndRun(q, "toolu_bench_catch_"+rt, "python", "import time\ntime.sleep(3)")
		done <- err
	}()
	label := "label=gatekeeper.run_id" // a container made for a run, not a warm one waiting
	var id string
	for i := 0; i < 100 && id == ""; i++ {
		out, err := exec.CommandContext(ctx, e.cfg.Docker, "ps", "-q", "--no-trunc", "--filter", "label=gatekeeper.instance=bench-cold-"+rt, "--filter", label).Output()
		if err != nil {
			<-done
			return Container{}, fmt.Errorf("docker ps: %w", err)
		}
		if f := strings.Fields(string(out)); len(f) > 0 {
			id = f[0]
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if id == "" {
		return Container{}, fmt.Errorf("the sidecar's container never showed up (run: %v)", <-done)
	}
	cs, err := InspectContainers(ctx, e.cfg.Docker, id)
	if rerr := <-done; err == nil && rerr != nil {
		err = fmt.Errorf("the sleeping run: %w", rerr)
	}
	if err != nil {
		return Container{}, err
	}
	return cs[0], nil
}

// flood measures row 4's output flood on a sidecar of its own, started
// with GODEBUG=gctrace=1 so that its Go heap can be told apart from the
// rest of its resident memory: VmRSS just before, and its peak (sampled
// every 10 ms) while two runs each print FloodMiB MiB, of which the sidecar
// keeps and forwards at most output.max_bytes.
func (e *env) flood(ctx context.Context) error {
	sc, c, q, effRaw, err := e.sidecarQuery(ctx, "runc", SidecarOptions{Name: "flood", Env: []string{"GODEBUG=gctrace=1"}})
	if err != nil {
		return err
	}
	defer sc.Stop()
	defer c.Close()
	var eff EffectiveSandbox
	if err := json.Unmarshal(effRaw, &eff); err != nil {
		return fmt.Errorf("effective policy: %w", err)
	}
	// One ordinary run first: the engine client, the runner's caches.
	if _, err := c.DecideAndRun(q, "toolu_bench_flood_warmup", "python", helloCode); err != nil {
		return err
	}
	m := e.res.memory()
	lines := e.cfg.FloodMiB * 128
	code := fmt.Sprintf("import sys\nline = 'x' * 8191 + '\\n'\nw = sys.stdout.write\nfor _ in range(%d):\n    w(line)\n", lines)
	time.Sleep(time.Second)
	before, err := ReadMemory(sc.PID())
	if err != nil {
		return err
	}
	logOffset := fileSize(sc.Log)
	m.FloodBefore = before.RSS
	m.FloodPrinted = int64(lines) * 8192
	m.FloodCap = eff.Sandbox.Output.MaxBytes
	sampler := SampleRSS(sc.PID(), 10*time.Millisecond)
	t0 := time.Now()
	for i := range 2 {
		out, err := c.DecideAndRun(q, fmt.Sprintf("toolu_bench_flood_%d", i), "python", code)
		if err != nil {
			sampler.Stop()
			return err
		}
		m.FloodReceived = max(m.FloodReceived, out.OutputBytes)
		m.FloodTruncated = out.Result.Truncated
		if out.Result.ExitCode != 0 {
			sampler.Stop()
			return fmt.Errorf("flood run exited %d (%s): %s", out.Result.ExitCode, out.Result.Reason, out.Result.Stderr)
		}
	}
	m.FloodSeconds = time.Since(t0).Seconds() / 2
	peak, n := sampler.Stop()
	m.FloodPeak, m.FloodSamples = peak, n
	if after, err := ReadMemory(sc.PID()); err == nil {
		m.FloodHWM = after.HWM
	}
	log := readFrom(sc.Log, 0)
	m.BeforeGC = ParseGCTrace(log[:min(int(logOffset), len(log))])
	m.FloodGC = ParseGCTrace(log[min(int(logOffset), len(log)):])
	return nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func readFrom(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}

// trace breaks a cold and a warm runc run down by engine API call.
func (e *env) trace(ctx context.Context) error {
	var eff EffectiveSandbox
	if err := json.Unmarshal(mustJSON(e.input["policy"]), &eff); err != nil {
		return err
	}
	eff.Sandbox.Proc.Runtime = "runc"
	timeout := time.Duration(eff.Sandbox.Proc.Timeout) * time.Millisecond
	for _, warm := range []bool{false, true} {
		tr, err := TraceRuns(ctx, SandboxOf(eff, e.cfg.Image), timeout, e.cfg.TraceRuns, warm)
		if err != nil {
			return err
		}
		e.res.Trace = append(e.res.Trace, tr)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// cpuTime is the user plus system CPU time pid has used, from
// /proc/PID/stat (clock ticks of 10ms); 0 if it cannot be read.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func versionOf(ctx context.Context, bin string, args ...string) string {
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return runtime.GOOS
	}
	return strings.TrimSpace(string(b))
}
