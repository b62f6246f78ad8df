package egress

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestValidateNetworkReportsEveryBadPatternWithItsLocation(t *testing.T) {
	t.Parallel()
	err := ValidateNetwork(runner.Network{
		Enabled: true,
		Allow:   []string{"example.com", "*", "ok.example:443"},
		Deny:    []string{"a.*.b"},
	})
	if !errors.Is(err, nethost.ErrBadPattern) {
		t.Fatalf("ValidateNetwork: %v; want an error wrapping nethost.ErrBadPattern", err)
	}
	for _, want := range []string{"net.allow[1]", "net.deny[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateNetwork error %q does not name %s", err, want)
		}
	}
	if err := ValidateNetwork(runner.Network{Enabled: true, Allow: []string{"*.example.com", "[::1]:80"}}); err != nil {
		t.Errorf("ValidateNetwork of a good network: %v", err)
	}
}

func TestBuiltInListsAreCompleteCopies(t *testing.T) {
	t.Parallel()
	vendors := ModelVendorHosts()
	for _, want := range []string{
		"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "api.mistral.ai",
		"api.cohere.ai", "api.cohere.com", "api.groq.com", "api.deepseek.com", "api.together.xyz",
		"openrouter.ai", "api.x.ai", "*.openai.azure.com", "bedrock-runtime.*.amazonaws.com",
	} {
		if !slices.Contains(vendors, want) {
			t.Errorf("ModelVendorHosts() lacks %q", want)
		}
	}
	meta := MetadataHosts()
	for _, want := range []string{
		"169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254", "metadata.google.internal", "metadata",
	} {
		if !slices.Contains(meta, want) {
			t.Errorf("MetadataHosts() lacks %q", want)
		}
	}
	vendors[0], meta[0] = "changed", "changed"
	if ModelVendorHosts()[0] == "changed" || MetadataHosts()[0] == "changed" {
		t.Error("the lists share memory with their callers")
	}
	for _, s := range meta {
		if _, err := nethost.Normalize(s); err != nil {
			t.Errorf("metadata host %q does not normalize: %v", s, err)
		}
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		addr string
		want addrClass
	}{
		{"a public IPv4 address", "93.184.215.14", classPublic},
		{"a public IPv6 address", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", classPublic},
		{"loopback", "127.0.0.1", classPrivate},
		{"loopback elsewhere in 127/8", "127.8.9.10", classPrivate},
		{"IPv6 loopback", "::1", classPrivate},
		{"RFC 1918 10/8", "10.0.0.1", classPrivate},
		{"RFC 1918 172.16/12", "172.31.255.255", classPrivate},
		{"just outside 172.16/12", "172.32.0.1", classPublic},
		{"RFC 1918 192.168/16", "192.168.1.1", classPrivate},
		{"CGNAT", "100.64.0.1", classPrivate},
		{"link-local", "169.254.1.1", classPrivate},
		{"IPv6 link-local", "fe80::1", classPrivate},
		{"IPv6 unique local", "fd12:3456::1", classPrivate},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", classPrivate},
		{"IPv4-compatible loopback", "::127.0.0.1", classPrivate},
		{"6to4", "2002:7f00:1::1", classPrivate},
		{"NAT64 of a public address", "64:ff9b::5db8:d70e", classPublic},
		{"NAT64 of a private address", "64:ff9b::a00:1", classPrivate},
		{"NAT64 of the metadata address", "64:ff9b::a9fe:a9fe", classMetadata},
		{"the unspecified address", "0.0.0.0", classForbidden},
		{"the IPv6 unspecified address", "::", classForbidden},
		{"multicast", "224.0.0.1", classForbidden},
		{"IPv6 multicast", "ff02::1", classForbidden},
		{"broadcast", "255.255.255.255", classForbidden},
		{"the AWS metadata address", "169.254.169.254", classMetadata},
		{"the mapped AWS metadata address", "::ffff:169.254.169.254", classMetadata},
		{"the ECS metadata address", "169.254.170.2", classMetadata},
		{"the Alibaba metadata address", "100.100.100.200", classMetadata},
		{"the AWS IPv6 metadata address", "fd00:ec2::254", classMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := classify(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Fatalf("classify(%s) = %d; want %d", tt.addr, got, tt.want)
			}
		})
	}
}
