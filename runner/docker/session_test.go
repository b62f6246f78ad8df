package docker

import (
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// TestSessionsRunc runs the session suite under runc, TestSessionsRunsc
// under gVisor: a session's sandbox is kept between its runs, never
// shared, and removed when it ends.
func TestSessionsRunc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	runnertest.Sessions(t, func(t *testing.T) runnertest.SessionRunner {
		return withRuntime{newTestRunner(t), runner.Runc}
	})
}

func TestSessionsRunsc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runsc)
	runnertest.Sessions(t, func(t *testing.T) runnertest.SessionRunner {
		return withRuntime{newTestRunner(t), runner.Runsc}
	})
}

// TestSessionLockdownRunc and TestSessionLockdownRunsc run the outcome
// cases of the conformance suite (its lockdown checks) inside sessions,
// at their first run and after ten.
func TestSessionLockdownRunc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	runnertest.SessionLockdown(t, func(t *testing.T) runnertest.SessionRunner {
		return withRuntime{newTestRunner(t), runner.Runc}
	}, runnertest.Options{})
}

func TestSessionLockdownRunsc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runsc)
	runnertest.SessionLockdown(t, func(t *testing.T) runnertest.SessionRunner {
		return withRuntime{newTestRunner(t), runner.Runsc}
	}, runnertest.Options{})
}
