//go:build kube

package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
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
func pooledRunner(t *testing.T, cfg PoolConfig) *Runner {
	t.Helper()
	rc := testConfig(t, nil)
	rc.Pool = cfg
	r := newTestRunner(t, rc)
	if err := r.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
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
			r := pooledRunner(t, PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}})
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
				if err := r.Warm(t.Context()); err != nil { // refilled in the background
					t.Fatal(err)
				}
			}
			if hits := counterValue(t, r.metrics.Hits); hits != 4 {
				t.Errorf("%v pool hits, want 4: every run warm", hits)
			}
			if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
				t.Errorf("%d Pods or NetworkPolicies besides the pool's (%v), want 0", n, err)
			}
		})
	}
}

// TestAColdRunTakesTheRoomOfAWarmPod fills the test node's two CPUs with
// two warm Pods of a whole CPU each, then runs a sandbox the pool does
// not keep (another memory size): its Pod cannot be scheduled until a
// warm Pod gives up its place, which the pool must do rather than let the
// run wait for the warm Pods' idle lifetime (minutes) and fail at its
// start timeout. It does not run in parallel with the other tests: their
// Pods would take the room it frees.
func TestAColdRunTakesTheRoomOfAWarmPod(t *testing.T) {
	c := requireCluster(t)
	sb := runnertest.Sandbox()
	sb.Image, sb.Runtime, sb.CPUs = c.image, runner.Runc, 1
	rc := testConfig(t, nil)
	rc.Pool = PoolConfig{Size: 2, Sandboxes: []runner.Sandbox{sb}}
	rc.StartTimeout = time.Minute
	r := newTestRunner(t, rc)
	if err := r.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
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
	if hits := counterValue(t, r.metrics.Hits); hits != 0 {
		t.Errorf("%v pool hits, want 0: the run's sandbox is not pooled", hits)
	}
}
