//go:build kube

package kube

// The smoke test of the cluster scripts/ensure-kube sets up: the sandbox
// image runs as a hardened Pod under each RuntimeClass, and the gvisor-nonet
// class really has no network while the others do. It needs the cluster
// (make test-kube brings it up); a missing cluster fails it, never skips it.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gatekeeper-ai/gatekeeper/internal/netns"
	"github.com/gatekeeper-ai/gatekeeper/runner/seccomp"
)

// cluster is what `scripts/ensure-kube env` exports.
type cluster struct {
	kubectl    string
	kubeconfig string // gatekeeper's own, namespace-scoped credentials
	namespace  string
	netns      string
	gateway    string // the Pod network's gateway address, inside netns
	nodeIP     string // the node's address in netns: API server, kubelet
	hostIP     string // the host's end of the veth
	image      string
	// egressPorts are the gateway's ports Pods may reach, FIRST:LAST.
	egressPorts string
}

func requireCluster(t testing.TB) cluster {
	t.Helper()
	c := cluster{
		kubectl:     os.Getenv("GATEKEEPER_KUBE_KUBECTL"),
		kubeconfig:  os.Getenv("GATEKEEPER_KUBECONFIG"),
		namespace:   os.Getenv("GATEKEEPER_KUBE_NAMESPACE"),
		netns:       os.Getenv("GATEKEEPER_KUBE_NETNS"),
		gateway:     os.Getenv("GATEKEEPER_KUBE_POD_GATEWAY"),
		nodeIP:      os.Getenv("GATEKEEPER_KUBE_NODE_IP"),
		hostIP:      os.Getenv("GATEKEEPER_KUBE_HOST_IP"),
		image:       os.Getenv("GATEKEEPER_KUBE_IMAGE"),
		egressPorts: os.Getenv("GATEKEEPER_KUBE_EGRESS_PORTS"),
	}
	if c.kubectl == "" || c.kubeconfig == "" || c.namespace == "" || c.netns == "" || c.gateway == "" || c.nodeIP == "" || c.hostIP == "" || c.image == "" || c.egressPorts == "" {
		t.Fatal(`no cluster: run scripts/ensure-kube up, then eval "$(scripts/ensure-kube env)" (make test-kube does both)`)
	}
	if out, err := c.run(t, nil, "get", "pods"); err != nil {
		t.Fatalf("cluster does not answer: %v\n%s", err, out)
	}
	return c
}

// nodeCPUs is the CPUs the test node offers Pods (its allocatable CPU),
// read with the cluster's admin credentials (KUBECONFIG of ensure-kube env).
func (c cluster) nodeCPUs(t testing.TB) float64 {
	t.Helper()
	admin := os.Getenv("KUBECONFIG")
	if admin == "" {
		t.Fatal(`no admin kubeconfig: eval "$(scripts/ensure-kube env)" sets KUBECONFIG`)
	}
	out, err := exec.CommandContext(t.Context(), c.kubectl, "--kubeconfig", admin, "get", "nodes", "-o", "jsonpath={.items[*].status.allocatable.cpu}").Output()
	if err != nil {
		t.Fatalf("read the node's allocatable CPU: %v", err)
	}
	cpus := strings.Fields(string(out))
	if len(cpus) != 1 {
		t.Fatalf("the test cluster has %d nodes (%q), want 1", len(cpus), out)
	}
	q, err := resource.ParseQuantity(cpus[0])
	if err != nil {
		t.Fatalf("the node's allocatable CPU %q: %v", cpus[0], err)
	}
	return float64(q.MilliValue()) / 1000
}

func (c cluster) command(t testing.TB, args ...string) *exec.Cmd {
	return exec.CommandContext(t.Context(), c.kubectl, append([]string{"--kubeconfig", c.kubeconfig, "-n", c.namespace}, args...)...)
}

// run runs kubectl with gatekeeper's credentials and returns its stdout and stderr.
func (c cluster) run(t testing.TB, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	cmd := c.command(t, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	return cmd.CombinedOutput()
}

// output runs kubectl with gatekeeper's credentials and returns its stdout only.
func (c cluster) output(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	return c.command(t, args...).Output()
}

// probe runs in the Pod and prints what it sees as key=value lines (the
// image's python3 is python3-minimal, without json).
const probe = `
import os, socket
out = {"uid": os.getuid(), "gid": os.getgid()}
def attempt(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return 0
    except OSError as e:
        return e.errno
out["root_write"] = attempt("/var/tmp/probe")
out["workspace_write"] = attempt("/workspace/probe")
out["tmp_write"] = attempt("/tmp/probe")
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
for k in ("CapEff", "CapBnd", "NoNewPrivs", "Seccomp"):
    out[k] = status.get(k, "").strip()
out["ifaces"] = ",".join(sorted(n for _, n in socket.if_nameindex()))
for m in (l.split() for l in open("/proc/self/mounts")):
    if m[1] in ("/", "/workspace", "/tmp"):
        out["fstype" + m[1]] = m[2]
        out["opts" + m[1]] = m[3]
for target in os.environ["PROBE_TARGETS"].split():
    name, addr = target.split("=", 1)
    host, port = addr.rsplit(":", 1)
    try:
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall((os.environ["PROBE_TOKEN"] + "-" + name + "\n").encode())
        s.close()
        out["connect_" + name] = 0
    except OSError as e:
        out["connect_" + name] = e.errno or -1
for k, v in out.items():
    print("%s=%s" % (k, v))
`

// parseProbe reads the probe's key=value lines.
func parseProbe(out string) map[string]string {
	seen := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			seen[k] = v
		}
	}
	return seen
}

// hardenedPod is the Pod the backend is to build, with the probe as its program.
func hardenedPod(name, class, image, targets, token string) map[string]any {
	res := map[string]any{"cpu": "250m", "memory": "128Mi", "ephemeral-storage": "64Mi"}
	profile := map[string]any{"type": "RuntimeDefault"}
	if strings.HasPrefix(class, "gvisor") { // the profile of runner/seccomp, which scripts/ensure-kube installs
		profile = map[string]any{"type": "Localhost", "localhostProfile": seccomp.LocalhostProfile()}
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"gatekeeper.dev/test": "smoke"}},
		"spec": map[string]any{
			"runtimeClassName":             class,
			"restartPolicy":                "Never",
			"activeDeadlineSeconds":        120,
			"automountServiceAccountToken": false,
			"enableServiceLinks":           false,
			"securityContext": map[string]any{
				"runAsUser": 65534, "runAsGroup": 65534, "runAsNonRoot": true,
				"seccompProfile": profile,
			},
			"containers": []any{map[string]any{
				"name":            "sandbox",
				"image":           image,
				"imagePullPolicy": "Never",
				"command":         []any{"python3", "-c", probe},
				"env": []any{
					map[string]any{"name": "PROBE_TARGETS", "value": targets},
					map[string]any{"name": "PROBE_TOKEN", "value": token},
				},
				"securityContext": map[string]any{
					"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false, "privileged": false,
					"capabilities": map[string]any{"drop": []any{"ALL"}},
				},
				"resources":    map[string]any{"requests": res, "limits": res},
				"volumeMounts": []any{map[string]any{"name": "workspace", "mountPath": "/workspace"}, map[string]any{"name": "tmp", "mountPath": "/tmp"}},
			}},
			"volumes": []any{
				map[string]any{"name": "workspace", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "32Mi"}},
				map[string]any{"name": "tmp", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "16Mi"}},
			},
		},
	}
}

// tokenListener listens on one address and records each line a client
// sends. It is closed when the test ends.
type tokenListener struct {
	ln    net.Listener
	conns atomic.Int64 // connections accepted
	mu    sync.Mutex
	got   []string
	done  chan struct{}
}

// listen listens on addr in the network namespace netns, or in the test's
// own namespace when netns is empty.
func listen(t testing.TB, ns, addr string) *tokenListener {
	t.Helper()
	var ln net.Listener
	var err error
	if ns == "" {
		ln, err = net.Listen("tcp", addr)
	} else {
		ln, err = netns.Listen(netns.Path(ns), "tcp", addr)
	}
	if err != nil {
		t.Fatalf("listen on %s in netns %q: %v", addr, ns, err)
	}
	l := &tokenListener{ln: ln, done: make(chan struct{})}
	go l.serve()
	t.Cleanup(func() { l.ln.Close(); <-l.done })
	return l
}

// listenEgress listens on the first free egress port of the gateway: the
// one kind of address outside a Pod that a Pod with a network may reach.
func listenEgress(t testing.TB, c cluster) *tokenListener {
	t.Helper()
	first, last, _ := strings.Cut(c.egressPorts, ":")
	lo, _ := strconv.Atoi(first)
	hi, _ := strconv.Atoi(last)
	for port := lo; port <= hi && port > 0; port++ {
		ln, err := netns.Listen(netns.Path(c.netns), "tcp", net.JoinHostPort(c.gateway, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l := &tokenListener{ln: ln, done: make(chan struct{})}
		go l.serve()
		t.Cleanup(func() { l.ln.Close(); <-l.done })
		return l
	}
	t.Fatalf("no free egress port in %s on %s", c.egressPorts, c.gateway)
	return nil
}

func (l *tokenListener) serve() {
	defer close(l.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.conns.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if line, err := bufio.NewReader(conn).ReadString('\n'); err == nil {
				l.mu.Lock()
				l.got = append(l.got, strings.TrimSpace(line))
				l.mu.Unlock()
			}
		}()
	}
}

// received reports whether token arrived, waiting up to wait for it.
func (l *tokenListener) received(token string, wait time.Duration) bool {
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		l.mu.Lock()
		got := slices.Contains(l.got, token)
		l.mu.Unlock()
		if got || time.Now().After(deadline) {
			return got
		}
	}
}

// runPod creates the Pod, waits until it has ended and returns its log and
// how long create -> completed took (polled every 100ms).
func runPod(t *testing.T, c cluster, pod map[string]any) (string, time.Duration) {
	t.Helper()
	name := pod["metadata"].(map[string]any)["name"].(string)
	body, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd := exec.Command(c.kubectl, "--kubeconfig", c.kubeconfig, "-n", c.namespace, "delete", "pod", name, "--ignore-not-found", "--timeout=60s")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("delete pod %s: %v\n%s", name, err, out)
		}
	})
	start := time.Now()
	if out, err := c.run(t, body, "create", "-f", "-"); err != nil {
		t.Fatalf("create pod %s: %v\n%s", name, err, out)
	}
	var phase string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, err := c.output(t, "get", "pod", name, "-o", "jsonpath={.status.phase}")
		if err != nil {
			t.Fatalf("get pod %s: %v\n%s", name, err, out)
		}
		if phase = string(out); phase == "Succeeded" || phase == "Failed" {
			break
		}
	}
	took := time.Since(start)
	logs, _ := c.run(t, nil, "logs", name)
	if phase != "Succeeded" {
		desc, _ := c.run(t, nil, "get", "pod", name, "-o", "yaml")
		t.Fatalf("pod %s ended in phase %q, want Succeeded\nlogs:\n%s\npod:\n%s", name, phase, logs, desc)
	}
	return string(logs), took
}

const (
	errnoEROFS = "30"
	capsNone   = "0000000000000000"
)

// TestHardenedPodRunsUnderEachRuntimeClass runs the sandbox image as the
// hardened Pod under each RuntimeClass and checks, from inside, what each
// setting must give; that the classes with a network reach a listener on
// an egress port of the Pod network's gateway and the -nonet classes do
// not; and that no Pod reaches another port of the gateway, the host
// through the veth, or the node's own address (API server).
func TestHardenedPodRunsUnderEachRuntimeClass(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	gateway := listenEgress(t, c)
	other := listen(t, c.netns, net.JoinHostPort(c.gateway, "0"))
	host := listen(t, "", net.JoinHostPort(c.hostIP, "0"))
	targets := fmt.Sprintf("gateway=%s other=%s host=%s node=%s", gateway.ln.Addr(), other.ln.Addr(), host.ln.Addr(), net.JoinHostPort(c.nodeIP, "6443"))
	for _, tc := range []struct {
		class   string
		seccomp string // 2, a filter: runc loads it into the process, gVisor (runsc oci-seccomp) into its own kernel
		volume  string // the emptyDir's file system as the Pod sees it: gVisor serves the host's tmpfs through its gofer
		ifaces  string
		network bool
	}{
		{class: "runc", seccomp: "2", volume: "tmpfs", ifaces: "eth0,lo", network: true},
		{class: "runc-nonet", seccomp: "2", volume: "tmpfs", ifaces: "lo", network: false},
		{class: "gvisor", seccomp: "2", volume: "9p", ifaces: "eth0,lo", network: true},
		{class: "gvisor-nonet", seccomp: "2", volume: "9p", ifaces: "lo", network: false},
	} {
		t.Run(tc.class, func(t *testing.T) {
			t.Parallel()
			token := fmt.Sprintf("smoke-%s-%d-%d", tc.class, os.Getpid(), time.Now().UnixNano())
			name := fmt.Sprintf("smoke-%s-%d", tc.class, time.Now().UnixNano()%1_000_000_000)
			logs, took := runPod(t, c, hardenedPod(name, tc.class, c.image, targets, token))
			t.Logf("%s: Pod create -> completed in %s", tc.class, took.Round(10*time.Millisecond))
			s := parseProbe(logs)
			wait := time.Duration(0)
			if tc.network {
				wait = 5 * time.Second
			}
			for _, check := range []struct {
				what string
				ok   bool
			}{
				{"runs as uid and gid 65534", s["uid"] == "65534" && s["gid"] == "65534"},
				{"root file system is read-only (EROFS in the world-writable /var/tmp)", s["root_write"] == errnoEROFS},
				{"root is mounted ro", slices.Contains(strings.Split(s["opts/"], ","), "ro")},
				{"/workspace is writable", s["workspace_write"] == "0"},
				{"/tmp is writable", s["tmp_write"] == "0"},
				{"/workspace and /tmp are " + tc.volume, s["fstype/workspace"] == tc.volume && s["fstype/tmp"] == tc.volume},
				{"no effective capabilities", s["CapEff"] == capsNone},
				{"no bounding capabilities", s["CapBnd"] == capsNone},
				{"no new privileges", s["NoNewPrivs"] == "1"},
				{"seccomp mode " + tc.seccomp, s["Seccomp"] == tc.seccomp},
				{"interfaces " + tc.ifaces, s["ifaces"] == tc.ifaces},
				{fmt.Sprintf("connects to the gateway's egress port: %t", tc.network), (s["connect_gateway"] == "0") == tc.network},
				{fmt.Sprintf("the egress port's listener got the token: %t", tc.network), gateway.received(token+"-gateway", wait) == tc.network},
				{"cannot connect to another port of the gateway", s["connect_other"] != "0" && s["connect_other"] != ""},
				{"the other port's listener got nothing", !other.received(token+"-other", 0)},
				{"cannot connect to the host's end of the veth", s["connect_host"] != "0" && s["connect_host"] != ""},
				{"host listener got nothing", !host.received(token+"-host", 0)},
				{"cannot connect to the API server on the node's address", s["connect_node"] != "0" && s["connect_node"] != ""},
			} {
				if !check.ok {
					t.Errorf("%s: want %s; the probe saw:\n%s", tc.class, check.what, logs)
				}
			}
		})
	}
}

// TestNamespaceRefusesUnhardenedPods checks the API server's own second
// layer: the namespace enforces the restricted Pod Security Standard.
func TestNamespaceRefusesUnhardenedPods(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	pod := hardenedPod(fmt.Sprintf("smoke-unhardened-%d", time.Now().UnixNano()%1_000_000_000), "runc", c.image, "", "x")
	container := pod["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	container["securityContext"].(map[string]any)["allowPrivilegeEscalation"] = true
	body, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.run(t, body, "create", "-f", "-")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "violates PodSecurity") {
		t.Fatalf("create of a Pod allowing privilege escalation: err %v, output %s; want a PodSecurity refusal", err, out)
	}
}

// TestGatekeeperCredentialsAreNarrow checks what gatekeeper's kubeconfig may
// do: Pods in its namespace, nothing cluster-wide and no Secrets.
func TestGatekeeperCredentialsAreNarrow(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "pods"}, "yes"},
		{[]string{"create", "pods", "--subresource=attach"}, "yes"},
		{[]string{"get", "pods", "--subresource=log"}, "yes"},
		{[]string{"create", "pods", "--subresource=exec"}, "no"},
		{[]string{"get", "secrets"}, "no"},
		{[]string{"create", "pods", "-n", "default"}, "no"},
		{[]string{"list", "nodes"}, "no"},
		{[]string{"create", "runtimeclasses.node.k8s.io"}, "no"},
		{[]string{"list", "runtimeclasses.node.k8s.io"}, "yes"},
	} {
		out, _ := c.output(t, append([]string{"auth", "can-i"}, tc.args...)...)
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("can-i %s: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}
