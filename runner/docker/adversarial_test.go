package docker

// The adversarial suite (runnertest.Adversarial) against the real engine
// under runc and runsc, and what must not outlive a run.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
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
// marker or the container's id. Under runc the sandbox's processes are host
// processes. Under runsc they live inside the sandbox's kernel, invisible
// to the host, so the marker check alone could not fail there: the host
// processes that hold that kernel, runsc-sandbox and runsc-gofer (found by
// the container id on their command lines while the program waits), must
// be gone too.
func TestNothingOutlivesTheRun(t *testing.T) {
	t.Parallel()
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			r := newTestRunner(t)
			cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			marker := fmt.Sprintf("gk-adv-survivor-%d-%s", os.Getpid(), rt)
			// The program starts its survivors, says so, and waits for the
			// test to have looked at the host before it ends.
			spec := runnertest.Spec(fmt.Sprintf(`import os, subprocess, time
subprocess.Popen(["nohup", "bash", "-c", "exec -a %[1]s-nohup sleep 300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["%[1]s-daemon", "300"])
    os._exit(0)
os.wait()
time.sleep(0.5)
print(sorted(open("/proc/%%s/cmdline" %% d).read().split("\0")[0] for d in os.listdir("/proc") if d.isdigit()), flush=True)
while not os.path.exists("/tmp/looked"):
    time.sleep(0.05)
`, marker))
			spec.Sandbox.Runtime = rt
			spec.Timeout = 2 * time.Minute
			said := make(chan struct{})
			var once sync.Once
			spec.OnOutput = func(runner.Stream, []byte) { once.Do(func() { close(said) }) }
			looked := make(chan []hostProc, 1)
			go func() {
				defer close(looked)
				select {
				case <-said:
				case <-t.Context().Done():
					return
				}
				looked <- advSandboxProcesses(t, r, cli)
			}()
			res, err := r.Run(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			// A run that waited on the survivors would end timed out.
			if res.Reason != runner.Exited || res.ExitCode != 0 || !strings.Contains(res.Stdout, marker+"-daemon") {
				t.Fatalf("the run ended %s with %d, stdout %q stderr %q; want exit 0 with the survivors running", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
			}
			procs := <-looked
			t.Logf("host processes of the container while it ran: %v", procs)
			if rt == runner.Runsc {
				for _, name := range []string{"runsc-sandbox", "runsc-gofer"} {
					if !slices.ContainsFunc(procs, func(p hostProc) bool { return p.name == name }) {
						t.Errorf("no %s process of the container found while it ran (found %v): the check below would prove nothing", name, procs)
					}
				}
			}
			if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
				t.Errorf("leftovers after the run: %d, %v; want 0", n, err)
			}
			// The kernel may take a moment to reap a killed PID namespace,
			// runsc to end its sandbox.
			deadline := time.Now().Add(30 * time.Second)
			for {
				alive := advHostProcesses(marker)
				for _, p := range procs {
					if p.alive() {
						alive = append(alive, p.String())
					}
				}
				if len(alive) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("host processes %v of the run are still there after it", alive)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// hostProc is a host process, told from a later one with its pid by its
// start time.
type hostProc struct {
	pid   int
	name  string // argv[0]
	start string // /proc/pid/stat's starttime
}

func (p hostProc) String() string { return fmt.Sprintf("%d:%s", p.pid, p.name) }

// alive reports whether p still runs (a zombie is not running).
func (p hostProc) alive() bool {
	q, ok := readHostProc(p.pid)
	return ok && q.start == p.start
}

// readHostProc reads the host process pid, false if there is none or it
// is a zombie.
func readHostProc(pid int) (hostProc, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return hostProc{}, false
	}
	_, rest, ok := strings.Cut(string(stat), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return hostProc{}, false
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return hostProc{}, false
	}
	argv0, _, _ := strings.Cut(string(cmd), "\x00")
	return hostProc{pid: pid, name: filepath.Base(argv0), start: fields[19]}, true
}

// advSandboxProcesses finds r's one running container, lists the host
// processes whose command line carries its id, and then tells the
// program (through a file the program waits for) that it may end.
func advSandboxProcesses(t *testing.T, r *Runner, cli *client.Client) []hostProc {
	ctx := t.Context()
	list, err := r.pf.containers(ctx)
	if err != nil || len(list) != 1 {
		t.Errorf("the runner's containers while the program waits: %v, %v; want one", list, err)
		return nil
	}
	id := list[0].ID
	var procs []hostProc
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !strings.Contains(string(b), id) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if p, ok := readHostProc(pid); ok {
			procs = append(procs, p)
		}
	}
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"touch", "/tmp/looked"}})
	if err == nil {
		err = cli.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{Detach: true})
	}
	if err != nil {
		t.Errorf("tell the program to end: %v", err)
	}
	return procs
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

	waitCtx, cancel := context.WithTimeout(ctx, spec.Timeout+launch.BackstopGrace+5*time.Second)
	defer cancel()
	waitC, errC := r.pf.cli.ContainerWait(waitCtx, id, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		t.Logf("the abandoned container ended after %v with %d", time.Since(begin), w.StatusCode)
	case err := <-errC:
		t.Fatalf("the abandoned container with a stopped backstop still runs %v after it started (timeout %v, backstop grace %v): %v", time.Since(begin), spec.Timeout, launch.BackstopGrace, err)
	}
}
