package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EffectiveSandbox is the part of a query's effective policy (the
// query_opened frame's effective_policy: sizes in bytes, durations in ms)
// the harness reads.
type EffectiveSandbox struct {
	Sandbox struct {
		FS struct {
			Workspace struct {
				Size int64 `json:"size"`
			} `json:"workspace"`
			Tmp struct {
				Size int64 `json:"size"`
			} `json:"tmp"`
		} `json:"fs"`
		Proc struct {
			CPUs    float64 `json:"cpus"`
			Memory  int64   `json:"memory"`
			PIDs    int64   `json:"pids"`
			Timeout int64   `json:"timeout"`
			Runtime string  `json:"runtime"`
			User    int     `json:"user"`
		} `json:"proc"`
		Output struct {
			MaxBytes int64 `json:"max_bytes"`
		} `json:"output"`
	} `json:"sandbox"`
}

// Container is the part of `docker inspect` that gatekeeper's runner sets:
// everything that decides what runs and under which limits.
type Container struct {
	Config struct {
		User, Hostname, WorkingDir, Image string
		Env                               []string
		Entrypoint, Cmd                   []string
		AttachStdin, OpenStdin, StdinOnce bool
	}
	HostConfig struct {
		NetworkMode, Runtime, IpcMode, PidMode, UTSMode string
		ReadonlyRootfs, Privileged                      bool
		Tmpfs                                           map[string]string
		CapDrop, CapAdd, SecurityOpt, Binds, DNS        []string
		ShmSize                                         int64
		Init                                            *bool
		LogConfig                                       struct{ Type string }
		NanoCpus, Memory, MemorySwap                    int64
		PidsLimit                                       *int64
		Ulimits                                         []struct {
			Name       string
			Soft, Hard int64
		}
		Mounts []json.RawMessage
	}
}

// InspectContainers returns `docker inspect` of the given containers.
func InspectContainers(ctx context.Context, docker string, ids ...string) ([]Container, error) {
	out, err := exec.CommandContext(ctx, docker, append([]string{"inspect"}, ids...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("docker inspect: %w", err)
	}
	var cs []Container
	if err := json.Unmarshal(out, &cs); err != nil || len(cs) != len(ids) {
		return nil, fmt.Errorf("docker inspect: %d containers for %d ids (%v)", len(cs), len(ids), err)
	}
	return cs, nil
}

// argv is the container's command line: what the entrypoint and command
// have in common however they are split.
func (c Container) argv() []string {
	return append(append([]string{}, c.Config.Entrypoint...), c.Config.Cmd...)
}

// DockerRunArgs returns the arguments of `docker run --rm -i` that create a
// container with every setting of c, a container gatekeeper's runner made:
// the same image, command line, user, environment, mounts, limits, runtime
// and security options. Labels are not copied: the container gets
// gatekeeper.instance=instance. Settings it cannot express on the command
// line are an error; CheckDockerFlags verifies the result against c. A
// seccomp profile given inline (as runner/docker gives runsc containers
// theirs) is written to a file in dir, which the CLI reads and compacts.
func DockerRunArgs(c Container, instance, dir string) ([]string, error) {
	h := c.HostConfig
	if len(h.Mounts) > 0 || len(h.Binds) > 0 || len(h.DNS) > 0 || len(h.CapAdd) > 0 || h.Privileged {
		return nil, errors.New("the sidecar's container has mounts, DNS settings or added capabilities this harness does not replicate")
	}
	argv := c.argv()
	if len(argv) == 0 {
		return nil, errors.New("the sidecar's container has no command")
	}
	args := []string{"run", "--rm", "-i",
		"--label", "gatekeeper.instance=" + instance,
		"--user", c.Config.User,
		"--hostname", c.Config.Hostname,
		"--workdir", c.Config.WorkingDir,
		"--network", h.NetworkMode,
		"--runtime", h.Runtime,
		"--log-driver", h.LogConfig.Type,
		"--shm-size", strconv.FormatInt(h.ShmSize, 10),
		"--memory", strconv.FormatInt(h.Memory, 10),
		"--memory-swap", strconv.FormatInt(h.MemorySwap, 10),
		"--cpus", strconv.FormatFloat(float64(h.NanoCpus)/1e9, 'f', -1, 64),
	}
	opt := func(flag, v string) {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	opt("--ipc", h.IpcMode)
	opt("--pid", h.PidMode)
	opt("--uts", h.UTSMode)
	if h.ReadonlyRootfs {
		args = append(args, "--read-only")
	}
	if h.Init != nil && *h.Init {
		args = append(args, "--init")
	}
	if h.PidsLimit != nil {
		args = append(args, "--pids-limit", strconv.FormatInt(*h.PidsLimit, 10))
	}
	for _, d := range slices.Sorted(maps.Keys(h.Tmpfs)) {
		args = append(args, "--tmpfs", d+":"+h.Tmpfs[d])
	}
	for _, cap := range h.CapDrop {
		args = append(args, "--cap-drop", cap)
	}
	for _, s := range h.SecurityOpt {
		if profile, ok := strings.CutPrefix(s, "seccomp="); ok && strings.HasPrefix(profile, "{") {
			sum := sha256.Sum256([]byte(profile))
			file := filepath.Join(dir, "seccomp-"+hex.EncodeToString(sum[:6])+".json")
			if err := os.WriteFile(file, []byte(profile), 0o644); err != nil {
				return nil, fmt.Errorf("the container's seccomp profile: %w", err)
			}
			s = "seccomp=" + file
		}
		args = append(args, "--security-opt", s)
	}
	for _, u := range h.Ulimits {
		args = append(args, "--ulimit", fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
	}
	for _, e := range c.Config.Env {
		args = append(args, "--env", e)
	}
	// The CLI's --entrypoint takes one word; the rest follows the image.
	args = append(args, "--entrypoint", argv[0], c.Config.Image)
	return append(args, argv[1:]...), nil
}

// backstopGrace is runner/docker's: the in-container `timeout -s KILL`
// is the run's timeout plus this.
const backstopGrace = 10 * time.Second

// RunTag is the end-mark tag RunInput gives `docker run`; the runner
// draws a random one per run.
const RunTag = "0123456789abcdef"

// EndMark is what the launcher writes to each stream after a program
// exited with code, when it writes end marks.
func EndMark(code int) string { return fmt.Sprintf("\x1egatekeeper-end %s %03d\x1e", RunTag, code) }

// RunInput is what the runner writes to a container's standard input for
// a Python run of code: the workspace tar with main.py owned by uid, after
// the header line when the container's launcher waits for one (the
// launcher that lets a warm container wait for its code; the earlier
// launcher read the tar alone): "<backstop seconds> python", plus the
// end-mark tag when the launcher writes end marks, plus "0" (no snapshot
// of /workspace) when it can send one back.
func RunInput(c Container, code string, timeout time.Duration, uid int) []byte {
	var buf bytes.Buffer
	argv := strings.Join(c.argv(), " ")
	if strings.Contains(argv, "read -r h") {
		fmt.Fprintf(&buf, "%d python", int64(math.Ceil((timeout + backstopGrace).Seconds())))
		if strings.Contains(argv, "gatekeeper-end") {
			buf.WriteString(" " + RunTag)
		}
		if strings.Contains(argv, "gatekeeper-snap") {
			buf.WriteString(" 0") // no snapshot of /workspace: docker run keeps nothing either
		}
		buf.WriteString("\n")
	}
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: "main.py", Mode: 0o644, Size: int64(len(code)), Uid: uid, Gid: uid, ModTime: time.Now(), Format: tar.FormatPAX}
	_ = tw.WriteHeader(hdr) // writes to a bytes.Buffer cannot fail
	_, _ = tw.Write([]byte(code))
	_ = tw.Close()
	return buf.Bytes()
}

// DockerRun runs `docker run` with args and stdin, and returns its wall
// time and standard output.
func DockerRun(ctx context.Context, docker string, args []string, stdin []byte) (time.Duration, string, error) {
	cmd := exec.CommandContext(ctx, docker, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return d, out.String(), fmt.Errorf("docker run: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	return d, out.String(), nil
}

// settings flattens a container into named settings.
func (c Container) settings() map[string]any {
	h := c.HostConfig
	ulimits := make([]string, len(h.Ulimits)) // the CLI orders them at random
	for i, u := range h.Ulimits {
		ulimits[i] = fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard)
	}
	slices.Sort(ulimits)
	env := slices.Sorted(slices.Values(c.Config.Env)) // the CLI's order varies; the program's is set by env -i
	return map[string]any{
		"User": c.Config.User, "Hostname": c.Config.Hostname, "WorkingDir": c.Config.WorkingDir, "Image": c.Config.Image,
		"Env": env, "argv": c.argv(), "AttachStdin": c.Config.AttachStdin, "OpenStdin": c.Config.OpenStdin, "StdinOnce": c.Config.StdinOnce,
		"NetworkMode": h.NetworkMode, "Runtime": h.Runtime, "IpcMode": h.IpcMode, "PidMode": h.PidMode, "UTSMode": h.UTSMode,
		"ReadonlyRootfs": h.ReadonlyRootfs, "Tmpfs": h.Tmpfs, "CapDrop": h.CapDrop, "CapAdd": h.CapAdd, "SecurityOpt": h.SecurityOpt,
		"ShmSize": h.ShmSize, "Init": h.Init != nil && *h.Init, "LogConfig.Type": h.LogConfig.Type,
		"NanoCpus": h.NanoCpus, "Memory": h.Memory, "MemorySwap": h.MemorySwap, "PidsLimit": deref(h.PidsLimit),
		"Ulimits": ulimits, "Privileged": h.Privileged, "Binds": h.Binds, "DNS": h.DNS, "Mounts": len(h.Mounts),
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// FlagsCheck is the outcome of comparing the sidecar's container with the
// one `docker run` makes from DockerRunArgs.
type FlagsCheck struct {
	Runtime  string   `json:"runtime"`
	Compared int      `json:"settings_compared"`
	Diffs    []string `json:"diffs"`
}

// CheckDockerFlags creates (without starting) a container with runArgs
// (the arguments of `docker run`, --rm dropped) and compares its settings
// with sidecar's.
func CheckDockerFlags(ctx context.Context, docker string, sidecar Container, runArgs []string) (FlagsCheck, error) {
	var fc FlagsCheck
	createArgs := []string{"create"}
	for _, a := range runArgs[1:] {
		if a != "--rm" {
			createArgs = append(createArgs, a)
		}
	}
	out, err := exec.CommandContext(ctx, docker, createArgs...).CombinedOutput()
	if err != nil {
		return fc, fmt.Errorf("docker create: %w: %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	defer exec.Command(docker, "rm", "-f", id).Run() //nolint:errcheck // best effort
	ours, err := InspectContainers(ctx, docker, id)
	if err != nil {
		return fc, err
	}
	a, b := sidecar.settings(), ours[0].settings()
	for _, k := range slices.Sorted(maps.Keys(a)) {
		fc.Compared++
		if !reflect.DeepEqual(normalize(a[k]), normalize(b[k])) {
			fc.Diffs = append(fc.Diffs, fmt.Sprintf("%s: sidecar %v, docker run %v", k, a[k], b[k]))
		}
	}
	return fc, nil
}

// normalize treats nil and empty slices and maps alike.
func normalize(v any) any {
	rv := reflect.ValueOf(v)
	if (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Map) && rv.Len() == 0 {
		return nil
	}
	return v
}
