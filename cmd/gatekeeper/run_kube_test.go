//go:build kube

package main

// gatekeeper run against the real cluster of scripts/ensure-kube (make
// test-kube brings it up and exports its environment); a missing cluster
// fails the test, it never skips it.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// kubeRunArgs are serve's cluster flags for the test cluster, from the
// environment of scripts/ensure-kube env.
func kubeRunArgs(t *testing.T) (args []string, image string) {
	t.Helper()
	env := map[string]string{}
	for _, k := range []string{"GATEKEEPER_KUBECONFIG", "GATEKEEPER_KUBE_NAMESPACE", "GATEKEEPER_KUBE_NETNS", "GATEKEEPER_KUBE_EGRESS_ADDR", "GATEKEEPER_KUBE_EGRESS_PORTS", "GATEKEEPER_KUBE_IMAGE"} {
		if env[k] = os.Getenv(k); env[k] == "" {
			t.Fatalf(`no cluster (%s unset): run scripts/ensure-kube up, then eval "$(scripts/ensure-kube env)" (make test-kube does both)`, k)
		}
	}
	return []string{"--runner", "kube", "--kubeconfig", env["GATEKEEPER_KUBECONFIG"], "--namespace", env["GATEKEEPER_KUBE_NAMESPACE"],
		"--kube-netns", env["GATEKEEPER_KUBE_NETNS"], "--kube-egress-addr", env["GATEKEEPER_KUBE_EGRESS_ADDR"],
		"--kube-egress-ports", env["GATEKEEPER_KUBE_EGRESS_PORTS"], "--instance", fmt.Sprintf("cli-kube-%d", os.Getpid())}, env["GATEKEEPER_KUBE_IMAGE"]
}

// TestKubeRunRunsInAPod: gatekeeper run --runner kube runs its code in a
// Pod of the cluster, with no Docker engine to fall back to (DOCKER_HOST
// points nowhere), under the policy's limits: the file it was given is in
// /workspace, the file it writes comes back, and a timeout past the
// policy's is refused as the sidecar refuses it.
func TestKubeRunRunsInAPod(t *testing.T) {
	args, image := kubeRunArgs(t)
	dir, file := writePolicy(t, fmt.Sprintf(`version: 1
workspace_root: ./ws
tools:
  allow: [mcp__sandboxed_code__run]
sandbox:
  fs: {image: %q}
  proc: {timeout: 60s}
  output: {max_files: 2, max_files_bytes: 1k}
`, image))
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	in := filepath.Join(dir, "in.txt")
	must(t, os.WriteFile(in, []byte("from the host\n"), 0o644))
	code := `import os
print(open("data/in.txt").read().strip(), "on", os.uname().nodename)
print(open("/etc/hosts").readline().strip())
open("out.txt", "w").write("from the pod\n")
`
	out, err := cli(t, "", append([]string{"run", "--policy", file, "--lang", "python", "--file", "data/in.txt=" + in, "--output", "out.txt", "-c", code}, args...)...)
	if err != nil {
		t.Fatalf("run --runner kube: %v\n%s", err, out)
	}
	var rep wire.RunReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("run's output %q: %v", out, err)
	}
	// The kubelet writes a Pod's /etc/hosts; Docker writes its own.
	want := "from the host on sandbox\n# Kubernetes-managed hosts file.\n"
	if rep.ExitCode != 0 || rep.Stdout != want || rep.Image != image {
		t.Fatalf("run --runner kube: exit %d, stdout %q, image %q; want exit 0, %q, %q\n%s", rep.ExitCode, rep.Stdout, rep.Image, want, image, out)
	}
	if len(rep.Files) != 1 || rep.Files[0].Path != "out.txt" || rep.Files[0].Text == nil || *rep.Files[0].Text != "from the pod\n" {
		t.Fatalf("run --runner kube returned files %+v; want out.txt holding %q", rep.Files, "from the pod\n")
	}
	out, err = cli(t, "", append([]string{"run", "--policy", file, "--lang", "python", "--timeout-ms", "60001", "-c", "print(1)"}, args...)...)
	if want := "run: timeout_ms 60001 exceeds the query's sandbox.proc.timeout of 1m0s"; err == nil || err.Error() != want {
		t.Fatalf("run --runner kube --timeout-ms 60001: %v\n%s\nwant %q", err, out, want)
	}
}
