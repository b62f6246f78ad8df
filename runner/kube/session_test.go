//go:build kube

package kube

import (
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// TestSessionsRunsc runs the session suite as Pods under gVisor
// (gvisor-nonet): a session is one Pod held for its runs, attached once.
func TestSessionsRunsc(t *testing.T) {
	t.Parallel()
	image := testImage(t)
	runnertest.Sessions(t, func(t *testing.T) runnertest.SessionRunner {
		return withRuntime{newTestRunner(t, testConfig(t, nil)), runner.Runsc, image}
	}, "")
}

// TestSessionLockdownRunsc runs the conformance suite's outcome cases
// inside sessions of gVisor Pods, at their first run and after ten.
func TestSessionLockdownRunsc(t *testing.T) {
	t.Parallel()
	image := testImage(t)
	runnertest.SessionLockdown(t, func(t *testing.T) runnertest.SessionRunner {
		return withRuntime{newTestRunner(t, testConfig(t, nil)), runner.Runsc, image}
	}, kubeOptions)
}
