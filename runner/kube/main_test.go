//go:build kube

package kube

// The backend's tests run against the real cluster of scripts/ensure-kube
// (make test-kube brings it up and exports its environment); a missing
// cluster fails them, it never skips them.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gatekeeper-ai/gatekeeper/internal/netns"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
)

func TestMain(m *testing.M) {
	// client-go reports through klog, among others the WebSocket
	// executor's readers ending with their connection after every attach.
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

var instanceSeq atomic.Int64

// testConfig is a Config for the test cluster with an instance name of
// its own, egress served at the Pod network's gateway inside the
// cluster's namespace, and auditor recording the proxy's events.
func testConfig(t testing.TB, auditor egress.Auditor) Config {
	t.Helper()
	c := requireCluster(t)
	rest, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", c.kubeconfig, err)
	}
	if auditor == nil {
		auditor = discardAudit{}
	}
	proxy, err := egress.New(egress.Config{Auditor: auditor})
	if err != nil {
		t.Fatal(err)
	}
	first, last, ok := strings.Cut(c.egressPorts, ":")
	if !ok {
		t.Fatalf("GATEKEEPER_KUBE_EGRESS_PORTS %q: want FIRST:LAST", c.egressPorts)
	}
	lo, err1 := strconv.ParseUint(first, 10, 16)
	hi, err2 := strconv.ParseUint(last, 10, 16)
	if err1 != nil || err2 != nil {
		t.Fatalf("GATEKEEPER_KUBE_EGRESS_PORTS %q: want FIRST:LAST", c.egressPorts)
	}
	gw, err := netip.ParseAddr(c.gateway)
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Instance:    fmt.Sprintf("test-%d-%d", os.Getpid(), instanceSeq.Add(1)),
		Namespace:   c.namespace,
		REST:        rest,
		Egress:      proxy,
		EgressAddr:  gw,
		EgressPorts: [2]uint16{uint16(lo), uint16(hi)},
		Listen: func(network, address string) (net.Listener, error) {
			return netns.Listen(netns.Path(c.netns), network, address)
		},
	}
}

type discardAudit struct{}

func (discardAudit) Egress(egress.Event) error { return nil }

// newTestRunner returns a Runner of cfg, closed and cleaned up when t
// ends (cleaned up only while it may: see platform.guard).
func newTestRunner(t testing.TB, cfg Config) *Runner {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Only the holder of the instance's Lease (with Config.Lease) may
		// remove its Pods: a crashed runner's successor removed them.
		if r.pf.guard() == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := r.Cleanup(ctx); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		r.Close()
	})
	return r
}

// testImage is the sandbox image scripts/ensure-kube loaded.
func testImage(t testing.TB) string { return requireCluster(t).image }

// withRuntime runs every Spec under one runtime, in the test image.
type withRuntime struct {
	*Runner
	rt    runner.Runtime
	image string
}

func (w withRuntime) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	spec.Sandbox.Runtime = w.rt
	if spec.Sandbox.Image == "" {
		spec.Sandbox.Image = w.image
	}
	return w.Runner.Run(ctx, spec)
}
