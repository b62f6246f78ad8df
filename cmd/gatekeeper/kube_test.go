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
