package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/bench"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Engine is a Docker engine the soak starts for itself, so that it can
// restart and freeze it without touching anyone else's containers: its
// own data root, exec root, pid file and API socket, in a network
// namespace of its own. Its bridges and iptables rules, and the firewall
// rules the sidecar (started in the same namespace) installs for its
// sandbox networks, live in that namespace and never touch the host's.
// The machine's own engine is only read from: the sandbox image is copied
// out of it (save and load through the API).
type Engine struct {
	// Name names the network namespace (/run/netns/Name) and prefixes the
	// directories.
	Name string
	// Socket is the engine's API socket.
	Socket string
	log    *slog.Logger
	argv   []string
	logf   string
	dirs   []string // removed by Close, after unmounting what is left in them
	proc   *bench.Process
	cli    *client.Client
}

// StartEngine creates the network namespace and starts dockerd in it with
// runsc registered (when installed). state holds the data root (it must
// not be on overlayfs); run holds the exec root and socket, and must be a
// short path (Unix socket names are limited).
func StartEngine(ctx context.Context, name, state, run string, log *slog.Logger) (*Engine, error) {
	e := &Engine{Name: name, log: log}
	data, execRoot := filepath.Join(state, name), filepath.Join(run, name)
	e.dirs = []string{data, execRoot}
	for _, d := range e.dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	e.Socket = filepath.Join(execRoot, "docker.sock")
	e.logf = filepath.Join(data, "dockerd.log")
	cfg := map[string]any{}
	if runsc, err := exec.LookPath("runsc"); err == nil {
		cfg["runtimes"] = map[string]any{"runsc": map[string]string{"path": runsc}}
	}
	cfgFile := filepath.Join(data, "daemon.json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		return nil, err
	}
	if out, err := runCmd(ctx, "ip", "netns", "add", name); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %w: %s", name, err, out)
	}
	if out, err := runCmd(ctx, "ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		e.Close()
		return nil, fmt.Errorf("loopback up in %s: %w: %s", name, err, out)
	}
	e.argv = []string{"nsenter", "--net=" + e.netns(), "--", "dockerd",
		"--data-root", filepath.Join(data, "root"), "--exec-root", filepath.Join(execRoot, "x"),
		"--pidfile", filepath.Join(execRoot, "docker.pid"), "-H", "unix://" + e.Socket,
		"--config-file", cfgFile, "--log-level", "warn"}
	if err := e.Start(ctx); err != nil {
		e.Close()
		return nil, err
	}
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+e.Socket), client.WithAPIVersionNegotiation())
	if err != nil {
		e.Close()
		return nil, err
	}
	e.cli = cli
	return e, nil
}

func (e *Engine) netns() string { return "/run/netns/" + e.Name }

// Host is the engine's address, for DOCKER_HOST.
func (e *Engine) Host() string { return "unix://" + e.Socket }

// Client is a client of the engine.
func (e *Engine) Client() *client.Client { return e.cli }

// InNetns prefixes argv so that it runs in the engine's network namespace.
func (e *Engine) InNetns(argv ...string) []string {
	return append([]string{"nsenter", "--net=" + e.netns(), "--"}, argv...)
}

// PID is dockerd's process id.
func (e *Engine) PID() int { return e.proc.PID() }

// Start starts dockerd and waits until it answers.
func (e *Engine) Start(ctx context.Context) error {
	p, err := bench.Start(ctx, "dockerd ("+e.Name+")", e.Socket, "/_ping", e.logf, e.argv, nil)
	if err != nil {
		return err
	}
	e.proc = p
	return nil
}

// Stop stops dockerd (SIGTERM; it stops its containers) and waits for it,
// killing it after within.
func (e *Engine) Stop(within time.Duration) error {
	if e.proc == nil {
		return nil
	}
	_ = e.proc.Signal(syscall.SIGTERM)
	select {
	case <-e.proc.Done():
	case <-time.After(within):
		_ = e.proc.Signal(syscall.SIGKILL)
		<-e.proc.Done()
		return fmt.Errorf("dockerd did not stop within %s; killed", within)
	}
	return nil
}

// Freeze stops dockerd with SIGSTOP; Thaw resumes it.
func (e *Engine) Freeze() error { return e.proc.Signal(syscall.SIGSTOP) }

// Thaw resumes a frozen dockerd with SIGCONT.
func (e *Engine) Thaw() error { return e.proc.Signal(syscall.SIGCONT) }

// Close stops dockerd, unmounts what it left mounted, removes its
// directories and the network namespace.
func (e *Engine) Close() {
	if e.proc != nil {
		_ = e.proc.Signal(syscall.SIGCONT)
		if err := e.Stop(60 * time.Second); err != nil {
			e.log.Warn("stop the soak engine", "err", err)
		}
	}
	if e.cli != nil {
		e.cli.Close()
	}
	for _, d := range e.dirs {
		unmountUnder(d, e.log)
		if err := os.RemoveAll(d); err != nil {
			e.log.Warn("remove the soak engine's directory", "dir", d, "err", err)
		}
	}
	if out, err := runCmd(context.Background(), "ip", "netns", "del", e.Name); err != nil {
		e.log.Warn("remove the soak engine's network namespace", "netns", e.Name, "err", err, "output", out)
	}
}

// unmountUnder unmounts every mount point below dir, deepest first.
func unmountUnder(dir string, log *slog.Logger) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			points = append(points, fields[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil {
			log.Warn("unmount", "path", points[i], "err", err)
		}
	}
}

// LoadImage copies image ref from the engine of from (the machine's own)
// into this one, unless it is there already.
func (e *Engine) LoadImage(ctx context.Context, from *client.Client, ref string) error {
	if _, err := e.cli.ImageInspect(ctx, ref); err == nil {
		return nil
	}
	rc, err := from.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("save %s from the machine's engine: %w", ref, err)
	}
	defer rc.Close()
	resp, err := e.cli.ImageLoad(ctx, rc, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("load %s into the soak engine: %w", ref, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if _, err := e.cli.ImageInspect(ctx, ref); err != nil {
		return fmt.Errorf("%s not in the soak engine after loading it: %w", ref, err)
	}
	return nil
}

// Leftovers is what a sidecar instance has in the engine and the
// namespace's firewall.
type Leftovers struct {
	Containers []string // ids
	Warm       int      // of Containers, the warm pool's
	Networks   []string // ids
	Rules      int      // iptables and ip6tables rules carrying the instance's comment
	RuleIDs    []string // the sandbox network ids those rules name
}

// Total is everything counted.
func (l Leftovers) Total() int { return len(l.Containers) + len(l.Networks) + l.Rules }

// Leftovers lists what instance has in the engine now.
func (e *Engine) Leftovers(ctx context.Context, instance string) (Leftovers, error) {
	var l Leftovers
	label := filters.NewArgs(filters.Arg("label", runner.LabelInstance+"="+instance))
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: label})
	if err != nil {
		return l, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs {
		l.Containers = append(l.Containers, c.ID)
		if c.Labels[runner.LabelPool] != "" {
			l.Warm++
		}
	}
	ns, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: label})
	if err != nil {
		return l, fmt.Errorf("list networks: %w", err)
	}
	for _, n := range ns {
		l.Networks = append(l.Networks, n.ID)
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := runCmd(ctx, e.InNetns(save)...)
		if err != nil {
			return l, fmt.Errorf("%s in %s: %w: %s", save, e.Name, err, out)
		}
		mark := "gatekeeper:" + instance + ":"
		l.Rules += strings.Count(out, mark)
		for _, line := range strings.Split(out, "\n") {
			if _, rest, ok := strings.Cut(line, mark); ok {
				id, _, _ := strings.Cut(strings.Trim(rest, `"`), `"`)
				id, _, _ = strings.Cut(id, " ")
				if !slices.Contains(l.RuleIDs, id) {
					l.RuleIDs = append(l.RuleIDs, id)
				}
			}
		}
	}
	return l, nil
}

// Exists reports which of the container and network ids still exist.
func (e *Engine) Exists(ctx context.Context, containers, networks []string) ([]string, error) {
	var left []string
	for _, id := range containers {
		_, err := e.cli.ContainerInspect(ctx, id)
		switch {
		case err == nil:
			left = append(left, "container "+id[:12])
		case !isNotFound(err):
			return left, err
		}
	}
	for _, id := range networks {
		_, err := e.cli.NetworkInspect(ctx, id, network.InspectOptions{})
		switch {
		case err == nil:
			left = append(left, "network "+id[:12])
		case !isNotFound(err):
			return left, err
		}
	}
	return left, nil
}

// AllContainers counts every container in the engine, whoever made it.
func (e *Engine) AllContainers(ctx context.Context) (int, error) {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true})
	return len(cs), err
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// runCmd runs a command and returns its combined output.
func runCmd(ctx context.Context, argv ...string) (string, error) {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}
