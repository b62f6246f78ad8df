package main

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
)

func TestKubeEgressFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, addr, ports string
		want              netip.Addr
		wantPorts         [2]uint16
		err               string
	}{
		{name: "an address and a range", addr: "10.214.0.1", ports: "3128:3135", want: netip.MustParseAddr("10.214.0.1"), wantPorts: [2]uint16{3128, 3135}},
		{name: "one port", addr: "10.0.0.1", ports: "3128", want: netip.MustParseAddr("10.0.0.1"), wantPorts: [2]uint16{3128, 3128}},
		{name: "no address refuses networked sandboxes", ports: "3128:3135", wantPorts: [2]uint16{3128, 3135}},
		{name: "a range upside down", addr: "10.0.0.1", ports: "3135:3128", err: "the last port is below the first"},
		{name: "port 0", addr: "10.0.0.1", ports: "0:3128", err: "want FIRST:LAST"},
		{name: "not a number", addr: "10.0.0.1", ports: "proxy", err: "want FIRST:LAST"},
		{name: "an IPv6 address", addr: "fd00::1", ports: "3128", err: "want an IPv4 address"},
		{name: "a host name", addr: "gateway", ports: "3128", err: "want an IPv4 address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, ports, err := kubeOptions{egressAddr: tc.addr, egressPorts: tc.ports}.egress()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("egress() = %v, %v, %v; want an error saying %q", addr, ports, err, tc.err)
				}
				return
			}
			if err != nil || addr != tc.want || ports != tc.wantPorts {
				t.Fatalf("egress() = %v, %v, %v; want %v, %v, nil", addr, ports, err, tc.want, tc.wantPorts)
			}
		})
	}
}

func TestServeRefusesAnUnknownRunner(t *testing.T) {
	t.Parallel()
	_, err := newSandboxRunner(t.Context(), runnerOptions{backend: "podman", lockDir: t.TempDir(), log: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), `--runner "podman": want docker or kube`) {
		t.Fatalf("newSandboxRunner = %v; want the unknown runner named", err)
	}
}

// TestServeInAPodTakesItsInstanceAndEgressAddressFromThePod: in a Pod (no
// --kubeconfig), serve --runner kube names its instance after the Pod and
// serves the egress proxy on the Pod's IP, from the downward API's
// POD_NAME and POD_IP; a flag or its variable wins; with a kubeconfig
// (outside the cluster) neither applies. The Lease's holder names the Pod.
func TestServeInAPodTakesItsInstanceAndEgressAddressFromThePod(t *testing.T) {
	t.Parallel()
	pod := map[string]string{"POD_NAME": "agent-2", "POD_UID": "6f1c", "POD_IP": "10.214.0.7"}
	tests := []struct {
		name         string
		args         []string
		env          map[string]string
		wantInstance string
		wantAddr     string
		wantHolder   string
	}{
		{name: "in a Pod", env: pod, wantInstance: "agent-2", wantAddr: "10.214.0.7", wantHolder: "pod agent-2 uid 6f1c"},
		{name: "flags win", args: []string{"--instance", "mine", "--kube-egress-addr", "10.0.0.9"}, env: pod, wantInstance: "mine", wantAddr: "10.0.0.9", wantHolder: "pod agent-2 uid 6f1c"},
		{name: "variables win", env: map[string]string{"POD_NAME": "agent-2", "POD_IP": "10.214.0.7", "GATEKEEPER_INSTANCE": "env-name"}, wantInstance: "env-name", wantAddr: "10.214.0.7", wantHolder: "pod agent-2 uid "},
		{name: "with a kubeconfig", args: []string{"--kubeconfig", "/x"}, env: pod, wantInstance: "default", wantHolder: "pod agent-2 uid 6f1c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := newFlags("serve", "", nil)
			instance := fs.String("instance", "default", "")
			ko := kubeFlags(fs)
			env := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			if err := parse(fs, tc.args, env); err != nil {
				t.Fatal(err)
			}
			got := ko.serving(fs, env, *instance)
			if got != tc.wantInstance || ko.egressAddr != tc.wantAddr || ko.holder != tc.wantHolder || !ko.lease {
				t.Errorf("instance %q, egress %q, holder %q, lease %v; want %q, %q, %q, true", got, ko.egressAddr, ko.holder, ko.lease, tc.wantInstance, tc.wantAddr, tc.wantHolder)
			}
		})
	}
}
