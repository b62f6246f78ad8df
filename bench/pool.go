package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// InterpreterRun is row 6: a pandas hello world on the python-data
// profile through three sidecars, interleaved: a warm pool whose
// containers started Python and preloaded numpy, pandas and matplotlib
// (--pool-interpreters, the default), a warm pool without (the pool as it
// was), and no pool (cold). Hello is a hello world on the first sidecar,
// in the same rounds: what the pandas run is measured against.
type InterpreterRun struct {
	Profile string `json:"profile"`
	Code    string `json:"code"`
	// Series are preloaded, warm_plain, cold and hello end to end
	// (decide, run, run_result), and each again with the suffix
	// _first_output: from the run frame to the first output frame, and
	// _program: the runner's duration_ms (the code sent to the program's
	// exit).
	Series map[string]Summary `json:"series"`
}

// pandasCode is row 6's program.
const pandasCode = `import pandas as pd
print(pd.DataFrame({"a": [1]}))`

// pandasOut is what it prints.
const pandasOut = "   a\n0  1\n"

// interpreterProfile is the profile row 6 runs on.
const interpreterProfile = "python-data"

// interpreters measures row 6.
func (e *env) interpreters(ctx context.Context) error {
	ir, err := e.interpretersOn(ctx, e.policy["runc"], "interp-", nil, true)
	if err != nil {
		return err
	}
	e.res.Interpreters = ir
	return nil
}

// interpretersOn measures row 6 on sidecars of policy started with args
// (another runner), their names beginning with prefix; withPlain adds the
// series of a pool without interpreters started ahead.
func (e *env) interpretersOn(ctx context.Context, policy, prefix string, args []string, withPlain bool) (*InterpreterRun, error) {
	pol, err := policyWithImage(policy, interpreterProfile, interpreterProfile)
	if err != nil {
		return nil, err
	}
	type series struct {
		name, code, want string
		sc               *Sidecar
		c                *Client
		q                string
		warm             bool
		took, ttfo, prog []time.Duration
	}
	start := func(name string, more ...string) (*Sidecar, *Client, string, error) {
		sc, c, q, _, err := e.sidecarQuery(ctx, "runc", SidecarOptions{Name: prefix + name, Policy: pol, Args: append(slices.Clone(args), more...)})
		if err != nil {
			return nil, nil, "", err
		}
		return sc, c, q, nil
	}
	pre, prec, preq, err := start("preloaded")
	if err != nil {
		return nil, err
	}
	defer pre.Stop()
	cold, coldc, coldq, err := start("cold", "--pool-size", "0")
	if err != nil {
		return nil, err
	}
	defer cold.Stop()
	all := []*series{
		{name: "preloaded", code: pandasCode, want: pandasOut, sc: pre, c: prec, q: preq, warm: true},
		{name: "hello", code: helloCode, want: "hello, world\n", sc: pre, c: prec, q: preq, warm: true},
		{name: "cold", code: pandasCode, want: pandasOut, sc: cold, c: coldc, q: coldq},
	}
	if withPlain {
		plain, plainc, plainq, err := start("plain", "--pool-interpreters=false")
		if err != nil {
			return nil, err
		}
		defer plain.Stop()
		all = append(all, &series{name: "warm_plain", code: pandasCode, want: pandasOut, sc: plain, c: plainc, q: plainq, warm: true})
	}
	n := 0
	run := func(s *series) (RunOutcome, error) {
		if s.warm {
			// As in row 5: the run follows the previous one by more than
			// a refill.
			if err := waitPoolFull(ctx, s.sc, 2); err != nil {
				return RunOutcome{}, fmt.Errorf("%s: %w", s.name, err)
			}
		}
		n++
		out, err := s.c.DecideAndRun(s.q, fmt.Sprintf("toolu_bench_interp_%s_%d", s.name, n), "python", s.code)
		if err != nil {
			return out, fmt.Errorf("%s: %w", s.name, err)
		}
		if r := out.Result; r.ExitCode != 0 || r.Stdout != s.want {
			return out, fmt.Errorf("%s: exited %d (%s) with stdout %q stderr %q", s.name, r.ExitCode, r.Reason, r.Stdout, r.Stderr)
		}
		return out, nil
	}
	for _, s := range all { // untimed: page cache, the pools' first fill
		for range 2 {
			if _, err := run(s); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for i := range e.cfg.ProfileRuns {
		for j := range all {
			s := all[(i+j)%len(all)]
			t0 := time.Now()
			out, err := run(s)
			if err != nil {
				return nil, err
			}
			s.took, s.ttfo = append(s.took, time.Since(t0)), append(s.ttfo, out.FirstOutput)
			s.prog = append(s.prog, time.Duration(out.Result.DurationMS)*time.Millisecond)
		}
	}
	ir := &InterpreterRun{Profile: interpreterProfile, Code: pandasCode, Series: map[string]Summary{}}
	for _, s := range all {
		e.res.samples[prefix+s.name] = s.took
		ir.Series[s.name] = Summarize(s.took)
		ir.Series[s.name+"_first_output"] = Summarize(s.ttfo)
		ir.Series[s.name+"_program"] = Summarize(s.prog)
	}
	e.cfg.Log.Info("bench: interpreters", "sidecars", prefix, "preloaded_p50_ms", ir.Series["preloaded"].P50, "warm_plain_p50_ms", ir.Series["warm_plain"].P50,
		"cold_p50_ms", ir.Series["cold"].P50, "hello_p50_ms", ir.Series["hello"].P50)
	return ir, nil
}

// KubeRun is rows 6 and 7 on Kubernetes Pods (`--runner kube`, the
// cluster of the environment scripts/ensure-kube sets): the pandas hello
// world warm preloaded vs cold, and the pool under 8 sessions at the
// longest think time, beside Docker's rows from the same run. Each Pod
// gets KubeCPUs: its requests are its limits, and the test node's two
// CPUs must hold a pool and the cold runs beside it.
type KubeRun struct {
	CPUs         string          `json:"cpus"`
	Interpreters *InterpreterRun `json:"warm_interpreters,omitempty"`
	Pool         *PoolLoad       `json:"pool_8,omitempty"`
}

// kubeSessions is the level of row 7 measured on Pods.
const kubeSessions = 8

// kubeCPUs is the CPUs of a Pod of the kube phase.
const kubeCPUs = "0.25"

// kube measures rows 6 and 7 on Pods.
func (e *env) kube(ctx context.Context) error {
	args := []string{"--runner", "kube"}
	kr := &KubeRun{CPUs: kubeCPUs}
	e.res.Kube = kr
	pol, err := policyWithCPUs(e.policy["runc"], "kube", kubeCPUs)
	if err != nil {
		return err
	}
	ir, err := e.interpretersOn(ctx, pol, "kube-interp-", args, false)
	if err != nil {
		return fmt.Errorf("pandas on Pods: %w", err)
	}
	kr.Interpreters = ir
	think := slices.Max(e.cfg.PoolThink)
	sc, err := e.startSidecar(ctx, "runc", SidecarOptions{Name: "kube-pool", Policy: pol, Args: args})
	if err != nil {
		return err
	}
	defer sc.Stop()
	l, err := e.poolLoad(ctx, sc, kubeSessions, think)
	if err != nil {
		return fmt.Errorf("%d sessions on Pods: %w", kubeSessions, err)
	}
	kr.Pool = &l
	e.cfg.Log.Info("bench: pool on Pods", "sessions", kubeSessions, "think_ms", l.ThinkMS, "warm_share", l.WarmShare(),
		"first_output_p50_ms", l.FirstOutput.P50, "waited", l.Waited, "cold", l.Cold)
	return nil
}

// PoolLoad is row 7 at one level: Sessions agent sessions on one sidecar,
// each its own connection and query, each running a Python hello world,
// thinking ThinkMS (uniformly 0.5× to 1.5×) between the end of a run and
// the next, for Seconds after a warm-up.
type PoolLoad struct {
	Sessions int     `json:"sessions"`
	ThinkMS  float64 `json:"think_ms"`
	Seconds  float64 `json:"seconds"`
	Runs     int     `json:"runs"`
	PerSec   float64 `json:"runs_per_second"`
	// FirstOutput is from the run frame to the first output frame; Total
	// is decide, run and run_result (ms).
	FirstOutput Summary `json:"first_output"`
	Total       Summary `json:"total"`
	// From the sidecar's pool metrics over the window: runs served by a
	// warm container at once, after waiting for one being made, and cold.
	WarmAtOnce int `json:"warm_at_once"`
	Waited     int `json:"waited"`
	Cold       int `json:"cold"`
	// WaitMeanMS is the mean time the waiting runs waited for their
	// container (gatekeeper_pool_wait_seconds).
	WaitMeanMS float64 `json:"pool_wait_mean_ms"`
	// Targets is the pool's target size at the end of the window (all
	// sandboxes); Refills the containers it made during it.
	Target  int `json:"pool_target_end"`
	Refills int `json:"refills"`
	// For queries with a session (row 10): runs that were their session's
	// first and ended in the window (begun in it or before), and runs of
	// the window that reported state_lost.
	SessionStarts int `json:"session_starts,omitempty"`
	StateLost     int `json:"state_lost,omitempty"`
}

// WarmShare is the share of runs served by a warm container at once.
func (l PoolLoad) WarmShare() float64 {
	n := l.WarmAtOnce + l.Waited + l.Cold
	if n == 0 {
		return 0
	}
	return float64(l.WarmAtOnce) / float64(n)
}

// PoolResult is row 7 at one think time: the single-session reference
// and the loaded levels, on sidecars with the default pool flags.
type PoolResult struct {
	ThinkMS float64    `json:"think_ms"`
	Single  PoolLoad   `json:"single"`
	Levels  []PoolLoad `json:"levels"`
	Flags   string     `json:"flags"`
}

// poolWarmup is the untimed load before each level's measured window.
const poolWarmup = 10 * time.Second

// poolRuns is how many runs each level's window is sized to hold, so that
// its p99 rests on 100 samples rather than being the one slowest run of a
// few dozen; the window is that many runs at the level's expected rate (n
// sessions, one run per think time), within 30 and 90 seconds.
const poolRuns = 100

// poolWindow is the measured window of n sessions thinking about think.
func poolWindow(n int, think time.Duration) time.Duration {
	return min(max(time.Duration(poolRuns)*think/time.Duration(n), 30*time.Second), 90*time.Second)
}

// pool measures row 7 for each think time of the config, each level on
// a fresh sidecar with the default pool flags.
func (e *env) pool(ctx context.Context) error {
	var single PoolLoad
	for k, think := range e.cfg.PoolThink {
		res := PoolResult{ThinkMS: float64(think.Milliseconds()), Flags: "defaults (--pool-size 8 --pool-min 2 --pool-interpreters --max-runs 4)"}
		levels := e.cfg.PoolSessions
		if k == 0 {
			// The reference, once: a session thinking a second between
			// runs, longer than a refill, gives about 85 samples in its window.
			levels = append([]int{1}, levels...)
		}
		for _, n := range levels {
			if n == 1 {
				think = time.Second
			}
			sc, err := e.startSidecar(ctx, "runc", SidecarOptions{Name: fmt.Sprintf("pool-%d-%d", think.Milliseconds(), n)})
			if err != nil {
				return err
			}
			l, err := e.poolLoad(ctx, sc, n, think)
			sc.Stop()
			if err != nil {
				return fmt.Errorf("%d sessions, think %v: %w", n, think, err)
			}
			if n == 1 {
				single = l
				think = e.cfg.PoolThink[k]
			} else {
				res.Levels = append(res.Levels, l)
			}
			e.cfg.Log.Info("bench: pool", "sessions", n, "think_ms", l.ThinkMS, "runs_per_s", l.PerSec, "warm_share", l.WarmShare(),
				"first_output_p50_ms", l.FirstOutput.P50, "first_output_p99_ms", l.FirstOutput.P99, "waited", l.Waited, "cold", l.Cold)
		}
		res.Single = single
		e.res.Pool = append(e.res.Pool, res)
	}
	return nil
}

// loadSpec is one level of load: Sessions agent sessions thinking about
// Think between runs, each opening its query with Override (nil: none),
// for Window (0: poolWindow) after poolWarmup. Name keys the samples.
type loadSpec struct {
	Name     string
	Sessions int
	Think    time.Duration
	Window   time.Duration
	Override map[string]any
}

// poolLoad runs n sessions against sc, each thinking about think between
// runs: poolWarmup, then poolWindow measured (runs that began in it), with
// the pool's counters read at both ends.
func (e *env) poolLoad(ctx context.Context, sc *Sidecar, n int, think time.Duration) (PoolLoad, error) {
	l, _, err := e.load(ctx, sc, loadSpec{Name: fmt.Sprintf("pool/%d", n), Sessions: n, Think: think})
	return l, err
}

// load runs spec against sc (see poolLoad) and returns the level and the
// window's bounds.
func (e *env) load(ctx context.Context, sc *Sidecar, spec loadSpec) (PoolLoad, [2]time.Time, error) {
	n, poolThink, window := spec.Sessions, spec.Think, spec.Window
	if window <= 0 {
		window = poolWindow(n, poolThink)
	}
	var span [2]time.Time
	l := PoolLoad{Sessions: n, ThinkMS: float64(poolThink.Milliseconds()), Seconds: window.Seconds()}
	if err := waitPoolFull(ctx, sc, 2); err != nil {
		return l, span, err
	}
	clients := make([]*Client, n)
	queries := make([]string, n)
	for i := range clients {
		c, err := Dial(ctx, sc.Socket, sc.Token)
		if err != nil {
			return l, span, err
		}
		defer c.Close()
		if queries[i], _, err = c.OpenQuery(spec.Override); err != nil {
			return l, span, err
		}
		clients[i] = c
	}
	begin := time.Now()
	from, until := begin.Add(poolWarmup), begin.Add(poolWarmup+window)
	span = [2]time.Time{from, until}
	var before map[string]float64
	snap := make(chan struct{})
	go func() { // the counters at the window's start
		defer close(snap)
		select {
		case <-time.After(time.Until(from)):
		case <-ctx.Done():
		}
		before = poolCounters(ctx, sc)
	}()
	var (
		mu          sync.Mutex
		ttfo, total []time.Duration
		errs        []error
		wg          sync.WaitGroup
	)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			think := func() time.Duration { return time.Duration((0.5 + rand.Float64()) * float64(poolThink)) }
			// A random first pause: sessions do not start in step.
			next := time.Now().Add(time.Duration(rand.Float64() * float64(poolThink)))
			for k := 0; ; k++ {
				select {
				case <-time.After(time.Until(next)):
				case <-ctx.Done():
					return
				}
				t0 := time.Now()
				if !t0.Before(until) {
					return
				}
				out, err := c.DecideAndRun(queries[i], fmt.Sprintf("toolu_bench_pool_%d_%d_%d", n, i, k), "python", helloCode)
				if err == nil && (out.Result.ExitCode != 0 || out.Result.Stdout != "hello, world\n") {
					err = fmt.Errorf("run exited %d (%s) with stdout %q stderr %q", out.Result.ExitCode, out.Result.Reason, out.Result.Stdout, out.Result.Stderr)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("session %d run %d: %w", i, k, err))
				} else if !t0.Before(from) {
					ttfo, total = append(ttfo, out.FirstOutput), append(total, time.Since(t0))
					if out.Result.StateLost != nil {
						l.StateLost++
					}
				}
				if s := out.Result.Session; err == nil && s != nil && s.Run == 1 && time.Now().After(from) {
					// Begun before the window or in it, a session's
					// first run that ends in it may make its sandbox there.
					l.SessionStarts++
				}
				mu.Unlock()
				if err != nil {
					return
				}
				next = time.Now().Add(think())
			}
		}()
	}
	wg.Wait()
	<-snap
	if err := errors.Join(errs...); err != nil {
		return l, span, err
	}
	span[1] = time.Now() // the last run of the window has ended
	after := poolCounters(ctx, sc)
	delta := func(k string) float64 { return after[k] - before[k] }
	hits, waited := delta("gatekeeper_pool_hits_total"), delta("gatekeeper_pool_waits_total")
	l.WarmAtOnce, l.Waited, l.Cold = int(hits-waited), int(waited), int(delta("gatekeeper_pool_misses_total"))
	if c := delta("gatekeeper_pool_wait_seconds_count"); c > 0 {
		l.WaitMeanMS = delta("gatekeeper_pool_wait_seconds_sum") / c * 1000
	}
	l.Refills = int(delta("gatekeeper_pool_refill_seconds_count"))
	l.Target = int(after["gatekeeper_pool_target_containers"])
	l.Runs = len(total)
	l.PerSec = float64(l.Runs) / window.Seconds()
	l.FirstOutput, l.Total = Summarize(ttfo), Summarize(total)
	e.res.samples[spec.Name+"/first_output"] = ttfo
	return l, span, nil
}

// poolCounters reads the sidecar's pool metrics as name → value (the
// unlabelled series only).
func poolCounters(ctx context.Context, sc *Sidecar) map[string]float64 {
	out := map[string]float64{}
	for _, line := range poolMetrics(ctx, sc) {
		f := strings.Fields(line)
		if len(f) != 2 || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// Goals of rows 6 and 7.
const (
	interpreterGoal = "warm python-data pandas hello p50 ≤ 0.1× its cold run, same run"
	poolWarmGoal    = "≥ 90% of runs served by a warm container at once, 8 concurrent sessions, steady state"
	poolTTFOGoal    = "time to first output p99 at 8 sessions ≤ 3× the single-session warm p50"
)

// evaluatePool adds the targets of rows 6 and 7. The pool's are taken at
// the longest think time measured (see Config.PoolThink).
func (r *Results) evaluatePool() {
	if ir := r.Interpreters; ir != nil && ir.Series["cold"].N > 0 {
		ratio := Ratio(ir.Series["preloaded"].P50, ir.Series["cold"].P50)
		r.target("warm_pandas", interpreterGoal, fmt.Sprintf("%.2f×, %s vs %s", ratio, FormatMS(ir.Series["preloaded"].P50), FormatMS(ir.Series["cold"].P50)), ptr(ratio <= 0.1))
	} else {
		r.target("warm_pandas", interpreterGoal, "not measured", nil)
	}
	p := r.poolAt()
	l8 := p.level(8)
	if l8 == nil || p.Single.Runs == 0 {
		r.target("pool_warm_share_8", poolWarmGoal, "not measured", nil)
		r.target("pool_first_output_p99_8", poolTTFOGoal, "not measured", nil)
		return
	}
	think := fmt.Sprintf(", sessions thinking ~%s between runs", FormatMS(p.ThinkMS))
	share := l8.WarmShare()
	r.target("pool_warm_share_8", poolWarmGoal, fmt.Sprintf("%.0f%% (%d at once, %d waited, %d cold)%s", 100*share, l8.WarmAtOnce, l8.Waited, l8.Cold, think), ptr(share >= 0.9))
	ratio := Ratio(l8.FirstOutput.P99, p.Single.FirstOutput.P50)
	r.target("pool_first_output_p99_8", poolTTFOGoal, fmt.Sprintf("%.2f×, %s vs %s%s", ratio, FormatMS(l8.FirstOutput.P99), FormatMS(p.Single.FirstOutput.P50), think), ptr(ratio <= 3))
}

// poolAt returns the pool results of the longest think time, or nil.
func (r *Results) poolAt() *PoolResult {
	var best *PoolResult
	for i := range r.Pool {
		if best == nil || r.Pool[i].ThinkMS > best.ThinkMS {
			best = &r.Pool[i]
		}
	}
	return best
}

// level returns the load of n sessions, or nil (also for a nil p).
func (p *PoolResult) level(n int) *PoolLoad {
	if p == nil {
		return nil
	}
	for i := range p.Levels {
		if p.Levels[i].Sessions == n {
			return &p.Levels[i]
		}
	}
	return nil
}

// kubePoolRow renders row 7 on Pods, against Docker's single session
// when it was measured.
func (r *Results) kubePoolRow(row func(cells ...string), pp func(Summary) string) {
	k := r.Kube
	if k == nil || k.Pool == nil {
		return
	}
	l := k.Pool
	ref, vs := "—", "—"
	if p := r.poolAt(); p != nil && p.Single.Runs > 0 {
		ref, vs = pp(p.Single.FirstOutput), fmt.Sprintf("%.2f×", Ratio(l.FirstOutput.P50, p.Single.FirstOutput.P50))
	}
	row("7", fmt.Sprintf("Kubernetes Pods (`--runner kube`, %s CPU a Pod): %d sessions thinking ~%s: %.1f runs/s, %.0f%% warm at once (%d waited %s on average, %d cold): time to first output vs 1 session on Docker",
		k.CPUs, l.Sessions, FormatMS(l.ThinkMS), l.PerSec, 100*l.WarmShare(), l.Waited, FormatMS(l.WaitMeanMS), l.Cold),
		pp(l.FirstOutput), ref, vs, "—", "")
}

// poolRows renders rows 6 and 7.
func (r *Results) poolRows(row func(cells ...string)) {
	pp := func(s Summary) string { return FormatMS(s.P50) + " (p99 " + FormatMS(s.P99) + ")" }
	ratio := func(a, b Summary) string { return fmt.Sprintf("%.2f×", Ratio(a.P50, b.P50)) }
	if ir := r.Interpreters; ir != nil {
		s := ir.Series
		what := "`import pandas as pd; print(pd.DataFrame(...))` end to end, runc, profile `" + ir.Profile + "`"
		row("6", what+": warm, interpreter started and pandas preloaded vs cold, p50", pp(s["preloaded"]), pp(s["cold"]), ratio(s["preloaded"], s["cold"]), "≤ 0.1×", r.met("warm_pandas"))
		row("6", what+": warm preloaded vs warm without (the pool before), p50", pp(s["preloaded"]), pp(s["warm_plain"]), ratio(s["preloaded"], s["warm_plain"]), "—", "")
		row("6", "the same, time to first output (from the run frame): warm preloaded vs cold, p50", pp(s["preloaded_first_output"]), pp(s["cold_first_output"]), ratio(s["preloaded_first_output"], s["cold_first_output"]), "—", "")
		row("6", "first output of the pandas run vs of a hello world, both warm preloaded, same sidecar, p50", pp(s["preloaded_first_output"]), pp(s["hello_first_output"]), ratio(s["preloaded_first_output"], s["hello_first_output"]), "—", "")
	} else {
		row("6", "warm interpreters (pandas hello world)", "not measured", "", "", "", "")
	}
	if k := r.Kube; k != nil && k.Interpreters != nil {
		s := k.Interpreters.Series
		row("6", "the same on Kubernetes Pods (`--runner kube`, RuntimeClass runc, "+k.CPUs+" CPU a Pod): warm, pandas preloaded vs cold, p50", pp(s["preloaded"]), pp(s["cold"]), ratio(s["preloaded"], s["cold"]), "—", "")
	}
	r.kubePoolRow(row, pp)
	if len(r.Pool) == 0 {
		row("7", "the pool under concurrency", "not measured", "", "", "", "")
		return
	}
	target := r.poolAt()
	for i := range r.Pool {
		p := &r.Pool[i]
		think := FormatMS(p.ThinkMS)
		if i == 0 {
			row("7", fmt.Sprintf("1 session, a hello world after ~%s of thinking: time to first output (the reference)", FormatMS(p.Single.ThinkMS)), pp(p.Single.FirstOutput), "—", "—", "—", "")
		}
		for _, l := range p.Levels {
			goal, result := "—", ""
			if l.Sessions == 8 && p == target {
				goal, result = "≥ 90% warm; p99 ≤ 3× single p50", r.met("pool_warm_share_8")+" "+r.met("pool_first_output_p99_8")
			}
			row("7", fmt.Sprintf("%d sessions thinking ~%s: %.1f runs/s, %.0f%% warm at once (%d waited %s on average, %d cold): time to first output vs 1 session",
				l.Sessions, think, l.PerSec, 100*l.WarmShare(), l.Waited, FormatMS(l.WaitMeanMS), l.Cold),
				pp(l.FirstOutput), pp(p.Single.FirstOutput), fmt.Sprintf("%.2f× (p99 ÷ p50 %.2f×)", Ratio(l.FirstOutput.P50, p.Single.FirstOutput.P50), Ratio(l.FirstOutput.P99, p.Single.FirstOutput.P50)), goal, result)
		}
	}

}
