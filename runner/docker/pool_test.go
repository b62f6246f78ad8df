package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// newPooledRunner returns a test Runner with a warm pool, closed (and its
// instance cleaned up) when t ends; then nothing of the instance may be
// left, warm containers included.
func newPooledRunner(t testing.TB, cfg sandbox.PoolConfig) *Runner {
	t.Helper()
	r, err := New(Config{
		Instance:     fmt.Sprintf("test-%d-%d", os.Getpid(), instanceSeq.Add(1)),
		DefaultImage: testImage,
		Pool:         cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if ids, err := r.pf.containers(ctx); err != nil || len(ids) != 0 {
			t.Errorf("after Close: %d containers of the instance, %v; want none", len(ids), err)
		}
		if _, err := r.Cleanup(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return r
}

// pooledRuntime runs every Spec under one runtime, after making sure a
// warm container of its sandbox is ready (a run racing another for it may
// still miss and run cold).
type pooledRuntime struct {
	*Runner
	rt runner.Runtime
}

func (w pooledRuntime) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	spec.Sandbox.Runtime = w.rt
	// A cancel during the wait is the run's: Run reports it, as a
	// cancelled Result.
	if err := w.AwaitWarm(ctx, spec.Sandbox); err != nil && ctx.Err() == nil {
		return runner.Result{}, fmt.Errorf("warm the pool: %w", err)
	}
	return w.Runner.Run(ctx, spec)
}

// TestConformanceRuncPooled runs the conformance suite with the warm pool
// on: the same limits must hold in a container that waited for its code.
func TestConformanceRuncPooled(t *testing.T) {
	t.Parallel()
	conformancePooled(t, runner.Runc)
}

// TestConformanceRunscPooled is the same under gVisor.
func TestConformanceRunscPooled(t *testing.T) {
	t.Parallel()
	conformancePooled(t, runner.Runsc)
}

func conformancePooled(t *testing.T, rt runner.Runtime) {
	requireRuntime(t, rt)
	var mu sync.Mutex
	var runners []*Runner
	runnertest.Conformance(t, func(t *testing.T) runnertest.Runner {
		r := newPooledRunner(t, sandbox.PoolConfig{Size: 3, Idle: 5 * time.Minute, All: true})
		mu.Lock()
		runners = append(runners, r)
		mu.Unlock()
		return pooledRuntime{r, rt}
	})
	t.Cleanup(func() {
		var hits, misses float64
		for _, r := range runners {
			hits += counterValue(t, r.Metrics().Hits)
			misses += counterValue(t, r.Metrics().Misses)
		}
		t.Logf("pool: %v hits, %v misses", hits, misses)
		if hits < 10 {
			t.Errorf("only %v runs were warm, want most of the suite's", hits)
		}
	})
}

func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestPoolWarmRunTimeoutCountsFromTheCode lets a warm container wait for
// longer than the run's timeout before the run takes it: the timeout must
// count from the code's delivery, neither from the container's start nor
// too late.
func TestPoolWarmRunTimeoutCountsFromTheCode(t *testing.T) {
	t.Parallel()
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			sb := runnertest.Sandbox()
			sb.Runtime = rt
			r := newPooledRunner(t, sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}})
			if err := r.Warm(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Longer than the run's timeout and its in-container backstop
			// (1s + launch.BackstopGrace): a clock started with the container
			// would have killed it before the run.
			time.Sleep(time.Second + launch.BackstopGrace + 2*time.Second)

			spec := runnertest.Spec("import time\nprint('started', flush=True)\nwhile True:\n    pass")
			spec.Sandbox = sb
			spec.Timeout = time.Second
			res, err := r.Run(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if hits := counterValue(t, r.Metrics().Hits); hits != 1 {
				t.Fatalf("%v pool hits, want the run to be warm", hits)
			}
			if res.Reason != runner.TimedOut || res.ExitCode != 137 || res.Stdout != "started\n" {
				t.Errorf("ended %s %d stdout %q stderr %q; want timed_out 137 after printing", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
			}
			// The program printed and then ran into its own 1s timeout: a
			// clock started with the container would have ended it before
			// the code arrived. (No upper bound: that would time the machine.)
			if res.Duration < time.Second {
				t.Errorf("duration %v, shorter than the 1s timeout counted from the code's delivery", res.Duration)
			}
		})
	}
}

// TestPoolContainersServeOneRun checks that a warm container is used once
// and removed, and that the pool refills in the background.
func TestPoolContainersServeOneRun(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	sb := runnertest.Sandbox()
	r := newPooledRunner(t, sandbox.PoolConfig{Size: 2, Sandboxes: []runner.Sandbox{sb}})
	if err := r.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The cgroup path names the container under runc.
	code := `import os
print(open("/proc/self/cgroup").read().split("/docker/")[1].split()[0][:64])
print(os.path.exists("/tmp/marker"))
open("/tmp/marker", "w").write("x")`
	var seen []string
	for i := range 4 {
		spec := runnertest.Spec(code)
		spec.Sandbox = sb
		res, err := r.Run(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		id, rest, _ := strings.Cut(res.Stdout, "\n")
		if rest != "False\n" || len(id) != 64 {
			t.Fatalf("run %d: stdout %q stderr %q; want a container id and no marker", i, res.Stdout, res.Stderr)
		}
		if slices.Contains(seen, id) {
			t.Errorf("run %d ran in container %s again", i, id[:12])
		}
		seen = append(seen, id)
		gone := false
		for range 50 { // removed in the background, right after the run
			list, err := r.pf.cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("id", id))})
			if err != nil {
				t.Fatal(err)
			}
			if gone = len(list) == 0; gone {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !gone {
			t.Errorf("run %d: container %s still exists 5s after the run", i, id[:12])
		}
		if err := r.Warm(t.Context()); err != nil { // refilled in the background
			t.Fatal(err)
		}
	}
	if hits := counterValue(t, r.Metrics().Hits); hits != 4 {
		t.Errorf("%v hits, want 4", hits)
	}
}

// TestPoolReplacesIdleContainers gives warm containers a short idle
// lifetime: the pool replaces them, and removes the old ones.
func TestPoolReplacesIdleContainers(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	sb := runnertest.Sandbox()
	r := newPooledRunner(t, sandbox.PoolConfig{Size: 2, Idle: time.Second, Sandboxes: []runner.Sandbox{sb}})
	if err := r.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	first := warmIDs(t, r)
	if len(first) != 2 {
		t.Fatalf("%d warm containers, want 2", len(first))
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		now := warmIDs(t, r)
		if len(now) == 2 && !slices.Contains(now, first[0]) && !slices.Contains(now, first[1]) {
			break
		}
	}
	if now := warmIDs(t, r); slices.Contains(now, first[0]) || slices.Contains(now, first[1]) {
		t.Fatalf("warm containers %v still include the first ones %v after their idle lifetime", now, first)
	}
	// The replaced containers are removed, not only forgotten.
	for range 50 {
		list, err := r.pf.containers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(list, func(c container.Summary) bool { return slices.Contains(first, c.ID) }) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("replaced warm containers %v were not removed", first)
}

func warmIDs(t *testing.T, r *Runner) []string {
	t.Helper()
	return r.Ready()
}

// TestPoolWarmContainerEndsByItself plays a sidecar that hangs: a warm
// container nobody sends code to ends itself after its wait, without the
// runner.
func TestPoolWarmContainerEndsByItself(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	r := newTestRunner(t)
	spec := runnertest.Spec("print(1)")
	pl, err := r.Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	// A warm container as the pool plans one, waiting 2s for its code
	// (made by hand: no pool's reaper sees it).
	pl.PoolKey, pl.Warm, pl.Wait = "by-hand", &launch.Warm{}, 2*time.Second
	begin := time.Now()
	inst, err := r.pf.Create(t.Context(), sandbox.CreateRequest{Plan: pl, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Remove()
	defer inst.Detach()
	go func() { _, _ = io.Copy(io.Discard, inst.Streams().Stdout) }()
	select {
	case <-inst.Done():
		took := time.Since(begin)
		ex, err := inst.Exit(t.Context(), sandbox.Ending{})
		if err != nil {
			t.Fatal(err)
		}
		// 125 is the launcher's own "no run arrived": its wait, not the
		// runner, ended the container.
		if ex.Code != 125 || took < 2*time.Second {
			t.Errorf("the abandoned warm container exited %d after %v; want 125 after its 2s wait", ex.Code, took)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the abandoned warm container still waits after 30s")
	}
}

// TestPoolCleanupCollectsWarmContainers plays a sidecar that was killed: a
// new runner of the same instance removes its warm containers.
func TestPoolCleanupCollectsWarmContainers(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	sb := runnertest.Sandbox()
	crashed := newPooledRunner(t, sandbox.PoolConfig{Size: 2, Sandboxes: []runner.Sandbox{sb}})
	if err := crashed.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := crashed.Leftovers(t.Context()); err != nil || n != 0 {
		t.Errorf("Leftovers = %d, %v; want 0 (warm containers are the pool's)", n, err)
	}
	before, err := crashed.pf.containers(t.Context())
	if err != nil || len(before) != 2 {
		t.Fatalf("the crashed runner's containers: %v, %v; want its 2 warm ones", before, err)
	}
	next, err := New(Config{Instance: crashed.Instance(), DefaultImage: testImage})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	removed, err := next.Cleanup(t.Context())
	if err != nil || removed != 2 {
		t.Errorf("Cleanup = %d, %v; want the 2 warm containers removed", removed, err)
	}
	// The "crashed" runner still lives in this process, and its pool may
	// make a new warm container once Cleanup removed its own: what must
	// be gone are the containers it had.
	after, err := next.pf.containers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range before {
		if slices.ContainsFunc(after, func(a container.Summary) bool { return a.ID == c.ID }) {
			t.Errorf("container %s of the crashed runner is still there after Cleanup", c.ID)
		}
	}
}

// TestPoolMetrics checks the collectors the sidecar registers.
func TestPoolMetrics(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	sb := runnertest.Sandbox()
	r := newPooledRunner(t, sandbox.PoolConfig{Size: 1, All: true, Sandboxes: []runner.Sandbox{sb}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r.Collectors()...)
	if err := r.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		spec := runnertest.Spec("print(1)")
		spec.Sandbox = sb
		if i == 1 {
			spec.Timeout = sandbox.PoolMaxTimeout + time.Second // not pooled: neither hit nor miss
		}
		if _, err := r.Run(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.AwaitWarm(t.Context(), sb); err != nil { // the refill after the hit is done
		t.Fatal(err)
	}
	// A sandbox pooled only once a run used it: that first run misses.
	other := sb
	other.MemoryBytes = 96 << 20
	spec := runnertest.Spec("print(1)")
	spec.Sandbox = other
	if _, err := r.Run(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		switch {
		case m.Counter != nil:
			got[f.GetName()] = m.Counter.GetValue()
		case m.Histogram != nil:
			got[f.GetName()] = float64(m.Histogram.GetSampleCount())
		case m.Gauge != nil:
			got[f.GetName()] = m.Gauge.GetValue()
		}
	}
	want := map[string]float64{
		"gatekeeper_pool_hits_total":          1,
		"gatekeeper_pool_misses_total":        1,
		"gatekeeper_pool_refill_errors_total": 0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if got["gatekeeper_pool_refill_seconds"] < 2 {
		t.Errorf("refill observed %v times, want at least 2 (the warm-up and the refill after the hit)", got["gatekeeper_pool_refill_seconds"])
	}
	if _, ok := got["gatekeeper_pool_warm_containers"]; !ok {
		t.Error("no gatekeeper_pool_warm_containers gauge")
	}
}

// TestPoolRefusesUnpoolableSandboxes: a sandbox with a network or a deps
// directory cannot be pooled.
func TestPoolRefusesUnpoolableSandboxes(t *testing.T) {
	t.Parallel()
	withDeps := runnertest.Sandbox()
	withDeps.DepsDir = t.TempDir()
	withNet := runnertest.Sandbox()
	withNet.Network = runner.Network{Enabled: true, Allow: []string{"example.com"}}
	for _, sb := range []runner.Sandbox{withDeps, withNet} {
		_, err := newRunner(Config{Instance: "unit", DefaultImage: "img:test", Pool: sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}}}, newFake(), func() error { return nil })
		if err == nil || !strings.Contains(err.Error(), "never pooled") {
			t.Errorf("New with pooled sandbox %+v = %v, want a refusal", sb, err)
		}
	}
	bad := runnertest.Sandbox()
	bad.UID = 0
	if _, err := newRunner(Config{Instance: "unit", DefaultImage: "img:test", Pool: sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{bad}}}, newFake(), func() error { return nil }); err == nil {
		t.Error("New with a pooled root sandbox succeeded, want the plan's refusal")
	}
}
