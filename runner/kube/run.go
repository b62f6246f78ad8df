package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// Timeouts for API calls that must happen even after the caller's context
// ended (deleting a Pod, reading its final status).
const (
	cleanupTimeout = 30 * time.Second
	// drainTimeout bounds the wait for the output stream to end after
	// the Pod was told to stop: the kubelet gives a container two seconds
	// before it kills it.
	drainTimeout = 10 * time.Second
)

// Run runs spec in a new Pod, or in a warm one of the pool (see
// PoolConfig), and deletes the Pod whatever happened, in the background
// right after (Close, Cleanup and Leftovers wait for those deletions). A
// Pod serves one run only.
//
// Before the first run under a RuntimeClass, and again after a failed
// check, a canary run under it checks what the class must give (see the
// package doc); a class that fails refuses the run with the canary's
// finding (runner.ErrNetworkUnsupported for a network that does not hold,
// runner.ErrRuntimeUnavailable for a missing class). Before the first run
// in an image, a probe run lists its interpreters; a language the image
// lacks is runner.ErrLanguageUnavailable.
//
// Errors, each wrapping a runner sentinel where one applies: a refused
// Spec (runner.ErrInvalidSpec, every problem listed), a network policy the
// runner cannot enforce (runner.ErrNetworkUnsupported), a RuntimeClass
// that is missing or fails its canary, an image without the language's
// interpreter, a cluster that cannot be reached or does not start the Pod
// within Config.StartTimeout (runner.ErrUnavailable, with the Pod's own
// reason). An image the node's runtime lacks is an error naming the
// command that loads it.
//
// Once the Pod's container runs, Run returns a Result and a nil error
// (unless the attach to it fails): Exited (or OOMKilled when the memory
// limit killed it), TimedOut (exit code 137), or Cancelled. If ctx ends
// before the container ran, Run returns ctx's error. Output is streamed to
// spec.OnOutput as it arrives, each stream capped at MaxOutputBytes.
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
	if err := r.watch.start(ctx); err != nil {
		return res, err
	}
	if err := r.checks.require(ctx, p); err != nil {
		return res, err
	}
	if err := r.images.require(ctx, p, spec.Language); err != nil {
		return res, err
	}
	if r.pool != nil {
		if w := r.pool.take(spec, p); w != nil {
			return r.runWarm(ctx, w, p, spec, res)
		}
	}
	return r.runCold(ctx, p, spec, res)
}

// runCold creates a Pod for spec, waits until its container runs and
// executes the run in it.
func (r *Runner) runCold(ctx context.Context, p *plan, spec runner.Spec, res runner.Result) (runner.Result, error) {
	var proxy netip.AddrPort
	if p.network {
		var err error
		if proxy, err = r.egress.addr(ctx); err != nil {
			return res, err
		}
		p.env = append(launch.Env(), proxyEnv(proxy)...)
	}
	name := newPodName()
	if err := r.createPod(ctx, spec, p, name, proxy); err != nil {
		return res, err
	}
	defer r.removeLater(name)
	t0 := time.Now()
	pod, err := r.waitStarted(ctx, name, p)
	if err != nil {
		return res, err
	}
	r.log.Debug("sandbox run", "run_id", spec.RunID, "query_id", spec.QueryID, "pod", name, "pod_start", time.Since(t0))
	if p.network {
		addr, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil {
			return res, fmt.Errorf("pod %s has no address for the egress proxy (%q): %w", name, pod.Status.PodIP, err)
		}
		if err := r.cfg.Egress.Register(addr, egress.RunIdentity{RunID: spec.RunID, QueryID: spec.QueryID}, spec.Sandbox.Network); err != nil {
			return res, fmt.Errorf("register the sandbox with the egress proxy: %w", err)
		}
		defer r.cfg.Egress.Unregister(addr)
	}
	return r.execute(ctx, name, p, spec, res)
}

// proxyEnv is the sandbox's proxy environment: upper and lower case, as
// tools differ in which they read, and an empty NO_PROXY so that nothing
// bypasses the proxy (nothing else is reachable anyway).
func proxyEnv(proxy netip.AddrPort) []string {
	u := "http://" + proxy.String()
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u, "NO_PROXY=", "no_proxy="}
}

// createPod creates the NetworkPolicy, then the Pod, of plan p. The
// requests are not cancelled with ctx: an object the API server created
// after the caller gave up would be left behind. On error nothing of it
// is left (in the background).
func (r *Runner) createPod(ctx context.Context, spec runner.Spec, p *plan, name string, proxy netip.AddrPort) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := r.cs.NetworkingV1().NetworkPolicies(r.cfg.Namespace).Create(ctx, r.networkPolicy(name, p, proxy), metav1.CreateOptions{}); err != nil {
		return apiErr("create network policy", err)
	}
	pod := r.pod(spec, p, name)
	if _, skipped := runAnnotations(spec); len(skipped) > 0 && p.poolKey == "" {
		r.log.Warn("spec labels that are not valid annotation keys are left off the pod", "run_id", spec.RunID, "keys", skipped)
	}
	if _, err := r.cs.CoreV1().Pods(r.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		r.removeLater(name)
		return apiErr("create pod", err)
	}
	return nil
}

// errNoRoom marks a warm Pod the scheduler found no node for: warm Pods
// take only room no run needs, so the pool gives it up and tries again
// later rather than wait for room.
var errNoRoom = errors.New("no node has room for it now")

// errImageMissing marks a Pod that cannot start because the node lacks
// its image: the image's fault, not its RuntimeClass's, and mended by
// loading it, so no check remembers it.
var errImageMissing = errors.New("image missing")

// startFailures are the reasons a container waits with that mean it will
// not start by itself.
var startFailures = map[string]bool{
	"ErrImageNeverPull": true, "ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
	"CrashLoopBackOff": true, "ImageInspectError": true,
}

// waitStarted waits until the Pod's container runs, at most
// Config.StartTimeout, and returns the Pod as it was then. A container
// that cannot start is an error with its reason; one that already ended
// is returned as it is (execute reads what it left). A warm Pod that
// cannot be scheduled is errNoRoom at once.
//
// The Pod of a run (not a warm Pod) that the scheduler cannot place while
// the pool holds warm Pods takes the place of one (see pool.yield): warm
// Pods hold their requests, and a run must not wait for them.
func (r *Runner) waitStarted(ctx context.Context, name string, p *plan) (*corev1.Pod, error) {
	waitCtx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	if r.pool != nil && p.poolKey == "" {
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Go(func() { r.yieldWhileUnschedulable(waitCtx, name) })
	}
	pod, err := r.watch.wait(waitCtx, name, func(pod *corev1.Pod) (bool, error) {
		if pod == nil {
			return false, nil // not seen yet
		}
		if p.poolKey != "" && unschedulable(pod) {
			return false, fmt.Errorf("warm pod %s: %w", name, errNoRoom)
		}
		st := sandboxStatus(pod)
		switch {
		case pod.DeletionTimestamp != nil:
			return false, fmt.Errorf("pod %s was deleted before it ran", name)
		case st != nil && (st.State.Running != nil || st.State.Terminated != nil):
			return true, nil
		case st != nil && st.State.Waiting != nil && startFailures[st.State.Waiting.Reason]:
			w := st.State.Waiting
			if w.Reason == "ErrImageNeverPull" {
				return false, fmt.Errorf("image %s is not in the cluster's container runtime (%s; no registry is used): %w: %s",
					p.image, loadHint(p.image), errImageMissing, w.Message)
			}
			return false, fmt.Errorf("pod %s cannot start its container: %s: %s", name, w.Reason, w.Message)
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			return false, fmt.Errorf("pod %s ended before its container ran: %s %s", name, pod.Status.Reason, pod.Status.Message)
		}
		return false, nil
	})
	switch {
	case err == nil:
		return pod, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("pod %s did not start within %s (%s): %w", name, r.cfg.StartTimeout, pendingReason(pod), runner.ErrUnavailable)
	}
	return nil, err
}

// yieldInterval is how often a run's Pod the scheduler cannot place asks
// the pool for a warm Pod's place: the scheduler needs a moment to see
// the last one go, and warm Pods still being made become ready later.
const yieldInterval = time.Second

// yieldWhileUnschedulable has the pool give up a warm Pod every
// yieldInterval while the scheduler finds no node for the Pod name, until
// ctx ends.
func (r *Runner) yieldWhileUnschedulable(ctx context.Context, name string) {
	tick := time.NewTicker(yieldInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if pod := r.watch.get(name); pod != nil && unschedulable(pod) && r.pool.yield() {
			r.log.Info("a run's pod cannot be scheduled: a warm pod gave up its place", "pod", name)
		}
	}
}

// unschedulable reports whether the scheduler found no node for the Pod.
func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// loadHint names the command that puts image into the cluster.
func loadHint(image string) string {
	for _, p := range profile.All() {
		if p.Tag() == image {
			return "load it with: gatekeeper image build --kube " + p.Name
		}
	}
	return "load it from the Docker engine with: scripts/ensure-kube image " + image
}

// pendingReason says why a Pod has not started, from its conditions and
// its container's state.
func pendingReason(p *corev1.Pod) string {
	if p == nil {
		return "the API server never showed it"
	}
	var why []string
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			why = append(why, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	if st := sandboxStatus(p); st != nil && st.State.Waiting != nil {
		why = append(why, fmt.Sprintf("container waiting: %s %s", st.State.Waiting.Reason, st.State.Waiting.Message))
	}
	if len(why) == 0 {
		return "phase " + string(p.Status.Phase)
	}
	return strings.Join(why, "; ")
}

// attach attaches to the Pod's container: stdin, stdout and stderr, no
// TTY, over WebSocket (the remote command protocol v5, whose stdin can be
// closed on its own), falling back to SPDY where the upgrade fails. It
// returns when the streams end (the container exited, or ctx ended).
func (r *Runner) attach(ctx context.Context, name string, opts remotecommand.StreamOptions) error {
	req := r.cs.CoreV1().RESTClient().Post().Namespace(r.cfg.Namespace).Resource("pods").Name(name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: containerName, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(r.cfg.REST, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("attach to pod %s: %w", name, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(r.cfg.REST, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("attach to pod %s: %w", name, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("attach to pod %s: %w", name, err)
	}
	if err := exec.StreamWithContext(ctx, opts); err != nil {
		return apiErr("attach to pod "+name, err)
	}
	return nil
}

// execute runs spec in the running Pod name: it attaches to its
// container, feeds it its header and workspace, streams its output until
// the end marks, the timeout or ctx's end; then it takes the snapshot of
// /workspace the launcher sends back, if the run asked for one, and saves
// it or returns its files. The timeout counts from the moment the code is
// sent. Where the marks are absent (the sandbox was killed) or carry a
// signal's status, the Pod's status gives the exit code and whether the
// memory limit killed it.
func (r *Runner) execute(ctx context.Context, name string, p *plan, spec runner.Spec, res runner.Result) (runner.Result, error) {
	// The attach lives until execute returns, whatever ctx does. Every
	// goroutine started here ends before execute returns.
	watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var snap *launch.Snapshot
	defer func() {
		stopWatching()
		wg.Wait()
		snap.Close()
	}()

	inputDone := make(chan struct{})
	var manifest workspace.Manifest
	var inputErr error
	if launch.WantsSnapshot(spec) {
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

	stdinR, stdinW := io.Pipe()
	drained := make(chan struct{})
	var attachErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(drained)
		attachErr = r.attach(watchCtx, name, remotecommand.StreamOptions{Stdin: stdinR, Stdout: markedOut, Stderr: markedErr})
		// An input still being written has nowhere to go.
		_ = stdinR.CloseWithError(errors.New("the sandbox's standard input closed"))
		markedOut.Flush()
		markedErr.Flush()
	}()

	begin := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(inputDone)
		// A write error means the attach or the container is gone
		// already; the status below says why.
		manifest, inputErr = p.in.Write(stdinW, spec)
		_ = stdinW.Close() // the launcher's tar sees the stream end
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
	// after) waits a moment for them, as the Docker backend's does:
	// killing at once would report the run as ended early instead of its
	// snapshot as refused.
	var refusedKill <-chan time.Time
	killOnEnd := false
	var killedFor runner.ExitReason
	streamEnded, marked, ended := false, false, false
	code, codeOK := 0, false
	endedC := marks.Ended()
	for !streamEnded && !marked && killedFor == "" {
		if ended && codeOK && code < 128 && snapDone == nil {
			// The program exited by itself, its output is complete and
			// its snapshot (if any) in. An exit by signal (137 for the
			// OOM killer) is left to the Pod's status, which alone says
			// whether the memory limit did it.
			marked = true
			break
		}
		select {
		case <-drained:
			streamEnded = true
		case <-endedC:
			endedC, ended = nil, true
			res.Duration = time.Since(begin)
			code, codeOK = marks.ExitCode()
			timer.Stop() // the program has ended: the snapshot has a deadline of its own
			if snapDone != nil {
				snapTimeout = time.After(launch.SnapshotGrace)
			}
			if killOnEnd {
				refusedKill, killOnEnd = nil, false
				r.kill(name) // its refused snapshot may still be sending
			}
		case <-snapDone:
			snapDone, snapTimeout = nil, nil
			switch {
			case snap.Err == nil:
			case ended:
				r.kill(name) // it may still be sending
			default:
				killOnEnd, refusedKill = true, time.After(time.Second)
			}
		case <-refusedKill:
			refusedKill, killOnEnd = nil, false
			r.kill(name)
		case <-snapTimeout:
			snapTimeout, snapLate = nil, true
			r.kill(name)
		case <-timer.C:
			killedFor = runner.TimedOut
		case <-ctx.Done():
			killedFor = runner.Cancelled
		}
	}
	if killedFor != "" {
		r.kill(name)
	}
	if !ended {
		res.Duration = time.Since(begin)
	}
	if !marked { // with both marks in, every byte before them was passed on
		select {
		case <-drained:
		case <-time.After(drainTimeout):
			stopWatching()
			<-drained
		}
	}

	oomKilled := false
	switch {
	case killedFor != "":
		res.ExitCode = 137
	case marked:
		res.ExitCode = code
	default:
		// The program did not exit by itself, or a signal ended it, or the
		// attach was lost: the container's final status says how it ended.
		st, err := r.finalStatus(name)
		switch {
		case st != nil:
			res.ExitCode = int(st.ExitCode)
			oomKilled = st.Reason == "OOMKilled"
		case attachErr != nil:
			r.kill(name)
			return res, attachErr
		case err != nil:
			return res, err
		}
		switch {
		case oomKilled:
			// The OOM killer's SIGKILL, whatever the runtime reports
			// (gVisor's whole sandbox dies, and containerd says 128).
			res.ExitCode = 137
		case ended && codeOK:
			res.ExitCode = code // the marks agree on it; the container's status may be the launcher's
		}
	}
	res.Stdout, res.Truncated = stdout.Result()
	var errTrunc bool
	res.Stderr, errTrunc = stderr.Result()
	res.Truncated = res.Truncated || errTrunc

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
			stopWatching() // a container that ended without reading its input
			<-inputDone
		}
		if why := snap.Take(&res, spec, launch.Ending{Ended: ended, Late: snapLate, InputErr: inputErr}); why != "" && spec.Workspace != nil {
			r.log.Debug("workspace not saved", "run_id", spec.RunID, "query_id", spec.QueryID, "why", why)
		}
	}
	return res, nil
}

// finalStatus waits, at most cleanupTimeout, for the Pod's container to
// terminate and returns how it did; nil when the Pod went away first.
func (r *Runner) finalStatus(name string) (*corev1.ContainerStateTerminated, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	pod, err := r.watch.wait(ctx, name, func(p *corev1.Pod) (bool, error) {
		st := sandboxStatus(p)
		return p == nil || st != nil && st.State.Terminated != nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for the end of pod %s: %w", name, err)
	}
	if st := sandboxStatus(pod); st != nil {
		return st.State.Terminated, nil
	}
	return nil, nil
}

// kill tells the kubelet to stop the Pod now (its deletion, with the
// shortest grace period), with a fresh context. A Pod that is gone is
// fine.
func (r *Runner) kill(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := r.deletePod(ctx, name); err != nil {
		r.log.Warn("stop sandbox pod", "pod", name, "err", err)
	}
}

// removeLater deletes the Pod of a run that ended, and its NetworkPolicy
// once the Pod is gone, in the background, off the run's path. Close,
// Cleanup and Leftovers wait for these removals; Cleanup also collects
// the Pods of a sidecar that died before they ended.
func (r *Runner) removeLater(name string) {
	r.removals.Go(func() { r.remove(name) })
}

// remove deletes the Pod, waits until it is gone, then deletes its
// NetworkPolicy, with fresh contexts.
func (r *Runner) remove(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*cleanupTimeout)
	defer cancel()
	if err := r.deletePod(ctx, name); err != nil {
		r.log.Warn("delete sandbox pod", "pod", name, "err", err)
	}
	if err := r.watch.waitGone(ctx, name); err != nil {
		r.log.Warn("sandbox pod not gone; its network policy stays until the next cleanup", "pod", name, "err", err)
		return
	}
	err := r.cs.NetworkingV1().NetworkPolicies(r.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.log.Warn("delete sandbox network policy", "policy", name, "err", err)
	}
}
