package docker

// The adversarial suite (runnertest.Adversarial) against the real engine
// under runc and runsc, and what must not outlive a run.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// TestAdversarialSandbox runs runnertest's adversarial suite under runc
// and runsc.
func TestAdversarialSandbox(t *testing.T) {
	t.Parallel()
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			runnertest.Adversarial(t, newTestRunner(t), rt, runnertest.Options{})
		})
	}
}

// TestNothingOutlivesTheRun leaves processes behind on purpose (nohup, a
// double fork into a new session), each named with a marker, and checks that
// once Run returns the container is gone and no host process carries the
// marker. Under runc the sandbox's processes are host processes; under
// runsc they live inside the sandbox's kernel, whose processes end with it.
func TestNothingOutlivesTheRun(t *testing.T) {
	t.Parallel()
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			r := newTestRunner(t)
			marker := fmt.Sprintf("gk-adv-survivor-%d-%s", os.Getpid(), rt)
			spec := runnertest.Spec(fmt.Sprintf(`import os, subprocess
subprocess.Popen(["nohup", "bash", "-c", "exec -a %[1]s-nohup sleep 300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["%[1]s-daemon", "300"])
    os._exit(0)
os.wait()
import time
time.sleep(0.5)
print(sorted(open("/proc/%%s/cmdline" %% d).read().split("\0")[0] for d in os.listdir("/proc") if d.isdigit()))
`, marker))
			spec.Sandbox.Runtime = rt
			res, err := r.Run(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			// A run that waited on the survivors would end timed out.
			if res.Reason != runner.Exited || res.ExitCode != 0 || !strings.Contains(res.Stdout, marker+"-daemon") {
				t.Fatalf("the run ended %s with %d, stdout %q stderr %q; want exit 0 with the survivors running", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
			}
			if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
				t.Errorf("leftovers after the run: %d, %v; want 0", n, err)
			}
			// The kernel may take a moment to reap a killed PID namespace.
			deadline := time.Now().Add(5 * time.Second)
			for {
				alive := advHostProcesses(marker)
				if len(alive) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("host processes %v still carry the marker after the run", alive)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// advHostProcesses lists the host pids whose command line holds marker.
func advHostProcesses(marker string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, filepath.Base(d))
		}
	}
	return out
}

// TestAStoppedBackstopStillEndsAnAbandonedContainer plays a program that
// sends SIGSTOP to every other process of its container and then runs on,
// while the sidecar is killed (the attach is dropped, as in
// TestAbandonedContainerEndsByItself). The container must still end
// shortly after its timeout: the backstop must be out of the program's
// reach. (When `timeout -s KILL` ran as an ordinary process of the sandbox
// uid, a stopped timeout never fired nor reaped its child, and the
// container ran until the next sidecar's Cleanup. The kernel drops SIGSTOP
// and SIGKILL sent to a PID namespace's init from inside it, so a backstop
// that is the container's PID 1 holds.)
func TestAStoppedBackstopStillEndsAnAbandonedContainer(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	r := newTestRunner(t)
	// The program stops every other process it can signal: whatever the
	// backstop is, it must not be one of them.
	spec := runnertest.Spec(`import os, signal, time
stopped = []
for d in os.listdir("/proc"):
    if d.isdigit() and int(d) != os.getpid():
        try:
            argv0 = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")[0].decode()
            os.kill(int(d), signal.SIGSTOP)
            stopped.append(d + ":" + argv0)
        except OSError:
            pass
print("stopped", stopped, flush=True)
time.sleep(120)
`)
	spec.Timeout = time.Second
	ctx := t.Context()
	id, attach, begin := startUnwatched(t, r, spec)
	_ = attach.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	out := make([]byte, 4096)
	n, _ := io.ReadAtLeast(attach.Reader, out, 1)
	t.Logf("the program said: %q", out[:n])
	attach.Close() // the sidecar is gone

	waitCtx, cancel := context.WithTimeout(ctx, spec.Timeout+backstopGrace+5*time.Second)
	defer cancel()
	waitC, errC := r.cli.ContainerWait(waitCtx, id, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		t.Logf("the abandoned container ended after %v with %d", time.Since(begin), w.StatusCode)
	case err := <-errC:
		t.Fatalf("the abandoned container with a stopped backstop still runs %v after it started (timeout %v, backstop grace %v): %v", time.Since(begin), spec.Timeout, backstopGrace, err)
	}
}
