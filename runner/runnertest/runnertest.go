// Package runnertest is the conformance suite every sandbox backend passes:
// the same cases, each asserting a specific outcome (an errno, a flag, an
// exit code), run against Docker/runc, Docker/runsc and any later backend.
//
// Conformance runs real untrusted-looking programs (fork and memory bombs,
// output floods, network probes to TEST-NET addresses) inside the backend,
// so it needs a backend that really isolates; it never reaches a host
// outside the machine.
package runnertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Runner is the backend under test.
type Runner interface {
	Run(ctx context.Context, spec runner.Spec) (runner.Result, error)
}

// Leftovers is what Conformance needs besides Run: a count of the sandboxes
// (containers, VMs) the backend still holds. Conformance checks it is 0
// after a cancelled run and after the suite; a Runner without it fails the
// suite.
type Leftovers interface {
	Leftovers(ctx context.Context) (int, error)
}

// WarmPool is a Runner with a warm pool whose warm-ups a test can hold
// (runner/sandbox's Runner). When Pooled reports true, Conformance also
// cancels a run while it waits in the pool for a sandbox being made.
type WarmPool interface {
	// Pooled reports whether the runner keeps a warm pool.
	Pooled() bool
	// HoldWarmUps holds the warm-ups the pool starts from now on, before
	// they create their sandbox, so that a run finds one being made and
	// waits for it, until release, which returns once each held warm-up
	// handed its sandbox over or failed.
	HoldWarmUps() (release func())
	// Awaiting returns how many runs wait for a warm sandbox being made.
	Awaiting() int
}

// SecretEnv is set in the test process by Conformance; its value must not
// appear anywhere in a sandbox's environment.
const SecretEnv = "GATEKEEPER_TEST_SECRET"

var secretOnce sync.Once

func secret() string {
	secretOnce.Do(func() {
		if os.Getenv(SecretEnv) == "" {
			os.Setenv(SecretEnv, fmt.Sprintf("s3cr3t-%d-%d", os.Getpid(), time.Now().UnixNano()))
		}
	})
	return os.Getenv(SecretEnv)
}

// Sandbox is the policy the cases run under unless a case changes it. Image
// and Runtime are empty: the backend's defaults.
func Sandbox() runner.Sandbox {
	return runner.Sandbox{
		UID:            65534,
		GID:            65534,
		CPUs:           1,
		MemoryBytes:    256 << 20,
		PIDs:           64,
		WorkspaceBytes: 16 << 20,
		TmpBytes:       8 << 20,
		MaxOutputBytes: 64 << 10,
	}
}

var runCounter atomic.Int64

// Spec returns a Python run of code under Sandbox.
func Spec(code string) runner.Spec {
	return runner.Spec{
		RunID:    fmt.Sprintf("conformance-%d-%d", os.Getpid(), runCounter.Add(1)),
		QueryID:  "conformance",
		Language: runner.Python,
		Code:     code,
		Timeout:  30 * time.Second,
		Sandbox:  Sandbox(),
	}
}

// Options says what a backend does differently by design; each case that
// depends on it asserts that backend's own outcome instead. The zero value
// is the Docker backend.
type Options struct {
	// NoHostDeps: the backend mounts no host directory, so a Spec with
	// Sandbox.DepsDir is refused with runner.ErrInvalidSpec (the
	// Kubernetes backend: a Pod gets no host path), and the read-only
	// checks of /deps are left out.
	NoHostDeps bool
	// RootOwnedWorkspace: /workspace itself belongs to root with mode
	// 1777, as /tmp does (Kubernetes' emptyDir has no owner setting); what
	// the program writes there is still its own.
	RootOwnedWorkspace bool
	// ExecVolumes: /workspace and /tmp are not mounted noexec
	// (Kubernetes' emptyDir takes no mount options), so a binary copied
	// there runs, with the program's own uid, seccomp filter and limits.
	ExecVolumes bool
	// PIDsByRlimit: under runc the container's pids cgroup has no limit
	// of its own ("max"); the run's processes are bounded by RLIMIT_NPROC
	// in the sandbox's own user namespace (the fork bomb case checks the
	// bound), and the node's per-Pod pids limit is the backstop.
	PIDsByRlimit bool
	// IPv6Loopback: the sandbox's lo has ::1 (a Pod's network namespace),
	// so a connect to it is refused rather than failing for want of an
	// address, and one to another IPv6 address finds no route.
	IPv6Loopback bool
}

// Conformance runs the suite against the Runner newRunner returns, with the
// zero Options. It calls newRunner once for most cases, which run in
// parallel on that Runner, and again for cases that need a Runner of their
// own (counting leftovers of one run); each Runner must be independent of
// the others (for Docker: its own instance label) and safe for concurrent
// use.
func Conformance(t *testing.T, newRunner func(t *testing.T) Runner) {
	ConformanceWith(t, newRunner, Options{})
}

// ConformanceWith is Conformance with the backend's Options.
func ConformanceWith(t *testing.T, newRunner func(t *testing.T) Runner, o Options) {
	secret()
	r := newRunner(t)
	lo, ok := r.(Leftovers)
	if !ok {
		t.Fatalf("runner %T does not implement runnertest.Leftovers; the suite cannot check that sandboxes are removed", r)
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n, err := lo.Leftovers(ctx)
		if err != nil {
			t.Errorf("count leftovers after the suite: %v", err)
		} else if n != 0 {
			t.Errorf("%d sandboxes left after the suite, want 0", n)
		}
	})
	deps := depsDir(t)

	t.Run("runs", func(t *testing.T) {
		for _, tc := range outcomeCases(deps, o) {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				spec := Spec(tc.code)
				if tc.edit != nil {
					tc.edit(&spec)
				}
				res, err := r.Run(t.Context(), spec)
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				tc.check(t, res)
			})
		}
	})
	t.Run("refused specs", func(t *testing.T) {
		for _, tc := range refusedCases(t, o) {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				spec := Spec("print('must not run')")
				tc.edit(&spec)
				res, err := r.Run(t.Context(), spec)
				if !errors.Is(err, tc.want) {
					t.Fatalf("Run = %+v, %v; want an error wrapping %v", res, err, tc.want)
				}
			})
		}
	})
	t.Run("output is streamed as it is produced", func(t *testing.T) {
		t.Parallel()
		testStreaming(t, r)
	})
	t.Run("an output flood is truncated at the cap without growing the heap", func(t *testing.T) {
		t.Parallel()
		testFlood(t, r)
	})
	t.Run("a fork bomb hits the pids limit and the host stays responsive", func(t *testing.T) {
		t.Parallel()
		testForkBomb(t, r)
	})
	t.Run("a second run cannot see the first run's files", func(t *testing.T) {
		t.Parallel()
		testFresh(t, r)
	})
	t.Run("workspaces", func(t *testing.T) {
		t.Parallel()
		testWorkspaces(t, r)
	})
	t.Run("nested calls go through the bridge", func(t *testing.T) {
		t.Parallel()
		testBridge(t, r)
	})
	t.Run("a cancelled run is killed and leaves nothing behind", func(t *testing.T) {
		t.Parallel()
		// A runner of its own, so that no other case's sandbox is counted.
		own := newRunner(t)
		ownLo, ok := own.(Leftovers)
		if !ok {
			t.Fatalf("runner %T does not implement runnertest.Leftovers", own)
		}
		testCancel(t, own, ownLo)
	})
	if wp, ok := r.(WarmPool); ok && wp.Pooled() {
		t.Run("a run cancelled while it waits for a warm sandbox ends cancelled and leaves nothing behind", func(t *testing.T) {
			t.Parallel()
			own := newRunner(t)
			ownLo, ok := own.(Leftovers)
			if !ok {
				t.Fatalf("runner %T does not implement runnertest.Leftovers", own)
			}
			ownPool, ok := own.(WarmPool)
			if !ok || !ownPool.Pooled() {
				t.Fatalf("runner %T has no warm pool, as the suite's first one had", own)
			}
			testCancelWhileWaiting(t, own, ownLo, ownPool)
		})
	}
}

// depsDir makes a host directory for /deps holding dep.txt. Both are owned
// by the Sandbox user and writable by it, so that only the read-only mount
// keeps the program from writing there. Changing the owner needs root, as
// the Docker engine does.
func depsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "dep.txt")
	if err := os.WriteFile(file, []byte("dependency\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	sb := Sandbox()
	for _, p := range []string{dir, file} {
		if err := os.Chown(p, sb.UID, sb.GID); err != nil {
			t.Fatalf("give the deps dir to the sandbox user: %v", err)
		}
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	// t.TempDir makes 0700 parents; the sandbox runs as another user.
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tb is the part of testing.TB the result checks use; a test of the checks
// themselves records with it.
type tb interface {
	Helper()
	Error(args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

type outcomeCase struct {
	name  string
	skip  bool // the case does not apply under the suite's Options
	code  string
	edit  func(*runner.Spec)
	check func(tb, runner.Result)
	// session says how SessionLockdown runs the case (the zero value: at
	// a session's first run and after ten).
	session sessionUse
}

// sessionUse says how SessionLockdown runs an outcome case.
type sessionUse int

const (
	sessionBoth      sessionUse = iota // at the first run and after ten
	sessionFirstOnly                   // at the first run only: the case ends its session
	sessionSkip                        // not at all: the case is about a single-use sandbox
)

// oomOvercharge is how far past its limit a sandbox's memory high-water
// mark may be seen when the OOM killer ends it: the memory controller lets
// a dying task's charges through (a charge batch of 64 pages per CPU, for
// each of the sandbox's threads that is charging as it dies), and a
// mebibyte covers that with room.
const oomOvercharge = 1 << 20

// errnoProbe defines try(label, fn), which prints the label and "ok" or the
// errno name of the OSError fn raised.
const errnoProbe = `import errno, os, sys
def try_(label, fn):
    try:
        fn()
        print(label, "ok")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, str(e)))
def write(p):
    def f():
        with open(p, "w") as fh:
            fh.write("x")
    return f
`

// outcomeCases are the cases that apply under o.
func outcomeCases(deps string, o Options) []outcomeCase {
	all := []outcomeCase{
		{
			name: "hello world prints and exits 0",
			code: `print("hello, world")`,
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "hello, world\n")
				wantEqual(t, "stderr", res.Stderr, "")
				if res.Truncated {
					t.Errorf("truncated, want not")
				}
				if res.Image == "" || res.Runtime == "" {
					t.Errorf("image %q, runtime %q: want both set", res.Image, res.Runtime)
				}
				if res.Duration <= 0 {
					t.Errorf("duration %v, want > 0", res.Duration)
				}
			},
		},
		{
			name: "stdout and stderr are kept apart",
			code: "import sys\nprint('to out')\nprint('to err', file=sys.stderr)",
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "to out\n")
				wantEqual(t, "stderr", res.Stderr, "to err\n")
			},
		},
		{
			name: "a non-zero exit code is reported",
			code: "import sys\nsys.exit(3)",
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 3)
			},
		},
		{
			name: "a syntax error exits 1 with SyntaxError on stderr",
			code: "print(",
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 1)
				wantContains(t, "stderr", res.Stderr, "SyntaxError")
			},
		},
		{
			name: "the shell language runs sh",
			code: `echo "shell $((6*7))"`,
			edit: func(s *runner.Spec) { s.Language = runner.Shell },
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "shell 42\n")
			},
		},
		{
			name: "an endless loop is killed at the timeout",
			code: "while True:\n    pass",
			edit: func(s *runner.Spec) { s.Timeout = 2 * time.Second },
			check: func(t tb, res runner.Result) {
				if res.Session != nil {
					// In a session the timeout interrupts the program,
					// which stops (KeyboardInterrupt) and keeps its session.
					wantExit(t, res, runner.TimedOut, 130)
					wantContains(t, "stderr", res.Stderr, "KeyboardInterrupt")
					if res.StateLost != nil {
						t.Errorf("state lost %+v, want the session kept", res.StateLost)
					}
				} else {
					wantExit(t, res, runner.TimedOut, 137)
				}
				if res.Duration < 2*time.Second || res.Duration > 12*time.Second {
					t.Errorf("duration %v, want about 2s", res.Duration)
				}
			},
		},
		{
			name: "a memory bomb is OOM-killed",
			code: "chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 20))",
			edit: func(s *runner.Spec) { s.Sandbox.MemoryBytes = 64 << 20 },
			check: func(t tb, res runner.Result) {
				if res.Runtime == runner.Runsc && res.Reason != runner.OOMKilled {
					// Under gVisor the host kernel's OOM killer kills the
					// whole sandbox (exit 137), and the engine's OOM flag
					// for it is occasionally lost (seen about once in
					// twenty runs under load with Docker 20.10 and cgroup
					// v1). What gVisor guarantees is the kill at the
					// limit, asserted here; runc must report the OOM.
					wantExit(t, res, runner.Exited, 137)
					t.Logf("runsc: killed with 137 at the memory limit, but the engine did not report the OOM")
				} else {
					wantExit(t, res, runner.OOMKilled, 137)
				}
				// The kernel lets a task that is being killed charge past
				// its cgroup's limit so that it can exit (the memory
				// controller's forced charge): a high-water mark a page or
				// a charge batch above the limit is seen under load
				// (64 MiB + 4 KiB, with cgroup v1 under gVisor on
				// Kubernetes). More than that would be a limit not enforced.
				if res.PeakMemoryBytes > 64<<20+oomOvercharge {
					t.Errorf("peak memory %d exceeds the 64 MiB limit by more than the kernel's forced charge of a dying task (%d)", res.PeakMemoryBytes, oomOvercharge)
				}
			},
		},
		{
			// /var/tmp (mode 1777) and /deps (owned by the program's uid)
			// would be writable by permission: only a read-only mount stops
			// the writes there. For root-owned /, /etc and /usr, Linux
			// reports the read-only mount first (EROFS); gVisor's kernel
			// checks permission first and reports EACCES (both refuse the
			// write; the /var/tmp and /deps probes prove the mount is
			// read-only under gVisor too).
			name: "writes to the root file system and /deps fail with EROFS",
			skip: o.NoHostDeps,
			code: errnoProbe + `
for p in ["/var/tmp/x", "/deps/new", "/deps/dep.txt", "/x", "/etc/x", "/usr/x", "/usr/bin/python3"]:
    try_(p, write(p))
try_("mkdir /usr/d", lambda: os.mkdir("/usr/d"))
print(open("/deps/dep.txt").read().strip())
`,
			edit: func(s *runner.Spec) { s.Sandbox.DepsDir = deps },
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				rootOwned := "EROFS"
				if res.Runtime == runner.Runsc {
					rootOwned = "EACCES"
				}
				want := "/var/tmp/x EROFS\n/deps/new EROFS\n/deps/dep.txt EROFS\n" +
					strings.ReplaceAll("/x E\n/etc/x E\n/usr/x E\n/usr/bin/python3 E\n", "E\n", rootOwned+"\n") +
					"mkdir /usr/d EROFS\ndependency\n"
				wantEqual(t, "stdout", res.Stdout, want)
			},
		},
		{
			// The same without /deps, for a backend that mounts none.
			name: "writes to the root file system fail with EROFS",
			skip: !o.NoHostDeps,
			code: errnoProbe + `
for p in ["/var/tmp/x", "/x", "/etc/x", "/usr/x", "/usr/bin/python3"]:
    try_(p, write(p))
try_("mkdir /usr/d", lambda: os.mkdir("/usr/d"))
`,
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				rootOwned := "EROFS"
				if res.Runtime == runner.Runsc {
					rootOwned = "EACCES"
				}
				want := "/var/tmp/x EROFS\n" +
					strings.ReplaceAll("/x E\n/etc/x E\n/usr/x E\n/usr/bin/python3 E\n", "E\n", rootOwned+"\n") +
					"mkdir /usr/d EROFS\n"
				wantEqual(t, "stdout", res.Stdout, want)
			},
		},
		{
			name: "/workspace and /tmp are writable",
			code: errnoProbe + `
try_("/workspace/out.txt", write("/workspace/out.txt"))
try_("/tmp/out.txt", write("/tmp/out.txt"))
try_("/workspace/sub", lambda: os.makedirs("/workspace/sub/deeper"))
print(open("/workspace/out.txt").read(), open("/tmp/out.txt").read())
`,
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "/workspace/out.txt ok\n/tmp/out.txt ok\n/workspace/sub ok\nx x\n")
			},
		},
		{
			name: "filling /tmp stops at its size with ENOSPC",
			code: `import errno
n = 0
try:
    with open("/tmp/fill", "wb") as f:
        while True:
            f.write(b"\0" * (1 << 20))
            f.flush()
            n += 1
except OSError as e:
    print(errno.errorcode[e.errno], n)
`,
			edit: func(s *runner.Spec) { s.Sandbox.TmpBytes = 8 << 20 },
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				var code string
				var mib int
				if _, err := fmt.Sscan(res.Stdout, &code, &mib); err != nil {
					t.Fatalf("stdout %q: %v", res.Stdout, err)
				}
				if code != "ENOSPC" || mib < 6 || mib > 8 {
					t.Errorf("fill ended with %s after %d MiB, want ENOSPC after 6 to 8 MiB", code, mib)
				}
			},
		},
		{
			name: "there is no network interface but loopback and connects fail with ENETUNREACH",
			code: errnoProbe + `import socket
ifaces = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])
print("interfaces", ",".join(ifaces))
def connect(host, port):
    def f():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect((host, port))
        finally:
            s.close()
    return f
def send(host, port):
    def f():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.sendto(b"x", (host, port))
        finally:
            s.close()
    return f
try:
    connect("192.0.2.1", 80)()
    print("tcp 192.0.2.1 connected")
except socket.timeout:
    print("tcp 192.0.2.1 timeout")
except OSError as e:
    print("tcp 192.0.2.1", errno.errorcode.get(e.errno, str(e)))
try_("tcp 198.51.100.1", connect("198.51.100.1", 443))
try_("udp 203.0.113.1", send("203.0.113.1", 53))
`,
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "interfaces lo\ntcp 192.0.2.1 ENETUNREACH\ntcp 198.51.100.1 ENETUNREACH\nudp 203.0.113.1 ENETUNREACH\n")
			},
		},
		{
			name: "the program runs as the policy's uid and gid and owns /workspace",
			skip: o.RootOwnedWorkspace,
			code: "id -u; id -g; stat -c '%u:%g' /workspace; touch /workspace/t && stat -c '%u:%g' /workspace/t",
			edit: func(s *runner.Spec) {
				s.Language = runner.Shell
				s.Sandbox.UID, s.Sandbox.GID = 12345, 23456
			},
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "12345\n23456\n12345:23456\n12345:23456\n")
			},
		},
		{
			name: "the program runs as the policy's uid and gid and owns what it writes in a root-owned /workspace",
			skip: !o.RootOwnedWorkspace,
			code: "id -u; id -g; stat -c '%u:%g %a' /workspace; touch /workspace/t && stat -c '%u:%g' /workspace/t",
			edit: func(s *runner.Spec) {
				s.Language = runner.Shell
				s.Sandbox.UID, s.Sandbox.GID = 12345, 23456
			},
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "12345\n23456\n0:0 1777\n12345:23456\n")
			},
		},
		{
			name: "the program has no capabilities and no new privileges",
			code: `fields = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
for k in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"]:
    print(k, fields.get(k, "missing").strip())
`,
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "CapInh 0000000000000000\nCapPrm 0000000000000000\nCapEff 0000000000000000\nCapBnd 0000000000000000\nCapAmb 0000000000000000\nNoNewPrivs 1\n")
			},
		},
		{
			name: "there is no Docker socket anywhere",
			code: `import os, stat
found = []
for p in ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"]:
    if os.path.lexists(p):
        found.append(p)
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys"):
        dirs[:] = []
        continue
    for name in files + dirs:
        p = os.path.join(root, name)
        try:
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                found.append(p)
        except OSError:
            pass
if "docker.sock" in open("/proc/self/mountinfo").read():
    found.append("mountinfo")
print("sockets:", sorted(set(found)))
`,
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				want := "sockets: []\n"
				if res.Session != nil {
					// A session's supervisor listens there for its runs
					// (runner/launch, SessionProgram).
					want = "sockets: ['/tmp/.gatekeeper-session/sock']\n"
				}
				wantEqual(t, "stdout", res.Stdout, want)
			},
		},
		{
			name: "the environment is PATH, HOME, LANG and the tools' paths only and holds nothing of the host",
			code: `import os, glob
print(sorted(os.environ))
print(os.environ.get("HOME"), os.environ.get("LANG"))
print(os.environ.get("GATEKEEPER_TOOLS"), os.environ.get("PYTHONPATH"), os.environ.get("NODE_PATH"))
leaks = []
for p in glob.glob("/proc/[0-9]*/environ"):
    try:
        if ` + fmt.Sprintf("%q", secret()) + `.encode() in open(p, "rb").read():
            leaks.append(p)
    except OSError:
        pass
print("leaks", leaks)
`,
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "['GATEKEEPER_TOOLS', 'HOME', 'LANG', 'NODE_PATH', 'PATH', 'PYTHONPATH']\n/workspace C.UTF-8\n"+
					"/tmp/.gatekeeper /tmp/.gatekeeper/python /tmp/.gatekeeper/node\nleaks []\n")
			},
		},
		{
			name: "files passed in are readable and importable",
			code: `import helper
print(helper.VALUE)
print(open("data/in.csv").read(), end="")
print(open("/workspace/cfg.json").read())
`,
			edit: func(s *runner.Spec) {
				s.Files = map[string]string{
					"helper.py":   "VALUE = 42\n",
					"data/in.csv": "a,b\n1,2\n",
					"cfg.json":    `{"k": 1}`,
				}
			},
			check: func(t tb, res runner.Result) {
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "42\na,b\n1,2\n{\"k\": 1}\n")
			},
		},
	}
	var out []outcomeCase
	for _, c := range all {
		if !c.skip {
			out = append(out, c)
		}
	}
	return out
}

type refusedCase struct {
	name string
	edit func(*runner.Spec)
	want error
}

func refusedCases(t *testing.T, o Options) []refusedCase {
	deps := func(dir string, globs ...string) func(*runner.Spec) {
		return func(s *runner.Spec) { s.Sandbox.DepsDir, s.Sandbox.DenyGlobs = dir, globs }
	}
	withEnv := depsDir(t)
	if err := os.WriteFile(filepath.Join(withEnv, ".env"), []byte("TOKEN=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain := depsDir(t)
	cases := []refusedCase{
		{"uid 0 is refused", func(s *runner.Spec) { s.Sandbox.UID = 0 }, runner.ErrInvalidSpec},
		{"a file leaving /workspace is refused", func(s *runner.Spec) { s.Files = map[string]string{"../escape.py": "x"} }, runner.ErrInvalidSpec},
		{"an absolute file path is refused", func(s *runner.Spec) { s.Files = map[string]string{"/etc/passwd": "x"} }, runner.ErrInvalidSpec},
		{"a zero sandbox is refused", func(s *runner.Spec) { s.Sandbox = runner.Sandbox{} }, runner.ErrInvalidSpec},
		{"code larger than the workspace is refused", func(s *runner.Spec) {
			s.Sandbox.WorkspaceBytes = 1 << 20
			s.Files = map[string]string{"big": strings.Repeat("x", 2<<20)}
		}, runner.ErrInvalidSpec},
		{"deps at / is refused", deps("/"), runner.ErrInvalidSpec},
		{"deps at /etc is refused", deps("/etc"), runner.ErrInvalidSpec},
		{"deps inside /etc is refused", deps("/etc/ssl"), runner.ErrInvalidSpec},
		{"deps at /proc is refused", deps("/proc"), runner.ErrInvalidSpec},
		{"deps at /sys is refused", deps("/sys"), runner.ErrInvalidSpec},
		{"deps at /run is refused", deps("/run"), runner.ErrInvalidSpec},
		{"deps at /var/run is refused", deps("/var/run"), runner.ErrInvalidSpec},
		{"deps at /var, containing /var/run, is refused", deps("/var"), runner.ErrInvalidSpec},
		{"deps at /root is refused", deps("/root"), runner.ErrInvalidSpec},
		{"deps at /home is refused", deps("/home"), runner.ErrInvalidSpec},
		{"deps at the Docker socket is refused", deps("/var/run/docker.sock"), runner.ErrInvalidSpec},
		{"a relative deps path is refused", deps("relative/dir"), runner.ErrInvalidSpec},
		{"deps matching a deny glob is refused", deps(plain, plain), runner.ErrInvalidSpec},
		{"deps inside a deny glob's match is refused", deps(plain, filepath.Dir(plain)+"/**"), runner.ErrInvalidSpec},
		{"deps containing a file matching a deny glob is refused", deps(withEnv, "**/.env"), runner.ErrInvalidSpec},
	}
	if o.NoHostDeps {
		cases = append(cases, refusedCase{"a deps directory is refused: the backend mounts no host path", deps(plain), runner.ErrInvalidSpec})
	}
	entries, _ := os.ReadDir("/home")
	for _, e := range entries {
		if e.IsDir() {
			p := filepath.Join("/home", e.Name())
			cases = append(cases, refusedCase{"deps at home directory " + p + " is refused", deps(p), runner.ErrInvalidSpec})
			break
		}
	}
	return cases
}

// testStreaming cancels the run when its first chunk arrives. The program
// would run until its timeout after printing it, so a backend that held
// output until the program ended could never deliver the chunk in time:
// the run would end timed out with nothing streamed. No wall-clock margin
// is involved (the first chunk used to have to arrive 1 s before the end of
// a 2 s program, which a loaded machine could miss).
func testStreaming(t *testing.T, r Runner) {
	spec := Spec("import time\nprint('first', flush=True)\ntime.sleep(120)\nprint('second')")
	type chunk struct {
		stream runner.Stream
		data   string
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	var chunks []chunk
	spec.OnOutput = func(s runner.Stream, b []byte) {
		mu.Lock()
		chunks = append(chunks, chunk{s, string(b)})
		mu.Unlock()
		if strings.Contains(string(b), "first") {
			cancel()
		}
	}
	res, err := r.Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != runner.Cancelled {
		t.Errorf("the run ended %s, want cancelled by its first streamed chunk while the program still ran", res.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	var all strings.Builder
	for _, c := range chunks {
		if c.stream != runner.Stdout {
			t.Errorf("chunk %q on %s, want stdout", c.data, c.stream)
		}
		all.WriteString(c.data)
	}
	wantEqual(t, "streamed output", all.String(), "first\n")
	wantEqual(t, "stdout", res.Stdout, "first\n")
}

// floodMu serializes the output flood cases of the suites one test
// process runs.
var floodMu sync.Mutex

func testFlood(t *testing.T, r Runner) {
	const flood = 48 << 20
	spec := Spec(fmt.Sprintf(`import sys
chunk = b"x" * (1 << 16)
for _ in range(%d):
    sys.stdout.buffer.write(chunk)
for _ in range(%d):
    sys.stderr.buffer.write(chunk)
`, flood*3/4>>16, flood/4>>16))
	capBytes := spec.Sandbox.MaxOutputBytes

	// The heap is the whole test process's: other tests running in
	// parallel allocate too, and their garbage counts until the next GC.
	// So floods of several suites in one process take turns, and the GC
	// runs often while one is measured: buffering the flood would still
	// grow the live heap by tens of MiB, but others' garbage stays small.
	// What other tests hold live meanwhile (a run's returned files, say)
	// counts as well, so the growth is the least of up to three floods: a
	// backend that keeps the flood grows the heap every time, the noise of
	// other tests does not.
	floodMu.Lock()
	defer floodMu.Unlock()
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	var streamed atomic.Int64
	spec.OnOutput = func(_ runner.Stream, b []byte) { streamed.Add(int64(len(b))) }
	res, growth, err := heapGrowth(t, r, spec)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, runner.Exited, 0)
	if !res.Truncated {
		t.Error("Truncated false, want true")
	}
	if int64(len(res.Stdout)) != capBytes || int64(len(res.Stderr)) != capBytes {
		t.Errorf("kept %d stdout and %d stderr bytes, want %d each", len(res.Stdout), len(res.Stderr), capBytes)
	}
	if got := streamed.Load(); got != 2*capBytes {
		t.Errorf("OnOutput got %d bytes, want %d (the cap on each stream)", got, 2*capBytes)
	}
	for try := 1; try < 3 && growth > flood/4; try++ {
		_, g, err := heapGrowth(t, r, spec)
		if err != nil {
			t.Fatal(err)
		}
		growth = min(growth, g)
	}
	// A backend that kept the flood would grow the heap by at least the
	// 36 MiB of stdout.
	if growth > flood/4 {
		t.Errorf("heap grew by %d bytes during a %d byte flood (the least of three), want well below (< %d)", growth, flood, flood/4)
	}
	t.Logf("heap growth during a %d MiB flood: %d KiB", flood>>20, growth>>10)
}

// heapGrowth runs spec and returns its result and how far the process's
// heap grew above what it was before the run, sampled every 10 ms.
func heapGrowth(t *testing.T, r Runner, spec runner.Spec) (runner.Result, int64, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
			}
		}
	}()
	res, err := r.Run(t.Context(), spec)
	close(stop)
	<-sampled
	return res, int64(peak.Load()) - int64(base), err
}

func testForkBomb(t *testing.T, r Runner) {
	spec := Spec(`import os, time, errno
n = 0
try:
    while n < 10000:
        pid = os.fork()
        if pid == 0:
            try:
                os.fork()
            except OSError:
                pass
            time.sleep(60)
            os._exit(0)
        n += 1
    print("unlimited", n)
except OSError as e:
    print(errno.errorcode[e.errno], n)
`)
	spec.Sandbox.PIDs = 32
	spec.Timeout = 30 * time.Second

	// A goroutine measures how late the test process's own ticks come while
	// the bomb runs.
	var worst atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := time.Now()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				if gap := now.Sub(last); int64(gap) > worst.Load() {
					worst.Store(int64(gap))
				}
				last = now
			}
		}
	}()
	res, err := r.Run(t.Context(), spec)
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, runner.Exited, 0)
	var code string
	var n int
	if _, err := fmt.Sscan(res.Stdout, &code, &n); err != nil {
		t.Fatalf("stdout %q (stderr %q): %v", res.Stdout, res.Stderr, err)
	}
	if code != "EAGAIN" || n >= int(spec.Sandbox.PIDs) {
		t.Errorf("fork stopped with %s after %d children, want EAGAIN before %d", code, n, spec.Sandbox.PIDs)
	}
	// That the run ended by itself (above, not timed out after 30 s) says
	// the bomb's children did not hold it. The stall bound only catches a
	// host brought to a halt: a loaded 2-core machine can stall a process
	// for a few seconds on its own (it was 2 s, which such a machine could
	// miss); the pids limit itself is checked by the count above.
	if gap := time.Duration(worst.Load()); gap > 10*time.Second {
		t.Errorf("the test process stalled for %v during the bomb", gap)
	}
	// The backend answers promptly afterwards.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	after := time.Now()
	res, err = r.Run(ctx, Spec(`print("still here")`))
	if err != nil {
		t.Fatalf("run after the bomb: %v", err)
	}
	wantEqual(t, "stdout after the bomb", res.Stdout, "still here\n")
	t.Logf("fork bomb: %s after %d children; worst tick gap %v; next run took %v", code, n, time.Duration(worst.Load()), time.Since(after))
}

func testFresh(t *testing.T, r Runner) {
	res, err := r.Run(t.Context(), Spec(`open("/workspace/marker", "w").write("1")
open("/tmp/marker", "w").write("1")
print("written")`))
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "first run stdout", res.Stdout, "written\n")
	res, err = r.Run(t.Context(), Spec(`import os
print(os.path.exists("/workspace/marker"), os.path.exists("/tmp/marker"), sorted(os.listdir("/workspace")))`))
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, res, runner.Exited, 0)
	wantEqual(t, "second run stdout", res.Stdout, "False False ['main.py']\n")
}

// testCancel cancels a run once its program printed: however long the
// sandbox took to start (a loaded machine, a cold gVisor Pod), the cancel
// comes while the program runs, and the program's own end is two minutes
// past its 30 s timeout, so only the cancel ends it as cancelled.
func testCancel(t *testing.T, r Runner, lo Leftovers) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	spec := Spec("import time\nprint('started', flush=True)\ntime.sleep(120)")
	var once sync.Once
	spec.OnOutput = func(runner.Stream, []byte) { once.Do(cancel) }
	res, err := r.Run(ctx, spec)
	if err != nil {
		t.Fatalf("Run after cancel = %v, want a Result with reason cancelled", err)
	}
	wantExit(t, res, runner.Cancelled, 137)
	wantEqual(t, "stdout", res.Stdout, "started\n")
	n, err := lo.Leftovers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d sandboxes left after the cancelled run returned, want 0", n)
	}
}

// testCancelWhileWaiting holds the pool's warm-ups, so that the run
// finds a warm sandbox being made and waits for it, and cancels the run
// while it waits there: the run ends cancelled (a Result, not an error)
// without having run anything. Once the held warm-up went on, nothing of
// the run is left: no sandbox (a warm-up the run had claimed goes to the
// pool, whose own warm sandboxes Leftovers does not count, and not to the
// cancelled run), no run still waiting; and the runner still runs code.
func testCancelWhileWaiting(t *testing.T, r Runner, lo Leftovers, wp WarmPool) {
	release := wp.HoldWarmUps()
	defer release()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type ran struct {
		res runner.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := r.Run(ctx, Spec("print('must not run')"))
		done <- ran{res, err}
	}()
	for wp.Awaiting() == 0 {
		select {
		case got := <-done:
			t.Fatalf("the run ended (%+v, %v) without waiting for the held warm sandbox", got.res, got.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	got := <-done
	if got.err != nil {
		t.Fatalf("Run cancelled while it waited for a warm sandbox = %v, want a Result with reason cancelled", got.err)
	}
	wantExit(t, got.res, runner.Cancelled, 137)
	wantEqual(t, "stdout", got.res.Stdout, "")
	if n := wp.Awaiting(); n != 0 {
		t.Errorf("%d runs still wait for a warm sandbox after the cancelled run returned, want 0", n)
	}
	release() // the held warm-ups make their sandboxes, for the pool
	n, err := lo.Leftovers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d sandboxes left after the cancelled run returned and the warm-up it waited for went on, want 0", n)
	}
	res, err := r.Run(t.Context(), Spec("print('after')"))
	if err != nil {
		t.Fatalf("a run after the cancelled one: %v", err)
	}
	wantExit(t, res, runner.Exited, 0)
	wantEqual(t, "stdout of the run after the cancelled one", res.Stdout, "after\n")
}

func wantExit(t tb, res runner.Result, reason runner.ExitReason, code int) {
	t.Helper()
	if res.Reason != reason || res.ExitCode != code {
		t.Errorf("ended %s with exit code %d, want %s with %d (stdout %q, stderr %q)", res.Reason, res.ExitCode, reason, code, clip(res.Stdout), clip(res.Stderr))
	}
}

func wantEqual(t tb, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func wantContains(t tb, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%s = %q, want it to contain %q", what, clip(got), want)
	}
}

func clip(s string) string {
	if len(s) > 500 {
		return s[:500] + "…"
	}
	return s
}
