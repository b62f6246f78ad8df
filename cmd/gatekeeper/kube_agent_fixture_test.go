//go:build kube

package main

// The fixture of TestKubeAgentPods: a namespace of its own, kubectl, and a
// watch that remembers every sandbox Pod and NetworkPolicy it saw.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/kube"
)

type kubeFixture struct {
	t       *testing.T
	ns      string
	dir     string // the overlay
	env     map[string]string
	cs      kubernetes.Interface
	watch   *sandboxWatch
	applied time.Time
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	must(t, err)
	return hex.EncodeToString(b)
}

// newKubeFixture makes a namespace (no Pod Security enforcement: the test
// cluster's component runs the agents with hostNetwork) and removes it,
// with the overlay's cluster-scoped objects, when the test ends; a failed
// test first logs the Pods and their logs.
func newKubeFixture(t *testing.T) *kubeFixture {
	t.Helper()
	env := map[string]string{}
	for _, k := range []string{"KUBECONFIG", "GATEKEEPER_KUBE_KUBECTL", "GATEKEEPER_KUBE_NODE_IP", "GATEKEEPER_KUBE_POD_GATEWAY"} {
		if env[k] = os.Getenv(k); env[k] == "" {
			t.Fatalf(`no cluster (%s unset): run scripts/ensure-kube up, then eval "$(scripts/ensure-kube env)" (make test-kube does both)`, k)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	must(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	k := &kubeFixture{t: t, ns: "gka-" + randomHex(t)[:6], dir: t.TempDir(), env: env, cs: cs}
	k.kubectlNS(false, "create", "namespace", k.ns)
	t.Cleanup(func() {
		if t.Failed() {
			k.dump()
		}
		k.kubectlNS(false, "delete", "-k", k.dir, "--ignore-not-found", "--wait=false")
		k.kubectlNS(false, "delete", "namespace", k.ns, "--wait=true", "--timeout=180s")
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k.watch = watchSandboxes(ctx, cs, k.ns)
	return k
}

// kubectl runs kubectl in the test's namespace and fails the test on an error.
func (k *kubeFixture) kubectl(args ...string) string {
	k.t.Helper()
	return k.kubectlNS(true, append([]string{"-n", k.ns}, args...)...)
}

func (k *kubeFixture) kubectlNS(fatal bool, args ...string) string {
	k.t.Helper()
	out, err := exec.Command(k.env["GATEKEEPER_KUBE_KUBECTL"], args...).CombinedOutput()
	if err != nil {
		if fatal {
			k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		k.t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (k *kubeFixture) dump() {
	k.t.Logf("pods:\n%s", k.kubectlNS(false, "-n", k.ns, "get", "pods", "-o", "wide"))
	for i := 0; i < 3; i++ {
		for _, c := range []string{"agent", "gatekeeper"} {
			out := k.kubectlNS(false, "-n", k.ns, "logs", k.pod(i), "-c", c, "--tail=40")
			k.t.Logf("logs of %s/%s:\n%s", k.pod(i), c, out)
		}
	}
}

// buildAgentImage runs scripts/kube-agent-image and returns the tag it printed.
func (k *kubeFixture) buildAgentImage() string {
	k.t.Helper()
	out, err := exec.Command("../../scripts/kube-agent-image").Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		k.t.Fatalf("scripts/kube-agent-image: %v\n%s", err, stderr)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "gatekeeper-agent:") {
		k.t.Fatalf("scripts/kube-agent-image printed %q; want the image's tag", out)
	}
	return lines[len(lines)-1]
}

func (k *kubeFixture) apply(image string, replicas int) {
	k.t.Helper()
	overlay(k.t, k.dir, k.ns, image, replicas, k.env)
	k.applied = time.Now()
	k.kubectl("apply", "-k", k.dir)
}

func (k *kubeFixture) pod(i int) string { return fmt.Sprintf("gatekeeper-agent-%s-%d", k.ns, i) }

func (k *kubeFixture) scale(n int) {
	k.t.Helper()
	k.kubectl("scale", "statefulset", "gatekeeper-agent-"+k.ns, fmt.Sprintf("--replicas=%d", n))
}

// readyTimes is when a Pod's sidecar and agent started and when it was
// Ready, from its status (second precision), after its creation.
type readyTimes struct {
	total                  time.Duration // since the apply, measured by the test
	sidecar, agent, podRdy time.Duration
}

func (r readyTimes) String() string {
	return fmt.Sprintf("from the Pod's creation: sidecar started %s, agent started %s (after the sidecar's start-up probe passed), Pod Ready %s", r.sidecar, r.agent, r.podRdy)
}

// waitReady waits until the Pod exists, is Ready, and is younger than a
// deletion the test made (a StatefulSet's Pod comes back under its name).
func (k *kubeFixture) waitReady(name string, limit time.Duration) readyTimes {
	k.t.Helper()
	var p *corev1.Pod
	k.poll(limit, "agent Pod "+name+" Ready", func() bool {
		got, err := k.cs.CoreV1().Pods(k.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				p = got
				return true
			}
		}
		return false
	})
	r := readyTimes{total: time.Since(k.applied).Round(time.Millisecond)}
	created := p.CreationTimestamp.Time
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name == "gatekeeper" && s.State.Running != nil {
			r.sidecar = s.State.Running.StartedAt.Sub(created)
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "agent" && s.State.Running != nil {
			r.agent = s.State.Running.StartedAt.Sub(created)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			r.podRdy = c.LastTransitionTime.Sub(created)
		}
	}
	return r
}

func (k *kubeFixture) restarts(name string) int32 {
	k.t.Helper()
	p, err := k.cs.CoreV1().Pods(k.ns).Get(context.Background(), name, metav1.GetOptions{})
	must(k.t, err)
	var n int32
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		n += s.RestartCount
	}
	return n
}

func (k *kubeFixture) queryLines(name string) []queryLine {
	k.t.Helper()
	out, err := exec.Command(k.env["GATEKEEPER_KUBE_KUBECTL"], "-n", k.ns, "logs", name, "-c", "agent").Output()
	if err != nil {
		return nil
	}
	return parseQueryLines(string(out))
}

// waitQueries waits until the agent logged n queries; a failed one fails the test.
func (k *kubeFixture) waitQueries(name string, n int, limit time.Duration) {
	k.t.Helper()
	k.poll(limit, fmt.Sprintf("%d queries of %s", n, name), func() bool {
		lines := k.queryLines(name)
		for _, l := range lines {
			if !l.OK {
				k.t.Fatalf("agent %s: query %d failed: %s", name, l.Query, l.raw)
			}
		}
		return len(lines) >= n
	})
}

// waitQueriesAfter waits until the agent logged a query that ended after t0.
func (k *kubeFixture) waitQueriesAfter(name string, t0 time.Time, limit time.Duration) {
	k.t.Helper()
	k.poll(limit, "a query of "+name+" after the delete", func() bool {
		for _, l := range k.queryLines(name) {
			if l.Time.After(t0) {
				return true
			}
		}
		return false
	})
}

// waitGone waits until none of the named Pods and NetworkPolicies of the
// instance exists.
func (k *kubeFixture) waitGone(instance string, names []string, limit time.Duration) {
	k.t.Helper()
	var left []string
	k.poll(limit, "the deleted agent's sandbox objects gone", func() bool {
		left = nil
		now := k.objects(runner.LabelInstance + "=" + instance)
		for _, n := range names {
			if now[n] {
				left = append(left, n)
			}
		}
		return len(left) == 0
	})
}

// waitNoSandboxes waits until the namespace holds no Pod at all and no
// NetworkPolicy of any instance.
func (k *kubeFixture) waitNoSandboxes(limit time.Duration) {
	k.t.Helper()
	k.poll(limit, "no Pod and no sandbox NetworkPolicy left in "+k.ns, func() bool {
		pods, err := k.cs.CoreV1().Pods(k.ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0 && len(k.objects(runner.LabelInstance)) == 0
	})
}

// objects names the Pods and NetworkPolicies that match the selector.
func (k *kubeFixture) objects(selector string) map[string]bool {
	k.t.Helper()
	ctx, sel := context.Background(), metav1.ListOptions{LabelSelector: selector}
	pods, err := k.cs.CoreV1().Pods(k.ns).List(ctx, sel)
	must(k.t, err)
	nps, err := k.cs.NetworkingV1().NetworkPolicies(k.ns).List(ctx, sel)
	must(k.t, err)
	m := map[string]bool{}
	for _, p := range pods.Items {
		m["pod/"+p.Name] = true
	}
	for _, n := range nps.Items {
		m["networkpolicy/"+n.Name] = true
	}
	return m
}

// readyz is a sidecar's /readyz, asked over its socket inside the Pod.
func (k *kubeFixture) readyz(name string) (string, error) {
	out, err := exec.Command(k.env["GATEKEEPER_KUBE_KUBECTL"], "-n", k.ns, "exec", name, "-c", "gatekeeper", "--", "/usr/local/bin/node", "-e",
		`require('http').get({socketPath:'/run/gatekeeper/gatekeeper.sock',path:'/readyz'},r=>{let b='';r.on('data',d=>b+=d);r.on('end',()=>console.log(JSON.parse(b).policy_revision))})`).Output()
	return strings.TrimSpace(string(out)), err
}

// measurePolicyChange changes the policy ConfigMap and logs when each
// sidecar's /readyz reports the new revision; all must agree in the end.
func (k *kubeFixture) measurePolicyChange(pods []string, limit time.Duration) {
	k.t.Helper()
	old := map[string]string{}
	for _, p := range pods {
		r, err := k.readyz(p)
		if err != nil || !strings.HasPrefix(r, "sha256:") {
			k.t.Fatalf("readyz of %s: %q, %v", p, r, err)
		}
		old[p] = r
	}
	ctx := context.Background()
	cm, err := k.cs.CoreV1().ConfigMaps(k.ns).Get(ctx, "gatekeeper-policy-"+k.ns, metav1.GetOptions{})
	must(k.t, err)
	cm.Data["sandbox.policy.yaml"] += fmt.Sprintf("\n# changed by TestKubeAgentPods at %s\n", time.Now().Format(time.RFC3339Nano))
	changed := time.Now()
	_, err = k.cs.CoreV1().ConfigMaps(k.ns).Update(ctx, cm, metav1.UpdateOptions{})
	must(k.t, err)
	reached := map[string]time.Duration{}
	revs := map[string]bool{}
	k.poll(limit, "the changed policy in every sidecar", func() bool {
		for _, p := range pods {
			if _, ok := reached[p]; ok {
				continue
			}
			if r, err := k.readyz(p); err == nil && strings.HasPrefix(r, "sha256:") && r != old[p] {
				reached[p] = time.Since(changed).Round(100 * time.Millisecond)
				revs[r] = true
			}
		}
		return len(reached) == len(pods)
	})
	if len(revs) != 1 {
		k.t.Fatalf("the sidecars report %d revisions after one change: %v", len(revs), revs)
	}
	var ds []time.Duration
	for _, d := range reached {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	k.t.Logf("figure: a policy ConfigMap change reached %d sidecars in %v (each sidecar's /readyz polled about every second)", len(pods), ds)
}

// poll checks cond every half second until it holds or limit passes,
// and fails at the latest three minutes before go test's -timeout would
// end the process, so that the namespace is still removed.
func (k *kubeFixture) poll(limit time.Duration, what string, cond func() bool) {
	k.t.Helper()
	deadline := time.Now().Add(limit)
	if dl, ok := k.t.Deadline(); ok && deadline.After(dl.Add(-3*time.Minute)) {
		deadline = dl.Add(-3 * time.Minute)
	}
	for !cond() {
		if time.Now().After(deadline) {
			k.t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// sandboxWatch remembers every Pod and NetworkPolicy of any instance it
// saw in the namespace.
type sandboxWatch struct {
	mu   sync.Mutex
	seen map[string]*seenObject
}

type seenObject struct {
	name, instance, class string
	run                   bool // a run's Pod (it carries a run id), not a canary's
	created               time.Time
	deleted               bool
}

func watchSandboxes(ctx context.Context, cs kubernetes.Interface, ns string) *sandboxWatch {
	w := &sandboxWatch{seen: map[string]*seenObject{}}
	sel := metav1.ListOptions{LabelSelector: runner.LabelInstance}
	loop := func(kind string, start func() (watch.Interface, error)) {
		for ctx.Err() == nil {
			wi, err := start()
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ctx.Err() == nil {
				ev, ok := <-wi.ResultChan()
				if !ok {
					break
				}
				w.record(kind, ev)
			}
			wi.Stop()
		}
	}
	go loop("pod", func() (watch.Interface, error) { return cs.CoreV1().Pods(ns).Watch(ctx, sel) })
	go loop("networkpolicy", func() (watch.Interface, error) {
		return cs.NetworkingV1().NetworkPolicies(ns).Watch(ctx, sel)
	})
	return w
}

func (w *sandboxWatch) record(kind string, ev watch.Event) {
	o, ok := ev.Object.(metav1.Object)
	if !ok {
		return
	}
	key := kind + "/" + o.GetName()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen[key]
	if s == nil {
		s = &seenObject{name: key, instance: o.GetLabels()[runner.LabelInstance], created: o.GetCreationTimestamp().Time}
		// A run's Pod, not a RuntimeClass canary's (query gatekeeper-probe).
		a := o.GetAnnotations()
		s.run = a[kube.AnnotationRunID] != "" && a[kube.AnnotationQueryID] != "gatekeeper-probe"
		if p, ok := ev.Object.(*corev1.Pod); ok && p.Spec.RuntimeClassName != nil {
			s.class = *p.Spec.RuntimeClassName
		}
		w.seen[key] = s
	}
	if ev.Type == watch.Deleted {
		s.deleted = true
	}
}

// runPods are the runs' Pods of an instance seen so far.
func (w *sandboxWatch) runPods(instance string) []seenObject {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []seenObject
	for _, s := range w.seen {
		if s.instance == instance && s.run && strings.HasPrefix(s.name, "pod/") {
			out = append(out, *s)
		}
	}
	return out
}

// waitLiveRun waits until a run's Pod of the instance exists and returns its name.
func (w *sandboxWatch) waitLiveRun(t *testing.T, instance string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	if dl, ok := t.Deadline(); ok && deadline.After(dl.Add(-3*time.Minute)) {
		deadline = dl.Add(-3 * time.Minute)
	}
	for time.Now().Before(deadline) {
		for _, s := range w.runPods(instance) {
			if !s.deleted {
				return s.name
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no run of %s was in a sandbox Pod within %s", instance, limit)
	return ""
}

// namesBefore names the objects of an instance created before t0.
func (w *sandboxWatch) namesBefore(instance string, t0 time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, s := range w.seen {
		if s.instance == instance && !s.created.After(t0) {
			out = append(out, s.name)
		}
	}
	return out
}
