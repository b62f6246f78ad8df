package docker

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// TestSessionsRunc runs the session suite under runc, TestSessionsRunsc
// under gVisor: a session's sandbox is kept between its runs, never
// shared, and removed when it ends.
func TestSessionsRunc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	runnertest.Sessions(t, func(t *testing.T) runnertest.SessionRunner {
		return withRuntime{newTestRunner(t), runner.Runc}
	}, profileImages["node"])
}

func TestSessionsRunsc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runsc)
	runnertest.Sessions(t, func(t *testing.T) runnertest.SessionRunner {
		return withRuntime{newTestRunner(t), runner.Runsc}
	}, profileImages["node"])
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

// TestSessionsPastTheCapEvictTheIdlest: with room for one idle session
// (by the cap on idle sessions, or by the pool's memory budget), a
// second session's start ends the first, whose next run starts afresh
// and says evicted.
func TestSessionsPastTheCapEvictTheIdlest(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	mem := runnertest.Spec("").Sandbox.MemoryBytes
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"one idle session by --max-sessions", Config{MaxIdleSessions: 1}},
		{"one and a half sessions' memory by --pool-max-memory", Config{Pool: sandbox.PoolConfig{Size: 1, MaxMemoryBytes: mem * 3 / 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.Instance, cfg.DefaultImage = fmt.Sprintf("test-%d-%d", os.Getpid(), instanceSeq.Add(1)), testImage
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			store, err := workspace.OpenStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			run := func(id, code string) runner.Result {
				t.Helper()
				ws, err := store.Workspace(id)
				if err != nil {
					t.Fatal(err)
				}
				spec := runnertest.Spec(code)
				spec.Workspace, spec.QueryID = ws, id
				spec.Session = &runner.Session{ID: id, IdleTimeout: time.Minute, MaxLifetime: time.Hour}
				res, err := r.Run(t.Context(), spec)
				if err != nil || res.Reason != runner.Exited {
					t.Fatalf("run in %s: %v, %s (stderr %q)", id, err, res.Reason, res.Stderr)
				}
				return res
			}
			run("a", `open("/tmp/kept", "w").write("x")`)
			if res := run("a", `import os; print(os.path.exists("/tmp/kept"))`); res.Stdout != "True\n" || res.StateLost != nil {
				t.Fatalf("session a's second run: stdout %q, state lost %+v; want its file kept", res.Stdout, res.StateLost)
			}
			run("b", `print("b")`)
			res := run("a", `import os; print(os.path.exists("/tmp/kept"))`)
			if res.Stdout != "False\n" || res.StateLost == nil || res.StateLost.Reason != runner.EndEvicted || !res.StateLost.Fresh {
				t.Errorf("session a after b started: stdout %q, state lost %+v; want a fresh session that says evicted", res.Stdout, res.StateLost)
			}
			for _, id := range []string{"a", "b"} {
				if err := r.EndSession(t.Context(), id); err != nil {
					t.Fatal(err)
				}
			}
			if tc.cfg.Pool.Size == 0 { // the pool's warm container is not a leftover
				if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
					t.Errorf("leftovers %d, %v; want 0", n, err)
				}
			}
		})
	}
}
