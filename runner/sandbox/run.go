package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// Run runs spec in a sandbox made for it, or in a warm one of the pool
// (see PoolConfig), and removes the sandbox whatever happened: a sandbox
// with Network.Enabled, with the network made for it, before Run returns;
// any other in the background right after the run (Close, Cleanup and
// Leftovers wait for those removals). A sandbox serves one run only.
//
// Errors, each wrapping a runner sentinel where one applies: a refused
// Spec (runner.ErrInvalidSpec, every problem listed), a network policy the
// platform cannot enforce (runner.ErrNetworkUnsupported), a runtime it
// lacks (runner.ErrRuntimeUnavailable; never a fallback), an image
// without the language's interpreter (runner.ErrLanguageUnavailable,
// naming the image), a platform that cannot be reached
// (runner.ErrUnavailable).
//
// Once the sandbox started, Run returns a Result and a nil error (unless
// the platform fails while Run watches the sandbox): the program ended
// (Exited, or OOMKilled when the memory limit killed it), the timeout
// killed it (TimedOut, exit code 137), Run killed it thrashing at its
// memory limit (OOMKilled, 137; a StallMeter sandbox, see stallWatch), or
// ctx ended and Run killed it (Cancelled). The timeout counts from the
// moment the code is sent.
//
// A ctx that ends before the sandbox started (while the platform is
// prepared, while the run waits for a warm sandbox being made, while its
// sandbox is created) ends the run the same way: a Result with reason
// Cancelled and exit code 137, no output, and a nil error, whatever the
// cut-short wait returned. Nothing is left of it: a sandbox being made for
// it is removed in the background (Close, Cleanup and Leftovers wait for
// that), and a warm sandbox it waited for goes to the pool.
//
// Output is streamed to spec.OnOutput from a goroutine of Run as it
// arrives, each stream capped at MaxOutputBytes; past the cap it is read
// and dropped, never buffered, and Result.Truncated is set.
func (r *Runner) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	return r.run(ctx, spec, true)
}

// Probe runs spec as Run does, in a sandbox made for it, but without
// Platform.Prepare and the pool: for a platform's own checks, which its
// Prepare runs (runner/kube's canaries).
func (r *Runner) Probe(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	return r.run(ctx, spec, false)
}

func (r *Runner) run(ctx context.Context, spec runner.Spec, checked bool) (runner.Result, error) {
	res := runner.Result{RunID: spec.RunID}
	p, err := r.Plan(spec)
	if err != nil {
		return res, err
	}
	res.Image, res.Runtime = p.Image, p.Runtime
	if err := p.Input.OpenSaved(spec); err != nil {
		return res, err
	}
	defer p.Input.CloseSaved()
	if checked {
		if err := r.pf.Prepare(ctx, p, spec.Language); err != nil {
			return notStarted(ctx, res, spec, err)
		}
	}
	if checked && spec.Session != nil {
		return r.runSession(ctx, p, spec, res)
	}
	if checked && r.pool != nil {
		w, c := r.pool.take(p, spec.Language, spec.Timeout)
		if c != nil {
			if w, err = r.pool.await(ctx, c); err != nil {
				return notStarted(ctx, res, spec, err)
			}
		}
		if w != nil {
			return r.runWarm(ctx, w, p, spec, res)
		}
	}
	req := CreateRequest{Plan: p, Spec: spec, Background: r.background}
	if r.pool != nil {
		req.Yield = r.pool.yield
	}
	inst, err := r.pf.Create(ctx, req)
	if err != nil {
		return notStarted(ctx, res, spec, err)
	}
	if spec.Sandbox.Network.Enabled {
		// A sandbox with a network of its own goes, network and all,
		// before Run returns: when the answer reaches the model nothing it
		// could reach is left. Others are removed right after, off the
		// run's path.
		defer inst.Remove()
	} else {
		defer r.removeLater(inst)
	}
	defer inst.Detach()
	if err := ctx.Err(); err != nil {
		return notStarted(ctx, res, spec, err)
	}
	if err := checkLanguage(ctx, inst, spec.Language); err != nil {
		return notStarted(ctx, res, spec, err)
	}
	r.log.Debug("sandbox run", "run_id", spec.RunID, "query_id", spec.QueryID, "sandbox", inst.ID())
	return r.execute(ctx, inst, p, spec, res, nil)
}

// runWarm runs spec in warm sandbox w, taken from the pool; the pool
// removes it after the run, in the background. The sandbox's labels name
// its pool, not the run: the run's ids and labels are logged here, and
// added where the platform can (RunLabeler).
func (r *Runner) runWarm(ctx context.Context, w *warm, p *Plan, spec runner.Spec, res runner.Result) (runner.Result, error) {
	defer r.pool.release(w)
	r.pool.served(w, spec.Language)
	r.log.Info("pooled sandbox run", "run_id", spec.RunID, "query_id", spec.QueryID, "sandbox", w.inst.ID(),
		"pool", w.key, "labels", spec.Labels)
	if l, ok := w.inst.(RunLabeler); ok {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() { l.LabelRun(spec) })
	}
	if err := checkLanguage(ctx, w.inst, spec.Language); err != nil {
		return notStarted(ctx, res, spec, err) // release detaches and removes it
	}
	// The warm sandbox's plan has the pool's lifetimes; the run's input
	// (its code, tag and saved workspace) is the run's own, in p.
	return r.execute(ctx, w.inst, p, spec, res, nil)
}

// cancelledCode is the exit code of a cancelled run, started or not: a
// kill's.
const cancelledCode = 137

// notStarted is what Run returns when err stopped a run before its
// program started: the Result of a cancelled run when ctx has ended (the
// wait that err ended was cut short by it, whatever err says), err
// otherwise.
func notStarted(ctx context.Context, res runner.Result, spec runner.Spec, err error) (runner.Result, error) {
	if ctx.Err() == nil {
		return res, err
	}
	res.Reason, res.ExitCode = runner.Cancelled, cancelledCode
	if spec.Workspace != nil {
		// As launch.Snapshot.Take says it of a run cancelled later.
		res.Workspace = runner.WorkspaceNotSaved
		res.WorkspaceNote = "the run was cancelled before its sandbox started, so " + launch.WorkspaceDir +
			" was not saved: the next run starts from it as it was before this run"
	}
	return res, nil
}

// background runs f with the runner's removals.
func (r *Runner) background(f func()) { r.removals.Go(f) }

// checkLanguage asks a LanguageChecker whether the sandbox has lang's
// interpreter.
func checkLanguage(ctx context.Context, inst Instance, lang runner.Language) error {
	if c, ok := inst.(LanguageChecker); ok {
		return c.CheckLanguage(ctx, lang)
	}
	return nil
}

// execute runs spec in the started sandbox inst: it feeds it its header
// and workspace, streams its output and supervises it (the loop of
// states below) until it ends, the timeout passes or ctx ends; then it
// asks how the sandbox ended and takes the snapshot of /workspace it sent
// back, if the run asked for one, and saves it or returns its files. The
// timeout counts from the moment the code is sent, however long the
// sandbox waited for it, until the program's end marks.
//
// The sandbox's standard input is the run loop's until the run ends: it
// carries the header and the workspace tar, then closes; in a run with
// tools (spec.Caller) it stays open after them for the bridge's answers
// (launch.Bridge), and closes once the bridge is closed, when the run
// ended. The bridge's call frames are lifted out of standard output
// (launch.CallDemux) before the output cap: they are not output.
//
// In a session (sr not nil) the sandbox outlives the run: its input is in
// frames and stays open, the end marks carry the session's state (which
// execute puts in sr), a program the timeout interrupted that stopped
// ends as timed out with its session kept, and the deadline is the
// timeout plus the session's interrupt grace: past it the sandbox, and so
// the session, is killed.
func (r *Runner) execute(ctx context.Context, inst Instance, p *Plan, spec runner.Spec, res runner.Result, sr *sessionRun) (runner.Result, error) {
	// The streams and the goroutines reading them live until execute
	// returns, whatever ctx does; every goroutine started here ends
	// before it returns.
	watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var snap *launch.Snapshot
	var bridge *launch.Bridge
	streams := inst.Streams()
	in := &inlet{done: make(chan struct{}), stdin: streams.Stdin, keep: spec.Caller != nil || sr != nil}
	defer func() {
		if bridge != nil {
			r.closeBridge(bridge, in, inst) // no-op when the run's end closed it
		}
		in.close()
		stopWatching()
		inst.Detach()
		wg.Wait()
		snap.Close()
	}()

	if launch.WantsSnapshot(spec) {
		snap = launch.StartSnapshot(spec, p.Input.Tag, func() workspace.Manifest {
			select {
			case <-in.done:
				return in.manifest
			case <-watchCtx.Done():
				return nil
			}
		}, &wg)
	}
	stdout := launch.NewCapped(runner.Stdout, spec.Sandbox.MaxOutputBytes, spec.OnOutput)
	stderr := launch.NewCapped(runner.Stderr, spec.Sandbox.MaxOutputBytes, spec.OnOutput)
	marks := launch.NewEndMarks(p.Input.Tag)
	var sink *launch.SnapshotSink
	if snap != nil {
		sink = snap.Sink
	}
	// In a run with tools the program's output passes through the call
	// filter after its end mark is found: init's call frames go to the
	// bridge, whose answers go on standard input after the input.
	out := io.Writer(stdout)
	var demux *launch.CallDemux
	if spec.Caller != nil {
		bridge = launch.NewBridge(ctx, spec.Caller, spec.Sandbox.Calls, answers{in})
		demux = launch.NewCallDemux(p.Input.Tag, bridge.LineMax(), stdout, bridge.Call)
		out = demux
	}
	markedOut, markedErr := marks.Stream(out, sink), marks.Stream(stderr, nil)
	drained := make(chan struct{})
	var copies sync.WaitGroup
	copies.Go(func() { _, _ = io.Copy(markedOut, streams.Stdout) })
	copies.Go(func() { _, _ = io.Copy(markedErr, streams.Stderr) })
	wg.Go(func() {
		defer close(drained)
		copies.Wait()
		markedOut.Flush()
		if demux != nil {
			demux.Flush()
		}
		markedErr.Flush()
	})

	if m, ok := inst.(PeakMeter); ok {
		m.StartMeter()
	}
	begin := time.Now()
	wg.Go(func() { in.feed(p, spec) })
	stall := watchStall(inst)
	defer stall.close()

	limit := spec.Timeout
	if sr != nil {
		limit += launch.InterruptGrace + interruptMargin
	}
	l := &loop{
		r: r, inst: inst, ctx: ctx, snap: snap, marks: marks, endedC: marks.Ended(),
		timer: time.NewTimer(limit), begin: begin, thrashC: stall.thrashed(), sess: sr,
	}
	defer l.timer.Stop()
	l.timerC = l.timer.C
	if snap != nil {
		l.snapDone = snap.Done
	}
	for st := state(running{}); st != nil; {
		st = l.step(st)
	}
	var fared stallReport
	if l.killedFor == runner.TimedOut {
		fared = stall.report() // before the kill takes its cgroup
	}
	if !l.gone && !l.marked {
		inst.Kill()
		l.killed = true
		select {
		case <-inst.Done():
		case <-time.After(cleanupTimeout):
			return res, fmt.Errorf("sandbox %s did not stop after kill", inst.ID())
		}
	}
	if bridge != nil {
		// The run ended (by itself, killed, timed out, cancelled): no call
		// of it is answered any more.
		r.closeBridge(bridge, in, inst)
		res.ToolCalls = bridge.Calls()
	}
	res.Duration = l.duration
	if !l.ended {
		res.Duration = time.Since(begin)
	}
	if !l.marked { // with both marks in, every byte before them was passed on
		select {
		case <-drained:
		case <-time.After(r.cfg.DrainTimeout):
			inst.Detach()
			<-drained
		}
	}
	stopWatching()

	exitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	ex, err := inst.Exit(exitCtx, Ending{ByItself: l.marked, Killed: l.killed, Since: begin})
	if err != nil {
		return res, err
	}
	res.ExitCode = ex.Code
	if l.marked || l.ended && l.codeOK && !ex.OOMKilled && l.killedFor == "" {
		// The marks give the program's own status; the sandbox's may be
		// its launcher's, or a kill's after a refused snapshot.
		res.ExitCode = l.code
	}
	if ex.OOMKilled || l.killedFor == runner.OOMKilled {
		res.ExitCode = 137 // the OOM killer's SIGKILL (or the runner's), whatever the runtime reports
	}
	res.Stdout, res.Truncated = stdout.Result()
	var errTrunc bool
	res.Stderr, errTrunc = stderr.Result()
	res.Truncated = res.Truncated || errTrunc
	res.PeakMemoryBytes = max(ex.PeakMemoryBytes, l.peak)

	switch {
	case l.killedFor == runner.TimedOut:
		res.Reason = runner.TimedOut
		r.logStarved(fared, spec)
	case sr != nil && l.killedFor == "" && (sr.state == launch.MarkInterrupted || sr.state == launch.MarkTimedOut):
		res.Reason = runner.TimedOut
	case ex.OOMKilled:
		res.Reason = runner.OOMKilled
	case l.killedFor == runner.OOMKilled:
		res.Reason = runner.OOMKilled
		r.log.Warn("sandbox thrashing at its memory limit ended as oom_killed", "run_id", spec.RunID, "query_id", spec.QueryID,
			"sandbox", inst.ID(), "evidence", stall.evidence)
	case l.killedFor == runner.Cancelled:
		res.Reason = runner.Cancelled
	default:
		res.Reason = runner.Exited
	}
	if snap != nil {
		<-snap.Done // the output has ended, so the receiver has its stream's end
		select {
		case <-in.done:
		case <-time.After(r.cfg.DrainTimeout):
			inst.Detach() // a sandbox that ended without reading its input
			<-in.done
		}
		if why := snap.Take(&res, spec, launch.Ending{Ended: l.ended, Late: l.snapLate, InputErr: in.err}); why != "" && spec.Workspace != nil {
			r.log.Debug("workspace not saved", "run_id", spec.RunID, "query_id", spec.QueryID, "why", why)
		}
	}
	return res, nil
}

// inlet is the writer of a sandbox's standard input during a run.
type inlet struct {
	stdin io.WriteCloser
	// keep: the run has tools, and standard input stays open after the
	// input for the bridge's answers.
	keep      bool
	done      chan struct{} // closed when feed returned
	manifest  workspace.Manifest
	err       error
	closeOnce sync.Once
}

// feed sends the sandbox its header and the tar of its workspace
// (launch.Input.Write), then closes its standard input, also after an
// error, so that the launcher's tar sees the stream end; in a run with
// tools it leaves it open unless the input failed. A write error means
// the sandbox is gone already; how it ended says why.
func (in *inlet) feed(p *Plan, spec runner.Spec) {
	defer close(in.done)
	in.manifest, in.err = p.Input.Write(in.stdin, spec)
	if !in.keep || in.err != nil {
		in.close()
	}
}

// close closes the sandbox's standard input, once.
func (in *inlet) close() { in.closeOnce.Do(func() { _ = in.stdin.Close() }) }

// errNoInput is the answer writer's error once the input failed.
var errNoInput = errors.New("the sandbox's input failed")

// answers is the bridge's writer: the sandbox's standard input, after
// the input (init reads no answer before it, and no call comes before the
// program starts; this keeps the two writers apart even so).
type answers struct{ in *inlet }

func (a answers) Write(b []byte) (int, error) {
	<-a.in.done
	if a.in.err != nil {
		return 0, errNoInput
	}
	return a.in.stdin.Write(b)
}

// closeBridge closes a run's bridge (pending calls cancelled, their
// answers dropped), then the sandbox's standard input. An answer the
// sandbox no longer reads (init stops reading once the program exited)
// holds the bridge's writer: after DrainTimeout, standard input is closed
// under it, and after another the sandbox is detached. Bridge.Close may
// be called again.
func (r *Runner) closeBridge(b *launch.Bridge, in *inlet, inst Instance) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		b.Close()
	}()
	select {
	case <-closed:
	case <-time.After(r.cfg.DrainTimeout):
		in.close()
		select {
		case <-closed:
		case <-time.After(r.cfg.DrainTimeout):
			inst.Detach()
			<-closed
		}
	}
	in.close()
}

// logStarved logs how a run the timeout ended fared, when its platform can
// tell (StallMeter): a program that waited for a CPU most of its time was
// starved by the host's load, not slow by itself, and one near its memory
// limit may have been on its way to the OOM killer. The Result says
// timed_out either way: the timeout is wall-clock time.
func (r *Runner) logStarved(f stallReport, spec runner.Spec) {
	if !f.ok {
		return
	}
	r.log.Info("sandbox run timed out", "run_id", spec.RunID, "query_id", spec.QueryID,
		"cpu_wait", f.cpuWait.Round(time.Millisecond), "memory_stall", f.memStall.Round(time.Millisecond), "span", f.span.Round(time.Millisecond),
		"memory_bytes", f.last.MemoryBytes, "limit_bytes", f.last.LimitBytes, "cpu_starved", f.cpuWait*2 >= f.span)
}
