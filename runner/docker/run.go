package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/uuid"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
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

// Run runs spec in a new container, or in a warm one of the pool (see
// PoolConfig), and removes the container whatever happened: before it
// returns, or for a warm container right after, in the background, where
// Close waits for it (removal uses its own context, so it happens after
// ctx ended too). A container serves one run only.
//
// A Sandbox with Network.Enabled runs on an internal network of its own
// whose only reachable endpoint is Config.Egress, listening on the
// network's gateway; the network, its firewall and the proxy registration
// are removed before Run returns, like the container (see the package doc).
//
// Errors, each wrapping a runner sentinel where one applies: a refused Spec
// (runner.ErrInvalidSpec, every problem listed), a network policy the runner
// cannot enforce (runner.ErrNetworkUnsupported: no Config.Egress, or no host
// firewall), a runtime the engine lacks
// (runner.ErrRuntimeUnavailable; never a fallback), an image without the
// language's interpreter (runner.ErrLanguageUnavailable, naming the
// image), an unreachable engine (runner.ErrUnavailable, with the engine's
// message). A missing image is the engine's NotFound error
// (cerrdefs.IsNotFound).
//
// A removal that fails (the engine restarting or unreachable) is tried
// again in the background, containers before networks, until it succeeds;
// Close tries once more.
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
	if err := p.in.OpenSaved(spec); err != nil {
		return res, err
	}
	defer p.in.CloseSaved()

	ok, err := r.runtimeAvailable(ctx, p.runtime)
	if err != nil {
		return res, err
	}
	if !ok {
		return res, fmt.Errorf("runtime %s is not installed in the engine: %w", p.runtime, runner.ErrRuntimeUnavailable)
	}
	if r.pool != nil {
		w, c := r.pool.take(spec.Sandbox, p, spec.Language, spec.Timeout)
		if c != nil {
			if w, err = r.pool.await(ctx, c); err != nil {
				return res, err
			}
		}
		if w != nil {
			return r.runWarm(ctx, w, p, spec, res)
		}
	}
	img, err := r.cli.ImageInspect(ctx, p.image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return res, fmt.Errorf("image %s not found (%s): %w", p.image, profile.BuildHint(p.image), err)
		}
		return res, engineErr("inspect image "+p.image, err)
	}

	if spec.Sandbox.Network.Enabled {
		sn, err := r.openNetwork(ctx, spec)
		if err != nil {
			return res, err
		}
		defer sn.close() // after the container's removal below
		r.withNetwork(spec, p, sn)
	}

	id, err := r.create(ctx, p)
	if err != nil {
		return res, err
	}
	if p.net == nil {
		defer r.removeLater(id)
	} else {
		defer r.remove(id) // before its network goes (sn.close above)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	if err := r.checkLanguage(ctx, id, img.ID, spec.Language, p); err != nil {
		return res, err
	}
	r.log.Debug("sandbox run", "run_id", spec.RunID, "query_id", spec.QueryID, "container", short(id))
	s, err := r.startContainer(ctx, id)
	if err != nil {
		return res, err
	}
	return r.execute(ctx, id, s, p, spec, res)
}

// runWarm runs spec in warm container w, taken from the pool; the pool
// removes it after the run, in the background. The container's labels name
// its pool, not the run: the run's ids and labels are logged here instead.
func (r *Runner) runWarm(ctx context.Context, w *warm, p *plan, spec runner.Spec, res runner.Result) (runner.Result, error) {
	defer r.pool.release(w)
	r.pool.served(w, spec.Language)
	r.log.Info("pooled sandbox run", "run_id", spec.RunID, "query_id", spec.QueryID, "container", short(w.id),
		"pool", w.key, "labels", spec.Labels)
	if err := r.checkLanguage(ctx, w.id, w.imageID, spec.Language, p); err != nil {
		return res, err // release closes the session
	}
	return r.execute(ctx, w.id, w.sess, p, spec, res)
}

// create creates the container of plan p, not started. The request is not
// cancelled with ctx: a create the engine completed after the caller gave
// up would leave a container nobody removes. For the same reason a create
// that fails is followed by a search for what it may have made (by its
// LabelCreate), which the retrier removes.
func (r *Runner) create(ctx context.Context, p *plan) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	// The client normalizes fields of what it is given; a plan's settings
	// may be shared by the pool's concurrent creations.
	cfg, host := *p.config, *p.host
	// A label of its own finds the container should the answer be lost.
	labels := maps.Clone(cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelCreate] = uuid.NewString()
	cfg.Labels = labels
	created, err := r.cli.ContainerCreate(ctx, &cfg, &host, nil, nil, "")
	if err != nil {
		// The engine may have made it and died before it answered (EOF):
		// look for it until it is known not to exist.
		r.retry.addLost(false, LabelCreate, cfg.Labels[LabelCreate])
		return "", engineErr("create container", err)
	}
	return created.ID, nil
}

// removeLater removes the container of a run that ended in the
// background, off the run's path: once its program's end marks are in, the
// engine still takes tens of milliseconds to report the exit and more to
// remove it. Close, Cleanup and Leftovers wait for these removals; Cleanup
// also collects the containers of a sidecar that died before they ended.
func (r *Runner) removeLater(id string) {
	r.removals.Go(func() { r.remove(id) })
}

// remove force-removes the container with a fresh context. A removal
// that fails (the engine restarting, say) is retried in the background
// until the container is gone.
func (r *Runner) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		r.log.Warn("remove sandbox container; retrying in the background", "container", short(id), "err", err)
		r.retry.add(false, id)
	}
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
			_, err := r.cli.ContainerStatPath(ctx, id, path.Join(dir, p.in.Program.Interp))
			if err == nil {
				info.ok = true
				break
			}
			if !cerrdefs.IsNotFound(err) {
				return engineErr("look for "+p.in.Program.Interp+" in image "+p.image, err)
			}
		}
		r.mu.Lock()
		r.languages[key] = info
		r.mu.Unlock()
	}
	if !info.ok {
		return fmt.Errorf("%s: no %s in image %s: %w", lang, p.in.Program.Interp, p.image, runner.ErrLanguageUnavailable)
	}
	return nil
}

// session is a started container's attach stream and the engine's wait
// for its exit, both open from before the start until the run ends.
//
// waitC and errC are buffered: the wait's one result (the exit, or the
// error that ended the wait) is kept there, whether or not anyone reads
// it. The Docker client's own result channel is unbuffered, and its
// goroutine, once it has the exit, blocks on it with no regard for the
// context: a session closed after its container exited without reading
// the exit (a run that ended by its end marks, a warm container the
// engine's restart or freeze ended) would leave that goroutine, and the
// response it holds open, for the life of the process.
type session struct {
	attach types.HijackedResponse
	waitC  <-chan container.WaitResponse
	errC   <-chan error
	cancel context.CancelFunc // ends the attach and wait requests
}

// close ends the attach and wait requests.
func (s *session) close() {
	s.cancel()
	s.attach.Close()
}

// startContainer attaches to the created container, asks the engine to
// report its exit, and starts it. The container then waits for its code
// on standard input (see launcher); a warm container of the pool waits
// there until a run takes it. The attach and the wait live until the
// session is closed, whatever ctx does.
func (r *Runner) startContainer(ctx context.Context, id string) (*session, error) {
	watchCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	attach, err := r.cli.ContainerAttach(watchCtx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		cancel()
		return nil, engineErr("attach container", err)
	}
	s := &session{attach: attach, cancel: cancel}
	s.waitC, s.errC = keepWait(r.cli.ContainerWait(watchCtx, id, container.WaitConditionNextExit))
	if err := r.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		s.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, engineErr("start container", err)
	}
	return s, nil
}

// keepWait takes the one result of a wait (the client sends exactly one,
// on one of its channels, and an error once the wait's context ends) into
// channels of capacity 1, so that neither the client's goroutine nor the
// one started here outlives the wait, read or not.
func keepWait(waitC <-chan container.WaitResponse, errC <-chan error) (<-chan container.WaitResponse, <-chan error) {
	kept, keptErr := make(chan container.WaitResponse, 1), make(chan error, 1)
	go func() {
		select {
		case st := <-waitC:
			kept <- st
		case err := <-errC:
			keptErr <- err
		}
	}()
	return kept, keptErr
}

// writeInput sends the container its header and the tar of its workspace
// (launch.Input.Write), then closes its standard input, also after an
// error, so that the launcher's tar sees the stream end. It returns the
// files the tar holds.
func writeInput(attach types.HijackedResponse, p *plan, spec runner.Spec) (workspace.Manifest, error) {
	defer func() { _ = attach.CloseWrite() }()
	return p.in.Write(attach.Conn, spec)
}

// execute runs spec in the started container of session s: it feeds the
// container its header and workspace, streams its output and watches it
// until it ends, the timeout passes or ctx ends; then it takes the
// snapshot of /workspace the container sends back, if the run asked for
// one (wantsSnapshot), and saves it or returns its files. The timeout
// counts from the moment the code is sent, however long the container
// waited for it, until the program's end marks. It closes s.
func (r *Runner) execute(ctx context.Context, id string, s *session, p *plan, spec runner.Spec, res runner.Result) (runner.Result, error) {
	// The output stream, the wait and the stats stream live until execute
	// returns, whatever ctx does. Every goroutine started here ends before
	// execute returns.
	watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var snap *launch.Snapshot
	defer func() {
		stopWatching()
		s.close()
		wg.Wait()
		snap.Close()
	}()

	inputDone := make(chan struct{})
	var manifest workspace.Manifest
	var inputErr error
	if wantsSnapshot(spec) {
		snap = launch.StartSnapshot(spec, p.in.Tag, func() workspace.Manifest {
			select {
			case <-inputDone:
				return manifest
			case <-watchCtx.Done():
				return nil
			}
		}, &wg)
	}
	stdout := launch.NewCapped(runner.Stdout, spec.Sandbox.MaxOutputBytes, spec.OnOutput)
	stderr := launch.NewCapped(runner.Stderr, spec.Sandbox.MaxOutputBytes, spec.OnOutput)
	marks := launch.NewEndMarks(p.in.Tag)
	var sink *launch.SnapshotSink
	if snap != nil {
		sink = snap.Sink
	}
	markedOut, markedErr := marks.Stream(stdout, sink), marks.Stream(stderr, nil)
	drained := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(drained)
		_, _ = stdcopy.StdCopy(markedOut, markedErr, s.attach.Reader)
		markedOut.Flush()
		markedErr.Flush()
	}()

	if p.net != nil {
		// The program waits for its code, sent below, so it makes no
		// request before the proxy knows its address.
		if err := p.net.register(ctx, id, spec); err != nil {
			r.kill(id)
			close(inputDone)
			return res, err
		}
	}

	begin := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(inputDone)
		// A write error means the container is gone already; the wait
		// below reports why.
		manifest, inputErr = writeInput(s.attach, p, spec)
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
	var snapDone <-chan struct{}
	if snap != nil {
		snapDone = snap.Done
	}
	var snapTimeout <-chan time.Time
	snapLate := false
	// A snapshot refused before the program's end marks are both in (its
	// stdout mark comes before the snapshot, its stderr mark may come
	// after) waits a moment for them: killing at once would report the
	// run as ended early instead of its snapshot as refused.
	var refusedKill <-chan time.Time
	killOnEnd := false
	var killedFor runner.ExitReason
	var status container.WaitResponse
	waitDone, marked, ended := false, false, false
	var cgPeak int64 // the kernel's peak, read when the marks arrive
	code, codeOK := 0, false
	endedC := marks.Ended()
	for !waitDone && !marked && killedFor == "" {
		if ended && codeOK && code < 128 && snapDone == nil {
			// The program exited by itself, its output is complete and
			// its snapshot (if any) in. An exit by signal (137 for the
			// OOM killer) is left to the engine, which alone knows
			// whether the memory limit did it.
			status.StatusCode, marked = int64(code), true
			break
		}
		select {
		case status = <-s.waitC:
			waitDone = true
		case <-endedC:
			endedC, ended = nil, true
			res.Duration = time.Since(begin)
			// The container lives on for its launcher: its cgroup still
			// holds the program's high-water mark.
			cgPeak = cgroupPeak(id)
			code, codeOK = marks.ExitCode()
			timer.Stop() // the program has ended: the snapshot has a deadline of its own
			if snapDone != nil {
				snapTimeout = time.After(snapshotGrace)
			}
			if killOnEnd {
				refusedKill, killOnEnd = nil, false
				r.kill(id) // its refused snapshot may still be sending
			}
		case <-snapDone:
			snapDone, snapTimeout = nil, nil
			switch {
			case snap.Err == nil:
			case ended:
				r.kill(id) // it may still be sending
			default:
				killOnEnd, refusedKill = true, time.After(time.Second)
			}
		case <-refusedKill:
			refusedKill, killOnEnd = nil, false
			r.kill(id)
		case <-snapTimeout:
			snapTimeout, snapLate = nil, true
			r.kill(id)
		case err := <-s.errC:
			r.kill(id)
			return res, engineErr("wait for container", err)
		case <-timer.C:
			killedFor = runner.TimedOut
		case <-ctx.Done():
			killedFor = runner.Cancelled
		}
	}
	if !waitDone && !marked {
		r.kill(id)
		select {
		case status = <-s.waitC:
		case err := <-s.errC:
			return res, engineErr("wait for killed container", err)
		case <-time.After(cleanupTimeout):
			return res, fmt.Errorf("container %s did not stop after kill", short(id))
		}
	}
	if !ended {
		res.Duration = time.Since(begin)
	}

	if !marked { // with both marks in, every byte before them was passed on
		select {
		case <-drained:
		case <-time.After(drainTimeout):
			s.attach.Close()
			<-drained
		}
	}
	stopWatching()

	res.ExitCode = int(status.StatusCode)
	oomKilled := false
	if !marked {
		// The program did not exit by itself: ask the engine whether the
		// memory limit killed it. (After the marks the program exited on
		// its own, and the container's state is not final yet anyway.)
		inspectCtx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		insp, err := r.cli.ContainerInspect(inspectCtx, id)
		if err != nil {
			return res, engineErr("inspect container", err)
		}
		if insp.ContainerJSONBase != nil && insp.State != nil {
			oomKilled = insp.State.OOMKilled
		}
	}
	res.Stdout, res.Truncated = stdout.Result()
	var errTrunc bool
	res.Stderr, errTrunc = stderr.Result()
	res.Truncated = res.Truncated || errTrunc
	<-peak.done
	res.PeakMemoryBytes = max(peak.get(), cgPeak)
	if !marked && !oomKilled && killedFor == "" && res.ExitCode == 137 {
		oomKilled = r.oomKilled(id, res.PeakMemoryBytes, spec.Sandbox.MemoryBytes, begin)
	}

	switch {
	case killedFor == runner.TimedOut:
		res.Reason = runner.TimedOut
	case oomKilled:
		res.Reason = runner.OOMKilled
	case killedFor == runner.Cancelled:
		res.Reason = runner.Cancelled
	default:
		res.Reason = runner.Exited
	}
	if snap != nil {
		<-snap.Done // the output has ended, so the receiver has its stream's end
		select {
		case <-inputDone:
		case <-time.After(drainTimeout):
			s.attach.Close() // a container that ended without reading its input
			<-inputDone
		}
		r.takeSnapshot(&res, spec, snap, ended, snapLate, inputErr)
	}
	return res, nil
}

// takeSnapshot hands a run's received snapshot to its Workspace and its
// files to res, or says in res why the workspace was not saved (see
// launch.Snapshot.Take).
func (r *Runner) takeSnapshot(res *runner.Result, spec runner.Spec, snap *launch.Snapshot, ended, late bool, inputErr error) {
	if why := snap.Take(res, spec, launch.Ending{Ended: ended, Late: late, InputErr: inputErr}); why != "" && spec.Workspace != nil {
		r.log.Debug("workspace not saved", "run_id", spec.RunID, "query_id", spec.QueryID, "why", why)
	}
}

// oomLate is how long oomEvent waits for an OOM event that comes after
// the container's exit.
const oomLate = 2 * time.Second

// oomKilled says whether a container that died of SIGKILL (137), which
// the runner did not send and for which the engine reports no OOM, was
// killed by the memory limit all the same. The engine sets the
// container's OOMKilled only when the runtime reports the OOM before the
// exit: under load the two arrive the other way round now and then
// (Docker 20.10's monitor then logs the oom event but leaves OOMKilled
// false), and the event may come late or not at all. So: the memory use
// reached the limit (the stats stream's peak, when it caught one), or the
// engine logged an oom event for it since the run began.
func (r *Runner) oomKilled(id string, peak, limit int64, since time.Time) bool {
	if limit > 0 && peak >= limit {
		return true
	}
	return r.oomEvent(id, since)
}

// oomEvent reports whether the engine logged an "oom" event for the
// container since the run began, waiting up to oomLate for a late one.
func (r *Runner) oomEvent(id string, since time.Time) bool {
	ctx, cancel := context.WithTimeout(context.Background(), oomLate+5*time.Second)
	defer cancel()
	msgs, errs := r.cli.Events(ctx, events.ListOptions{
		Since:   strconv.FormatInt(since.Add(-time.Second).Unix(), 10),
		Until:   strconv.FormatInt(time.Now().Add(oomLate).Unix()+1, 10),
		Filters: filters.NewArgs(filters.Arg("container", id), filters.Arg("event", "oom")),
	})
	isOOM := func(m events.Message) bool { return m.Action == events.ActionOOM }
	for {
		select {
		case m := <-msgs:
			if isOOM(m) {
				return true
			}
		case <-errs: // io.EOF once Until has passed; take what came before it
			for {
				select {
				case m := <-msgs:
					if isOOM(m) {
						return true
					}
				default:
					return false
				}
			}
		case <-ctx.Done():
			return false
		}
	}
}

// peakMemory follows the container's stats stream and keeps the highest
// memory use seen (cgroup v1 max_usage, else usage). The stream samples
// about once a second; cgroupPeak, read when the end marks arrive, sees
// what a shorter run used.
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
