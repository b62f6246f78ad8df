package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// TestRunscAskedOfARealEngineWithoutItIsRefused starts a Docker engine of
// its own, a real dockerd with no runsc runtime registered (no bridge, no
// iptables rules, a containerd namespace of its own, so that it touches
// nothing of the machine's engine), and asks it for a runsc run: the
// runner must ask the engine, find no runsc, and refuse the run before any
// container exists, never falling back to runc.
func TestRunscAskedOfARealEngineWithoutItIsRefused(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	cli := startBareEngine(t)
	info, err := cli.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.Runtimes[string(runner.Runsc)]; ok {
		t.Fatalf("the bare engine has runsc (runtimes %v); the test needs one without", info.Runtimes)
	}
	r, err := newRunner(Config{Instance: fmt.Sprintf("test-%d-%d", os.Getpid(), instanceSeq.Add(1)), DefaultImage: testImage}, cli, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spec := runnertest.Spec(`print("ran")`)
	spec.Sandbox.Runtime = runner.Runsc
	res, err := r.Run(t.Context(), spec)
	if !errors.Is(err, runner.ErrRuntimeUnavailable) || !strings.Contains(fmtErr(err), "runsc") {
		t.Fatalf("Run = %+v, %v; want an error wrapping %v naming runsc", res, err, runner.ErrRuntimeUnavailable)
	}
	list, err := cli.ContainerList(t.Context(), container.ListOptions{All: true})
	if err != nil || len(list) != 0 {
		t.Errorf("the engine holds %d containers (%v) after the refused run, want none", len(list), err)
	}
}

// startBareEngine starts a dockerd with no runtime but runc, its state in
// a directory of the test, and stops it when t ends.
func startBareEngine(t *testing.T) *client.Client {
	t.Helper()
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		t.Fatalf("dockerd is needed to start an engine without runsc: %v", err)
	}
	dir, err := os.MkdirTemp("", "gkd") // short: the socket's path is limited
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "d.sock")
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("gatekeeper-test-%d", os.Getpid())
	log, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dockerd, "--config-file", filepath.Join(dir, "daemon.json"),
		"--data-root", filepath.Join(dir, "root"), "--exec-root", filepath.Join(dir, "x"),
		"--pidfile", filepath.Join(dir, "d.pid"), "-H", "unix://"+sock,
		"--bridge", "none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
		"--containerd-namespace", ns, "--containerd-plugins-namespace", ns+"-plugins", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	// A network namespace of its own: a dockerd started with --bridge none
	// deletes the host's docker0 interface at start (libnetwork removes the
	// default bridge it is told not to use), which took the machine's engine's
	// default bridge away for every later test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("the bare dockerd did not stop within a minute; killed")
		}
		log.Close()
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove the bare engine's state: %v", err)
		}
	})
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := cli.Ping(ctx)
		cancel()
		if err == nil {
			return cli
		}
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			t.Fatalf("the bare dockerd exited: %s", b)
		default:
		}
		if i == 600 {
			b, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			t.Fatalf("the bare dockerd did not answer within a minute: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
