//go:build kube

package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// pooledRunner is a test Runner with a warm pool of cfg, warmed.
func pooledRunner(t *testing.T, cfg sandbox.PoolConfig) *Runner {
	t.Helper()
	rc := testConfig(t, nil)
	rc.Pool = cfg
	r := newTestRunner(t, rc)
	warmUp(t, r)
	return r
}

// warmUp waits until r's pool is full. A warm Pod takes only room no run
// needs, so while other tests' Pods fill the node the pool gives up and
// tries again later: warm waits through that, for up to two minutes.
func warmUp(t *testing.T, r *Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		err := r.Warm(ctx)
		switch {
		case err == nil:
			return
		case !errors.Is(err, sandbox.ErrNoRoom) || ctx.Err() != nil:
			t.Fatalf("warm the pool: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// TestPoolPodsServeOneRun runs four times in a pool of one warm Pod under
// each runtime: every run is warm, none sees the marker the one before it
// left in /tmp (a Pod serves one run), the timeout counts from the code's
// delivery (the Pod waited longer than it before the run), and once the
// runs ended nothing but the pool's own warm Pod is left.
func TestPoolPodsServeOneRun(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			sb := runnertest.Sandbox()
			sb.Image, sb.Runtime, sb.CPUs = c.image, rt, 0.5
			r := pooledRunner(t, sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}})
			time.Sleep(2 * time.Second) // longer than the timeout below
			for i := range 4 {
				spec := runnertest.Spec(`import os
print(os.path.exists("/tmp/marker"), flush=True)
open("/tmp/marker", "w").write("x")
while True:
    pass`)
				spec.Sandbox = sb
				spec.Timeout = time.Second
				res, err := r.Run(t.Context(), spec)
				if err != nil {
					t.Fatal(err)
				}
				if res.Reason != runner.TimedOut || res.ExitCode != 137 || res.Stdout != "False\n" {
					t.Errorf("run %d ended %s %d stdout %q stderr %q; want timed_out 137 after printing False (no marker)", i, res.Reason, res.ExitCode, res.Stdout, res.Stderr)
				}
				if res.Duration < time.Second {
					t.Errorf("run %d: duration %v, shorter than its 1s timeout counted from the code's delivery", i, res.Duration)
				}
				warmUp(t, r) // refilled in the background
			}
			if hits := counterValue(t, r.Metrics().Hits); hits != 4 {
				t.Errorf("%v pool hits, want 4: every run warm", hits)
			}
			if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
				t.Errorf("%d Pods or NetworkPolicies besides the pool's (%v), want 0", n, err)
			}
		})
	}
}

// TestAColdRunTakesTheRoomOfAWarmPod fills the test node's CPUs with two
// warm Pods of half of them each, then runs a sandbox the pool does not
// keep (another memory size, the same CPUs): its Pod cannot be scheduled
// until a warm Pod gives up its place, which the pool must do rather than
// let the run wait for the warm Pods' idle lifetime (minutes) and fail at
// its start timeout. The Pods' size comes from the node, so that the node
// is full on any machine (two CPUs here). It does not run in parallel with
// the other tests: their Pods would take the room it frees.
func TestAColdRunTakesTheRoomOfAWarmPod(t *testing.T) {
	c := requireCluster(t)
	sb := runnertest.Sandbox()
	sb.Image, sb.Runtime, sb.CPUs = c.image, runner.Runc, c.nodeCPUs(t)/2
	rc := testConfig(t, nil)
	rc.Pool = sandbox.PoolConfig{Size: 2, Sandboxes: []runner.Sandbox{sb}}
	rc.StartTimeout = time.Minute
	r := newTestRunner(t, rc)
	warmUp(t, r)
	spec := runnertest.Spec(`print("cold")`)
	spec.Sandbox = sb
	spec.Sandbox.MemoryBytes += 64 << 20
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatalf("the cold run: %v", err)
	}
	if res.Reason != runner.Exited || strings.TrimSpace(res.Stdout) != "cold" {
		t.Errorf("the cold run ended %s %d stdout %q stderr %q; want exited 0 printing cold", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
	}
	if hits := counterValue(t, r.Metrics().Hits); hits != 0 {
		t.Errorf("%v pool hits, want 0: the run's sandbox is not pooled", hits)
	}
}

// pooledRuntime runs every Spec under one runtime in the test image, after
// making sure a warm Pod of its sandbox is ready (a run racing another for
// it may still miss and run cold).
type pooledRuntime struct {
	withRuntime
}

func (w pooledRuntime) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	spec.Sandbox.Runtime = w.rt
	// A fifth of a CPU (no case measures CPU): requests equal limits, and
	// with whole CPUs the test node's two hold two Pods, so that most of
	// the suite, run in parallel, would find no room for warm Pods and run
	// cold.
	spec.Sandbox.CPUs = 0.2
	if spec.Sandbox.Image == "" {
		spec.Sandbox.Image = w.image
	}
	if spec.Timeout <= sandbox.PoolMaxTimeout {
		// A warm Pod takes only room no run needs: on a full node the
		// run goes cold, and its Pod takes a warm Pod's place. A cancel
		// during the wait is the run's: Run reports it, as a cancelled
		// Result.
		if err := w.AwaitWarm(ctx, spec.Sandbox); err != nil && !errors.Is(err, sandbox.ErrNoRoom) && ctx.Err() == nil {
			return runner.Result{}, fmt.Errorf("warm the pool: %w", err)
		}
	}
	return w.Runner.Run(ctx, spec)
}

// TestConformanceRuncPooled runs the conformance suite with the warm pool
// on: the same limits must hold in a Pod that waited for its code. The
// pooled suites do not run in parallel with the other tests (their cases
// do, with each other): their warm Pods would hold room the other tests'
// cold Pods wait for, one at a time.
func TestConformanceRuncPooled(t *testing.T) {
	conformancePooled(t, runner.Runc)
}

// TestConformanceRunscPooled is the same under gVisor.
func TestConformanceRunscPooled(t *testing.T) {
	conformancePooled(t, runner.Runsc)
}

func conformancePooled(t *testing.T, rt runner.Runtime) {
	image := testImage(t)
	var mu sync.Mutex
	var runners []*Runner
	runnertest.ConformanceWith(t, func(t *testing.T) runnertest.Runner {
		cfg := testConfig(t, nil)
		cfg.Pool = sandbox.PoolConfig{Size: 1, Idle: 5 * time.Minute, All: true}
		r := newTestRunner(t, cfg)
		mu.Lock()
		runners = append(runners, r)
		mu.Unlock()
		return pooledRuntime{withRuntime{r, rt, image}}
	}, kubeOptions)
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
