package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/gorilla/websocket"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// asMainEnv, set to 1, makes the test binary run main instead of the
// tests: the two-sidecar test starts real serve processes from it.
const asMainEnv = "GATEKEEPER_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveProcess is a `gatekeeper serve` in a process of its own.
type serveProcess struct {
	cmd  *exec.Cmd
	sock string
	log  *syncWriter
	done chan struct{} // closed when the process has exited
}

// startServe starts serve on policy with its own socket, token, audit log
// and state under dir, instance and the lock directory lockDir (as
// XDG_RUNTIME_DIR); extra flags follow.
func startServe(t *testing.T, dir, lockDir, policy, instance string, extra ...string) *serveProcess {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o700))
	p := &serveProcess{sock: filepath.Join(dir, "gk.sock"), log: &syncWriter{b: &strings.Builder{}}, done: make(chan struct{})}
	args := append([]string{"serve", "--listen", "unix://" + p.sock, "--policy", policy, "--instance", instance,
		"--token-file", filepath.Join(dir, "token"), "--audit-log", filepath.Join(dir, "audit.jsonl"),
		"--state-dir", filepath.Join(dir, "state"), "--watch-interval", "0", "--max-runs", "2"}, extra...)
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), asMainEnv+"=1", "XDG_RUNTIME_DIR="+lockDir)
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, p.log
	must(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// connect opens a query on the sidecar p, waiting for it to listen.
func (p *serveProcess) connect(t *testing.T) *wsSidecar {
	t.Helper()
	return dialSidecar(t, p.sock, filepath.Join(filepath.Dir(p.sock), "token"), 60*time.Second, p.log)
}

// instanceContainers lists the IDs of the containers labelled with
// instance, and of those the pool's warm ones.
func instanceContainers(t *testing.T, cli *client.Client, instance string) (all, warm []string) {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", runner.LabelInstance+"="+instance))})
	must(t, err)
	for _, c := range list {
		all = append(all, c.ID)
		if c.Labels[runner.LabelPool] != "" && c.State == "running" {
			warm = append(warm, c.ID)
		}
	}
	slices.Sort(all)
	slices.Sort(warm)
	return all, warm
}

// TestASecondSidecarOfOneInstanceRefusesToStart pins the instance lock
// with real serve processes and the real Docker engine: a second sidecar
// of the first one's instance refuses to start, naming --instance, and
// the first one's warm containers and its run in flight survive; once
// the first is killed with SIGKILL (no clean-up of its own), a new one of
// the instance starts and removes what it left.
func TestASecondSidecarOfOneInstanceRefusesToStart(t *testing.T) {
	if runnertest.SkipEngine() {
		t.Skipf("%s=1: skipping a test that needs a Docker engine", runnertest.SkipEngineEnv)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	must(t, err)
	defer cli.Close()
	if _, err := cli.Ping(t.Context()); err != nil {
		t.Fatalf("Docker engine not usable: %v (set %s=1 to skip the engine tests explicitly)", err, runnertest.SkipEngineEnv)
	}
	instance := fmt.Sprintf("lock-test-%d", os.Getpid())
	t.Cleanup(func() { // whatever a failed test left of the instance
		all, _ := instanceContainers(t, cli, instance)
		for _, id := range all {
			_ = cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
		}
	})
	root, lockDir := t.TempDir(), t.TempDir()
	policy := filepath.Join(root, "policy.yaml")
	must(t, os.MkdirAll(filepath.Join(root, "ws"), 0o755))
	must(t, os.WriteFile(policy, []byte("version: 1\nworkspace_root: ./ws\ntools:\n  allow: [mcp__sandboxed_code__run]\nsandbox:\n  proc: {timeout: 60s}\n"), 0o644))
	pool := []string{"--pool-size", "2", "--pool-min", "2"}

	first := startServe(t, filepath.Join(root, "first"), lockDir, policy, instance, pool...)
	side := first.connect(t)
	var warm []string
	for deadline := time.Now().Add(90 * time.Second); len(warm) < 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first sidecar's pool has %d warm containers, want 2\n%s", len(warm), first.log)
		}
		_, warm = instanceContainers(t, cli, instance)
	}
	// A run in flight: it prints, then sleeps past the second start.
	code := `import time; print("started", flush=True); time.sleep(4); print("done")`
	input, _ := json.Marshal(map[string]string{"language": "python", "code": code})
	if d := side.do(t, fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":"mcp__sandboxed_code__run","tool_input":%s,"tool_use_id":"toolu_1","mcp_server":{"name":"sandboxed_code","source":"sdk"}}`, side.query, input)); d["decision"] != "allow" {
		t.Fatalf("decide: %v", d)
	}
	run, _ := json.Marshal(map[string]string{"type": "run", "id": "r", "query_id": side.query, "tool_use_id": "toolu_1", "language": "python", "code": code})
	must(t, side.ws.WriteMessage(websocket.TextMessage, run))
	if f := side.read(t); f["type"] != "output" || !strings.HasPrefix(fmt.Sprint(f["data"]), "started") {
		t.Fatalf("first frame of the run = %v; want its output started", f)
	}
	before, _ := instanceContainers(t, cli, instance)

	second := startServe(t, filepath.Join(root, "second"), lockDir, policy, instance, pool...)
	select {
	case <-second.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the second sidecar of instance %s is still running\n%s", instance, second.log)
	}
	if second.cmd.ProcessState.ExitCode() == 0 {
		t.Errorf("the second sidecar exited 0")
	}
	for _, want := range []string{fmt.Sprintf("instance %q is in use by another sidecar (pid %d", instance, first.cmd.Process.Pid), "--instance NAME"} {
		if !strings.Contains(second.log.String(), want) {
			t.Errorf("the second sidecar's error does not say %q:\n%s", want, second.log)
		}
	}
	if strings.Contains(second.log.String(), "removed leftover") {
		t.Errorf("the second sidecar removed something:\n%s", second.log)
	}
	// None of the instance's containers is gone; the first sidecar's pool
	// may have made one more meanwhile, refilling for the run's claim.
	after, _ := instanceContainers(t, cli, instance)
	for _, id := range before {
		if !slices.Contains(after, id) {
			t.Errorf("container %s of the first sidecar is gone after the refused start: %v, then %v", id, before, after)
		}
	}
	res := side.read(t)
	for res["type"] == "output" {
		res = side.read(t)
	}
	if res["type"] != "run_result" || res["exit_code"] != float64(0) || !strings.Contains(fmt.Sprint(res["stdout"]), "done") {
		t.Fatalf("the run in flight ended with %v; want exit 0 and done", res)
	}

	// SIGKILL: the first sidecar removes nothing of its own.
	must(t, first.cmd.Process.Signal(syscall.SIGKILL))
	<-first.done
	// The engine finishes a removal the killed sidecar had begun (its
	// run's container): wait for it, so that what is left is what no one
	// is removing.
	for deadline := time.Now().Add(30 * time.Second); removing(t, cli, instance) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	left, _ := instanceContainers(t, cli, instance)
	if len(left) == 0 {
		t.Fatalf("no leftovers after SIGKILL: the test would not show that the next sidecar removes them")
	}
	third := startServe(t, filepath.Join(root, "third"), lockDir, policy, instance, "--pool-size", "0")
	third.connect(t)
	// The line is logged before the sidecar listens; its pipe may lag.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(third.log.String(), "removed leftover sandboxes of a previous sidecar") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(third.log.String(), "removed leftover sandboxes of a previous sidecar") {
		t.Errorf("the sidecar after the SIGKILL did not say it removed leftovers:\n%s", third.log)
	}
	now, _ := instanceContainers(t, cli, instance)
	for _, id := range left {
		if slices.Contains(now, id) {
			t.Errorf("leftover container %s of the killed sidecar is still there", id[:12])
		}
	}
}

// removing reports whether a container of instance is being removed.
func removing(t *testing.T, cli *client.Client, instance string) bool {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", runner.LabelInstance+"="+instance), filters.Arg("status", "removing"))})
	must(t, err)
	return len(list) > 0
}

// read reads the next frame.
func (s *wsSidecar) read(t *testing.T) map[string]any {
	t.Helper()
	_ = s.ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	_, data, err := s.ws.ReadMessage()
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(data, &m))
	return m
}
