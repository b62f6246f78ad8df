package nethost

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

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
	globs := ModelVendorGlobs()
	vendors[0], meta[0], globs[0] = "changed", "changed", Glob{}
	if ModelVendorHosts()[0] == "changed" || MetadataHosts()[0] == "changed" || ModelVendorGlobs()[0].String() == "" {
		t.Error("the lists share memory with their callers")
	}
	for _, s := range meta {
		if _, err := Normalize(s); err != nil {
			t.Errorf("metadata host %q does not normalize: %v", s, err)
		}
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		addr string
		want AddrClass
	}{
		{"a public IPv4 address", "93.184.215.14", AddrPublic},
		{"a public IPv6 address", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", AddrPublic},
		{"loopback", "127.0.0.1", AddrPrivate},
		{"loopback elsewhere in 127/8", "127.8.9.10", AddrPrivate},
		{"IPv6 loopback", "::1", AddrPrivate},
		{"RFC 1918 10/8", "10.0.0.1", AddrPrivate},
		{"RFC 1918 172.16/12", "172.31.255.255", AddrPrivate},
		{"just outside 172.16/12", "172.32.0.1", AddrPublic},
		{"RFC 1918 192.168/16", "192.168.1.1", AddrPrivate},
		{"CGNAT", "100.64.0.1", AddrPrivate},
		{"link-local", "169.254.1.1", AddrPrivate},
		{"IPv6 link-local", "fe80::1", AddrPrivate},
		{"IPv6 unique local", "fd12:3456::1", AddrPrivate},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", AddrPrivate},
		{"IPv4-compatible loopback", "::127.0.0.1", AddrPrivate},
		{"6to4", "2002:7f00:1::1", AddrPrivate},
		{"NAT64 of a public address", "64:ff9b::5db8:d70e", AddrPublic},
		{"NAT64 of a private address", "64:ff9b::a00:1", AddrPrivate},
		{"NAT64 of the metadata address", "64:ff9b::a9fe:a9fe", AddrMetadata},
		{"the unspecified address", "0.0.0.0", AddrForbidden},
		{"the IPv6 unspecified address", "::", AddrForbidden},
		{"multicast", "224.0.0.1", AddrForbidden},
		{"IPv6 multicast", "ff02::1", AddrForbidden},
		{"broadcast", "255.255.255.255", AddrForbidden},
		{"the AWS metadata address", "169.254.169.254", AddrMetadata},
		{"the mapped AWS metadata address", "::ffff:169.254.169.254", AddrMetadata},
		{"the ECS metadata address", "169.254.170.2", AddrMetadata},
		{"the Alibaba metadata address", "100.100.100.200", AddrMetadata},
		{"the AWS IPv6 metadata address", "fd00:ec2::254", AddrMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ClassifyAddr(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Fatalf("ClassifyAddr(%s) = %d; want %d", tt.addr, got, tt.want)
			}
		})
	}
}

// TestCheckBuiltin is the table of the built-in blocks as the gate applies
// them to a WebFetch host: by name and, for an IP literal, by address,
// never by resolving a name.
func TestCheckBuiltin(t *testing.T) {
	t.Parallel()
	allow, err := ParseList("net.allow", []string{"10.0.0.1", "[fd12::1]:8443", "169.254.169.254", "api.anthropic.com", "*.example.com", "0.0.0.0"}, ParseAllow)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, host string
		port       uint16
		kind       string // "" for no block
		reasonHas  string
	}{
		{"the AWS metadata address, even when allowlisted", "169.254.169.254", 80, BlockMetadata, "host 169.254.169.254 is a cloud metadata endpoint"},
		{"the GCP metadata name", "metadata.google.internal", 443, BlockMetadata, "cloud metadata endpoint"},
		{"the bare metadata name", "metadata", 443, BlockMetadata, ""},
		{"the Alibaba metadata address", "100.100.100.200", 443, BlockMetadata, ""},
		{"the AWS IPv6 metadata address", "fd00:ec2::254", 443, BlockMetadata, ""},
		{"the metadata address through NAT64", "64:ff9b::a9fe:a9fe", 443, BlockMetadata, ""},
		{"a model vendor, even when allowlisted", "api.anthropic.com", 443, BlockModelVendor, "host api.anthropic.com is a model vendor API (api.anthropic.com)"},
		{"a model vendor by a one-label glob", "bedrock-runtime.us-east-1.amazonaws.com", 443, BlockModelVendor, "(bedrock-runtime.*.amazonaws.com)"},
		{"a model vendor by a subdomain glob", "mine.openai.azure.com", 443, BlockModelVendor, "(*.openai.azure.com)"},
		{"a model vendor by a glob inside a label", "us-central1-aiplatform.googleapis.com", 443, BlockModelVendor, ""},
		{"loopback", "127.0.0.1", 443, BlockPrivateAddress, `listing "127.0.0.1:443" in sandbox.net.allow`},
		{"IPv6 loopback", "::1", 8080, BlockPrivateAddress, `listing "[::1]:8080"`},
		{"RFC 1918 not allowlisted", "10.0.0.2", 443, BlockPrivateAddress, ""},
		{"link-local", "169.254.1.1", 443, BlockPrivateAddress, ""},
		{"CGNAT", "100.64.0.1", 443, BlockPrivateAddress, ""},
		{"6to4 of loopback", "2002:7f00:1::1", 443, BlockPrivateAddress, ""},
		{"IPv6 private on another port than the allowlisted one", "fd12::1", 443, BlockPrivateAddress, ""},
		{"the unspecified address, even when allowlisted", "0.0.0.0", 443, BlockPrivateAddress, "unspecified, multicast or broadcast"},
		{"multicast", "224.0.0.1", 443, BlockPrivateAddress, "unspecified, multicast or broadcast"},
		{"broadcast", "255.255.255.255", 443, BlockPrivateAddress, ""},
		{"an allowlisted private address", "10.0.0.1", 443, "", ""},
		{"an allowlisted private IPv6 address on its port", "fd12::1", 8443, "", ""},
		{"a public address", "93.184.215.14", 443, "", ""},
		{"NAT64 of a public address", "64:ff9b::5db8:d70e", 443, "", ""},
		{"an ordinary name", "pypi.org", 443, "", ""},
		{"a name that looks like a vendor", "api.anthropic.com.example.com", 443, "", ""},
		{"a name that resolves privately is not the gate's to know", "localtest.me", 443, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, ok := CheckBuiltin(tt.host, tt.port, allow)
			if tt.kind == "" {
				if ok {
					t.Fatalf("CheckBuiltin(%s, %d) = %+v; want no block", tt.host, tt.port, b)
				}
				return
			}
			if !ok || b.Kind != tt.kind || !strings.Contains(b.Reason, tt.reasonHas) {
				t.Fatalf("CheckBuiltin(%s, %d) = %+v, %v; want kind %s with %q", tt.host, tt.port, b, ok, tt.kind, tt.reasonHas)
			}
		})
	}
}
