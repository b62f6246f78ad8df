package server_test

// Three of the adversarial run cases again with the real Docker engine
// behind the sidecar instead of a fake runner: what the sidecar refuses
// must never reach the engine, and what it lets through must really run.

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/docker"
	"github.com/gatekeeper-ai/gatekeeper/runner/image"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// realRunner returns the Docker runner of an instance of its own, on the
// engine of the environment, with the default profile's image built if
// missing; it is cleaned up and closed when t ends. A missing engine fails
// t unless runnertest.SkipEngine says to skip.
func realRunner(t *testing.T) *docker.Runner {
	t.Helper()
	if runnertest.SkipEngine() {
		t.Skipf("%s=1: skipping a test that needs a Docker engine", runnertest.SkipEngineEnv)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatalf("Docker engine not usable: %v\nrun scripts/ensure-docker (or set %s=1 to skip the engine tests explicitly)", err, runnertest.SkipEngineEnv)
	}
	if _, err := image.Build(ctx, image.Options{Client: cli}); err != nil {
		t.Fatalf("build the default sandbox image: %v", err)
	}
	r, err := docker.New(docker.Config{Instance: fmt.Sprintf("gate-server-test-%d-%s", os.Getpid(), strings.ToLower(rand.Text()[:10]))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if n, err := r.Leftovers(ctx); err != nil || n != 0 {
			t.Errorf("the runner left %d containers or networks (%v); want none", n, err)
		}
		if _, err := r.Cleanup(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		r.Close()
	})
	return r
}

// countingRunner passes runs on to a real runner and keeps their code.
type countingRunner struct {
	server.Runner
	mu   sync.Mutex
	code []string
}

func (c *countingRunner) Run(ctx context.Context, s runner.Spec) (runner.Result, error) {
	c.mu.Lock()
	c.code = append(c.code, s.Code)
	c.mu.Unlock()
	return c.Runner.Run(ctx, s)
}

func (c *countingRunner) ran() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.code...)
}

// recvResult reads frames until the run's result and returns it with the
// output streamed before it; an error frame fails t.
func recvResult(t *testing.T, c *client) (map[string]any, string) {
	t.Helper()
	var out strings.Builder
	for {
		r := c.recv()
		switch r["type"] {
		case "output":
			out.WriteString(fmt.Sprint(r["data"]))
		case "run_result":
			return r, out.String()
		default:
			t.Fatalf("while waiting for a run's result: %v", r)
		}
	}
}

func TestRunAllowsOnTheRealEngine(t *testing.T) {
	t.Parallel()
	allowRun := func(t *testing.T, c *client, q, id, code string) {
		t.Helper()
		if d := c.decide(q, wire.SandboxTool, fmt.Sprintf(`{"language":"python","code":%q}`, code), id, sdkServer); d["decision"] != "allow" {
			t.Fatalf("decide %s: %v", id, d)
		}
	}
	runFrame := func(reqID, q, id, code string) string {
		return fmt.Sprintf(`{"type":"run","id":%q,"query_id":%q,"tool_use_id":%q,"language":"python","code":%q}`, reqID, q, id, code)
	}

	t.Run("an allow is spent once when two runs race for it", func(t *testing.T) {
		t.Parallel()
		cr := &countingRunner{Runner: realRunner(t)}
		h := advStart(t, cr)
		c := h.connect(t)
		q := c.open("")
		const code = `print("ran once")`
		allowRun(t, c, q, "toolu_race", code)
		c.send(runFrame("r1", q, "toolu_race", code))
		c.send(runFrame("r2", q, "toolu_race", code))
		var results, denied int
		var out strings.Builder
		for results+denied < 2 {
			r := c.recv()
			switch {
			case r["type"] == "output":
				out.WriteString(fmt.Sprint(r["data"]))
			case r["type"] == "run_result":
				results++
				if r["reason"] != "exited" || r["exit_code"] != float64(0) {
					t.Errorf("the run that spent the allow: %v", r)
				}
			case r["code"] == "run_denied" && r["rule"] == "run.no_prior_allow":
				denied++
			default:
				t.Fatalf("racing runs: unexpected %v", r)
			}
		}
		if results != 1 || denied != 1 || out.String() != "ran once\n" {
			t.Errorf("two racing runs on one allow: %d ran, %d refused, output %q; want 1, 1 and %q", results, denied, out.String(), "ran once\n")
		}
		if got := cr.ran(); len(got) != 1 {
			t.Errorf("the engine was given %d runs, want 1", len(got))
		}
	})

	t.Run("flooded allows forget the oldest and fail closed", func(t *testing.T) {
		t.Parallel()
		cr := &countingRunner{Runner: realRunner(t)}
		h := advStart(t, cr)
		c := h.connect(t)
		q := c.open("")
		const n = 1025 // one more than a query remembers
		const code = `print("newest")`
		allow := func(from, to int) {
			for j := from; j < to; j++ {
				c.send(fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":%q,"tool_input":{"language":"python","code":%q},"tool_use_id":"toolu_%d","mcp_server":%s}`, q, wire.SandboxTool, code, j, sdkServer))
			}
			for j := from; j < to; j++ {
				if r := c.recv(); r["decision"] != "allow" {
					t.Fatalf("decide %d: %v", j, r)
				}
			}
		}
		allow(0, 1) // alone, so that it is the oldest
		for i := 1; i < n-1; i += 32 {
			allow(i, min(i+32, n-1))
		}
		allow(n-1, n) // alone, so that it is the newest
		if r := c.do(runFrame("r0", q, "toolu_0", code)); r["code"] != "run_denied" || r["rule"] != "run.no_prior_allow" {
			t.Errorf("the oldest allow, pushed out: %v", r)
		}
		if got := cr.ran(); len(got) != 0 {
			t.Fatalf("the engine was given %d runs for a forgotten allow, want none", len(got))
		}
		c.send(runFrame("rn", q, fmt.Sprintf("toolu_%d", n-1), code))
		if r, out := recvResult(t, c); r["reason"] != "exited" || out != "newest\n" {
			t.Errorf("the newest allow's run: %v with output %q, want exited with %q", r, out, "newest\n")
		}
	})

	t.Run("a run is decided on its own code", func(t *testing.T) {
		t.Parallel()
		cr := &countingRunner{Runner: realRunner(t)}
		h := startWithRego(t, cr, `package gatekeeper

deny contains {"rule": "team.no_sockets", "reason": "sandboxed code may not use sockets"} if {
	input.tool_name == "mcp__sandboxed_code__run"
	regex.match(`+"`"+`\bimport\s+socket\b`+"`"+`, input.tool_input.code)
}
`)
		c := h.connect(t)
		q := c.open("")
		allowRun(t, c, q, "toolu_swap", "print(1)")
		if r := c.do(runFrame("r", q, "toolu_swap", "import socket\nprint('swapped')")); r["code"] != "run_denied" || r["rule"] != "team.no_sockets" {
			t.Fatalf("run with swapped code: %v", r)
		}
		if got := cr.ran(); len(got) != 0 {
			t.Errorf("the engine was given %q, want nothing", got)
		}
		// The allow was for print(1): that code, run now, really runs.
		allowRun(t, c, q, "toolu_own", "print(1)")
		c.send(runFrame("r2", q, "toolu_own", "print(1)"))
		if r, out := recvResult(t, c); r["reason"] != "exited" || out != "1\n" {
			t.Errorf("the run of the allowed code: %v with output %q, want exited with %q", r, out, "1\n")
		}
	})
}
