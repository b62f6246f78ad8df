package docker

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/strslice"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// Paths inside the container.
const (
	workspaceDir = "/workspace"
	depsDir      = "/deps"
	tmpDir       = "/tmp"
)

// sandboxEnv is the complete environment of the program; nothing of the
// sidecar's environment reaches the container.
var sandboxEnv = []string{
	"PATH=" + strings.Join(imagePath, ":"),
	"HOME=" + workspaceDir,
	"LANG=C.UTF-8",
}

// backstopGrace is how long past Spec.Timeout the in-container
// `timeout -s KILL` ends the program by itself, should the sidecar die
// before it could kill it.
const backstopGrace = 10 * time.Second

// snapshotGrace is how long, after the program ended, the container may
// take to send its snapshot of /workspace back; past it the sidecar ends
// the container and the workspace is not saved. It is added to the life
// (PID 1's timeout) of a container whose run asks for a snapshot, and of
// every warm container.
const snapshotGrace = 30 * time.Second

// coldMargin is how long past the run's backstop (timeout plus
// backstopGrace) the container's PID 1 ends a container created for one
// run, counted from its start: the code is sent right after the start.
const coldMargin = 2 * time.Second

// minMemoryBytes is the smallest memory limit Docker accepts.
const minMemoryBytes = 6 << 20

// language is how a runner.Language is started: the interpreter and its
// arguments, and the main file's name in /workspace.
type language struct {
	interp string   // looked up in the image's PATH
	args   []string // before the main file
	main   string
}

var languages = map[runner.Language]language{
	runner.Python: {interp: "python3", args: []string{"-u"}, main: "main.py"},
	runner.Shell:  {interp: "sh", main: "main.sh"},
	runner.Node:   {interp: "node", main: "main.js"},
}

// The container's command is coreutils `timeout -s KILL <life>` running
// the launcher: timeout is the container's PID 1, and the kernel drops
// SIGSTOP and SIGKILL sent to a PID namespace's init from inside it, so the
// program cannot stop this outer bound on the container's life (it can
// stop the launcher's own, per-run timeout, which runs as its uid). When
// PID 1 exits, the kernel kills every process of the container. Being no
// init system, it does not reap orphaned processes: their zombies count
// towards the pids limit until the run ends.
//
// launcher is the in-container script. It waits, at most $1, for a header
// line on standard input ("<seconds> <language> <tag> <snapshot>"),
// unpacks the workspace tar that follows into /workspace (exiting with
// 125, and no end marks, when it cannot), then, under coreutils `timeout
// -s KILL <seconds>`, runs the rest of its arguments (env -i and the
// program's environment) with the language's interpreter and main file,
// standard input from /dev/null. When the program has exited it
// ends every other process of the sandbox (kill -9 -1 reaches all of them
// but PID 1 and the launcher itself, all running as the sandbox user) and
// waits, briefly, until none is left but zombies, so that nothing writes
// to the streams or the workspace after; then it writes the end mark with
// the program's exit status to both streams (see endMarks). With a
// snapshot asked for (<snapshot> 1) it then writes, on standard output, a
// tar of /workspace and the snapshot mark "\x1egatekeeper-snap <tag>
// <tar's exit status>\x1e" (see snapshot.go), having first given the
// owner read and write access to everything there (the program may have
// taken it away). It exits with the
// program's status. So a container waits for its code without a clock
// running (a warm container of the pool waits this way), the run's
// backstop starts when the code arrives, and a container whose sidecar
// died ends by itself either way. The header is read byte by byte (the
// shell's read), so the tar that follows stays on standard input; the tag
// stays in the launcher's own variables, never on a command line or in an
// environment the program can read. The program is started through env -i
// because the shell adds variables of its own (PWD).
var launcher = func() string {
	var cases strings.Builder
	names := make([]string, 0, len(languages))
	for l := range languages {
		names = append(names, string(l))
	}
	sort.Strings(names)
	for _, n := range names {
		l := languages[runner.Language(n)]
		fmt.Fprintf(&cases, "%s) set -- \"$@\" %s;;\n", n, strings.Join(append(append([]string{l.interp}, l.args...), l.main), " "))
	}
	return `h=$(timeout -s KILL "$1" /bin/sh -c 'IFS= read -r h && printf %s "$h"') || { echo "gatekeeper: no run arrived" >&2; exit 125; }
shift
secs=${h%% *}
h=${h#* }
lang=${h%% *}
h=${h#* }
tag=${h%% *}
snap=${h#* }
case $secs in ''|*[!0-9]*) echo "gatekeeper: bad run header" >&2; exit 125;; esac
case $tag in ''|*[!0-9a-f]*) echo "gatekeeper: bad run header" >&2; exit 125;; esac
case $snap in 0|1) ;; *) echo "gatekeeper: bad run header" >&2; exit 125;; esac
case $lang in
` + cases.String() + `*) echo "gatekeeper: bad run header" >&2; exit 125;;
esac
tar -x -f - -C ` + workspaceDir + ` --no-same-owner || { echo "gatekeeper: cannot unpack ` + workspaceDir + `" >&2; exit 125; }
timeout -s KILL "${secs}s" "$@" </dev/null
c=$?
kill -9 -1 2>/dev/null
n=0
while [ "$n" -lt 200 ]; do
  left=
  for f in /proc/[0-9]*/stat; do
    p=${f#/proc/}
    p=${p%/stat}
    if [ "$p" = 1 ] || [ "$p" = "$$" ]; then continue; fi
    read -r l 2>/dev/null <"$f" || continue
    l=${l##*) }
    case ${l%% *} in Z|X|x) ;; *) left=1; break;; esac
  done
  [ -z "$left" ] && break
  n=$((n+1))
  sleep 0.01
done
printf '\036gatekeeper-end %s %03d\036' "$tag" "$c"
printf '\036gatekeeper-end %s %03d\036' "$tag" "$c" >&2
if [ "$snap" = 1 ]; then
  chmod -R u+rwX ` + workspaceDir + ` 2>/dev/null
  tar -c -f - -C ` + workspaceDir + ` --hard-dereference . 2>/dev/null
  printf '\036gatekeeper-snap %s %03d\036' "$tag" "$?"
fi
exit "$c"`
}()

// header is the line the launcher waits for: the backstop in whole
// seconds, the language, the run's tag for its end marks and whether to
// send a snapshot of /workspace back.
func header(timeout time.Duration, lang runner.Language, tag string, snapshot bool) []byte {
	backstop := int64(math.Ceil((timeout + backstopGrace).Seconds()))
	snap := 0
	if snapshot {
		snap = 1
	}
	return []byte(fmt.Sprintf("%d %s %s %d\n", backstop, lang, tag, snap))
}

// wantsSnapshot reports whether a run of spec sends /workspace back: to
// save it, or to return its files.
func wantsSnapshot(spec runner.Spec) bool {
	return spec.Workspace != nil || spec.Sandbox.MaxFiles > 0
}

// plan is a validated Spec turned into container settings. The settings
// depend on the Sandbox (and, for a networked one, its network) but not on
// the language, the timeout or the code, which travel on standard input
// (input); a warm pool creates containers from a plan before any of those
// is known.
type plan struct {
	image   string
	runtime runner.Runtime
	lang    language
	config  *container.Config
	host    *container.HostConfig
	files   map[string]string // the code and files, by clean path (workspace.Files)
	need    int64             // the tmpfs space they take
	tag     string            // the run's tag for its end marks (see endMarks)
	saved   io.ReadCloser     // the saved workspace the run starts from; nil: empty (openSaved)
	env     []string          // the program's whole environment
	net     *sandboxNet       // nil: no network
	poolKey string            // set for a warm container: its labels are the pool's
	wait    time.Duration     // the longest the container waits for its code
	life    time.Duration     // the longest the container lives (PID 1's timeout)
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
	lang, ok := languages[spec.Language]
	if !ok {
		bad("unknown language %q", spec.Language)
	}
	p.lang = lang
	if spec.Timeout <= 0 {
		bad("timeout %v is not positive", spec.Timeout)
	}
	if sb.UID == 0 {
		bad("uid 0 (root) is refused")
	} else if sb.UID < 0 {
		bad("uid %d is negative", sb.UID)
	}
	if sb.GID == 0 {
		bad("gid 0 (root) is refused")
	} else if sb.GID < 0 {
		bad("gid %d is negative", sb.GID)
	}
	if !(sb.CPUs > 0) || sb.CPUs > 1024 {
		bad("cpus %v is out of range", sb.CPUs)
	}
	if sb.MemoryBytes < minMemoryBytes {
		bad("memory %d bytes is below the minimum of %d", sb.MemoryBytes, minMemoryBytes)
	}
	if sb.PIDs <= 0 {
		bad("pids %d is not positive", sb.PIDs)
	}
	if sb.WorkspaceBytes <= 0 {
		bad("workspace size %d is not positive", sb.WorkspaceBytes)
	}
	if sb.TmpBytes <= 0 {
		bad("tmp size %d is not positive", sb.TmpBytes)
	}
	if sb.MaxOutputBytes <= 0 {
		bad("max output %d is not positive", sb.MaxOutputBytes)
	}
	if sb.DepsDir != "" {
		if err := checkDeps(sb.DepsDir, sb.DenyGlobs, r.extraProtected()); err != nil {
			bad("%v", err)
		}
	}
	if sb.MaxFiles < 0 || sb.MaxFilesBytes < 0 {
		bad("max files %d, max files bytes %d: neither may be negative", sb.MaxFiles, sb.MaxFilesBytes)
	}
	if _, err := workspace.CleanOutputs(spec.Outputs); err != nil {
		bad("%v", err)
	}
	if ok {
		files, need, err := workspace.Files(lang.main, spec.Code, spec.Files)
		if err != nil {
			bad("%v", err)
		} else if sb.WorkspaceBytes > 0 && need > sb.WorkspaceBytes {
			bad("code and files need %d bytes, the workspace holds %d", need, sb.WorkspaceBytes)
		}
		p.files, p.need, p.tag = files, need, newRunTag()
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
		labels[LabelInstance] = r.cfg.Instance
		labels[LabelPool] = p.poolKey
	} else {
		for k, v := range spec.Labels {
			labels[k] = v
		}
		labels[LabelInstance] = r.cfg.Instance
		labels[LabelRunID] = spec.RunID
		labels[LabelQueryID] = spec.QueryID
	}

	seconds := func(d time.Duration) string { return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10) + "s" }
	argv := []string{"/usr/bin/env", "-i"}
	argv = append(argv, sandboxEnv...)
	argv = append(argv, "timeout", "-s", "KILL", seconds(p.life), // PID 1: env and timeout exec
		"/bin/sh", "-c", launcher, "gatekeeper-launcher", seconds(p.wait), "/usr/bin/env", "-i")
	argv = append(argv, p.env...)

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
