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
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// Timeouts for engine calls that must happen even after the caller's
// context ended (killing, inspecting and removing the container).
const (
	cleanupTimeout = 30 * time.Second
	// drainTimeout bounds the wait for the output stream to end after the
	// container exited.
	drainTimeout = 5 * time.Second
)

// Prepare makes sure the engine has the plan's OCI runtime (asked once).
func (r *platform) Prepare(ctx context.Context, p *sandbox.Plan, _ runner.Language) error {
	ok, err := r.runtimeAvailable(ctx, p.Runtime)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("runtime %s is not installed in the engine: %w", p.Runtime, runner.ErrRuntimeUnavailable)
	}
	return nil
}

// Create creates the container of req.Plan (on a sandbox network of its
// own when its Sandbox has a network), attaches to it, asks the engine to
// report its exit and starts it; a networked container's address is then
// registered with the egress proxy. The container waits for its code on
// standard input (launch). The attach and the wait live until the
// container is detached, whatever ctx does.
func (r *platform) Create(ctx context.Context, req sandbox.CreateRequest) (_ sandbox.Instance, err error) {
	p, spec := req.Plan, req.Spec
	img, err := r.cli.ImageInspect(ctx, p.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %s not found (%s): %w", p.Image, profile.BuildHint(p.Image), err)
		}
		return nil, engineErr("inspect image "+p.Image, err)
	}
	c := &containerRun{r: r, imageID: img.ID, image: p.Image, memory: p.Sandbox.MemoryBytes, born: time.Now(), done: make(chan struct{})}
	if p.Sandbox.Network.Enabled {
		if c.net, err = r.openNetwork(ctx, spec); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			c.Detach()
			c.Remove()
		}
	}()
	cfg, host := r.containerSettings(spec, p, c.net)
	if c.id, err = r.create(ctx, cfg, host); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.PoolKey == "" {
		// A container made for its run starts only with its interpreter
		// there (a warm one is checked as its run takes it).
		if err := c.CheckLanguage(ctx, spec.Language); err != nil {
			return nil, err
		}
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	if c.net != nil {
		// The program waits for its code, sent after Create returns, so
		// it makes no request before the proxy knows its address.
		if err := c.net.register(ctx, c.id, p.Registration(spec)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// create creates a container, not started. The request is not cancelled
// with ctx: a create the engine completed after the caller gave up would
// leave a container nobody removes. For the same reason a create that
// fails is followed by a search for what it may have made (by its
// LabelCreate), which the retrier removes.
func (r *platform) create(ctx context.Context, cfg *container.Config, host *container.HostConfig) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	// A label of its own finds the container should the answer be lost.
	labels := maps.Clone(cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelCreate] = uuid.NewString()
	cfg.Labels = labels
	created, err := r.cli.ContainerCreate(ctx, cfg, host, nil, nil, "")
	if err != nil {
		// The engine may have made it and died before it answered (EOF):
		// look for it until it is known not to exist.
		r.retry.addLost(false, LabelCreate, cfg.Labels[LabelCreate])
		return "", engineErr("create container", err)
	}
	return created.ID, nil
}

// remove force-removes the container with a fresh context. A removal
// that fails (the engine restarting, say) is retried in the background
// until the container is gone.
func (r *platform) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		r.log.Warn("remove sandbox container; retrying in the background", "container", short(id), "err", err)
		r.retry.add(false, id)
	}
}

// kill sends SIGKILL to the container with a fresh context; a container
// that already stopped is fine.
func (r *platform) kill(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = r.cli.ContainerKill(ctx, id, "KILL")
}

// containerRun is one container as a sandbox.Instance: its attach stream,
// split into its standard streams, and the engine's wait for its exit,
// both open from before its start until it is detached.
//
// The wait's one result (the exit, or the error that ended the wait) is
// kept whether or not anyone reads it: the Docker client's own result
// channel is unbuffered, and its goroutine, once it has the exit, blocks on
// it with no regard for the context, so a container detached after it
// exited without reading the exit would leave that goroutine, and the
// response it holds open, for the life of the process.
type containerRun struct {
	r       *platform
	id      string
	imageID string
	image   string
	memory  int64 // its memory limit
	born    time.Time
	net     *sandboxNet // nil: no network

	attach  types.HijackedResponse
	pipes   *sandbox.Pipes
	cancel  context.CancelFunc // ends the attach, wait and stats requests
	copied  chan struct{}      // closed when the attach stream is split
	done    chan struct{}      // closed when the wait returned
	status  container.WaitResponse
	waitErr error

	peak      peakMemory
	cg        cgroupOf // its cgroup, for Stall
	detach    sync.Once
	removeOne sync.Once
}

// start attaches to the created container, asks the engine to report its
// exit, and starts it.
func (c *containerRun) start(ctx context.Context) error {
	r := c.r
	watchCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	attach, err := r.cli.ContainerAttach(watchCtx, c.id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		cancel()
		return engineErr("attach container", err)
	}
	c.attach, c.cancel = attach, cancel
	c.pipes = sandbox.NewPipes()
	c.copied = make(chan struct{})
	go func() {
		defer close(c.copied)
		stdout, stderr := c.pipes.Writers()
		_, err := stdcopy.StdCopy(stdout, stderr, attach.Reader)
		c.pipes.End(err)
	}()
	waitC, errC := keepWait(r.cli.ContainerWait(watchCtx, c.id, container.WaitConditionNextExit))
	go func() {
		defer close(c.done)
		select {
		case c.status = <-waitC:
		case err := <-errC:
			c.waitErr = engineErr("wait for container", err)
		}
	}()
	if err := r.cli.ContainerStart(ctx, c.id, container.StartOptions{}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return engineErr("start container", err)
	}
	return nil
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

// stdinOf is the write side of an attach stream: Close closes it for
// writing only, so that the launcher's tar sees the stream end while the
// output goes on.
type stdinOf struct{ a types.HijackedResponse }

func (s stdinOf) Write(p []byte) (int, error) { return s.a.Conn.Write(p) }
func (s stdinOf) Close() error                { return s.a.CloseWrite() }

// ID is the container's id.
func (c *containerRun) ID() string { return c.id }

// BindRun hands a networked container's registration with the egress
// proxy to spec's run (sandbox.RunBinder); without a network it does
// nothing.
func (c *containerRun) BindRun(spec runner.Spec) error {
	if c.net == nil {
		return nil
	}
	return c.net.bind(spec)
}

// Streams are the attach stream's, split.
func (c *containerRun) Streams() sandbox.Streams { return c.pipes.Streams(stdinOf{c.attach}) }

// Done is closed once the engine's wait returned.
func (c *containerRun) Done() <-chan struct{} { return c.done }

// Kill sends the container SIGKILL.
func (c *containerRun) Kill() { c.r.kill(c.id) }

// Detach ends the attach, wait and stats requests, and makes the proxy
// forget a networked container's address.
func (c *containerRun) Detach() {
	c.detach.Do(func() {
		if c.cancel != nil {
			c.cancel()
			c.attach.Close()
			c.pipes.Drop()
			<-c.copied
		}
		if c.net != nil {
			c.net.unregister()
		}
	})
}

// Remove removes the container, then its network.
func (c *containerRun) Remove() {
	c.removeOne.Do(func() {
		if c.id != "" {
			c.r.remove(c.id)
		}
		if c.net != nil {
			c.net.close()
		}
	})
}

// CheckLanguage makes sure the image has the language's interpreter in
// its PATH, asking the engine about the container's filesystem once per
// image and language.
func (c *containerRun) CheckLanguage(ctx context.Context, lang runner.Language) error {
	r := c.r
	prog, ok := launch.ProgramFor(lang)
	if !ok {
		return fmt.Errorf("unknown language %q: %w", lang, runner.ErrInvalidSpec)
	}
	key := langKey{imageID: c.imageID, lang: lang}
	r.mu.Lock()
	info, known := r.languages[key]
	r.mu.Unlock()
	if !known {
		for _, dir := range launch.ImagePath() {
			_, err := r.cli.ContainerStatPath(ctx, c.id, path.Join(dir, prog.Interp))
			if err == nil {
				info.ok = true
				break
			}
			if !cerrdefs.IsNotFound(err) {
				return engineErr("look for "+prog.Interp+" in image "+c.image, err)
			}
		}
		r.mu.Lock()
		r.languages[key] = info
		r.mu.Unlock()
	}
	if !info.ok {
		return fmt.Errorf("%s: no %s in image %s: %w", lang, prog.Interp, c.image, runner.ErrLanguageUnavailable)
	}
	return nil
}

// StartMeter starts following the container's stats stream.
func (c *containerRun) StartMeter() { c.peak.start(c) }

// Peak is the highest memory use so far: the kernel's high-water mark of
// the container's cgroup while it lives, and what the stats stream saw.
func (c *containerRun) Peak() int64 {
	return max(cgroupPeak(c.id), c.peak.get())
}

// Exit says how the container ended: its exit status and whether the
// memory limit killed it, from the engine; and its peak memory.
func (c *containerRun) Exit(ctx context.Context, e sandbox.Ending) (sandbox.Exit, error) {
	c.peak.stop()
	ex := sandbox.Exit{PeakMemoryBytes: c.peak.get()}
	if e.ByItself {
		// The program exited on its own; the container's state is not
		// final yet anyway.
		return ex, nil
	}
	select {
	case <-c.done:
	default:
		return ex, fmt.Errorf("container %s has not ended", short(c.id))
	}
	if c.waitErr != nil {
		return ex, c.waitErr
	}
	ex.Code = int(c.status.StatusCode)
	insp, err := c.r.cli.ContainerInspect(ctx, c.id)
	if err != nil {
		return ex, engineErr("inspect container", err)
	}
	if insp.ContainerJSONBase != nil && insp.State != nil {
		ex.OOMKilled = insp.State.OOMKilled
	}
	if !ex.OOMKilled && !e.Killed && ex.Code == 137 {
		ex.OOMKilled = c.r.oomKilled(c.id, ex.PeakMemoryBytes, c.memory, e.Since)
	}
	return ex, nil
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
func (r *platform) oomKilled(id string, peak, limit int64, since time.Time) bool {
	if limit > 0 && peak >= limit {
		return true
	}
	return r.oomEvent(id, since)
}

// oomEvent reports whether the engine logged an "oom" event for the
// container since the run began, waiting up to oomLate for a late one.
func (r *platform) oomEvent(id string, since time.Time) bool {
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

// peakMemory follows the container's stats stream during its run and
// keeps the highest memory use seen (cgroup v1 max_usage, else usage).
// The stream samples about once a second; cgroupPeak, read when the end
// marks arrive, sees what a shorter run used.
type peakMemory struct {
	mu     sync.Mutex
	peak   int64
	cancel context.CancelFunc // nil until start
	done   chan struct{}      // closed when watch returned
}

// start starts following the stats stream, once.
func (m *peakMemory) start(c *containerRun) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	go func() {
		defer close(m.done)
		m.watch(ctx, c.r.cli, c.id)
	}()
}

// stop ends the stats stream and waits for its last sample.
func (m *peakMemory) stop() {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
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
