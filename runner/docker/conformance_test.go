package docker

import (
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

func TestConformanceRunc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	runnertest.Conformance(t, func(t *testing.T) runnertest.Runner {
		return withRuntime{newTestRunner(t), runner.Runc}
	})
}

// TestConformanceRunsc runs the same cases under gVisor. They hold there as
// they are, because the runner maps the policy onto what gVisor enforces
// (see Config.RunscPIDsExtra): gVisor's own kernel applies RLIMIT_NPROC to
// the sandbox's processes, so a fork bomb gets EAGAIN as under runc.
func TestConformanceRunsc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runsc)
	runnertest.Conformance(t, func(t *testing.T) runnertest.Runner {
		return withRuntime{newTestRunner(t), runner.Runsc}
	})
}
