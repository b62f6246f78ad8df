package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Timeouts for engine calls that must happen even after the caller's
// context ended (killing, inspecting and removing the container).
const (
	cleanupTimeout = 30 * time.Second
	// drainTimeout bounds the wait for the output stream to end after the
	// container exited.
	drainTimeout = 5 * time.Second
)

// imagePath is the PATH in which the interpreter is looked up.
var imagePath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// Run runs spec in a new container and removes the container before it
// returns, whatever happened (removal uses its own context, so it happens
// after ctx ended too).
//
// Errors, each wrapping a runner sentinel where one applies: a refused Spec
// (runner.ErrInvalidSpec, every problem listed), a network policy
// (runner.ErrNetworkUnsupported), a runtime the engine lacks
// (runner.ErrRuntimeUnavailable; never a fallback), an image without the
// language's interpreter (runner.ErrLanguageUnavailable, naming the
// image), an unreachable engine (runner.ErrUnavailable, with the engine's
// message). A missing image is the engine's NotFound error
// (cerrdefs.IsNotFound).
//
// Once the container started, Run returns a Result and a nil error (unless
// the engine fails while Run watches the container): the program ended
// (Exited, or OOMKilled when the memory limit killed it), the timeout
// killed it (TimedOut, exit code 137), or ctx ended and Run killed it
// (Cancelled). If ctx ends before the container started, Run returns ctx's
// error. Run is safe for concurrent use.
//
// Output is streamed to spec.OnOutput from a goroutine of Run as it
// arrives, each stream capped at MaxOutputBytes; past the cap it is read
// and dropped, never buffered, and Result.Truncated is set.
func (r *Runner) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	res := runner.Result{RunID: spec.RunID}
	p, err := r.plan(spec)
	if err != nil {
		return res, err
	}
	res.Image, res.Runtime = p.image, p.runtime

	ok, err := r.runtimeAvailable(ctx, p.runtime)
	if err != nil {
		return res, err
	}
	if !ok {
		return res, fmt.Errorf("runtime %s is not installed in the engine: %w", p.runtime, runner.ErrRuntimeUnavailable)
	}
	img, err := r.cli.ImageInspect(ctx, p.image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return res, fmt.Errorf("image %s not found (build it with gatekeeper image build): %w", p.image, err)
		}
		return res, engineErr("inspect image "+p.image, err)
	}

	id, err := r.create(ctx, p)
	if err != nil {
		return res, err
	}
	defer r.remove(id)
	if err := ctx.Err(); err != nil {
		return res, err
	}

	if err := r.checkLanguage(ctx, id, img.ID, spec.Language, p); err != nil {
		return res, err
	}
	return r.start(ctx, id, p, spec, res)
}

// create creates the container of plan p, not started. The request is not
// cancelled with ctx: a create the engine completed after the caller gave
// up would leave a container nobody removes.
func (r *Runner) create(ctx context.Context, p *plan) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	created, err := r.cli.ContainerCreate(ctx, p.config, p.host, nil, nil, "")
	if err != nil {
		return "", engineErr("create container", err)
	}
	return created.ID, nil
}

// remove force-removes the container with a fresh context.
func (r *Runner) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
}

// kill sends SIGKILL to the container with a fresh context; a container
// that already stopped is fine.
func (r *Runner) kill(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = r.cli.ContainerKill(ctx, id, "KILL")
}

// checkLanguage makes sure the image has the language's interpreter in its
// PATH, asking the engine about the created container's filesystem once per
// image and language.
func (r *Runner) checkLanguage(ctx context.Context, id, imageID string, lang runner.Language, p *plan) error {
	key := langKey{imageID: imageID, lang: lang}
	r.mu.Lock()
	info, known := r.languages[key]
	r.mu.Unlock()
	if !known {
		for _, dir := range imagePath {
			_, err := r.cli.ContainerStatPath(ctx, id, path.Join(dir, p.lang.interp))
			if err == nil {
				info.ok = true
				break
			}
			if !cerrdefs.IsNotFound(err) {
				return engineErr("look for "+p.lang.interp+" in image "+p.image, err)
			}
		}
		r.mu.Lock()
		r.languages[key] = info
		r.mu.Unlock()
	}
	if !info.ok {
		return fmt.Errorf("%s: no %s in image %s: %w", lang, p.lang.interp, p.image, runner.ErrLanguageUnavailable)
	}
	return nil
}

// start attaches to the created container, starts it, feeds it the
// workspace and watches it until it ends, the timeout passes or ctx ends.
// It is separate from create so that a container created ahead of time
// (a warm pool) can be started here.
func (r *Runner) start(ctx context.Context, id string, p *plan, spec runner.Spec, res runner.Result) (runner.Result, error) {
	// The output stream, the wait and the stats stream live until start
	// returns, whatever ctx does. Every goroutine started here ends before
	// start returns.
	watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatching()
	attach, err := r.cli.ContainerAttach(watchCtx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return res, engineErr("attach container", err)
	}
	var wg sync.WaitGroup
	defer func() {
		stopWatching()
		attach.Close()
		wg.Wait()
	}()
	waitC, waitErrC := r.cli.ContainerWait(watchCtx, id, container.WaitConditionNextExit)

	stdout := newCapped(runner.Stdout, spec.Sandbox.MaxOutputBytes, spec.OnOutput)
	stderr := newCapped(runner.Stderr, spec.Sandbox.MaxOutputBytes, spec.OnOutput)
	drained := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(drained)
		_, _ = stdcopy.StdCopy(stdout, stderr, attach.Reader)
	}()

	if err := r.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		attach.Close()
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, engineErr("start container", err)
	}
	begin := time.Now()

	wg.Add(1)
	go func() {
		defer wg.Done()
		// A write error means the container is gone already; the wait
		// below reports why.
		if _, err := attach.Conn.Write(p.workspace); err == nil {
			_ = attach.CloseWrite()
		}
	}()

	peak := &peakMemory{done: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(peak.done)
		peak.watch(watchCtx, r.cli, id)
	}()

	timer := time.NewTimer(spec.Timeout)
	defer timer.Stop()
	var killedFor runner.ExitReason
	var status container.WaitResponse
	waitDone := false
	select {
	case status = <-waitC:
		waitDone = true
	case err := <-waitErrC:
		r.kill(id)
		return res, engineErr("wait for container", err)
	case <-timer.C:
		killedFor = runner.TimedOut
	case <-ctx.Done():
		killedFor = runner.Cancelled
	}
	if !waitDone {
		r.kill(id)
		select {
		case status = <-waitC:
		case err := <-waitErrC:
			return res, engineErr("wait for killed container", err)
		case <-time.After(cleanupTimeout):
			return res, fmt.Errorf("container %s did not stop after kill", short(id))
		}
	}
	res.Duration = time.Since(begin)

	select {
	case <-drained:
	case <-time.After(drainTimeout):
		attach.Close()
		<-drained
	}
	stopWatching()

	inspectCtx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	insp, err := r.cli.ContainerInspect(inspectCtx, id)
	if err != nil {
		return res, engineErr("inspect container", err)
	}
	res.ExitCode = int(status.StatusCode)
	if insp.ContainerJSONBase != nil && insp.State != nil {
		res.OOMKilled = insp.State.OOMKilled
	}
	res.Stdout, res.Truncated = stdout.result()
	var errTrunc bool
	res.Stderr, errTrunc = stderr.result()
	res.Truncated = res.Truncated || errTrunc
	<-peak.done
	res.PeakMemoryBytes = peak.get()

	switch {
	case killedFor == runner.TimedOut:
		res.Reason, res.TimedOut = runner.TimedOut, true
	case res.OOMKilled:
		res.Reason = runner.OOMKilled
	case killedFor == runner.Cancelled:
		res.Reason = runner.Cancelled
	default:
		res.Reason = runner.Exited
	}
	return res, nil
}

// peakMemory follows the container's stats stream and keeps the highest
// memory use seen (cgroup v1 max_usage, else usage). It is best effort: a
// run shorter than the engine's sampling interval may report 0.
type peakMemory struct {
	done chan struct{} // closed when watch returned
	mu   sync.Mutex
	peak int64
}

func (m *peakMemory) watch(ctx context.Context, cli engine, id string) {
	stats, err := cli.ContainerStats(ctx, id, true)
	if err != nil {
		return
	}
	defer stats.Body.Close()
	dec := json.NewDecoder(stats.Body)
	for {
		var s container.StatsResponse
		if err := dec.Decode(&s); err != nil {
			return // EOF when the container stopped, or watching ended
		}
		v := max(s.MemoryStats.MaxUsage, s.MemoryStats.Usage)
		m.mu.Lock()
		m.peak = max(m.peak, int64(v))
		m.mu.Unlock()
	}
}

func (m *peakMemory) get() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}
