package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/strslice"

	"github.com/gatekeeper-ai/gatekeeper/runner"
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
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=" + workspaceDir,
	"LANG=C.UTF-8",
}

// backstopGrace is how long past Spec.Timeout the in-container
// `timeout -s KILL` ends the container by itself, should the sidecar die
// before it could kill it.
const backstopGrace = 10 * time.Second

// minMemoryBytes is the smallest memory limit Docker accepts.
const minMemoryBytes = 6 << 20

// pageSize is the tmpfs allocation unit used to check that the code and
// files fit the workspace.
const pageSize = 4096

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

// launcher is the in-container script: it unpacks the workspace tar from
// standard input into /workspace, then runs its arguments (env -i, sandboxEnv,
// the interpreter and the main file) with standard input from /dev/null.
// It runs under coreutils timeout, so a container whose sidecar died ends
// by itself. The program is started through env -i because the shell adds
// variables of its own (PWD).
const launcher = `tar -x -f - -C ` + workspaceDir + ` --no-same-owner || { echo "gatekeeper: cannot unpack ` + workspaceDir + `" >&2; exit 125; }
exec "$@" </dev/null`

// plan is a validated Spec turned into container settings. It depends on
// the Sandbox, the language and the timeout but not on the code, which
// travels separately as workspace; a warm pool can create containers from
// a plan before the code is known.
type plan struct {
	image     string
	runtime   runner.Runtime
	lang      language
	config    *container.Config
	host      *container.HostConfig
	workspace []byte // tar of the code and files
}

// plan validates spec and builds the container settings. Problems with the
// Spec are returned together, wrapped in runner.ErrInvalidSpec; a network
// policy is refused with runner.ErrNetworkUnsupported.
func (r *Runner) plan(spec runner.Spec) (*plan, error) {
	sb := spec.Sandbox
	if sb.Network.Enabled {
		// The egress proxy will attach an internal per-run network here
		// (see networkMode); until then a network policy cannot be enforced.
		return nil, fmt.Errorf("sandbox network enabled: %w", runner.ErrNetworkUnsupported)
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	p := &plan{image: sb.Image, runtime: sb.Runtime}
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
	if ok {
		ws, need, err := workspaceTar(spec, lang.main)
		if err != nil {
			bad("%v", err)
		} else if sb.WorkspaceBytes > 0 && need > sb.WorkspaceBytes {
			bad("code and files need %d bytes, the workspace holds %d", need, sb.WorkspaceBytes)
		}
		p.workspace = ws
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", runner.ErrInvalidSpec, strings.Join(problems, "; "))
	}

	p.config, p.host = r.containerSettings(spec, p)
	return p, nil
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
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[LabelInstance] = r.cfg.Instance
	labels[LabelRunID] = spec.RunID
	labels[LabelQueryID] = spec.QueryID

	backstop := int64(math.Ceil((spec.Timeout + backstopGrace).Seconds()))
	argv := []string{"/usr/bin/env", "-i"}
	argv = append(argv, sandboxEnv...)
	argv = append(argv, "timeout", "-s", "KILL", strconv.FormatInt(backstop, 10)+"s",
		"/bin/sh", "-c", launcher, "gatekeeper-launcher", "/usr/bin/env", "-i")
	argv = append(argv, sandboxEnv...)
	argv = append(argv, p.lang.interp)
	argv = append(argv, p.lang.args...)
	argv = append(argv, p.lang.main)

	cfg := &container.Config{
		User:         fmt.Sprintf("%d:%d", sb.UID, sb.GID),
		Hostname:     "sandbox",
		Env:          append([]string(nil), sandboxEnv...),
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
	init := true
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
		NetworkMode:    networkMode(spec),
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
		Init:        &init,
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

// networkMode is the container's network. Only "none" exists today; a
// per-run internal network behind the egress proxy goes here.
func networkMode(runner.Spec) container.NetworkMode { return "none" }

// workspaceTar builds the tar the container unpacks into /workspace: the
// code as mainName and every file of spec.Files, with the directories they
// need. need is the tmpfs space the files take, in whole pages.
func workspaceTar(spec runner.Spec, mainName string) (ws []byte, need int64, err error) {
	files := map[string]string{mainName: spec.Code}
	dirs := map[string]bool{}
	var problems []error
	for name, content := range spec.Files {
		clean, err := cleanWorkspacePath(name)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if _, dup := files[clean]; dup {
			problems = append(problems, fmt.Errorf("file %q collides with another file or the main file", name))
			continue
		}
		files[clean] = content
		for d := path.Dir(clean); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if _, clash := files[d]; clash {
			problems = append(problems, fmt.Errorf("file %q is also a directory", d))
		}
	}
	if len(problems) > 0 {
		return nil, 0, errors.Join(problems...)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	uid, gid := spec.Sandbox.UID, spec.Sandbox.GID
	dirNames := make([]string, 0, len(dirs))
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames) // parents before children
	for _, d := range dirNames {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, Uid: uid, Gid: gid, ModTime: now, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, 0, fmt.Errorf("workspace tar: %w", err)
		}
		need += pageSize
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		content := files[n]
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(content)), Uid: uid, Gid: gid, ModTime: now, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, 0, fmt.Errorf("workspace tar: %w", err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			return nil, 0, fmt.Errorf("workspace tar: %w", err)
		}
		need += (int64(len(content)) + pageSize - 1) / pageSize * pageSize
	}
	if err := tw.Close(); err != nil {
		return nil, 0, fmt.Errorf("workspace tar: %w", err)
	}
	return buf.Bytes(), need, nil
}

// cleanWorkspacePath returns name as a clean path relative to /workspace,
// or an error if it is empty, absolute, or would leave /workspace.
func cleanWorkspacePath(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || strings.Contains(name, "\\") {
		return "", fmt.Errorf("file name %q is not allowed", name)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("file %q is absolute; names are relative to %s", name, workspaceDir)
	}
	clean := path.Clean(name)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("file %q leaves %s", name, workspaceDir)
	}
	return clean, nil
}
