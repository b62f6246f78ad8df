//go:build kube

package kube

import (
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// TestConformanceRunc runs the conformance suite as Pods under runc (the
// runc-nonet class for the cases without a network).
func TestConformanceRunc(t *testing.T) {
	t.Parallel()
	conformance(t, runner.Runc)
}

// TestConformanceRunsc runs it under gVisor (gvisor-nonet).
func TestConformanceRunsc(t *testing.T) {
	t.Parallel()
	conformance(t, runner.Runsc)
}

func conformance(t *testing.T, rt runner.Runtime) {
	image := testImage(t)
	runnertest.ConformanceWith(t, func(t *testing.T) runnertest.Runner {
		return withRuntime{newTestRunner(t, testConfig(t, nil)), rt, image}
	}, kubeOptions)
}

// kubeOptions are what the backend does differently by design (see
// runnertest.Options and docs/SANDBOX.md): a Pod mounts no host path;
// emptyDir has no owner setting and no mount options; the pids bound is
// RLIMIT_NPROC in the Pod's own user namespace; a Pod's lo has ::1.
var kubeOptions = runnertest.Options{NoHostDeps: true, RootOwnedWorkspace: true, ExecVolumes: true, PIDsByRlimit: true, IPv6Loopback: true}

// TestAdversarialSandbox runs runnertest's adversarial suite as Pods
// under runc (runc-nonet) and gVisor (gvisor-nonet).
func TestAdversarialSandbox(t *testing.T) {
	t.Parallel()
	image := testImage(t)
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			runnertest.Adversarial(t, withRuntime{newTestRunner(t, testConfig(t, nil)), rt, image}, rt, kubeOptions)
		})
	}
}
