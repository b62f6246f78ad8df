package docker

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// TestAProgramThrashingAtItsMemoryLimitIsOOMKilledUnderLoad runs, beside a
// CPU hog in a sandbox of its own, a program that holds 216 MiB of its
// 256 MiB and reads a mapped 96 MiB file from /deps over and over: its
// file pages are reclaimed and read back (as an interpreter's are near
// its limit), reclaim always makes progress, and the kernel's OOM killer
// never acts, so without the runner's memory stall bound it runs until its
// 30 s timeout. The run must end as oom_killed (137). On a host whose
// cgroups keep no pressure figures (pure cgroup v1) the runner cannot see
// the stall: the test says so and fails.
func TestAProgramThrashingAtItsMemoryLimitIsOOMKilledUnderLoad(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	if !cgroupPSI() {
		t.Fatal("this host's cgroups keep no pressure figures (no memory.pressure): the runner cannot bound thrashing here")
	}
	deps := thrashFile(t, 96<<20)
	r := newTestRunner(t)

	hogCtx, stopHog := context.WithCancel(t.Context())
	var hog sync.WaitGroup
	hog.Go(func() {
		_, _ = r.Run(hogCtx, runnertest.Spec("while True:\n    pass"))
	})
	defer func() { stopHog(); hog.Wait() }()

	spec := runnertest.Spec("import mmap\n" +
		"hold = bytearray(216 << 20)\n" +
		"for i in range(0, len(hold), 4096):\n    hold[i] = 1\n" +
		"f = open('/deps/blob', 'rb')\n" +
		"m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n" +
		"while True:\n    s = 0\n    for i in range(0, len(m), 4096):\n        s += m[i]\n")
	spec.Sandbox.MemoryBytes = 256 << 20
	spec.Sandbox.DepsDir = deps
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != runner.OOMKilled || res.ExitCode != 137 {
		t.Errorf("ended %s with %d after %s (stderr %.300q), want oom_killed with 137", res.Reason, res.ExitCode, res.Duration, res.Stderr)
	}
}

// cgroupPSI says whether this host's cgroups keep pressure figures: a v2
// hierarchy, at the root or beside v1 (hybrid), with memory.pressure.
func cgroupPSI() bool {
	for _, d := range []string{cgroupRoot, filepath.Join(cgroupRoot, "unified")} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.controllers")); err == nil {
			if matches, _ := filepath.Glob(filepath.Join(d, "*", "memory.pressure")); len(matches) > 0 {
				return true
			}
		}
	}
	return false
}

// thrashFile writes n random bytes to blob in a new directory readable by
// the sandbox's user, and drops them from the page cache, so that the
// sandbox's reads charge them to its own cgroup. The directory is on the
// host's disk where it can be (a tmpfs file's pages cannot be reclaimed
// without swap: the kernel's OOM killer ends the run, oom_killed too).
func thrashFile(t *testing.T, n int) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "gatekeeper-thrash-")
	if err != nil {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "blob"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for written := 0; written < n; written += len(buf) {
		_, _ = rand.Read(buf)
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	return dir
}

var _ sandbox.StallMeter = (*containerRun)(nil)
