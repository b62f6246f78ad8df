package kube

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
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

// Validate refuses a network policy the runner cannot enforce
// (runner.ErrNetworkUnsupported), a deps directory (no host path is
// mounted), and a runtime without a RuntimeClass.
func (r *platform) Validate(spec runner.Spec, sp *sandbox.Plan) ([]string, error) {
	sb := spec.Sandbox
	if sb.Network.Enabled && r.egress == nil {
		return nil, fmt.Errorf("sandbox network enabled, but the runner has no egress proxy address Pods can reach: %w", runner.ErrNetworkUnsupported)
	}
	var problems []string
	if sb.DepsDir != "" {
		problems = append(problems, fmt.Sprintf("deps dir %q: the Kubernetes backend mounts no host path (sandbox.fs.deps is for the Docker backend; put dependencies in the image)", sb.DepsDir))
	}
	if sp.Runtime != runner.Runc && sp.Runtime != runner.Runsc {
		return problems, nil // refused already
	}
	if p := r.podPlan(sp); p.class == "" {
		what := "without a network"
		if p.network {
			what = "with a network"
		}
		err := runner.ErrRuntimeUnavailable
		if !p.network {
			err = runner.ErrNetworkUnsupported
		}
		return nil, fmt.Errorf("no RuntimeClass is configured for %s sandboxes %s: %w", p.Runtime, what, err)
	}
	return problems, nil
}

// Prepare refuses every run while the runner lacks its instance's Lease
// (with Config.Lease), starts watching the cluster, makes sure the plan's RuntimeClass
// passed its canary and, with lang, that the image has lang's interpreter
// (a probe run, once per image): before the first run under a class, and
// again after a failed check, a canary run under it checks what the class
// must give (see the package doc).
func (r *platform) Prepare(ctx context.Context, sp *sandbox.Plan, lang runner.Language) error {
	if err := r.guard(); err != nil {
		return err
	}
	p := r.podPlan(sp)
	if err := r.watch.start(ctx); err != nil {
		return err
	}
	if err := r.checks.require(ctx, p); err != nil {
		return err
	}
	if lang == "" {
		return nil
	}
	return r.images.require(ctx, p, lang)
}

// Create refuses, as Prepare does, without the instance's Lease; else it
// creates the Pod of req.Plan (and its NetworkPolicy), waits until
// its container runs, registers a networked Pod's address with the egress
// proxy, and attaches to it. The container's command waits for a first
// line on standard input before it starts the launcher, and Create sends
// that line once attached: a Pod's attach sees only what the container
// writes after it, and so nothing the launcher writes is lost.
func (r *platform) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Instance, error) {
	if err := r.guard(); err != nil {
		return nil, err
	}
	p, spec := r.podPlan(req.Plan), req.Spec
	env := launch.Env()
	var proxy netip.AddrPort
	if p.network {
		var err error
		if proxy, err = r.egress.addr(ctx); err != nil {
			return nil, err
		}
		env = append(env, req.Plan.NetworkEnv("http://"+proxy.String())...)
	}
	name := newPodName()
	pr := &podRun{r: r, name: name, done: make(chan struct{})}
	if err := r.createPod(ctx, spec, p, env, name, proxy); err != nil {
		req.Background(pr.Remove)
		return nil, err
	}
	t0 := time.Now()
	pod, err := r.waitStarted(ctx, name, p, req.Yield)
	if err != nil {
		req.Background(pr.Remove)
		return nil, err
	}
	r.log.Debug("sandbox pod started", "run_id", spec.RunID, "query_id", spec.QueryID, "pod", name, "pod_start", time.Since(t0))
	pr.peakFiles = peakFiles(cgroupRoot, pod, p.Runtime)
	if readPeak(pr.peakFiles) == 0 {
		r.peakUnseen.Do(func() {
			r.log.Info("the runner cannot read its pods' memory cgroups on their node: results report no peak memory (see docs/KUBERNETES.md)", "pod", name)
		})
	}
	if p.network {
		addr, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil {
			req.Background(pr.Remove)
			return nil, fmt.Errorf("pod %s has no address for the egress proxy (%q): %w", name, pod.Status.PodIP, err)
		}
		if err := r.cfg.Egress.Register(addr, req.Plan.Registration(spec)); err != nil {
			req.Background(pr.Remove)
			return nil, fmt.Errorf("register the sandbox with the egress proxy: %w", err)
		}
		pr.src = addr
	}
	if err := pr.start(ctx); err != nil {
		pr.Detach()
		req.Background(pr.Remove)
		return nil, err
	}
	return pr, nil
}

// createPod creates the NetworkPolicy, then the Pod, of plan p. The
// requests are not cancelled with ctx: an object the API server created
// after the caller gave up would be left behind. On error nothing of it
// is left (in the background).
func (r *platform) createPod(ctx context.Context, spec runner.Spec, p *plan, env []string, name string, proxy netip.AddrPort) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := r.cs.NetworkingV1().NetworkPolicies(r.cfg.Namespace).Create(ctx, r.networkPolicy(name, p, proxy), metav1.CreateOptions{}); err != nil {
		return apiErr("create network policy", err)
	}
	pod := r.pod(spec, p, env, name)
	if _, skipped := runAnnotations(spec); len(skipped) > 0 && p.PoolKey == "" {
		r.log.Warn("spec labels that are not valid annotation keys are left off the pod", "run_id", spec.RunID, "keys", skipped)
	}
	if _, err := r.cs.CoreV1().Pods(r.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return apiErr("create pod", err)
	}
	return nil
}

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
// the pool holds warm Pods takes the place of one (yield): warm Pods hold
// their requests, and a run must not wait for them. A warm Pod the
// scheduler cannot place is sandbox.ErrNoRoom: warm Pods take only room
// no run needs, so the pool gives it up and tries again later.
func (r *platform) waitStarted(ctx context.Context, name string, p *plan, yield func() bool) (*corev1.Pod, error) {
	waitCtx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	if yield != nil && p.PoolKey == "" {
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Go(func() { r.yieldWhileUnschedulable(waitCtx, name, yield) })
	}
	pod, err := r.watch.wait(waitCtx, name, func(pod *corev1.Pod) (bool, error) {
		if pod == nil {
			return false, nil // not seen yet
		}
		if p.PoolKey != "" && unschedulable(pod) {
			return false, fmt.Errorf("warm pod %s: %w", name, sandbox.ErrNoRoom)
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
					p.Image, loadHint(p.Image), errImageMissing, w.Message)
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
func (r *platform) yieldWhileUnschedulable(ctx context.Context, name string, yield func() bool) {
	tick := time.NewTicker(yieldInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if pod := r.watch.get(name); pod != nil && unschedulable(pod) && yield() {
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
func (r *platform) attach(ctx context.Context, name string, opts remotecommand.StreamOptions) error {
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

// podRun is one running Pod as a sandbox.Instance: its attach, split
// into its standard streams, open from before its launcher started until
// it is detached.
type podRun struct {
	r    *platform
	name string
	src  netip.Addr // registered with the egress proxy; invalid: none

	// peakFiles hold the kernel's high-water mark of the sandbox's
	// memory, where this process can see the node's cgroups (peakFiles).
	peakFiles []string

	stdin     io.WriteCloser
	pipes     *sandbox.Pipes
	stop      context.CancelFunc // ends the attach
	done      chan struct{}      // closed when the attach returned
	attachErr error

	detach sync.Once
	remove sync.Once
}

// goLine is what the container's command waits for before it starts the
// launcher (see limits).
const goLine = "\n"

// start attaches to the Pod's container and sends it the go line.
func (pr *podRun) start(ctx context.Context) error {
	attachCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	pr.stop = stop
	stdinR, stdinW := io.Pipe()
	pr.stdin, pr.pipes = stdinW, sandbox.NewPipes()
	go func() {
		defer close(pr.done)
		stdout, stderr := pr.pipes.Writers()
		err := pr.r.attach(attachCtx, pr.name, remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdout, Stderr: stderr})
		pr.attachErr = err
		// An input still being written has nowhere to go.
		_ = stdinR.CloseWithError(errors.New("the sandbox's standard input closed"))
		pr.pipes.End(err)
	}()
	if _, err := io.WriteString(stdinW, goLine); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		<-pr.done
		return fmt.Errorf("start pod %s: %w", pr.name, errors.Join(pr.attachErr, err))
	}
	return nil
}

// ID is the Pod's name.
func (pr *podRun) ID() string { return pr.name }

// Streams are the attach's.
func (pr *podRun) Streams() sandbox.Streams { return pr.pipes.Streams(pr.stdin) }

// Done is closed once the attach returned: the container ended, or the
// attach was lost (Exit says which).
func (pr *podRun) Done() <-chan struct{} { return pr.done }

// Kill deletes the Pod at once.
func (pr *podRun) Kill() { pr.r.kill(pr.name) }

// Detach ends the attach and makes the proxy forget a networked Pod's
// address.
func (pr *podRun) Detach() {
	pr.detach.Do(func() {
		if pr.stop != nil {
			pr.stop()
			pr.pipes.Drop()
			<-pr.done
		}
		if pr.src.IsValid() {
			pr.r.cfg.Egress.Unregister(pr.src)
		}
	})
}

// EgressCA is the egress proxy's CA certificate (sandbox.EgressPlatform);
// nil without a proxy.
func (r *platform) EgressCA() []byte {
	if r.cfg.Egress == nil {
		return nil
	}
	return r.cfg.Egress.CACert()
}

// BindRun hands a networked Pod's registration with the egress proxy to
// spec's run (sandbox.RunBinder); without a network it does nothing.
func (pr *podRun) BindRun(spec runner.Spec) error {
	if !pr.src.IsValid() {
		return nil
	}
	if err := pr.r.cfg.Egress.Bind(pr.src, sandbox.RunIdentity(spec)); err != nil {
		return fmt.Errorf("bind the sandbox to its run: %w", err)
	}
	return nil
}

// Remove deletes the Pod, then its NetworkPolicy.
func (pr *podRun) Remove() { pr.remove.Do(func() { pr.r.remove(pr.name) }) }

// Exit says how the Pod's container ended. Killed by the runner, it ended
// with 137 (the kubelet's status may say otherwise, or nothing once the
// Pod is gone); otherwise its final status gives the exit code and
// whether the memory limit killed it.
func (pr *podRun) Exit(ctx context.Context, e sandbox.Ending) (sandbox.Exit, error) {
	if e.ByItself {
		return sandbox.Exit{}, nil // the runner read the peak when the marks came
	}
	// The cgroup may outlive the container for a moment: what it held
	// then is the peak of a run that was killed or died.
	ex := sandbox.Exit{PeakMemoryBytes: pr.Peak()}
	if e.Killed {
		ex.Code = 137
		return ex, nil
	}
	st, err := pr.r.finalStatus(pr.name)
	switch {
	case st != nil:
		ex.Code, ex.OOMKilled = int(st.ExitCode), st.Reason == "OOMKilled"
		return ex, nil
	case pr.attachErr != nil:
		pr.r.kill(pr.name)
		return ex, pr.attachErr
	}
	return ex, err
}

// StartMeter does nothing: the kernel keeps the high-water mark that
// Peak reads.
func (pr *podRun) StartMeter() {}

// Peak is the kernel's high-water mark of the memory charged to the
// sandbox's cgroup on its node (see peakFiles), or 0 when this process
// cannot see that cgroup: a runner that does not run on the Pod's node
// with the node's cgroup file systems reports no peak.
func (pr *podRun) Peak() int64 { return readPeak(pr.peakFiles) }

// LabelRun adds the run's labels and annotations to a warm Pod it took.
func (pr *podRun) LabelRun(spec runner.Spec) {
	r := pr.r
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	ann, _ := runAnnotations(spec)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": runLabels(spec), "annotations": ann}})
	if err == nil {
		_, err = r.cs.CoreV1().Pods(r.cfg.Namespace).Patch(ctx, pr.name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		r.log.Warn("label a warm sandbox pod with its run", "pod", pr.name, "run_id", spec.RunID, "err", err)
	}
}

// finalStatus waits, at most cleanupTimeout, for the Pod's container to
// terminate and returns how it did; nil when the Pod went away first.
func (r *platform) finalStatus(name string) (*corev1.ContainerStateTerminated, error) {
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
func (r *platform) kill(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := r.deletePod(ctx, name); err != nil {
		r.log.Warn("stop sandbox pod", "pod", name, "err", err)
	}
}

// remove deletes the Pod, waits until it is gone, then deletes its
// NetworkPolicy, with fresh contexts.
func (r *platform) remove(name string) {
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
