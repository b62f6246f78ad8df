package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// These tests need the real engine and check what the conformance suite
// cannot see from inside the sandbox, or what is Docker-specific.

func TestEngineKeepsEverySetting(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	r := newTestRunner(t)
	spec := runnertest.Spec("print(1)")
	spec.Sandbox.DepsDir = t.TempDir()
	cfg, want, id := createFor(t, r, spec)
	insp, err := r.pf.cli.ContainerInspect(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	h := insp.HostConfig
	// Every setting TestContainerSettings pins in the request, as the
	// engine holds it.
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"ipc", h.IpcMode == want.IpcMode},
		{"shm size", h.ShmSize == want.ShmSize},
		{"ulimits", fmt.Sprint(h.Ulimits) == fmt.Sprint(want.Ulimits)},
		{"tmpfs", maps.Equal(h.Tmpfs, want.Tmpfs)},
		{"cpus", h.NanoCPUs == want.NanoCPUs},
		{"pids", h.PidsLimit != nil && want.PidsLimit != nil && *h.PidsLimit == *want.PidsLimit},
		{"runtime", h.Runtime == want.Runtime},
		{"pid and uts namespaces", h.PidMode == want.PidMode && h.UTSMode == want.UTSMode},
		{"user", insp.Config.User == cfg.User},
		{"entrypoint", slices.Equal(insp.Config.Entrypoint, cfg.Entrypoint)},
	} {
		if !c.ok {
			t.Errorf("the engine does not hold the requested %s", c.name)
		}
	}
	if !h.ReadonlyRootfs || h.Privileged || !slices.Equal(h.CapDrop, []string{"ALL"}) || h.NetworkMode != "none" ||
		!slices.Equal(h.SecurityOpt, []string{"no-new-privileges:true"}) || h.Memory != h.MemorySwap || h.PidsLimit == nil ||
		len(h.Binds) != 0 || len(h.Mounts) != 1 || !h.Mounts[0].ReadOnly || h.Init != nil && *h.Init {
		t.Errorf("engine holds host config %+v", h)
	}
	if len(insp.Mounts) != 1 || insp.Mounts[0].Destination != "/deps" || insp.Mounts[0].RW {
		t.Errorf("mounts %+v, want /deps read-only only", insp.Mounts)
	}
	if insp.Config.Labels[runner.LabelInstance] != r.Instance() {
		t.Errorf("labels %v lack the instance", insp.Config.Labels)
	}
}

// TestSeccomp checks the program runs under a seccomp filter (Seccomp: 2)
// under runc (Docker's default profile) and under runsc, which applies
// runner/seccomp's profile inside gVisor's kernel only when it is
// registered with --oci-seccomp (scripts/ensure-docker).
func TestSeccomp(t *testing.T) {
	t.Parallel()
	for rt, want := range map[runner.Runtime]string{runner.Runc: "2\n", runner.Runsc: "2\n"} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			r := newTestRunner(t)
			spec := runnertest.Spec(`print([l for l in open("/proc/self/status") if l.startswith("Seccomp:")][0].split()[1])`)
			spec.Sandbox.Runtime = rt
			res, err := r.Run(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != want {
				t.Errorf("seccomp mode %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
			}
		})
	}
}

func TestNodeMissingFromDefaultImage(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	r := newTestRunner(t)
	spec := runnertest.Spec("console.log(1)")
	spec.Language = runner.Node
	_, err := r.Run(t.Context(), spec)
	if !errors.Is(err, runner.ErrLanguageUnavailable) || !strings.Contains(err.Error(), testImage) {
		t.Fatalf("Run = %v, want ErrLanguageUnavailable naming %s", err, testImage)
	}
	if n, err := r.Leftovers(t.Context()); err != nil || n != 0 {
		t.Errorf("leftovers = %d, %v; want 0", n, err)
	}
}

func TestMissingImage(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	tests := []struct {
		name, image, hint string
	}{
		{"a stale profile tag says to build the profiles", "gatekeeper-sandbox:python-000000000000", "gatekeeper image build --all"},
		{"another image says to load it", "registry.example/sandbox:does-not-exist", "load it into the Docker engine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newTestRunner(t)
			spec := runnertest.Spec("print(1)")
			spec.Sandbox.Image = tt.image
			_, err := r.Run(t.Context(), spec)
			if !cerrdefs.IsNotFound(err) || !strings.Contains(err.Error(), tt.image) || !strings.Contains(err.Error(), tt.hint) {
				t.Fatalf("Run = %v, want a not-found error naming the image and %q", err, tt.hint)
			}
		})
	}
}

func TestPeakMemory(t *testing.T) {
	t.Parallel()
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			r := newTestRunner(t)
			spec := runnertest.Spec("import time\nb = bytearray(48 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(2.5)\nprint('ok')")
			spec.Sandbox.Runtime = rt
			res, err := r.Run(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != "ok\n" {
				t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
			}
			if res.PeakMemoryBytes < 48<<20 || res.PeakMemoryBytes > spec.Sandbox.MemoryBytes {
				t.Errorf("peak memory %d, want between 48 MiB and the %d limit", res.PeakMemoryBytes, spec.Sandbox.MemoryBytes)
			}
		})
	}
}

// TestAbandonedContainerEndsByItself plays a sidecar killed mid-run: it
// starts a container with an endless loop, drops the connection and never
// kills it. The in-container backstop must end it shortly after the
// timeout.
func TestAbandonedContainerEndsByItself(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	r := newTestRunner(t)
	spec := runnertest.Spec("while True:\n    pass")
	spec.Timeout = time.Second
	ctx := t.Context()
	id, attach, begin := startUnwatched(t, r, spec)
	time.Sleep(500 * time.Millisecond)
	attach.Close() // the sidecar is gone

	waitCtx, cancel := context.WithTimeout(ctx, spec.Timeout+launch.BackstopGrace+15*time.Second)
	defer cancel()
	waitC, errC := r.pf.cli.ContainerWait(waitCtx, id, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		took := time.Since(begin)
		if w.StatusCode != 137 {
			t.Errorf("abandoned container exited %d, want 137 (killed by the backstop)", w.StatusCode)
		}
		if took < spec.Timeout+launch.BackstopGrace-time.Second {
			t.Errorf("abandoned container ended after %v, before its backstop", took)
		}
		t.Logf("abandoned container ended after %v", took)
	case err := <-errC:
		t.Fatalf("the abandoned container still runs %v after it started: %v", time.Since(begin), err)
	}
}

// startUnwatched creates and starts spec's container the way Run does,
// sends it its code, and returns without watching it, as a sidecar killed
// right after the start would leave it. The container is removed when the
// test ends.
func startUnwatched(t *testing.T, r *Runner, spec runner.Spec) (id string, attach types.HijackedResponse, begin time.Time) {
	t.Helper()
	p, err := r.Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cfg, host := r.pf.containerSettings(spec, p, nil)
	id, err = r.pf.create(ctx, cfg, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.pf.remove(id) })
	attach, err = r.pf.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.pf.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	_, err = p.Input.Write(attach.Conn, spec)
	_ = attach.CloseWrite()
	if err != nil {
		t.Fatal(err)
	}
	return id, attach, begin
}

func TestCleanupRemovesOnlyItsInstance(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	mine, other := newTestRunner(t), newTestRunner(t)
	for _, r := range []*Runner{mine, mine, other} {
		spec := runnertest.Spec("print(1)")
		p, err := r.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		cfg, host := r.pf.containerSettings(spec, p, nil)
		if _, err := r.pf.create(t.Context(), cfg, host); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := mine.Cleanup(t.Context())
	if err != nil || removed != 2 {
		t.Fatalf("Cleanup = %d, %v; want 2, nil", removed, err)
	}
	if n, _ := mine.Leftovers(t.Context()); n != 0 {
		t.Errorf("%d of mine left after Cleanup, want 0", n)
	}
	if n, _ := other.Leftovers(t.Context()); n != 1 {
		t.Errorf("%d of the other instance left, want 1 (not mine to remove)", n)
	}
}

// TestNodeLanguage runs JavaScript in the node profile under both runtimes.
func TestNodeLanguage(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	tag := profileImages["node"]
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			r := newTestRunner(t)
			// The product comes from a worker thread: under gVisor, threads
			// start only with runner/seccomp's clone3 rule.
			spec := runnertest.Spec(`const fs = require("fs");
const { Worker } = require("worker_threads");
try { fs.writeFileSync("/etc/x", "x") } catch (e) { console.error(e.code) }
new Worker("require('worker_threads').parentPort.postMessage(6 * 7)", { eval: true })
  .on("message", n => console.log(n, fs.readFileSync("/workspace/data.txt", "utf8").trim()));`)
			spec.Language = runner.Node
			spec.Files = map[string]string{"data.txt": "from a file\n"}
			spec.Sandbox.Image = tag
			spec.Sandbox.Runtime = rt
			res, err := r.Run(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			wantErr := "EROFS\n"
			if rt == runner.Runsc {
				wantErr = "EACCES\n" // gVisor checks permission before the read-only mount
			}
			if res.ExitCode != 0 || res.Stdout != "42 from a file\n" || res.Stderr != wantErr {
				t.Errorf("node run: exit %d stdout %q stderr %q; want 0, %q, %q", res.ExitCode, res.Stdout, res.Stderr, "42 from a file\n", wantErr)
			}
		})
	}
}

// TestEndMarksEndTheRun runs programs in real containers with the engine's
// exit report withheld (the session's wait never answers), so only the
// launcher's end marks can end the run before its timeout: each run must
// end as exited, with the program's exit code and every byte it wrote
// (the last without a newline), and a forged mark with another tag kept as
// output. (What outlives a run is TestNothingOutlivesTheRun's.)
func TestEndMarksEndTheRun(t *testing.T) {
	t.Parallel()
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			r := newTestRunner(t)
			spec := runnertest.Spec(`import os, sys
sys.stdout.write("out-1\n")
sys.stderr.write("err-1\n")
sys.stdout.write("\x1egatekeeper-end 0000000000000000 000\x1e")
sys.stdout.write("x" * 10000)
if os.fork() == 0:
    import time
    time.sleep(3)
    sys.stdout.write("late orphan\n")
    sys.stdout.flush()
    os._exit(0)
sys.stdout.write("last, no newline")
sys.exit(7)
`)
			spec.Sandbox.Runtime = rt
			spec.Timeout = 20 * time.Second
			// The engine's report never comes: the runner's platform
			// hides the containers' exits.
			sr, err := sandbox.New(exitUnseen{r.pf}, sandbox.Config{Instance: r.Instance(), DefaultImage: testImage,
				ColdMargin: coldMargin, DrainTimeout: drainTimeout, MinMemoryBytes: minMemoryBytes})
			if err != nil {
				t.Fatal(err)
			}
			defer sr.Close()
			res, err := sr.Run(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason != runner.Exited || res.ExitCode != 7 {
				t.Errorf("reason %q, exit code %d; want exited with 7 (stderr %q)", res.Reason, res.ExitCode, res.Stderr)
			}
			want := "out-1\n\x1egatekeeper-end 0000000000000000 000\x1e" + strings.Repeat("x", 10000) + "last, no newline"
			if res.Stdout != want {
				t.Errorf("stdout is %d bytes ending %q; want %d bytes ending %q", len(res.Stdout), tail(res.Stdout), len(want), tail(want))
			}
			if res.Stderr != "err-1\n" {
				t.Errorf("stderr %q; want %q", res.Stderr, "err-1\n")
			}
		})
	}
}

func tail(s string) string { return s[max(0, len(s)-40):] }

// createFor plans spec and creates its container, removed when t ends.
func createFor(t *testing.T, r *Runner, spec runner.Spec) (*container.Config, *container.HostConfig, string) {
	t.Helper()
	p, err := r.Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, host := r.pf.containerSettings(spec, p, nil)
	id, err := r.pf.create(t.Context(), cfg, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.pf.remove(id) })
	return cfg, host, id
}

// exitUnseen is a platform whose containers' exits are never reported.
type exitUnseen struct{ *platform }

func (e exitUnseen) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Instance, error) {
	inst, err := e.platform.Create(ctx, req)
	if err != nil {
		return nil, err
	}
	return exitUnseenRun{inst.(*containerRun)}, nil
}

type exitUnseenRun struct{ *containerRun }

func (exitUnseenRun) Done() <-chan struct{} { return nil }

// TestCloseWaitsForBackgroundRemovals: a run's container is removed off the
// run's path, and Close returns only once that removal is done, so a
// sidecar that shuts down after its last run leaves nothing behind.
func TestCloseWaitsForBackgroundRemovals(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	r := newTestRunner(t)
	for range 3 {
		res, err := r.Run(t.Context(), runnertest.Spec(`print("done")`))
		if err != nil || res.Stdout != "done\n" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := New(Config{Instance: r.Instance(), DefaultImage: testImage})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	list, err := other.pf.containers(t.Context())
	if err != nil || len(list) != 0 {
		t.Errorf("after Close: %d containers of the instance, %v; want none", len(list), err)
	}
}
