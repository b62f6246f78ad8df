package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SeccompResult is row 8: what runner/seccomp's profile, applied inside
// gVisor (runsc --oci-seccomp), costs. Each pair runs the sidecar's own
// runsc container settings through `docker run`, once as they are (with
// the profile) and once with `--security-opt seccomp=unconfined` in its
// place (no profile, so runsc applies none): the same runtime, so the
// difference is the filter alone.
type SeccompResult struct {
	// Cold is `docker run --rm` of a hello world, end to end.
	Cold    Summary `json:"cold"`
	ColdOff Summary `json:"cold_unconfined"`
	// Started is the same hello world in a container already started and
	// waiting for its run, as a warm pool's is: from the code sent to the
	// end mark (the interpreter is not preloaded).
	Started    Summary `json:"started"`
	StartedOff Summary `json:"started_unconfined"`
	// Loop is a program making LoopCalls getppid system calls, in a
	// started container: where a per-call cost would show.
	Loop      Summary `json:"loop"`
	LoopOff   Summary `json:"loop_unconfined"`
	LoopCalls int     `json:"loop_calls"`
	// Seccomp is the Seccomp field of /proc/self/status in each variant,
	// checked before measuring: "2" with the profile, "0" without.
	Seccomp    map[string]string `json:"seccomp_status"`
	DockerArgs []string          `json:"docker_run_args"`
}

const seccompLoopCalls = 100000

// seccompLoopCode makes seccompLoopCalls system calls that gVisor serves
// itself, then prints what helloCode prints.
var seccompLoopCode = fmt.Sprintf("import os\nfor _ in range(%d):\n    os.getppid()\nprint(\"hello, world\")", seccompLoopCalls)

// unconfined returns args with the seccomp profile taken away: a
// seccomp= security option becomes seccomp=unconfined, or one is added
// before the entrypoint.
func unconfined(args []string) []string {
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		if out[i-1] == "--security-opt" && strings.HasPrefix(out[i], "seccomp=") {
			out[i] = "seccomp=unconfined"
			return out
		}
	}
	i := slices.Index(out, "--entrypoint")
	return slices.Insert(out, i, "--security-opt", "seccomp=unconfined")
}

// seccomp measures row 8 under runsc.
func (e *env) seccomp(ctx context.Context) error {
	const rt, name = "runsc", "runsc-seccomp"
	_, cc, cq, _, err := e.sidecarQuery(ctx, rt, SidecarOptions{Name: "cold-" + name, Args: []string{"--pool-size", "0"}})
	if err != nil {
		return err
	}
	sidecarC, err := e.catchContainer(ctx, cc, cq, name)
	if err != nil {
		return fmt.Errorf("catch the sidecar's container: %w", err)
	}
	if sidecarC.HostConfig.Runtime != rt {
		return fmt.Errorf("the sidecar's container runs under %q, not %s", sidecarC.HostConfig.Runtime, rt)
	}
	on, err := DockerRunArgs(sidecarC, "bench-"+name, e.tmp)
	if err != nil {
		return err
	}
	off := unconfined(on)
	sr := SeccompResult{LoopCalls: seccompLoopCalls, Seccomp: map[string]string{}, DockerArgs: on}
	timeout := 60 * time.Second
	uid, err := strconv.Atoi(strings.Split(sidecarC.Config.User, ":")[0])
	if err != nil {
		return fmt.Errorf("the sidecar's container user %q: %w", sidecarC.Config.User, err)
	}
	input := func(code string) []byte { return RunInput(sidecarC, code, timeout, uid) }
	status := `print(open("/proc/self/status").read().split("Seccomp:")[1].split()[0])`
	for variant, args := range map[string][]string{"profile": on, "unconfined": off} {
		_, out, err := DockerRun(ctx, e.cfg.Docker, args, input(status))
		if err != nil {
			return fmt.Errorf("%s: %w", variant, err)
		}
		sr.Seccomp[variant] = strings.TrimSpace(strings.TrimSuffix(out, EndMark(0)))
	}
	if sr.Seccomp["profile"] != "2" || sr.Seccomp["unconfined"] != "0" {
		return fmt.Errorf("inside runsc, Seccomp is %q with the profile and %q without, want 2 and 0: is runsc registered with --oci-seccomp (scripts/ensure-docker), and does the sidecar give runsc containers runner/seccomp's profile?", sr.Seccomp["profile"], sr.Seccomp["unconfined"])
	}

	hello, loop := input(helloCode), input(seccompLoopCode)
	check := func(out string) error {
		if strings.TrimSuffix(out, EndMark(0)) != "hello, world\n" {
			return fmt.Errorf("printed %q", out)
		}
		return nil
	}
	cold := func(args []string) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			d, out, err := DockerRun(ctx, e.cfg.Docker, args, hello)
			if err == nil {
				err = check(out)
			}
			return d, err
		}
	}
	started := func(args []string, stdin []byte) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			d, out, err := startedRun(ctx, e.cfg.Docker, e.tmp, args, stdin)
			if err == nil {
				err = check(out)
			}
			return d, err
		}
	}
	all := []struct {
		name string
		run  func() (time.Duration, error)
	}{
		{"cold", cold(on)}, {"cold_off", cold(off)},
		{"started", started(on, hello)}, {"started_off", started(off, hello)},
		{"loop", started(on, loop)}, {"loop_off", started(off, loop)},
	}
	for _, s := range all { // untimed: caches and the page cache
		if _, err := s.run(); err != nil {
			return fmt.Errorf("%s warm-up: %w", s.name, err)
		}
	}
	samples := map[string][]time.Duration{}
	for i := range e.cfg.Runs {
		for j := range all {
			s := all[(i+j)%len(all)]
			d, err := s.run()
			if err != nil {
				return fmt.Errorf("%s run %d: %w", s.name, i, err)
			}
			samples[s.name] = append(samples[s.name], d)
		}
	}
	for k, ds := range samples {
		e.res.samples["seccomp/"+k] = ds
	}
	sr.Cold, sr.ColdOff = Summarize(samples["cold"]), Summarize(samples["cold_off"])
	sr.Started, sr.StartedOff = Summarize(samples["started"]), Summarize(samples["started_off"])
	sr.Loop, sr.LoopOff = Summarize(samples["loop"]), Summarize(samples["loop_off"])
	e.res.Seccomp = &sr
	e.cfg.Log.Info("bench: seccomp", "cold_p50_ms", sr.Cold.P50, "cold_off_p50_ms", sr.ColdOff.P50, "started_p50_ms", sr.Started.P50, "started_off_p50_ms", sr.StartedOff.P50)
	return nil
}

// startedRun starts `docker run` with args, waits until the container runs
// and its launcher waits for the run, then writes stdin and returns the
// time from writing it to the end mark on standard output, and that output.
func startedRun(ctx context.Context, docker, dir string, args []string, stdin []byte) (time.Duration, string, error) {
	cid := filepath.Join(dir, fmt.Sprintf("cid-%d", time.Now().UnixNano()))
	defer os.Remove(cid)
	full := slices.Clone(args)
	full = slices.Insert(full, slices.Index(full, "--rm")+1, "--cidfile", cid)
	cmd := exec.CommandContext(ctx, docker, full...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, "", err
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		return 0, "", err
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		return 0, "", err
	}
	defer cmd.Wait() //nolint:errcheck // the error is the run's, read below
	var (
		mu     sync.Mutex
		out    []byte
		marked = make(chan time.Time, 1)
		read   = make(chan struct{})
	)
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		mark := []byte(EndMark(0))
		for {
			n, err := outR.Read(buf)
			mu.Lock()
			out = append(out, buf[:n]...)
			if bytes.Contains(out, mark) && len(marked) == 0 {
				marked <- time.Now()
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	if err := waitRunning(ctx, docker, cid); err != nil {
		in.Close()
		return 0, "", fmt.Errorf("%w: %s", err, strings.TrimSpace(errb.String()))
	}
	// The container runs; give its launcher a moment to reach the read
	// of its run, as a warm container has long reached it.
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	if _, err := in.Write(stdin); err != nil {
		return 0, "", err
	}
	in.Close()
	var d time.Duration
	select {
	case t := <-marked:
		d = t.Sub(t0)
	case <-read:
		select {
		case t := <-marked:
			d = t.Sub(t0)
		default:
			mu.Lock()
			defer mu.Unlock()
			return 0, string(out), fmt.Errorf("no end mark: %s", strings.TrimSpace(errb.String()))
		}
	case <-ctx.Done():
		return 0, "", ctx.Err()
	}
	<-read
	mu.Lock()
	defer mu.Unlock()
	return d, string(out), nil
}

// waitRunning polls until the container whose id docker writes to cidfile
// runs.
func waitRunning(ctx context.Context, docker, cidfile string) error {
	for range 300 {
		if b, err := os.ReadFile(cidfile); err == nil && len(b) > 0 {
			st, err := exec.CommandContext(ctx, docker, "inspect", "-f", "{{.State.Running}}", string(b)).Output()
			if err == nil && strings.TrimSpace(string(st)) == "true" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("the container did not start within 6 s")
}
