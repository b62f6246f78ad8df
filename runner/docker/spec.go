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
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
	"github.com/gatekeeper-ai/gatekeeper/runner/seccomp"
)

// depsDir is where Sandbox.DepsDir is mounted.
const depsDir = "/deps"

// coldMargin is how long past the run's backstop (timeout plus
// launch.BackstopGrace) the container's PID 1 ends a container created for
// one run, counted from its start: the code is sent right after the start.
const coldMargin = 2 * time.Second

// minMemoryBytes is the smallest memory limit Docker accepts.
const minMemoryBytes = 6 << 20

// Validate refuses a network policy on a Runner without an egress proxy
// (runner.ErrNetworkUnsupported) and checks the deps directory.
func (r *platform) Validate(spec runner.Spec, _ *sandbox.Plan) ([]string, error) {
	sb := spec.Sandbox
	if sb.Network.Enabled && r.cfg.Egress == nil {
		return nil, fmt.Errorf("sandbox network enabled, but the runner has no egress proxy: %w", runner.ErrNetworkUnsupported)
	}
	if sb.DepsDir != "" {
		if err := checkDeps(sb.DepsDir, sb.DenyGlobs, r.extraProtected()); err != nil {
			return []string{err.Error()}, nil
		}
	}
	return nil, nil
}

// extraProtected are deps-protected paths that depend on this machine: the
// engine's socket and the sidecar user's home directory.
func (r *platform) extraProtected() []string {
	out := []string{"/var/run/docker.sock", "/run/docker.sock"}
	if h := r.cli.DaemonHost(); strings.HasPrefix(h, "unix://") {
		out = append(out, strings.TrimPrefix(h, "unix://"))
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		out = append(out, home)
	}
	return out
}

// containerSettings turns a plan into the container's config, on sandbox
// network sn (nil: none). Each enforcement is one setting here; see the
// package doc.
func (r *platform) containerSettings(spec runner.Spec, p *sandbox.Plan, sn *sandboxNet) (*container.Config, *container.HostConfig) {
	sb := p.Sandbox
	env := launch.Env()
	if sn != nil {
		env = append(env, p.NetworkEnv(sn.proxyURL())...)
	}
	labels := map[string]string{}
	if p.PoolKey != "" {
		// A warm container serves a run not known yet; the run's ids and
		// labels go to the runner's log instead (see PoolConfig).
		labels[runner.LabelInstance] = r.cfg.Instance
		labels[runner.LabelPool] = p.PoolKey
	} else {
		for k, v := range spec.Labels {
			labels[k] = v
		}
		labels[runner.LabelInstance] = r.cfg.Instance
		labels[runner.LabelRunID] = spec.RunID
		labels[runner.LabelQueryID] = spec.QueryID
	}

	argv := p.Command(env)

	cfg := &container.Config{
		User:         fmt.Sprintf("%d:%d", sb.UID, sb.GID),
		Hostname:     "sandbox",
		Env:          env,
		Entrypoint:   strslice.StrSlice(argv),
		Cmd:          strslice.StrSlice{},
		WorkingDir:   launch.WorkspaceDir,
		Image:        p.Image,
		Labels:       labels,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
	}

	pids := sb.PIDs
	nproc := r.cfg.HostNproc
	if p.Runtime == runner.Runsc {
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
		Runtime:        string(p.Runtime),
		ReadonlyRootfs: true,
		Tmpfs: map[string]string{
			launch.WorkspaceDir: tmpfsOpts(sb.WorkspaceBytes, true),
			launch.TmpDir:       tmpfsOpts(sb.TmpBytes, false),
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
	if p.Runtime == runner.Runsc { // runner/seccomp says why gVisor gets its own profile
		host.SecurityOpt = append(host.SecurityOpt, seccomp.DockerSecurityOpt())
	}
	if sn != nil {
		host.NetworkMode = container.NetworkMode(sn.name)
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
