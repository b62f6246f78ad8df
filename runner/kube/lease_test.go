//go:build kube

package kube

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// testLease is a short Lease, so that a takeover costs the suite seconds.
func testLease(holder string) *LeaseConfig {
	return &LeaseConfig{Holder: holder, Duration: 3 * time.Second, Renew: time.Second}
}

// leaseRunner is a Runner of the test cluster for instance, guarded by a
// short Lease held as holder, not started.
func leaseRunner(t *testing.T, instance, holder string) *Runner {
	t.Helper()
	cfg := testConfig(t, nil)
	cfg.Egress, cfg.Lease = nil, testLease(holder)
	if instance != "" {
		cfg.Instance = instance
	}
	return newTestRunner(t, cfg)
}

// crash stops r renewing its Lease without releasing it, as a sidecar
// killed with SIGKILL (or whose node died) does.
func crash(r *Runner) {
	l := r.pf.lease
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	l.mu.Lock()
	l.held = nil
	l.mu.Unlock()
}

// leavePod creates a Pod (and its NetworkPolicy) of r's instance that
// nobody runs or removes, as a crashed sidecar leaves one.
func leavePod(t *testing.T, r *Runner) {
	t.Helper()
	spec := runnertest.Spec(`print("never sent")`)
	spec.Sandbox.Image, spec.Sandbox.Runtime, spec.Sandbox.CPUs = testImage(t), runner.Runsc, 0.25
	sp, err := r.Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.pf.createPod(t.Context(), spec, r.pf.podPlan(sp), launch.Env(), newPodName(), netip.AddrPort{}); err != nil {
		t.Fatal(err)
	}
}

// TestASecondSidecarOfALiveInstanceIsRefusedNamingTheHolder: two runners
// of one instance in one namespace; the second sees the first renew the
// Lease and refuses to start, naming it, and removes nothing; once the
// first stops cleanly, a third starts at once.
func TestASecondSidecarOfALiveInstanceIsRefusedNamingTheHolder(t *testing.T) {
	t.Parallel()
	first := leaseRunner(t, "", "first-sidecar")
	if err := first.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := leaseRunner(t, first.Instance(), "second-sidecar")
	err := second.Start(t.Context())
	if !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), "first-sidecar-") || !strings.Contains(err.Error(), "--instance") {
		t.Fatalf("the second sidecar's Start: %v; want ErrLeaseHeld naming first-sidecar and how to name another", err)
	}
	if err := first.pf.guard(); err != nil {
		t.Errorf("the first sidecar lost its Lease to a refused one: %v", err)
	}
	first.Close()
	third := leaseRunner(t, first.Instance(), "third-sidecar")
	t0 := time.Now()
	if err := third.Start(t.Context()); err != nil {
		t.Fatalf("after the first stopped cleanly: %v", err)
	}
	if d := time.Since(t0); d >= 3*time.Second {
		t.Errorf("the third sidecar waited %s for a released Lease, as for an expired one", d)
	}
}

// TestACrashedSidecarsLeaseIsTakenOverAndOnlyItsPodsRemoved: a sidecar
// that stops renewing leaves its Lease and its Pods; its successor of the
// same instance (a StatefulSet's Pod of the same name) takes the Lease
// over once it expires and removes that instance's Pods and
// NetworkPolicies, and no Pod of another instance in the namespace.
func TestACrashedSidecarsLeaseIsTakenOverAndOnlyItsPodsRemoved(t *testing.T) {
	t.Parallel()
	crashed := leaseRunner(t, "", "crashed-sidecar")
	other := leaseRunner(t, "", "other-sidecar")
	for _, r := range []*Runner{crashed, other} {
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	leavePod(t, crashed)
	leavePod(t, crashed)
	leavePod(t, other)
	crash(crashed)

	successor := leaseRunner(t, crashed.Instance(), "successor")
	if err := successor.Start(t.Context()); err != nil {
		t.Fatalf("the successor of a crashed sidecar: %v; want the expired Lease taken over", err)
	}
	lease, err := successor.pf.cs.CoordinationV1().Leases(successor.Namespace()).Get(t.Context(), LeaseName(crashed.Instance()), metav1.GetOptions{})
	if err != nil || !strings.HasPrefix(holderOf(lease), "successor-") {
		t.Fatalf("the Lease after the takeover: %v, %v; want the successor its holder", lease, err)
	}
	if n, err := successor.Cleanup(t.Context()); err != nil || n != 4 {
		t.Errorf("the successor's Cleanup = %d, %v; want the crashed sidecar's two Pods and two NetworkPolicies", n, err)
	}
	if n, err := other.Leftovers(t.Context()); err != nil || n != 2 {
		t.Errorf("the other instance has %d Pods and NetworkPolicies (%v), want its 2, untouched", n, err)
	}
	if err := other.pf.guard(); err != nil {
		t.Errorf("the other instance's sidecar lost its Lease: %v", err)
	}
}

// TestASidecarThatLosesItsLeaseRefusesRuns: another holder writes itself
// into the Lease; at its next renewal the sidecar sees it, and every run
// is refused naming the new holder, no Pod made.
func TestASidecarThatLosesItsLeaseRefusesRuns(t *testing.T) {
	t.Parallel()
	r := leaseRunner(t, "", "victim")
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	leases := r.pf.cs.CoordinationV1().Leases(r.Namespace())
	lease, err := leases.Get(t.Context(), LeaseName(r.Instance()), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	intruder := "intruder-sidecar"
	lease.Spec.HolderIdentity = &intruder
	if _, err := leases.Update(t.Context(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The sidecar sees it at its next renewal (every second here).
	deadline := time.Now().Add(10 * time.Second)
	for r.pf.guard() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the sidecar still holds its Lease 10 s after another took it")
		}
		time.Sleep(100 * time.Millisecond)
	}
	spec := runnertest.Spec(`print("must not run")`)
	spec.Sandbox.Image, spec.Sandbox.Runtime = testImage(t), runner.Runsc
	res, err := r.Run(t.Context(), spec)
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, runner.ErrUnavailable) || !strings.Contains(err.Error(), intruder) {
		t.Fatalf("a run after the Lease was taken: %+v, %v; want ErrLeaseLost (runner_unavailable) naming %s", res, err, intruder)
	}
	if _, err := r.Cleanup(t.Context()); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Cleanup without the Lease: %v; want it refused, the instance's Pods being the new holder's", err)
	}
	if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
		t.Errorf("the refused run left %d Pods and NetworkPolicies (%v)", n, err)
	}
	// The intruder's Lease is not the victim's to delete when it stops.
	r.Close()
	if got, err := leases.Get(t.Context(), LeaseName(r.Instance()), metav1.GetOptions{}); err != nil || holderOf(got) != intruder {
		t.Errorf("after the victim's Close the Lease is %v (%v); want the intruder's, kept", got, err)
	}
	_ = leases.Delete(t.Context(), LeaseName(r.Instance()), metav1.DeleteOptions{})
}
