package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gatekeeper-ai/gatekeeper/gate/console"
	"github.com/gatekeeper-ai/gatekeeper/internal/netns"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/kube"
)

// kubeOptions are the flags of --runner kube (docs/KUBERNETES.md).
type kubeOptions struct {
	kubeconfig   string
	namespace    string
	egressAddr   string
	egressPorts  string
	netns        string
	hostUsers    bool
	startTimeout time.Duration
	leaseFor     time.Duration
	checkImage   string // the image the start-up canaries run; set by serve
	// lease, set by serve, guards the instance with a Lease (holder names
	// this process in it).
	lease  bool
	holder string
}

// kubeFlags registers the flags of the Kubernetes backend on fs.
func kubeFlags(fs *flag.FlagSet) *kubeOptions {
	o := &kubeOptions{}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "with --runner kube: the kubeconfig of the runner's credentials; empty means the in-cluster config of the sidecar's Pod")
	fs.StringVar(&o.namespace, "namespace", kube.DefaultNamespace, "with --runner kube: the namespace the sandbox Pods run in")
	fs.StringVar(&o.egressAddr, "kube-egress-addr", "", "with --runner kube: the IP address the sidecar serves the egress proxy on, which Pods of networked sandboxes can reach and the cluster lets them reach nothing else; empty refuses networked sandboxes")
	fs.StringVar(&o.egressPorts, "kube-egress-ports", "3128:3135", "with --runner kube: FIRST:LAST, the ports at --kube-egress-addr the proxy may listen on (the first free one is taken)")
	fs.StringVar(&o.netns, "kube-netns", "", "with --runner kube: listen for the egress proxy inside this network namespace (a name under /run/netns or a path), where --kube-egress-addr exists (the test cluster of scripts/ensure-kube)")
	fs.BoolVar(&o.hostUsers, "kube-host-users", false, "with --runner kube: run runc Pods in the node's user namespace (a weaker, node-wide pids bound) where the runtime cannot give each its own")
	fs.DurationVar(&o.startTimeout, "kube-start-timeout", kube.DefaultStartTimeout, "with --runner kube: how long a Pod may take to start (scheduling included) before its run answers runner_unavailable")
	fs.DurationVar(&o.leaseFor, "kube-lease-duration", kube.DefaultLeaseDuration, "with serve --runner kube: how long the instance's Lease stands unrenewed before another sidecar may take it over (renewed every third of it)")
	return o
}

// The downward API's environment of an in-cluster sidecar (the manifests
// of docs/kubernetes set them from the Pod's fields).
const (
	envPodName = "POD_NAME" // metadata.name
	envPodUID  = "POD_UID"  // metadata.uid
	envPodIP   = "POD_IP"   // status.podIP
)

// serving readies the options of serve --runner kube after fs is parsed:
// the instance's Lease guards it, and in a Pod (no --kubeconfig) the
// instance defaults to the Pod's name (POD_NAME; a StatefulSet's Pod
// keeps its name when replaced, so its successor removes what it left)
// and --kube-egress-addr to the Pod's IP (POD_IP), where the proxy then
// listens. A flag or its GATEKEEPER_ variable wins. It returns the
// instance.
func (o *kubeOptions) serving(fs *flag.FlagSet, env envLookup, instance string) string {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	name, _ := env(envPodName)
	if o.kubeconfig == "" {
		if !set["instance"] && name != "" {
			instance = name
		}
		if ip, ok := env(envPodIP); ok && !set["kube-egress-addr"] && o.netns == "" {
			o.egressAddr = ip
		}
	}
	o.lease = true
	if uid, _ := env(envPodUID); name != "" || uid != "" {
		o.holder = "pod " + name + " uid " + uid
	} else {
		host, _ := os.Hostname()
		o.holder = fmt.Sprintf("%s pid %d", host, os.Getpid())
	}
	return instance
}

// restConfig is the API server configuration of --kubeconfig, or the
// in-cluster one.
func (o kubeOptions) restConfig() (*rest.Config, error) {
	if o.kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("--runner kube without --kubeconfig needs the in-cluster config of a Pod: %w", err)
	}
	return c, nil
}

// egress parses --kube-egress-addr and --kube-egress-ports; an empty
// address is the invalid netip.Addr (networked sandboxes are refused).
func (o kubeOptions) egress() (netip.Addr, [2]uint16, error) {
	var ports [2]uint16
	first, last, ok := strings.Cut(o.egressPorts, ":")
	if !ok {
		last = first
	}
	for i, s := range []string{first, last} {
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil || n == 0 {
			return netip.Addr{}, ports, fmt.Errorf("--kube-egress-ports %q: want FIRST:LAST, ports from 1 to 65535", o.egressPorts)
		}
		ports[i] = uint16(n)
	}
	if ports[1] < ports[0] {
		return netip.Addr{}, ports, fmt.Errorf("--kube-egress-ports %q: the last port is below the first", o.egressPorts)
	}
	if o.egressAddr == "" {
		return netip.Addr{}, ports, nil
	}
	addr, err := netip.ParseAddr(o.egressAddr)
	if err != nil || !addr.Is4() {
		return netip.Addr{}, ports, fmt.Errorf("--kube-egress-addr %q: want an IPv4 address", o.egressAddr)
	}
	return addr, ports, nil
}

// listen is how the runner opens the egress proxy's listeners: in
// --kube-netns when given.
func (o kubeOptions) listen() func(network, address string) (net.Listener, error) {
	if o.netns == "" {
		return net.Listen
	}
	path := o.netns
	if !strings.Contains(path, "/") {
		path = netns.Path(path)
	}
	return func(network, address string) (net.Listener, error) { return netns.Listen(path, network, address) }
}

// newKubeRunner makes the Kubernetes backend. checks runs the canaries of
// every RuntimeClass at start, so that the log says at once which runs
// the cluster cannot give their guarantees (those answer
// runner_unavailable).
func newKubeRunner(o runnerOptions, proxy *egress.Proxy) (*sandboxRunner, func(context.Context), error) {
	ko := o.kube
	rc, err := ko.restConfig()
	if err != nil {
		return nil, nil, err
	}
	addr, ports, err := ko.egress()
	if err != nil {
		return nil, nil, err
	}
	// client-go logs through klog, a process-wide logger, among others an
	// error each time an attach's connection ends as it should; the
	// runner returns and logs the errors that matter.
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	// Warm Pods hold their requests on a node; one a run's Pod needs the
	// room of is given up.
	cfg := kube.Config{
		Instance: o.instance, Namespace: ko.namespace, REST: rc, Pool: o.pool.config(), MaxIdleSessions: o.pool.maxSessions, Logger: o.log,
		EgressAddr: addr, EgressPorts: ports, Listen: ko.listen(),
		HostUsers: ko.hostUsers, StartTimeout: ko.startTimeout,
	}
	if ko.lease {
		cfg.Lease = &kube.LeaseConfig{Holder: ko.holder, Duration: ko.leaseFor}
	}
	if addr.IsValid() {
		cfg.Egress = proxy
	} else {
		o.log.Warn("no --kube-egress-addr: sandboxes with a network are refused (runner_unavailable)")
	}
	k, err := kube.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	s := &sandboxRunner{backend: k, collectors: k.Collectors(), status: func(ctx context.Context) console.RunnerStatus {
		st := console.RunnerStatus{Backend: "kube", Instance: o.instance, DefaultImage: defaultImageTag()}
		ks, err := k.Status(ctx)
		if err != nil {
			st.Error = err.Error()
		}
		st.Engine, st.Runtimes = ks.Version, ks.Classes
		return st
	}}
	// The runner logs what each class's canary found.
	checks := func(ctx context.Context) {
		if ko.checkImage != "" {
			k.Check(ctx, ko.checkImage)
		}
	}
	return s, checks, nil
}
