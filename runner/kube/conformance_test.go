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
	// A Pod mounts no host path, and emptyDir has no owner setting.
	runnertest.ConformanceWith(t, func(t *testing.T) runnertest.Runner {
		return withRuntime{newTestRunner(t, testConfig(t, nil)), rt, image}
	}, runnertest.Options{NoHostDeps: true, RootOwnedWorkspace: true})
}
