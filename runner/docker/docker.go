// Package docker runs sandboxed code in Docker containers, under runc or
// gVisor's runsc: it is the Docker platform of runner/sandbox, whose runner
// (validation, the warm pool, the run loop, metrics) it wraps. What it
// provides is what only Docker has: the engine client and its fault
// handling (retried removals, lost creates), the container settings
// (spec.go), the sandbox networks and their host firewall (network.go,
// firewall.go), the deps bind (deps.go), and how a container ended: its
// exit, the engine's OOM report and events, and its peak memory from the
// stats stream and the cgroup (run.go, cgroup.go).
//
// It enforces a runner.Sandbox with container settings only:
// a read-only root; size-limited tmpfs at /workspace (owned by the
// sandbox user) and /tmp (nosuid, nodev, noexec); an optional read-only,
// non-recursive bind of Sandbox.DepsDir at /deps and no other mount; no
// network (unless the Sandbox enables it, below); no capabilities, no new
// privileges, the default seccomp profile; a non-root user; private IPC,
// PID and UTS namespaces with a small /dev/shm; a PID 1 the program cannot
// stop that bounds the container's life (coreutils timeout; it does not
// reap orphaned processes); cgroup limits on CPU, memory (no swap) and
// processes; ulimits nofile, nproc and fsize; and an environment of PATH,
// HOME and LANG only.
//
// A Sandbox with Network.Enabled runs alone on an internal Docker network
// of its own (bridge gk-<id>: no route out, no masquerading, no IPv6) whose
// only reachable endpoint is Config.Egress, the egress proxy, listening on
// the network's gateway address; HTTP_PROXY and HTTPS_PROXY (and their
// lower-case forms) point there and NO_PROXY is empty. Docker's rules for
// an internal network stop forwarding but not packets addressed to the
// host, so the Runner also installs a host firewall for the bridge: an
// INPUT chain GK-<id> accepting TCP to the proxy's address and port and
// rejecting everything else, an ip6tables drop of everything from the
// bridge, and IPv6 turned off on it. DNS fails inside: Docker's embedded
// resolver is given no upstream server (0.0.0.0) and the firewall refuses
// DNS to the host; the proxy resolves names itself. The proxy learns the
// container's address (Register) after start and before the code is sent,
// and forgets it (Unregister) when the run ends; then the firewall and the
// network are removed. Networks carry the instance, run and query labels,
// firewall rules the comment gatekeeper:<instance>:<id>, and Cleanup
// removes both.
//
// The code and files never touch the host's disk: they reach the container
// as a tar stream on its standard input, which the container unpacks into
// its /workspace tmpfs before it runs the program with standard input from
// /dev/null. (Docker refuses CopyToContainer into a container with a
// read-only root, and a tmpfs exists only once the container runs, so
// neither copying before nor after start can fill it.) The tar follows a
// header line giving the language and the backstop: a started container
// waits for it, without a clock running, for a bounded time, then unpacks
// and runs the program under coreutils `timeout -s KILL` set a little past
// the run's timeout, so a container whose sidecar was killed ends by
// itself; Runner.Cleanup removes what is left. The runner's own timeout
// counts from the moment it sends the code. That is what lets the warm
// pool (Config.Pool) start containers before their run is known. The
// program runs as the same uid as that timeout and can stop it (SIGSTOP);
// the container's PID 1, another `timeout -s KILL`, which no process of
// the container can signal that way, still ends the container a few
// seconds later (for a warm container: after its idle lifetime plus
// PoolMaxTimeout at most).
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
	"log/slog"
	"net"
	"regexp"
	"slices"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// Every container a Runner creates carries runner.LabelInstance,
// runner.LabelRunID and runner.LabelQueryID, plus the Spec's own labels
// (which cannot override these) and LabelCreate.

// Defaults for the zero fields of Config.
const (
	DefaultShmBytes       = 16 << 20
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
	NetworkCreate(ctx context.Context, name string, opts network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, id string, opts network.InspectOptions) (network.Inspect, error)
	NetworkRemove(ctx context.Context, id string) error
	NetworkList(ctx context.Context, opts network.ListOptions) ([]network.Summary, error)
	Events(ctx context.Context, opts events.ListOptions) (<-chan events.Message, <-chan error)
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
	// Nofile is RLIMIT_NOFILE; 0 means sandbox.DefaultNofile.
	Nofile int64
	// HostNproc is RLIMIT_NPROC under runc. The host kernel counts that
	// limit over every process of the uid on the host, across runs, so it is
	// only a backstop there; Sandbox.PIDs (the pids cgroup) is the per-run
	// bound. 0 means sandbox.DefaultHostNproc. Under runsc, whose kernel counts only
	// the sandbox's own processes, RLIMIT_NPROC is Sandbox.PIDs.
	HostNproc int64
	// RunscPIDsExtra is added, twice Sandbox.PIDs plus this, to the pids
	// cgroup limit under runsc: the host cgroup there counts gVisor's own
	// threads and per-process stubs, not the program's processes, and gVisor
	// dies (exit 2) rather than failing fork when it is hit. 0 means
	// DefaultRunscPIDsExtra.
	RunscPIDsExtra int64
	// Egress is the egress proxy networked sandboxes reach the outside
	// through (an *egress.Proxy, whose Auditor records every request). nil
	// refuses a Sandbox with Network.Enabled (runner.ErrNetworkUnsupported).
	// The Runner needs the host firewall for networked sandboxes (root or
	// CAP_NET_ADMIN and the iptables commands); without it they are refused
	// the same way, never run unfirewalled.
	Egress sandbox.Egress
	// Pool configures the warm pool of containers (see
	// sandbox.PoolConfig); the zero value disables it.
	Pool sandbox.PoolConfig
	// MaxIdleSessions bounds the sessions whose sandbox waits for a run
	// (sandbox.Config.MaxIdleSessions).
	MaxIdleSessions int
	// Logger receives what happens outside a run's Result: the ids of runs
	// in warm containers, cleanup and pool failures, the proxy's serving
	// errors. nil discards.
	Logger *slog.Logger
}

var instanceRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Runner runs Specs in Docker containers: runner/sandbox's runner over
// the Docker platform. It is safe for concurrent use; it does not bound
// concurrency itself (see runner.Queue).
type Runner struct {
	*sandbox.Runner
	pf *platform
}

// platform is the Docker engine as a sandbox.Platform.
type platform struct {
	cfg       Config
	cli       engine
	fw        firewall
	log       *slog.Logger
	closeCli  func() error
	mu        sync.Mutex
	runtimes  map[string]bool          // nil until the engine was asked
	languages map[langKey]languageInfo // per image ID and language
	retry     *retrier                 // removals that failed, tried again
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
	for _, f := range []struct {
		v   *int64
		def int64
	}{
		{&cfg.ShmBytes, DefaultShmBytes}, {&cfg.Nofile, sandbox.DefaultNofile},
		{&cfg.HostNproc, sandbox.DefaultHostNproc}, {&cfg.RunscPIDsExtra, DefaultRunscPIDsExtra},
	} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pf := &platform{cfg: cfg, cli: cli, fw: iptables{}, log: log, closeCli: closeCli, languages: map[langKey]languageInfo{}}
	pf.retry = newRetrier(pf)
	sr, err := sandbox.New(pf, sandbox.Config{
		Instance: cfg.Instance, DefaultImage: cfg.DefaultImage, ColdMargin: coldMargin, DrainTimeout: drainTimeout,
		MinMemoryBytes: minMemoryBytes, Pool: cfg.Pool, MaxIdleSessions: cfg.MaxIdleSessions, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return &Runner{Runner: sr, pf: pf}, nil
}

// Close tries once more the removals that failed, then releases the
// engine client if New made it. (Runner.Close first waits for the
// removal of ended runs' containers and removes the pool's.)
func (pf *platform) Close() error {
	pf.retry.close()
	return pf.closeCli()
}

// Collectors returns gatekeeper_sandbox_removals_pending, beside the
// runner's own.
func (pf *platform) Collectors() []prometheus.Collector {
	return []prometheus.Collector{prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gatekeeper_sandbox_removals_pending", Help: "Containers and sandbox networks whose removal failed and is being retried.",
	}, pf.retry.count)}
}

// Memory is the engine's memory: the pool's default budget is half of it.
func (pf *platform) Memory(ctx context.Context) (int64, error) {
	info, err := pf.cli.Info(ctx)
	if err != nil {
		return 0, engineErr("engine info", err)
	}
	return info.MemTotal, nil
}

// Status is what the engine says about itself.
type Status struct {
	// Version is the engine's version; Runtimes the OCI runtimes it has,
	// sorted.
	Version  string
	Runtimes []string
}

// Status asks the engine for its version and runtimes now. An engine that
// cannot be reached is an error wrapping runner.ErrUnavailable.
func (r *Runner) Status(ctx context.Context) (Status, error) {
	info, err := r.pf.cli.Info(ctx)
	if err != nil {
		return Status{}, engineErr("engine info", err)
	}
	st := Status{Version: info.ServerVersion}
	for name := range info.Runtimes {
		st.Runtimes = append(st.Runtimes, name)
	}
	slices.Sort(st.Runtimes)
	return st, nil
}

// Instance returns the runner's instance name.
func (r *Runner) Instance() string { return r.pf.cfg.Instance }

// Sweep force-removes the containers labelled with this runner's
// instance that keep does not keep, running or not, then (when keep is
// nil) the instance's sandbox networks and their host firewall rules, and
// returns how many containers and networks it removed.
func (pf *platform) Sweep(ctx context.Context, keep func(id string, pooled bool) bool) (removed int, err error) {
	list, err := pf.containers(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, c := range list {
		id := c.ID
		if keep != nil && keep(id, c.Labels[runner.LabelPool] != "") {
			continue
		}
		err := pf.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			removed++
		case cerrdefs.IsNotFound(err):
			// gone already (removed by a run that just ended)
		default:
			errs = append(errs, engineErr("remove container "+short(id), err))
		}
	}
	if keep != nil {
		return removed, errors.Join(errs...) // networks are runs', never the pool's
	}
	n, err := pf.cleanupNetworks(ctx)
	removed += n
	errs = append(errs, err)
	return removed, errors.Join(errs...)
}

// Leftovers returns how many containers and sandbox networks labelled with
// this runner's instance exist, plus (with an egress proxy) the instance's
// host firewall rules; containers keep keeps (the pool's) are not counted.
func (pf *platform) Leftovers(ctx context.Context, keep func(id string, labels map[string]string) bool) (int, error) {
	list, err := pf.containers(ctx)
	if err != nil {
		return 0, err
	}
	n, err := pf.leftoverNetworks(ctx)
	for _, c := range list {
		if !keep(c.ID, c.Labels) {
			n++
		}
	}
	return n, err
}

func (pf *platform) containers(ctx context.Context) ([]container.Summary, error) {
	list, err := pf.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", runner.LabelInstance+"="+pf.cfg.Instance)),
	})
	if err != nil {
		return nil, engineErr("list containers", err)
	}
	return list, nil
}

// runtimeAvailable reports whether the engine has the OCI runtime. The
// engine's list is asked once and cached; a failed ask is not cached.
func (pf *platform) runtimeAvailable(ctx context.Context, rt runner.Runtime) (bool, error) {
	pf.mu.Lock()
	known := pf.runtimes
	pf.mu.Unlock()
	if known == nil {
		info, err := pf.cli.Info(ctx)
		if err != nil {
			return false, engineErr("engine info", err)
		}
		known = make(map[string]bool, len(info.Runtimes))
		for name := range info.Runtimes {
			known[name] = true
		}
		pf.mu.Lock()
		pf.runtimes = known
		pf.mu.Unlock()
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
