package docker

import (
	"context"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// TestConformanceRunc runs the suite in every profile's image: the
// lockdown holds whatever the image holds. The profiles take turns (each
// suite runs its cases in parallel): run together, their memory and fork
// bombs would overload the 2-core machines the suite runs on.
func TestConformanceRunc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	for _, name := range profile.Names() {
		t.Run(name, func(t *testing.T) {
			conformance(t, runner.Runc, name)
		})
	}
}

// TestConformanceRunsc runs the same cases under gVisor, in the default
// profile's image and in python-data's, the largest. They hold there as
// they are, because the runner maps the policy onto what gVisor enforces
// (see Config.RunscPIDsExtra): gVisor's own kernel applies RLIMIT_NPROC to
// the sandbox's processes, so a fork bomb gets EAGAIN as under runc.
func TestConformanceRunsc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runsc)
	for _, name := range []string{profile.Default, "python-data"} {
		t.Run(name, func(t *testing.T) {
			conformance(t, runner.Runsc, name)
		})
	}
}

func conformance(t *testing.T, rt runner.Runtime, name string) {
	img, ok := profileImages[name]
	if !ok {
		t.Fatalf("no image of profile %s", name)
	}
	runnertest.Conformance(t, func(t *testing.T) runnertest.Runner {
		return inImage{withRuntime{newTestRunner(t), rt}, img}
	})
}

// inImage runs every Spec in one image.
type inImage struct {
	withRuntime
	image string
}

func (w inImage) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	spec.Sandbox.Image = w.image
	return w.withRuntime.Run(ctx, spec)
}
