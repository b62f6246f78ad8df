package docker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// skipEnv, set to 1, skips the tests that need a Docker engine. Without it
// an unreachable engine fails them: they never skip silently. It is
// runnertest's switch, shared with gate/server's engine tests, and CI
// (CI=true) never honours it.
const skipEnv = runnertest.SkipEngineEnv

func skipEngine() bool { return runnertest.SkipEngine() }

var (
	engineSetupErr error             // why the engine tests cannot run
	testImage      string            // the default profile's image, built if missing
	profileImages  map[string]string // every profile's image tag, by profile name
	engineRuntimes map[string]bool
)

func TestMain(m *testing.M) {
	if !skipEngine() {
		engineSetupErr = setupEngine()
	}
	code := m.Run()
	if engineSetupErr == nil && !skipEngine() {
		if left := leftoverNetworks(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: Docker networks of this test process left behind: %s\n", strings.Join(left, ", "))
			code = 1
		}
	}
	os.Exit(code)
}

// leftoverNetworks lists the networks whose instance label belongs to one
// of this process's test runners.
func leftoverNetworks() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return []string{err.Error()}
	}
	defer cli.Close()
	list, err := cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", runner.LabelInstance))})
	if err != nil {
		return []string{err.Error()}
	}
	prefix := fmt.Sprintf("test-%d-", os.Getpid())
	var out []string
	for _, n := range list {
		if strings.HasPrefix(n.Labels[runner.LabelInstance], prefix) {
			out = append(out, n.Name)
		}
	}
	return out
}

// setupEngine checks the engine answers and makes sure every profile's
// image exists, building those that do not: once per machine and recipe
// (a few minutes from nothing; make test builds them before the tests).
func setupEngine() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	pingCtx, cancelPing := context.WithTimeout(ctx, 10*time.Second)
	defer cancelPing()
	if _, err := cli.Ping(pingCtx); err != nil {
		return err
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return err
	}
	engineRuntimes = map[string]bool{}
	for name := range info.Runtimes {
		engineRuntimes[name] = true
	}
	profileImages = map[string]string{}
	for _, name := range profile.Names() {
		res, err := image.Build(ctx, image.Options{Profile: name, Client: cli})
		if err != nil {
			return fmt.Errorf("build the %s sandbox image: %w", name, err)
		}
		profileImages[name] = res.Tag
	}
	testImage = profileImages[profile.Default]
	return nil
}

// requireEngine fails t unless the engine tests can run, or skips it when
// skipEngine says so.
func requireEngine(t testing.TB) {
	t.Helper()
	if skipEngine() {
		t.Skipf("%s=1: skipping a test that needs a Docker engine", skipEnv)
	}
	if engineSetupErr != nil {
		t.Fatalf("Docker engine not usable: %v\nrun scripts/ensure-docker (or set %s=1 to skip the engine tests explicitly)", engineSetupErr, skipEnv)
	}
}

func requireRuntime(t testing.TB, rt runner.Runtime) {
	t.Helper()
	requireEngine(t)
	if !engineRuntimes[string(rt)] {
		t.Fatalf("the engine has no %s runtime; run scripts/ensure-docker", rt)
	}
}

var instanceSeq atomic.Int64

// newTestRunner returns a Runner with an instance name of its own, closed
// and cleaned up when t ends.
func newTestRunner(t testing.TB) *Runner {
	t.Helper()
	r, err := New(Config{
		Instance:     fmt.Sprintf("test-%d-%d", os.Getpid(), instanceSeq.Add(1)),
		DefaultImage: testImage,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := r.Cleanup(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		r.Close()
	})
	return r
}

// withRuntime runs every Spec under one runtime.
type withRuntime struct {
	*Runner
	rt runner.Runtime
}

func (w withRuntime) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	spec.Sandbox.Runtime = w.rt
	return w.Runner.Run(ctx, spec)
}
