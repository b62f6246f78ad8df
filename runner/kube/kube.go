// Package kube runs sandboxed code as Kubernetes Pods, one Pod per run: it
// is the Kubernetes platform of runner/sandbox, whose runner (validation,
// the warm pool, the run loop, metrics) it wraps. What it provides is what
// only a cluster has: the Pod and NetworkPolicy (pod.go), the Pod's start,
// attach and end as the API server reports them (run.go, watch.go), the
// RuntimeClass canaries and image probes (checks.go), the listener of the
// egress proxy the cluster's firewall admits, and image loading (load.go).
//
// It enforces a runner.Sandbox with the Pod's own fields (the table in
// docs/SANDBOX.md maps each guarantee to the field that enforces it): a
// RuntimeClass chosen by the runtime and by whether the run has a
// network; a non-root uid and gid; a read-only root; no privilege
// escalation, no capabilities, seccomp RuntimeDefault; no service account
// token, no service links, no host namespaces and no host path; requests
// equal to limits for cpu, memory and ephemeral storage; memory-backed
// emptyDir volumes with a sizeLimit at /workspace and /tmp;
// activeDeadlineSeconds as the backstop and restartPolicy Never; and the
// labels of the instance, the run and the query.
//
// The code and files never touch a disk of the sidecar's or the node's:
// the runner attaches to the Pod's container and writes the launch
// protocol (runner/launch: a header line and a tar of /workspace) on its
// standard input, then reads its standard output and error until the
// launcher's end marks, and the snapshot of /workspace after them: the
// same launcher, marks and snapshot as the Docker backend's. Only where
// the marks are absent (the sandbox was killed) does the Pod's status
// supply the exit code and say whether the memory limit killed it. A
// run's peak memory is the kernel's high-water mark of the Pod's memory
// cgroup, which only a runner on the Pod's node can read (cgroup.go);
// elsewhere it is 0, unknown.
//
// A run without a network uses a RuntimeClass whose handler gives the Pod
// no interface but loopback (RuntimeClasses.RuncNoNet, RunscNoNet), so
// net.enabled: false holds whatever the network plugin does with
// NetworkPolicy; a deny-all NetworkPolicy selecting the Pod is the second
// layer. A run with a network uses the plain class, its NetworkPolicy
// allows egress only to the egress proxy (Config.Egress), which the
// runner serves on Config.EgressAddr, an address the cluster lets Pods
// reach and nothing else; HTTP_PROXY and HTTPS_PROXY point there. Before
// a RuntimeClass serves its first run, a canary run under it checks what
// it must give: a class without a network must leave the canary only
// loopback and fail every connection; a class with a network must reach
// the proxy and fail to reach anything else (the API server, another port
// of the proxy's address); and every class must run the canary under a
// seccomp filter whose clone3 is not refused with EPERM (gVisor Pods get
// runner/seccomp's profile as a Localhost profile, which runsc applies
// only with oci-seccomp). A class that fails is refused
// (runner.ErrNetworkUnsupported or runner.ErrRuntimeUnavailable), never
// used unchecked.
//
// Kubernetes has no per-Pod ulimits: the container's command sets
// RLIMIT_NOFILE, RLIMIT_FSIZE and RLIMIT_NPROC with the shell's ulimit
// before it becomes the launcher's PID 1 (see Config.HostNproc for what
// RLIMIT_NPROC bounds under runc). The pids cgroup of a Pod is the
// kubelet's node-wide podPidsLimit. docs/SANDBOX.md lists every
// difference from the Docker backend.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// Labels on Pods and NetworkPolicies beside runner.LabelInstance,
// runner.LabelRunID, runner.LabelQueryID and runner.LabelPool.
const (
	// LabelPod carries the Pod's own name: its NetworkPolicy selects it.
	LabelPod = "gatekeeper.pod"
	// LabelNetwork is "none" or "egress".
	LabelNetwork = "gatekeeper.network"
)

// Annotations carry what a label value cannot hold (any run or query id,
// the Spec's own labels).
const (
	AnnotationRunID   = "gatekeeper.run_id"
	AnnotationQueryID = "gatekeeper.query_id"
)

// Defaults for the zero fields of Config.
const (
	DefaultNamespace        = "gatekeeper"
	DefaultEphemeralStorage = 256 << 20
	DefaultStartTimeout     = 2 * time.Minute
	// DefaultPoolMaxMaking is the warm Pods made at once (Docker's pool
	// makes two): a Pod's start is seconds of waiting on the scheduler
	// and the kubelet, so two at once refill fewer than one a second.
	DefaultPoolMaxMaking = 4
)

// RuntimeClasses names the RuntimeClass of each kind of run. An empty
// name refuses runs of that kind.
type RuntimeClasses struct {
	// Runc and Runsc run sandboxes with a network (egress through the
	// proxy only).
	Runc, Runsc string
	// RuncNoNet and RunscNoNet run sandboxes without one: their handler
	// must give a Pod no interface but loopback, which the canary checks.
	RuncNoNet, RunscNoNet string
}

// DefaultRuntimeClasses are the classes scripts/ensure-kube installs.
func DefaultRuntimeClasses() RuntimeClasses {
	return RuntimeClasses{Runc: "runc", RuncNoNet: "runc-nonet", Runsc: "gvisor", RunscNoNet: "gvisor-nonet"}
}

// For returns the class of runs under rt, with or without a network.
func (c RuntimeClasses) For(rt runner.Runtime, network bool) string {
	switch {
	case rt == runner.Runc && network:
		return c.Runc
	case rt == runner.Runc:
		return c.RuncNoNet
	case rt == runner.Runsc && network:
		return c.Runsc
	case rt == runner.Runsc:
		return c.RunscNoNet
	}
	return ""
}

// Config configures a Runner. Instance and REST are required.
type Config struct {
	// Instance names this runner: every Pod and NetworkPolicy it creates
	// carries the label gatekeeper.instance=Instance, and Cleanup removes
	// only those. A valid label value: 1 to 63 of [A-Za-z0-9_.-],
	// starting and ending with a letter or digit.
	Instance string
	// Namespace is where the Pods run; empty means DefaultNamespace.
	Namespace string
	// REST is how to reach the API server, with the runner's credentials:
	// exactly Permissions in Namespace, nothing cluster-wide.
	REST *rest.Config
	// Lease, when set, guards the instance against a second live sidecar
	// in the cluster (see LeaseConfig): Start takes it, and the runner
	// makes no sandbox without it.
	Lease *LeaseConfig
	// Classes names the RuntimeClasses; the zero value means
	// DefaultRuntimeClasses.
	Classes RuntimeClasses
	// Egress is the egress proxy networked sandboxes reach the outside
	// through; nil refuses a Sandbox with Network.Enabled
	// (runner.ErrNetworkUnsupported), as does an EgressAddr that is not
	// valid.
	Egress sandbox.Egress
	// EgressAddr is where the runner serves the proxy: an address Pods
	// of the networked classes can reach (on the test cluster, the Pod
	// network's gateway inside the cluster's network namespace), and
	// EgressPorts the ports it may listen on there, the first free one
	// taken (the test cluster's firewall admits exactly these).
	EgressAddr  netip.Addr
	EgressPorts [2]uint16
	// Listen opens the runner's listeners at EgressAddr; nil means
	// net.Listen. (The test cluster's address exists only in its network
	// namespace: see internal/netns.)
	Listen func(network, address string) (net.Listener, error)
	// EphemeralStorageBytes is each Pod's ephemeral-storage request and
	// limit: what the node may hold for it outside its memory, chiefly
	// the container's log, which the CRI writes whatever gatekeeper reads.
	// 0 means DefaultEphemeralStorage.
	EphemeralStorageBytes int64
	// Nofile is RLIMIT_NOFILE; 0 means sandbox.DefaultNofile.
	Nofile int64
	// HostUsers runs runc Pods in the node's own user namespace instead
	// of one of their own (hostUsers: false, which needs Kubernetes 1.33
	// or later, a runtime handler with idmapped mounts and Linux 6.3 or
	// later). In its own user namespace a Pod's uid is its own on the node,
	// so RLIMIT_NPROC, set to Sandbox.PIDs, bounds that run's processes
	// alone; in the node's, the kernel counts the uid's processes across
	// every Pod and container, so RLIMIT_NPROC can only be the HostNproc
	// backstop and a run is bounded by the kubelet's node-wide
	// podPidsLimit instead of Sandbox.PIDs (a weaker bound, which the
	// runner logs when it starts). The canary checks that a runc Pod has
	// its own user namespace unless HostUsers is set. gVisor Pods always
	// use the node's (their kernel counts RLIMIT_NPROC per sandbox).
	HostUsers bool
	// HostNproc is RLIMIT_NPROC of runc Pods with HostUsers; 0 means
	// sandbox.DefaultHostNproc.
	HostNproc int64
	// StartTimeout bounds how long a Pod may take from its creation to a
	// running container (scheduling included); past it the run fails with
	// runner.ErrUnavailable. 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// Pool configures the warm pool of Pods (see sandbox.PoolConfig); the
	// zero value disables it.
	Pool sandbox.PoolConfig
	// MaxIdleSessions bounds the sessions whose sandbox waits for a run
	// (sandbox.Config.MaxIdleSessions).
	MaxIdleSessions int
	// Logger receives what happens outside a run's Result. nil discards.
	Logger *slog.Logger
}

var instanceRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$`)

// Runner runs Specs as Pods: runner/sandbox's runner over the Kubernetes
// platform. It is safe for concurrent use; it does not bound concurrency
// itself (see runner.Queue).
type Runner struct {
	*sandbox.Runner
	pf *platform
}

// platform is a Kubernetes cluster as a sandbox.Platform.
type platform struct {
	cfg    Config
	cs     kubernetes.Interface
	log    *slog.Logger
	watch  *podWatch
	egress *egressListener // nil without Config.Egress
	checks *classChecks
	images *imageProbes
	lease  *instanceLease  // nil without Config.Lease
	sr     *sandbox.Runner // runs the canaries and probes
	// peakUnseen logs once that the Pods' memory cgroups are out of sight.
	peakUnseen sync.Once
}

// New returns a Runner for cfg. It does not contact the API server; the
// first Run, Warm, Check or Cleanup does, and reports a cluster that
// cannot be reached as an error wrapping runner.ErrUnavailable.
func New(cfg Config) (*Runner, error) {
	if !instanceRE.MatchString(cfg.Instance) {
		return nil, fmt.Errorf("instance name %q: want a label value, 1 to 63 of [A-Za-z0-9_.-] starting and ending with a letter or digit", cfg.Instance)
	}
	if cfg.REST == nil {
		return nil, errors.New("kube: no API server configuration (Config.REST)")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Classes == (RuntimeClasses{}) {
		cfg.Classes = DefaultRuntimeClasses()
	}
	if cfg.EphemeralStorageBytes <= 0 {
		cfg.EphemeralStorageBytes = DefaultEphemeralStorage
	}
	if cfg.Nofile <= 0 {
		cfg.Nofile = sandbox.DefaultNofile
	}
	if cfg.HostNproc <= 0 {
		cfg.HostNproc = sandbox.DefaultHostNproc
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.Pool.MaxMaking == 0 {
		cfg.Pool.MaxMaking = DefaultPoolMaxMaking
	}
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	cs, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	return newRunner(cfg, cs)
}

func newRunner(cfg Config, cs kubernetes.Interface) (*Runner, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &platform{cfg: cfg, cs: cs, log: log}
	r.watch = newPodWatch(cs, cfg.Namespace, cfg.Instance, log)
	if cfg.Egress != nil && cfg.EgressAddr.IsValid() {
		r.egress = &egressListener{r: r}
	}
	r.checks = newClassChecks(r)
	r.images = newImageProbes(r)
	if cfg.Lease != nil {
		r.lease = newInstanceLease(r, *cfg.Lease)
	}
	sr, err := sandbox.New(r, sandbox.Config{
		Instance: cfg.Instance, ColdMargin: coldMargin, DrainTimeout: drainTimeout,
		MinMemoryBytes: minMemoryBytes, Pool: cfg.Pool, MaxIdleSessions: cfg.MaxIdleSessions, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	r.sr = sr
	return &Runner{Runner: sr, pf: r}, nil
}

// Start readies the runner of a sidecar before it removes its
// predecessor's leftovers (Cleanup): it checks that its credentials hold
// every permission it needs (CheckAccess), so that a Role with less fails
// here rather than at the first run, and with Config.Lease it takes the
// instance's Lease (a live sidecar of the instance holding it is
// ErrLeaseHeld, naming it; a crashed one's is taken over once it
// expires). Without the Lease, Run refuses every run. Close releases it.
func (r *Runner) Start(ctx context.Context) error {
	if err := r.pf.checkAccess(ctx); err != nil {
		return err
	}
	if r.pf.lease == nil {
		return nil
	}
	return r.pf.lease.take(ctx)
}

// guard returns nil while the runner may make sandboxes: always without
// Config.Lease, else while it holds the Lease.
func (r *platform) guard() error {
	if r.lease == nil {
		return nil
	}
	return r.lease.check()
}

// Instance returns the runner's instance name.
func (r *Runner) Instance() string { return r.pf.cfg.Instance }

// Namespace returns the namespace the runner's Pods run in.
func (r *Runner) Namespace() string { return r.pf.cfg.Namespace }

// Check checks the RuntimeClasses of every runtime, with and without a
// network, running sandboxes of image, and returns what it found: nil
// for each class that passed. A sidecar calls it at start, so that its
// log says at once what it cannot run; runs check their class themselves
// anyway.
func (r *Runner) Check(ctx context.Context, image string) map[string]error {
	return r.pf.check(ctx, image)
}

// Status asks the API server for its version and the runner's
// RuntimeClasses now.
func (r *Runner) Status(ctx context.Context) (Status, error) { return r.pf.status(ctx) }

// Close stops serving the egress proxy and stops watching the cluster.
// (Runner.Close first waits for the removal of ended runs' Pods and
// removes the pool's.)
func (r *platform) Close() error {
	if r.egress != nil {
		r.egress.close()
	}
	r.watch.stop()
	if r.lease != nil {
		r.lease.release()
	}
	return nil
}

// Status is what the cluster says about itself.
type Status struct {
	// Version is the API server's version; Classes the RuntimeClasses the
	// runner uses whose canary passed, sorted (the runner's Role cannot
	// read RuntimeClasses, which are cluster-wide).
	Version string
	Classes []string
}

func (r *platform) status(ctx context.Context) (Status, error) {
	v, err := r.cs.Discovery().ServerVersion()
	if err != nil {
		return Status{}, apiErr("server version", err)
	}
	st := Status{Version: v.GitVersion}
	for _, name := range r.classNames() {
		if r.checks.passed(name) {
			st.Classes = append(st.Classes, name)
		}
	}
	return st, r.guard()
}

// classNames are the configured RuntimeClass names, sorted, without
// repeats or empty ones.
func (r *platform) classNames() []string {
	c := r.cfg.Classes
	seen := map[string]bool{}
	var out []string
	for _, n := range []string{c.Runc, c.RuncNoNet, c.Runsc, c.RunscNoNet} {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Sweep deletes the Pods labelled with this runner's instance that keep
// does not keep (warm Pods of the pool included), and their
// NetworkPolicies, and returns how many it deleted.
func (r *platform) Sweep(ctx context.Context, keep func(id string, pooled bool) bool) (removed int, err error) {
	if err := r.guard(); err != nil {
		return 0, err // the instance's Pods are its Lease holder's to remove
	}
	sel := metav1.ListOptions{LabelSelector: runner.LabelInstance + "=" + r.cfg.Instance}
	pods, err := r.cs.CoreV1().Pods(r.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return 0, apiErr("list pods", err)
	}
	kept := func(name string, labels map[string]string) bool {
		return keep != nil && keep(name, labels[runner.LabelPool] != "")
	}
	var errs []error
	var deleted []string
	for _, p := range pods.Items {
		if kept(p.Name, p.Labels) {
			continue
		}
		if err := r.deletePod(ctx, p.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, p.Name)
		removed++
	}
	for _, name := range deleted {
		if err := r.watch.waitGone(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	nps, err := r.cs.NetworkingV1().NetworkPolicies(r.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return removed, errors.Join(append(errs, apiErr("list network policies", err))...)
	}
	for _, np := range nps.Items {
		if kept(np.Name, np.Labels) {
			continue // named after its Pod, which is kept
		}
		err := r.cs.NetworkingV1().NetworkPolicies(r.cfg.Namespace).Delete(ctx, np.Name, metav1.DeleteOptions{})
		switch {
		case err == nil:
			removed++
		case apierrors.IsNotFound(err):
		default:
			errs = append(errs, apiErr("delete network policy "+np.Name, err))
		}
	}
	return removed, errors.Join(errs...)
}

// Leftovers returns how many Pods and NetworkPolicies labelled with this
// runner's instance exist, except those keep keeps (the pool's, and
// their NetworkPolicies, named as their Pods).
func (r *platform) Leftovers(ctx context.Context, keep func(id string, labels map[string]string) bool) (int, error) {
	sel := metav1.ListOptions{LabelSelector: runner.LabelInstance + "=" + r.cfg.Instance}
	pods, err := r.cs.CoreV1().Pods(r.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return 0, apiErr("list pods", err)
	}
	nps, err := r.cs.NetworkingV1().NetworkPolicies(r.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return 0, apiErr("list network policies", err)
	}
	n := 0
	for _, p := range pods.Items {
		if !keep(p.Name, p.Labels) {
			n++
		}
	}
	for _, np := range nps.Items {
		if !keep(np.Name, np.Labels) {
			n++
		}
	}
	return n, nil
}

// deletePod asks the API server to delete the Pod, with a grace period of
// one second (the kubelet gives a container at least two before it kills
// it). A Pod that is gone already is fine.
func (r *platform) deletePod(ctx context.Context, name string) error {
	grace := int64(1)
	err := r.cs.CoreV1().Pods(r.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete pod "+name, err)
	}
	return nil
}

// apiErr wraps err from the API server with op; a server that cannot be
// reached, or answers that it is unavailable, is additionally marked
// runner.ErrUnavailable.
func apiErr(op string, err error) error {
	var netErr *net.OpError
	if apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || errors.As(err, &netErr) {
		return fmt.Errorf("%s: %w: %w", op, runner.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// podLabels are the labels every Pod and NetworkPolicy of the runner
// carries, plus extra.
func (r *platform) labels(extra map[string]string) map[string]string {
	l := map[string]string{runner.LabelInstance: r.cfg.Instance}
	for k, v := range extra {
		l[k] = v
	}
	return l
}
