package egress

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestPatternMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
		host    string // normalized
		port    uint16
		want    bool
	}{
		{"an exact name matches itself", "example.com", "example.com", 443, true},
		{"an exact name matches on any port", "example.com", "example.com", 8080, true},
		{"an exact name is normalized", "EXAMPLE.com.", "example.com", 80, true},
		{"an exact name does not match a subdomain", "example.com", "a.example.com", 443, false},
		{"an exact name does not match a longer name", "example.com", "notexample.com", 443, false},
		{"a wildcard matches a subdomain", "*.example.com", "a.example.com", 443, true},
		{"a wildcard matches a deeper subdomain", "*.example.com", "a.b.example.com", 443, true},
		{"a wildcard does not match the bare domain", "*.example.com", "example.com", 443, false},
		{"a wildcard does not match a longer name", "*.example.com", "notexample.com", 443, false},
		{"a wildcard does not match the domain as a prefix", "*.example.com", "example.com.evil.test", 443, false},
		{"a port restricts the match", "example.com:8443", "example.com", 8443, true},
		{"a port refuses other ports", "example.com:8443", "example.com", 443, false},
		{"a wildcard with a port", "*.example.com:443", "a.example.com", 443, true},
		{"a wildcard with a port refuses other ports", "*.example.com:443", "a.example.com", 80, false},
		{"an IPv4 pattern matches the address", "10.0.0.1", "10.0.0.1", 80, true},
		{"an IPv4 pattern in inet_aton spelling", "0x7f.1", "127.0.0.1", 80, true},
		{"an IPv4 pattern with a port", "127.0.0.1:8080", "127.0.0.1", 8080, true},
		{"an IPv4 pattern with a port refuses other ports", "127.0.0.1:8080", "127.0.0.1", 8081, false},
		{"a bare IPv6 pattern", "::1", "::1", 443, true},
		{"a bracketed IPv6 pattern with a port", "[::1]:443", "::1", 443, true},
		{"a mapped IPv6 pattern is its IPv4 address", "[::ffff:7f00:1]:80", "127.0.0.1", 80, true},
		{"an IP pattern does not match a name", "127.0.0.1", "localhost", 80, false},
		{"a name pattern does not match an address", "example.com", "93.184.215.14", 80, false},
		{"an IDN pattern matches its punycode", "bücher.example", "xn--bcher-kva.example", 443, true},
		{"the zero pattern matches nothing", "", "example.com", 443, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p Pattern
			if tt.pattern != "" {
				var err error
				if p, err = ParsePattern(tt.pattern); err != nil {
					t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
				}
			}
			if got := p.Match(tt.host, tt.port); got != tt.want {
				t.Fatalf("ParsePattern(%q).Match(%q, %d) = %v; want %v", tt.pattern, tt.host, tt.port, got, tt.want)
			}
		})
	}
}

func TestParsePatternRefusesBadPatterns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
	}{
		{"an empty pattern", ""},
		{"a lone star", "*"},
		{"a star and a dot", "*."},
		{"a star inside a name", "a.*.example.com"},
		{"a star without a dot", "*example.com"},
		{"a wildcard over an address", "*.1.2.3.4"},
		{"port 0", "example.com:0"},
		{"an empty port", "example.com:"},
		{"a port out of range", "example.com:70000"},
		{"an unclosed bracket", "[::1"},
		{"a space", "exa mple.com"},
		{"a name ending in a bad number", "example.300"},
		{"a zone", "fe80::1%eth0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if p, err := ParsePattern(tt.pattern); !errors.Is(err, ErrBadPattern) {
				t.Fatalf("ParsePattern(%q) = %v, %v; want an error wrapping ErrBadPattern", tt.pattern, p, err)
			}
		})
	}
}

func TestPatternStringParsesBackToTheSamePattern(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern, want string
	}{
		{"a name", "Example.COM.", "example.com"},
		{"a wildcard with a port", "*.Example.com:443", "*.example.com:443"},
		{"an inet_aton address", "0x7f.1:80", "127.0.0.1:80"},
		{"a bare IPv6 address", "::1", "[::1]"},
		{"a bracketed IPv6 address with a port", "[::1]:8080", "[::1]:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePattern(tt.pattern)
			if err != nil {
				t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
			}
			if got := p.String(); got != tt.want {
				t.Fatalf("ParsePattern(%q).String() = %q; want %q", tt.pattern, got, tt.want)
			}
			if back, err := ParsePattern(p.String()); err != nil || back != p {
				t.Fatalf("ParsePattern(%q) = %#v, %v; want %#v", p.String(), back, err, p)
			}
		})
	}
}

func TestMatchNormalizesTheHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern, host string
		port                uint16
		want                bool
		wantErr             error
	}{
		{"an upper-case host with a trailing dot", "*.example.com", "A.Example.COM.", 443, true, nil},
		{"an inet_aton host against a dotted pattern", "127.0.0.1", "2130706433", 80, true, nil},
		{"a bad pattern", "*", "example.com", 80, false, ErrBadPattern},
		{"a bad host", "example.com", "exa mple.com", 80, false, ErrBadHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Match(tt.pattern, tt.host, tt.port)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("Match(%q, %q, %d) = %v, %v; want %v, %v", tt.pattern, tt.host, tt.port, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestValidateNetworkReportsEveryBadPatternWithItsLocation(t *testing.T) {
	t.Parallel()
	err := ValidateNetwork(runner.Network{
		Enabled: true,
		Allow:   []string{"example.com", "*", "ok.example:443"},
		Deny:    []string{"a.*.b"},
	})
	if !errors.Is(err, ErrBadPattern) {
		t.Fatalf("ValidateNetwork: %v; want an error wrapping ErrBadPattern", err)
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

func TestHostGlob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, glob, host string
		want             bool
	}{
		{"a plain name", "api.openai.com", "api.openai.com", true},
		{"a plain name does not match a subdomain", "api.openai.com", "x.api.openai.com", false},
		{"a leading wildcard matches a subdomain", "*.openai.azure.com", "me.openai.azure.com", true},
		{"a leading wildcard matches a deeper subdomain", "*.openai.azure.com", "a.b.openai.azure.com", true},
		{"a leading wildcard does not match the domain", "*.openai.azure.com", "openai.azure.com", false},
		{"an inner star matches one label", "bedrock-runtime.*.amazonaws.com", "bedrock-runtime.us-east-1.amazonaws.com", true},
		{"an inner star does not match two labels", "bedrock-runtime.*.amazonaws.com", "bedrock-runtime.a.b.amazonaws.com", false},
		{"an inner star does not match no label", "bedrock-runtime.*.amazonaws.com", "bedrock-runtime.amazonaws.com", false},
		{"a star within a label", "*-aiplatform.googleapis.com", "us-central1-aiplatform.googleapis.com", true},
		{"a star within a label needs its suffix", "*-aiplatform.googleapis.com", "aiplatform.googleapis.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := parseHostGlob(tt.glob)
			if err != nil {
				t.Fatalf("parseHostGlob(%q): %v", tt.glob, err)
			}
			if got := g.match(tt.host); got != tt.want {
				t.Fatalf("parseHostGlob(%q).match(%q) = %v; want %v", tt.glob, tt.host, got, tt.want)
			}
		})
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
		if _, err := NormalizeHost(s); err != nil {
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
