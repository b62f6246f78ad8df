package kube

import (
	"crypto/rand"
	"encoding/hex"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
	"github.com/gatekeeper-ai/gatekeeper/runner/seccomp"
)

// containerName is the one container of a sandbox Pod.
const containerName = "sandbox"

// coldMargin is how long past the run's backstop (timeout plus
// launch.BackstopGrace) PID 1 ends a Pod created for one run, counted from
// the container's start: the code is sent once it runs, after an attach.
const coldMargin = 10 * time.Second

// minMemoryBytes is the smallest memory limit the runner accepts: the
// Docker backend's, so that one policy means the same on both.
const minMemoryBytes = 6 << 20

// unusedDNS is the only name server a Pod is given: 0.0.0.0 is the Pod
// itself, where nothing answers on port 53, so every name fails (the
// proxy resolves names itself), in a second rather than ten.
const unusedDNS = "0.0.0.0"

// limits is the shell that sets the run's rlimits, which a Pod spec cannot
// hold, waits for the go line (goLine: the runner has attached), and
// becomes the rest of its arguments (env, then PID 1's timeout). ulimit
// with neither -H nor -S sets both, so the program cannot raise them
// again. RLIMIT_NPROC is -u in bash and -p in dash; a shell that takes
// neither fails the Pod (exit 125, no end marks) rather than run it
// without the limit. read takes the go line a byte at a time (standard
// input is a pipe), leaving the header that follows to the launcher.
const limits = `ulimit -n "$1" && { ulimit -u "$2" 2>/dev/null || ulimit -p "$2"; } && ulimit -f "$3" || { echo "gatekeeper: cannot set the sandbox's rlimits" >&2; exit 125; }
shift 3
IFS= read -r _ || exit 125
exec "$@"`

// plan is a sandbox.Plan with what a Pod adds: its RuntimeClass, chosen
// by the runtime and by whether the sandbox has a network.
type plan struct {
	*sandbox.Plan
	class   string
	network bool
}

// podPlan completes p for a Pod.
func (r *platform) podPlan(p *sandbox.Plan) *plan {
	network := p.Sandbox.Network.Enabled
	return &plan{Plan: p, class: r.cfg.Classes.For(p.Runtime, network), network: network}
}

// newPodName returns a fresh Pod name: "gk-" and 16 hex digits.
func newPodName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return "gk-" + hex.EncodeToString(b)
}

// labelValue is v when it is a valid label value, else "h-" and a hash of
// it (the exact value is in an annotation).
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	return "h-" + digest.SHA256([]byte(v))[:24]
}

// runLabels are the labels of a Pod that serves spec's run.
func runLabels(spec runner.Spec) map[string]string {
	return map[string]string{runner.LabelRunID: labelValue(spec.RunID), runner.LabelQueryID: labelValue(spec.QueryID)}
}

// runAnnotations are the run's exact ids and the Spec's own labels, as
// annotations; a Spec label whose key is not a valid annotation key is
// left out (and logged by the caller).
func runAnnotations(spec runner.Spec) (map[string]string, []string) {
	a := map[string]string{AnnotationRunID: spec.RunID, AnnotationQueryID: spec.QueryID}
	var skipped []string
	for k, v := range spec.Labels {
		if len(validation.IsQualifiedName(k)) != 0 || k == AnnotationRunID || k == AnnotationQueryID {
			skipped = append(skipped, k)
			continue
		}
		a[k] = v
	}
	sort.Strings(skipped)
	return a, skipped
}

func networkLabel(on bool) string {
	if on {
		return "egress"
	}
	return "none"
}

// pod is the Pod of plan p with name. Each guarantee is one field here;
// see the package doc and docs/SANDBOX.md.
func (r *platform) pod(spec runner.Spec, p *plan, env []string, name string) *corev1.Pod {
	sb := p.Sandbox
	labels := r.labels(map[string]string{LabelPod: name, LabelNetwork: networkLabel(p.network)})
	var annotations map[string]string
	if p.PoolKey != "" {
		// A warm Pod serves a run not known yet; the run labels it when
		// it takes it (podRun.LabelRun).
		labels[runner.LabelPool] = p.PoolKey
	} else {
		for k, v := range runLabels(spec) {
			labels[k] = v
		}
		annotations, _ = runAnnotations(spec)
	}

	// RLIMIT_NPROC counts the processes of the uid in its user
	// namespace: a gVisor sandbox's kernel, or a runc Pod's own namespace,
	// holds this run's alone; the node's holds every Pod's (see
	// Config.HostUsers).
	hostUsers := r.hostUsers(p.Runtime)
	nproc := sb.PIDs
	if hostUsers && p.Runtime == runner.Runc {
		nproc = r.cfg.HostNproc
	}
	fsize := max(sb.WorkspaceBytes, sb.TmpBytes) * 2
	argv := append([]string{"/bin/sh", "-c", limits, "gatekeeper-limits",
		strconv.FormatInt(r.cfg.Nofile, 10), strconv.FormatInt(nproc, 10), strconv.FormatInt((fsize+511)/512, 10)},
		p.Command(env)...)
	for i, a := range argv {
		// The kubelet expands $(VAR) in a container's command and turns
		// $$ into $: doubled, every $ reaches the container as written.
		argv[i] = strings.ReplaceAll(a, "$", "$$")
	}

	res := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(int64(math.Ceil(sb.CPUs*1000)), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(sb.MemoryBytes, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(r.cfg.EphemeralStorageBytes, resource.BinarySI),
	}
	no, yes := false, true
	uid, gid := int64(sb.UID), int64(sb.GID)
	deadline := int64(math.Ceil(p.Life.Seconds()))
	grace := int64(1)
	class := p.class
	memory := func(size int64) *resource.Quantity { return resource.NewQuantity(size, resource.BinarySI) }
	profile := corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	if p.Runtime == runner.Runsc { // runner/seccomp says why gVisor gets its own, which scripts/ensure-kube installs
		profile = corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr(seccomp.LocalhostProfile())}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.cfg.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			RuntimeClassName:              &class,
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			HostNetwork:                   false,
			HostPID:                       false,
			HostIPC:                       false,
			ShareProcessNamespace:         &no,
			HostUsers:                     &hostUsers,
			Hostname:                      "sandbox",
			DNSPolicy:                     corev1.DNSNone,
			DNSConfig: &corev1.PodDNSConfig{
				Nameservers: []string{unusedDNS},
				Options:     []corev1.PodDNSConfigOption{{Name: "timeout", Value: ptr("1")}, {Name: "attempts", Value: ptr("1")}},
			},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:      &uid,
				RunAsGroup:     &gid,
				RunAsNonRoot:   &yes,
				SeccompProfile: &profile,
			},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           p.Image,
				ImagePullPolicy: corev1.PullNever,
				Command:         argv,
				WorkingDir:      launch.WorkspaceDir,
				Stdin:           true,
				StdinOnce:       true,
				TTY:             false,
				SecurityContext: &corev1.SecurityContext{
					Privileged:               &no,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					RunAsNonRoot:             &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &profile,
				},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: launch.WorkspaceDir},
					{Name: "tmp", MountPath: launch.TmpDir},
				},
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: memory(sb.WorkspaceBytes)}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: memory(sb.TmpBytes)}}},
			},
		},
	}
}

// networkPolicy is the NetworkPolicy of the Pod with name, created before
// it and deleted after it: no ingress at all, and egress only to the
// proxy (a networked run) or none (any other). On a cluster whose network
// plugin enforces NetworkPolicy it is a second layer under the
// RuntimeClass (no network) and the cluster's own firewall (the proxy
// only); the canary checks what holds without relying on it.
func (r *platform) networkPolicy(name string, p *plan, proxy netip.AddrPort) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: r.cfg.Namespace,
			Labels: r.labels(map[string]string{LabelPod: name, LabelNetwork: networkLabel(p.network)}),
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{runner.LabelInstance: r.cfg.Instance, LabelPod: name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      []networkingv1.NetworkPolicyEgressRule{},
		},
	}
	if p.PoolKey != "" {
		np.Labels[runner.LabelPool] = p.PoolKey
	}
	if p.network && proxy.IsValid() {
		tcp := corev1.ProtocolTCP
		port := intstr.FromInt32(int32(proxy.Port()))
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: proxy.Addr().String() + "/32"}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
		}}
	}
	return np
}

// hostUsers reports whether Pods under rt share the node's user
// namespace: gVisor's always (its kernel is the sandbox's boundary), runc's
// only with Config.HostUsers.
func (r *platform) hostUsers(rt runner.Runtime) bool { return rt == runner.Runsc || r.cfg.HostUsers }

func ptr[T any](v T) *T { return &v }
