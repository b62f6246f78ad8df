//go:build kube

package kube

import (
	"net/netip"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner/egress/egresstest"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// TestCleanupRemovesWhatACrashedSidecarLeft leaves what a sidecar killed
// in the middle of its runs leaves: running Pods, one with a network and
// one without, each with its NetworkPolicy, and nobody to delete them.
// A new Runner of the same instance (the restarted sidecar) must find
// them by label and remove all four, Pods gone from the API server rather
// than terminating; the same-shaped Pod of another instance stays.
func TestCleanupRemovesWhatACrashedSidecarLeft(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	crashedCfg := egressConfig(t, &egresstest.Recorder{})
	crashed := newTestRunner(t, crashedCfg)
	other := newTestRunner(t, testConfig(t, nil))

	leave := func(r *Runner, network bool) {
		t.Helper()
		spec := runnertest.Spec(`print("never sent")`)
		spec.Sandbox.Image = c.image
		// A quarter of a CPU: requests equal limits, and three Pods of a
		// whole CPU do not fit the test node's two at once.
		spec.Sandbox.CPUs = 0.25
		if network {
			spec.Sandbox.Network.Enabled, spec.Sandbox.Network.Allow = true, []string{"upstream.test"}
		}
		sp, err := r.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		p, env := r.pf.podPlan(sp), launch.Env()
		var proxy netip.AddrPort
		if network {
			if proxy, err = r.pf.egress.addr(t.Context()); err != nil {
				t.Fatal(err)
			}
			env = append(env, sandbox.ProxyEnv("http://"+proxy.String())...)
		}
		if err := r.pf.watch.start(t.Context()); err != nil {
			t.Fatal(err)
		}
		name := newPodName()
		if err := r.pf.createPod(t.Context(), spec, p, env, name, proxy); err != nil {
			t.Fatal(err)
		}
		// Running and blocked on its standard input, as a run's Pod is
		// between its start and the code's arrival.
		if _, err := r.pf.waitStarted(t.Context(), name, p, nil); err != nil {
			t.Fatal(err)
		}
	}
	leave(crashed, false)
	leave(crashed, true)
	leave(other, false)

	restarted := newTestRunner(t, Config{
		Instance: crashedCfg.Instance, Namespace: crashedCfg.Namespace, REST: crashedCfg.REST,
	})
	if n, err := restarted.Leftovers(t.Context()); err != nil || n != 4 {
		t.Fatalf("before Cleanup the restarted runner sees %d Pods and NetworkPolicies of its instance (%v), want 4", n, err)
	}
	removed, err := restarted.Cleanup(t.Context())
	if err != nil || removed != 4 {
		t.Fatalf("Cleanup = %d, %v; want 4 (two Pods, two NetworkPolicies), nil", removed, err)
	}
	if n, err := restarted.Leftovers(t.Context()); err != nil || n != 0 {
		t.Errorf("after Cleanup %d of the instance's Pods and NetworkPolicies remain (%v), want 0", n, err)
	}
	if n, err := other.Leftovers(t.Context()); err != nil || n != 2 {
		t.Errorf("the other instance has %d Pods and NetworkPolicies (%v), want its 2: not the restarted runner's to remove", n, err)
	}
}
