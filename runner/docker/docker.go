// Package docker runs sandboxed code in Docker containers, under runc or
// gVisor's runsc, enforcing a runner.Sandbox with container settings only:
// a read-only root; size-limited tmpfs at /workspace (owned by the
// sandbox user) and /tmp (nosuid, nodev, noexec); an optional read-only,
// non-recursive bind of Sandbox.DepsDir at /deps and no other mount; no
// network; no capabilities, no new privileges, the default seccomp
// profile; a non-root user; private IPC, PID and UTS namespaces with a
// small /dev/shm; an init that reaps zombies; cgroup limits on CPU, memory
// (no swap) and processes; ulimits nofile, nproc and fsize; and an
// environment of PATH, HOME and LANG only.
//
// The code and files never touch the host's disk: they reach the container
// as a tar stream on its standard input, which the container unpacks into
// its /workspace tmpfs before it runs the program with standard input from
// /dev/null. (Docker refuses CopyToContainer into a container with a
// read-only root, and a tmpfs exists only once the container runs, so
// neither copying before nor after start can fill it.) The whole container
// command runs under coreutils `timeout -s KILL` set a little past the
// run's timeout, so a container whose sidecar was killed ends by itself;
// Runner.Cleanup removes what is left.
//
// An image other than the default one needs /bin/sh, /usr/bin/env, tar and
// coreutils' timeout, plus the language's interpreter in PATH.
//
// Under runsc the same policy holds with these differences (the tests pin
// each): the pids cgroup counts gVisor's own threads, so it is set to
// 2*PIDs+RunscPIDsExtra and the per-run process bound is RLIMIT_NPROC,
// which gVisor's kernel counts per sandbox; the default seccomp profile is
// not loaded into the sandbox (gVisor's kernel serves the system calls,
// under its own filter); a write to a root-owned path of a read-only mount
// fails with EACCES rather than EROFS (gVisor checks permission first);
// and the engine occasionally misses the OOM event of a sandbox the memory
// limit killed (reported as exited with 137).
package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Container labels. Every container a Runner creates carries all three, plus
// the Spec's own labels (which cannot override these).
const (
	LabelInstance = "gatekeeper.instance"
	LabelRunID    = "gatekeeper.run_id"
	LabelQueryID  = "gatekeeper.query_id"
)

// Defaults for the zero fields of Config.
const (
	DefaultShmBytes       = 16 << 20
	DefaultNofile         = 1024
	DefaultHostNproc      = 4096
	DefaultRunscPIDsExtra = 64
)

// engine is the part of the Docker client a Runner uses; *client.Client
// satisfies it and unit tests use fakes.
type engine interface {
	Info(ctx context.Context) (system.Info, error)
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ContainerCreate(ctx context.Context, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error)
	ContainerStatPath(ctx context.Context, id, path string) (container.PathStat, error)
	ContainerAttach(ctx context.Context, id string, opts container.AttachOptions) (types.HijackedResponse, error)
	ContainerStart(ctx context.Context, id string, opts container.StartOptions) error
	ContainerWait(ctx context.Context, id string, cond container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerKill(ctx context.Context, id, signal string) error
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ContainerStats(ctx context.Context, id string, stream bool) (container.StatsResponseReader, error)
	ContainerRemove(ctx context.Context, id string, opts container.RemoveOptions) error
	ContainerList(ctx context.Context, opts container.ListOptions) ([]container.Summary, error)
	DaemonHost() string
}

// Config configures a Runner. Only Instance is required.
type Config struct {
	// Instance names this runner: every container it creates carries the
	// label gatekeeper.instance=Instance, and Cleanup removes only those.
	// Two runners sharing an engine (parallel tests, several sidecars) must
	// use different names. 1 to 64 of [A-Za-z0-9_.-].
	Instance string
	// DefaultImage is the image used when Spec.Sandbox.Image is empty.
	DefaultImage string
	// Client is the engine client to use; nil means a client from the
	// environment (DOCKER_HOST etc.) with API version negotiation, which
	// Close closes. A Client passed in stays the caller's to close.
	Client *client.Client
	// ShmBytes is the size of the container's private /dev/shm; 0 means
	// DefaultShmBytes.
	ShmBytes int64
	// Nofile is RLIMIT_NOFILE; 0 means DefaultNofile.
	Nofile int64
	// HostNproc is RLIMIT_NPROC under runc. The host kernel counts that
	// limit over every process of the uid on the host, across runs, so it is
	// only a backstop there; Sandbox.PIDs (the pids cgroup) is the per-run
	// bound. 0 means DefaultHostNproc. Under runsc, whose kernel counts only
	// the sandbox's own processes, RLIMIT_NPROC is Sandbox.PIDs.
	HostNproc int64
	// RunscPIDsExtra is added, twice Sandbox.PIDs plus this, to the pids
	// cgroup limit under runsc: the host cgroup there counts gVisor's own
	// threads and per-process stubs, not the program's processes, and gVisor
	// dies (exit 2) rather than failing fork when it is hit. 0 means
	// DefaultRunscPIDsExtra.
	RunscPIDsExtra int64
}

var instanceRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Runner runs Specs in Docker containers. It is safe for concurrent use;
// it does not bound concurrency itself (see runner.Queue).
type Runner struct {
	cfg       Config
	cli       engine
	closeCli  func() error
	mu        sync.Mutex
	runtimes  map[string]bool          // nil until the engine was asked
	languages map[langKey]languageInfo // per image ID and language
}

type langKey struct {
	imageID string
	lang    runner.Language
}

type languageInfo struct {
	ok bool
}

// New returns a Runner for cfg. It does not contact the engine; the first
// Run or Cleanup does, and reports an unreachable engine as an error
// wrapping runner.ErrUnavailable.
func New(cfg Config) (*Runner, error) {
	if cfg.Client != nil {
		return newRunner(cfg, cfg.Client, func() error { return nil })
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return newRunner(cfg, cli, cli.Close)
}

func newRunner(cfg Config, cli engine, closeCli func() error) (*Runner, error) {
	if !instanceRE.MatchString(cfg.Instance) {
		return nil, fmt.Errorf("instance name %q: want 1 to 64 of [A-Za-z0-9_.-]", cfg.Instance)
	}
	if cfg.ShmBytes <= 0 {
		cfg.ShmBytes = DefaultShmBytes
	}
	if cfg.Nofile <= 0 {
		cfg.Nofile = DefaultNofile
	}
	if cfg.HostNproc <= 0 {
		cfg.HostNproc = DefaultHostNproc
	}
	if cfg.RunscPIDsExtra <= 0 {
		cfg.RunscPIDsExtra = DefaultRunscPIDsExtra
	}
	return &Runner{cfg: cfg, cli: cli, closeCli: closeCli, languages: map[langKey]languageInfo{}}, nil
}

// Close releases the engine client if New made it. It does not stop runs in
// progress or remove containers.
func (r *Runner) Close() error { return r.closeCli() }

// Instance returns the runner's instance name.
func (r *Runner) Instance() string { return r.cfg.Instance }

// Cleanup force-removes every container labelled with this runner's
// instance, running or not, and returns how many it removed. Call it when
// the sidecar starts, to remove what a killed predecessor of the same
// instance left, and not while this runner has runs in progress: it would
// remove their containers too.
func (r *Runner) Cleanup(ctx context.Context) (removed int, err error) {
	ids, err := r.containers(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, id := range ids {
		err := r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			removed++
		case cerrdefs.IsNotFound(err):
			// gone already (removed by a run that just ended)
		default:
			errs = append(errs, engineErr("remove container "+short(id), err))
		}
	}
	return removed, errors.Join(errs...)
}

// Leftovers returns how many containers labelled with this runner's
// instance exist. Tests use it (see runnertest.Leftovers).
func (r *Runner) Leftovers(ctx context.Context) (int, error) {
	ids, err := r.containers(ctx)
	return len(ids), err
}

func (r *Runner) containers(ctx context.Context) ([]string, error) {
	list, err := r.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelInstance+"="+r.cfg.Instance)),
	})
	if err != nil {
		return nil, engineErr("list containers", err)
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// runtimeAvailable reports whether the engine has the OCI runtime. The
// engine's list is asked once and cached; a failed ask is not cached.
func (r *Runner) runtimeAvailable(ctx context.Context, rt runner.Runtime) (bool, error) {
	r.mu.Lock()
	known := r.runtimes
	r.mu.Unlock()
	if known == nil {
		info, err := r.cli.Info(ctx)
		if err != nil {
			return false, engineErr("engine info", err)
		}
		known = make(map[string]bool, len(info.Runtimes))
		for name := range info.Runtimes {
			known[name] = true
		}
		r.mu.Lock()
		r.runtimes = known
		r.mu.Unlock()
	}
	return known[string(rt)], nil
}

// engineErr wraps err from the engine with op; an engine that cannot be
// reached is additionally marked runner.ErrUnavailable.
func engineErr(op string, err error) error {
	var netErr *net.OpError
	if client.IsErrConnectionFailed(err) || cerrdefs.IsUnavailable(err) || errors.As(err, &netErr) && netErr.Op == "dial" {
		return fmt.Errorf("%s: %w: %w", op, runner.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
