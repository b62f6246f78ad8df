package docker

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/strslice"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/seccomp"
)

// Names of the launch protocol (runner/launch) used here.
const (
	workspaceDir  = launch.WorkspaceDir
	tmpDir        = launch.TmpDir
	depsDir       = "/deps"
	backstopGrace = launch.BackstopGrace
	snapshotGrace = launch.SnapshotGrace
)

// sandboxEnv is the complete environment of the program; nothing of the
// sidecar's environment reaches the container.
var sandboxEnv = launch.Env()

// launcher is the in-container script (launch.Script).
var launcher = launch.Script()

// header is the line the launcher waits for (launch.Header).
func header(timeout time.Duration, lang runner.Language, tag string, snapshot bool) []byte {
	return launch.Header(timeout, lang, tag, snapshot)
}

// wantsSnapshot reports whether a run of spec sends /workspace back
// (launch.WantsSnapshot).
func wantsSnapshot(spec runner.Spec) bool { return launch.WantsSnapshot(spec) }

// coldMargin is how long past the run's backstop (timeout plus
// backstopGrace) the container's PID 1 ends a container created for one
// run, counted from its start: the code is sent right after the start.
const coldMargin = 2 * time.Second

// minMemoryBytes is the smallest memory limit Docker accepts.
const minMemoryBytes = 6 << 20

// plan is a validated Spec turned into container settings. The settings
// depend on the Sandbox (and, for a networked one, its network) but not on
// the language, the timeout or the code, which travel on standard input
// (input); a warm pool creates containers from a plan before any of those
// is known.
type plan struct {
	image   string
	runtime runner.Runtime
	in      *launch.Input // the program, the code and files, the end marks' tag, the saved workspace
	config  *container.Config
	host    *container.HostConfig
	env     []string      // the program's whole environment
	net     *sandboxNet   // nil: no network
	poolKey string        // set for a warm container: its labels are the pool's
	warm    *launch.Warm  // set for a warm container: what it starts ahead
	wait    time.Duration // the longest the container waits for its code
	life    time.Duration // the longest the container lives (PID 1's timeout)
}

// command is the container's command line (launch.Command, or
// launch.WarmCommand for a warm container).
func (p *plan) command() []string {
	if p.warm != nil {
		// The pool checked the Warm when it planned the container
		// (warmStarts); a Warm{} always passes.
		if argv, err := launch.WarmCommand(p.life, p.wait, p.env, *p.warm); err == nil {
			return argv
		}
	}
	return launch.Command(p.life, p.wait, p.env)
}

// plan validates spec and builds the container settings. Problems with the
// Spec are returned together, wrapped in runner.ErrInvalidSpec; a network
// policy on a Runner without an egress proxy is refused with
// runner.ErrNetworkUnsupported. The settings of a networked plan are
// completed by withNetwork once its network exists.
func (r *Runner) plan(spec runner.Spec) (*plan, error) {
	sb := spec.Sandbox
	if sb.Network.Enabled && r.cfg.Egress == nil {
		return nil, fmt.Errorf("sandbox network enabled, but the runner has no egress proxy: %w", runner.ErrNetworkUnsupported)
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if sb.Network.Enabled {
		if err := egress.ValidateNetwork(sb.Network); err != nil {
			bad("%v", err)
		}
	}

	life := spec.Timeout + backstopGrace + coldMargin
	if wantsSnapshot(spec) {
		life += snapshotGrace
	}
	p := &plan{image: sb.Image, runtime: sb.Runtime, env: sandboxEnv, wait: life, life: life}
	if p.image == "" {
		p.image = r.cfg.DefaultImage
	}
	if p.image == "" {
		bad("no image: Sandbox.Image and the runner's default image are empty")
	}
	if p.runtime == "" {
		p.runtime = runner.Runc
	}
	if p.runtime != runner.Runc && p.runtime != runner.Runsc {
		bad("unknown runtime %q", p.runtime)
	}
	in, more := launch.Check(spec, minMemoryBytes)
	problems = append(problems, more...)
	p.in = in
	if sb.DepsDir != "" {
		if err := checkDeps(sb.DepsDir, sb.DenyGlobs, r.extraProtected()); err != nil {
			bad("%v", err)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", runner.ErrInvalidSpec, strings.Join(problems, "; "))
	}

	p.config, p.host = r.containerSettings(spec, p)
	return p, nil
}

// withNetwork puts the plan's container on sandbox network sn, with the
// proxy in its environment.
func (r *Runner) withNetwork(spec runner.Spec, p *plan, sn *sandboxNet) {
	p.net = sn
	p.env = append(append([]string(nil), sandboxEnv...), sn.env()...)
	p.config, p.host = r.containerSettings(spec, p)
}

// extraProtected are deps-protected paths that depend on this machine: the
// engine's socket and the sidecar user's home directory.
func (r *Runner) extraProtected() []string {
	out := []string{"/var/run/docker.sock", "/run/docker.sock"}
	if h := r.cli.DaemonHost(); strings.HasPrefix(h, "unix://") {
		out = append(out, strings.TrimPrefix(h, "unix://"))
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		out = append(out, home)
	}
	return out
}

// containerSettings turns a validated spec into the container's config. Each
// enforcement is one setting here; see the package doc.
func (r *Runner) containerSettings(spec runner.Spec, p *plan) (*container.Config, *container.HostConfig) {
	sb := spec.Sandbox
	labels := map[string]string{}
	if p.poolKey != "" {
		// A warm container serves a run not known yet; the run's ids and
		// labels go to the runner's log instead (see PoolConfig).
		labels[runner.LabelInstance] = r.cfg.Instance
		labels[runner.LabelPool] = p.poolKey
	} else {
		for k, v := range spec.Labels {
			labels[k] = v
		}
		labels[runner.LabelInstance] = r.cfg.Instance
		labels[runner.LabelRunID] = spec.RunID
		labels[runner.LabelQueryID] = spec.QueryID
	}

	argv := p.command()

	cfg := &container.Config{
		User:         fmt.Sprintf("%d:%d", sb.UID, sb.GID),
		Hostname:     "sandbox",
		Env:          append([]string(nil), p.env...),
		Entrypoint:   strslice.StrSlice(argv),
		Cmd:          strslice.StrSlice{},
		WorkingDir:   workspaceDir,
		Image:        p.image,
		Labels:       labels,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
	}

	pids := sb.PIDs
	nproc := r.cfg.HostNproc
	if p.runtime == runner.Runsc {
		nproc = sb.PIDs
		pids = 2*sb.PIDs + r.cfg.RunscPIDsExtra
	}
	fsize := max(sb.WorkspaceBytes, sb.TmpBytes) * 2
	tmpfsOpts := func(size int64, owned bool) string {
		o := "rw,noexec,nosuid,nodev,size=" + strconv.FormatInt(size, 10)
		if owned {
			o += fmt.Sprintf(",mode=0700,uid=%d,gid=%d", sb.UID, sb.GID)
		} else {
			o += ",mode=1777"
		}
		return o
	}
	host := &container.HostConfig{
		NetworkMode:    "none",
		Runtime:        string(p.runtime),
		ReadonlyRootfs: true,
		Tmpfs: map[string]string{
			workspaceDir: tmpfsOpts(sb.WorkspaceBytes, true),
			tmpDir:       tmpfsOpts(sb.TmpBytes, false),
		},
		CapDrop:     strslice.StrSlice{"ALL"},
		SecurityOpt: []string{"no-new-privileges:true"},
		IpcMode:     container.IPCModePrivate,
		PidMode:     "", // private
		UTSMode:     "", // private
		ShmSize:     r.cfg.ShmBytes,
		Init:        nil,                               // PID 1 is the backstop timeout, not docker-init
		LogConfig:   container.LogConfig{Type: "none"}, // output is read through attach only; nothing lands on disk
		Resources: container.Resources{
			NanoCPUs:   int64(sb.CPUs * 1e9),
			Memory:     sb.MemoryBytes,
			MemorySwap: sb.MemoryBytes,
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: r.cfg.Nofile, Hard: r.cfg.Nofile},
				{Name: "nproc", Soft: nproc, Hard: nproc},
				{Name: "fsize", Soft: fsize, Hard: fsize},
			},
		},
	}
	if p.runtime == runner.Runsc { // runner/seccomp says why gVisor gets its own profile
		host.SecurityOpt = append(host.SecurityOpt, seccomp.DockerSecurityOpt())
	}
	if p.net != nil {
		host.NetworkMode = container.NetworkMode(p.net.name)
		host.DNS = []string{unusedDNS}
		host.DNSOptions = []string{"timeout:1", "attempts:1"} // fail in a second, not ten
	}
	if sb.DepsDir != "" {
		host.Mounts = []mount.Mount{{
			Type:        mount.TypeBind,
			Source:      sb.DepsDir,
			Target:      depsDir,
			ReadOnly:    true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate, NonRecursive: true},
		}}
	}
	return cfg, host
}
