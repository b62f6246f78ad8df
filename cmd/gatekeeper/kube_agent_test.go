//go:build kube

package main

// Agent Pods with gatekeeper as their native sidecar, deployed from
// docs/kubernetes with kubectl apply -k on the real cluster of
// scripts/ensure-kube (make test-kube brings it up, exports its
// environment, and has built bin/gatekeeper, which the agent image
// carries). A missing cluster fails the test; it never skips.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubeAgentPods: an agent Pod (Node, @gatekeeper/client, the scripted
// model) runs queries whose code runs in gVisor sandbox Pods; three agent
// Pods under one policy; one deleted while its run's Pod exists leaves
// nothing of its own behind, and the others' queries all succeed; scaled
// to zero, no sandbox Pod or NetworkPolicy is left. It prints the deploy
// time of an agent Pod and how long a policy change took to reach every
// sidecar (docs/kubernetes/README.md, "Figures"), asserting neither.
func TestKubeAgentPods(t *testing.T) {
	k := newKubeFixture(t)
	start := time.Now()
	image := k.buildAgentImage()
	t.Logf("agent image %s built and imported in %s", image, time.Since(start).Round(time.Millisecond))

	k.apply(image, 1)
	first := k.pod(0)
	ready := k.waitReady(first, 4*time.Minute)
	t.Logf("figure: agent Pod %s with its sidecar: applied to Ready in %s (%s)", first, ready.total, ready)
	k.waitQueries(first, 1, 2*time.Minute)

	// The query's code ran in a gVisor Pod of this sidecar's instance.
	runs := k.watch.runPods(first)
	if len(runs) == 0 {
		t.Fatalf("agent %s logged an ok query, but no sandbox Pod of instance %s was seen", first, first)
	}
	for _, p := range runs {
		if p.class != "gvisor-nonet" {
			t.Fatalf("sandbox Pod %s of %s ran under RuntimeClass %q; want gvisor-nonet (runtime runsc, no network)", p.name, first, p.class)
		}
	}

	// Three agents under one policy.
	scaled := time.Now()
	k.scale(3)
	for i := 1; i < 3; i++ {
		r := k.waitReady(k.pod(i), 4*time.Minute)
		t.Logf("figure: agent Pod %s (scaled from 1 to 3 at once): Ready %s after the scale (%s)", k.pod(i), time.Since(scaled).Round(time.Millisecond), r)
	}
	victim, others := k.pod(1), []string{k.pod(0), k.pod(2)}
	for _, p := range []string{victim, k.pod(2)} {
		k.waitQueries(p, 1, 2*time.Minute)
	}

	// Delete the victim while a run of its is in a sandbox Pod.
	inFlight := k.watch.waitLiveRun(t, victim, 2*time.Minute)
	deleted := time.Now()
	k.kubectl("delete", "pod", victim, "--wait=false")
	t.Logf("deleted agent Pod %s while its run's Pod %s existed", victim, inFlight)
	before := k.watch.namesBefore(victim, deleted)
	k.waitGone(victim, before, 2*time.Minute)
	t.Logf("the deleted agent's %d sandbox Pods and NetworkPolicies were gone %s after the delete", len(before), time.Since(deleted).Round(time.Millisecond))

	// The StatefulSet brings the victim back under its name; its new
	// sidecar serves again.
	k.waitReady(victim, 4*time.Minute)
	k.waitQueries(victim, 1, 2*time.Minute)

	// A policy change reaches every sidecar through the ConfigMap volume.
	k.measurePolicyChange([]string{k.pod(0), victim, k.pod(2)}, 4*time.Minute)

	// The others were unaffected: every query of theirs succeeded, one at
	// least after the delete, and their containers never restarted.
	for _, p := range others {
		k.waitQueriesAfter(p, deleted, 2*time.Minute)
		lines := k.queryLines(p)
		for _, l := range lines {
			if !l.OK {
				t.Fatalf("agent %s: query %d failed: %s", p, l.Query, l.raw)
			}
		}
		if n := k.restarts(p); n != 0 {
			t.Fatalf("agent %s: %d container restarts; want 0", p, n)
		}
		t.Logf("agent %s: %d queries, all ok", p, len(lines))
	}

	// Scaled to zero, the sidecars stop cleanly: nothing of theirs is left.
	k.scale(0)
	k.waitNoSandboxes(3 * time.Minute)
	t.Logf("whole test: %s", time.Since(start).Round(time.Second))
}

// queryLine is one line of the example agent's log (docs/kubernetes/example-agent/agent.mjs).
type queryLine struct {
	Time  time.Time `json:"time"`
	Query int       `json:"query"`
	OK    bool      `json:"ok"`
	raw   string
}

// parseQueryLines reads the query lines of an agent's log; other lines
// (start, sigterm) are skipped.
func parseQueryLines(log string) []queryLine {
	var out []queryLine
	for _, s := range strings.Split(log, "\n") {
		var l queryLine
		if json.Unmarshal([]byte(s), &l) != nil || l.Query == 0 {
			continue
		}
		l.raw = s
		out = append(out, l)
	}
	return out
}

// overlay writes the test's kustomization over docs/kubernetes: its
// namespace, the image, the replicas, a token, the test cluster's
// component with this cluster's addresses, no warm pool (three sidecars
// on two cores), and an agent whose code sleeps so that a run is seen in
// flight.
func overlay(t *testing.T, dir, ns, image string, replicas int, env map[string]string) {
	t.Helper()
	// kustomize refuses absolute paths: the overlay names docs/kubernetes
	// relative to its own directory.
	abs, err := filepath.Abs("../..")
	must(t, err)
	repo, err := filepath.Rel(dir, abs)
	must(t, err)
	name, tag, _ := strings.Cut(image, ":")
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %[1]s
nameSuffix: -%[1]s
resources:
- %[2]s/docs/kubernetes/base
components:
- %[2]s/docs/kubernetes/components/test-cluster
images:
- {name: gatekeeper-agent, newName: %[3]s, newTag: %[4]s}
replicas:
- {name: gatekeeper-agent, count: %[5]d}
secretGenerator:
- name: gatekeeper-token
  literals: [token=%[6]s]
patches:
- path: patch.yaml
`, ns, repo, name, tag, replicas, randomHex(t))
	patch := fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: gatekeeper-agent
spec:
  template:
    spec:
      initContainers:
      - name: token
        imagePullPolicy: Never
      - name: gatekeeper
        imagePullPolicy: Never
        env:
        - {name: KUBERNETES_SERVICE_HOST, value: %q}
        - {name: GATEKEEPER_KUBE_EGRESS_ADDR, value: %q}
        - {name: GATEKEEPER_POOL_SIZE, value: "0"}
      containers:
      - name: agent
        imagePullPolicy: Never
        env:
        - {name: AGENT_SLEEP_S, value: "4"}
`, env["GATEKEEPER_KUBE_NODE_IP"], env["GATEKEEPER_KUBE_POD_GATEWAY"])
	must(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "patch.yaml"), []byte(patch), 0o644))
}
