package nethost

import (
	"fmt"
	"net/netip"
	"slices"
)

// The kinds of built-in block: hosts no policy reaches, whatever its allow
// list says. Each is the tail of a rule name in both enforcers: the egress
// proxy's egress.<kind> and the gate's net.<kind> (WebFetch).
const (
	// BlockMetadata is a cloud metadata service, by name or address
	// (MetadataHosts).
	BlockMetadata = "metadata"
	// BlockModelVendor is a model vendor API host (ModelVendorHosts).
	BlockModelVendor = "model_vendor"
	// BlockPrivateAddress is a non-public address (ClassifyAddr) that is not
	// itself an IP literal of the allow list, or one nothing can allow.
	BlockPrivateAddress = "private_address"
)

// BlockKinds returns every kind of built-in block, so that a consumer can
// check it handles each (the gate pins its Rego rules to it).
func BlockKinds() []string {
	return []string{BlockMetadata, BlockModelVendor, BlockPrivateAddress}
}

// Read-only tables of what nothing guarded by gatekeeper may reach. They are
// package variables only so that they are built once; nothing writes them,
// and the exported accessors hand out copies.
var (
	// metadataNames are the cloud metadata service names (normalized).
	metadataNames = []string{
		"metadata",
		"metadata.google.internal",
		"metadata.goog",
		"instance-data",
		"instance-data.ec2.internal",
	}
	// metadataAddrs are the cloud metadata service addresses: AWS/Azure/GCP/
	// OCI IMDS, AWS ECS task metadata, AWS EKS pod identity, Alibaba, OCI.
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"),
		netip.MustParseAddr("169.254.170.2"),
		netip.MustParseAddr("169.254.170.23"),
		netip.MustParseAddr("100.100.100.200"),
		netip.MustParseAddr("192.0.0.192"),
		netip.MustParseAddr("fd00:ec2::254"),
		netip.MustParseAddr("fd00:ec2::23"),
	}
	// modelVendorHosts are model vendor API hosts, in Glob syntax.
	modelVendorHosts = []string{
		"api.anthropic.com",
		"api.openai.com",
		"generativelanguage.googleapis.com",
		"aiplatform.googleapis.com",
		"*-aiplatform.googleapis.com",
		"api.mistral.ai",
		"api.cohere.ai",
		"api.cohere.com",
		"api.groq.com",
		"api.deepseek.com",
		"api.together.xyz",
		"api.fireworks.ai",
		"api.perplexity.ai",
		"openrouter.ai",
		"api.x.ai",
		"*.openai.azure.com",
		"*.services.ai.azure.com",
		"bedrock-runtime.*.amazonaws.com",
		"bedrock-runtime-fips.*.amazonaws.com",
	}
	// modelVendorGlobs is modelVendorHosts parsed; a test checks that every
	// entry parses.
	modelVendorGlobs = mustParseGlobs(modelVendorHosts)

	// nonPublic are the prefixes a name may not resolve to unless the
	// address is itself allowlisted: loopback, RFC 1918, CGNAT, link-local,
	// ULA, site-local, documentation, benchmarking, reserved, IPv4-compatible
	// and the transition mechanisms that embed one of those (6to4, Teredo,
	// local-use NAT64). The well-known NAT64 prefix 64:ff9b::/96 is judged by
	// the IPv4 address it embeds instead.
	nonPublic = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.0.0.0/24"),
		netip.MustParsePrefix("192.0.2.0/24"),
		netip.MustParsePrefix("192.88.99.0/24"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("198.18.0.0/15"),
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"),
		netip.MustParsePrefix("240.0.0.0/4"),
		netip.MustParsePrefix("::/96"),
		netip.MustParsePrefix("::ffff:0:0/96"),
		netip.MustParsePrefix("64:ff9b:1::/48"),
		netip.MustParsePrefix("100::/64"),
		netip.MustParsePrefix("2001::/32"),
		netip.MustParsePrefix("2001:2::/48"),
		netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("2002::/16"),
		netip.MustParsePrefix("fc00::/7"),
		netip.MustParsePrefix("fe80::/10"),
		netip.MustParsePrefix("fec0::/10"),
	}
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	broadcastAddr = netip.MustParseAddr("255.255.255.255")
)

// MetadataHosts returns the cloud metadata names and addresses nothing may
// reach (BlockMetadata), whatever its policy says. The caller owns the
// returned slice.
func MetadataHosts() []string {
	out := slices.Clone(metadataNames)
	for _, a := range metadataAddrs {
		out = append(out, a.String())
	}
	return out
}

// ModelVendorHosts returns the model vendor API hosts nothing may reach
// (BlockModelVendor), whatever its policy says, in Glob syntax: a leading
// "*." matches one or more labels; any other "*" matches within one label.
// The caller owns the returned slice.
func ModelVendorHosts() []string {
	return slices.Clone(modelVendorHosts)
}

// ModelVendorGlobs returns ModelVendorHosts parsed. The caller owns the
// returned slice.
func ModelVendorGlobs() []Glob {
	return slices.Clone(modelVendorGlobs)
}

// AddrClass is what the built-in address check makes of one address.
type AddrClass int

const (
	AddrPublic    AddrClass = iota // reachable when the name is allowed
	AddrPrivate                    // reachable only when the literal address is allowed
	AddrForbidden                  // never: unspecified, multicast, broadcast
	AddrMetadata                   // never: a cloud metadata address
)

// ClassifyAddr sorts a resolved or literal address. An IPv4-mapped address
// is judged as its IPv4 address, a NAT64 address (64:ff9b::/96) as the IPv4
// address it embeds; a zone is ignored.
func ClassifyAddr(a netip.Addr) AddrClass {
	a = a.Unmap().WithZone("")
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case slices.Contains(metadataAddrs, a):
		return AddrMetadata
	case a.IsUnspecified() || a.IsMulticast() || a == broadcastAddr:
		return AddrForbidden
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return AddrPrivate
		}
	}
	return AddrPublic
}

// IsMetadataHost reports whether the normalized host names a metadata
// service, by name or by address.
func IsMetadataHost(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return ClassifyAddr(a) == AddrMetadata
	}
	return slices.Contains(metadataNames, host)
}

// AllowsAddr reports whether an IP-literal pattern of allow names a on
// port: the only way a non-public address (AddrPrivate) is reached.
func AllowsAddr(allow []Pattern, a netip.Addr, port uint16) bool {
	for _, p := range allow {
		if p.MatchAddr(a, port) {
			return true
		}
	}
	return false
}

// Block is a built-in refusal of a host: its kind (BlockMetadata,
// BlockModelVendor, BlockPrivateAddress) and a reason that names the host
// and says why, for a model to read.
type Block struct {
	Kind   string
	Reason string
}

// CheckBuiltin applies the built-in blocks to a normalized host (Normalize's
// form) on port, before and without any name resolution: a metadata name or
// address, a model vendor host (the built-in ModelVendorHosts), and for an
// IP literal the address check, where a non-public address passes only when
// an IP-literal pattern of allow names it (AllowsAddr) and an unspecified,
// multicast or broadcast address never does. It reports false when no
// block applies. A name that resolves to a blocked address is not caught
// here: only the one who resolves it can (the egress proxy does, with
// ClassifyAddr on every address it resolved).
func CheckBuiltin(host string, port uint16, allow []Pattern) (Block, bool) {
	if IsMetadataHost(host) {
		return Block{BlockMetadata, fmt.Sprintf("host %s is a cloud metadata endpoint, which no policy can allow", host)}, true
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		for _, g := range modelVendorGlobs {
			if g.Match(host) {
				return Block{BlockModelVendor, fmt.Sprintf("host %s is a model vendor API (%s), which no policy can allow", host, g)}, true
			}
		}
		return Block{}, false
	}
	switch ClassifyAddr(a) {
	case AddrForbidden:
		return Block{BlockPrivateAddress, fmt.Sprintf("host %s is an unspecified, multicast or broadcast address, which no policy can allow", host)}, true
	case AddrPrivate:
		if !AllowsAddr(allow, a, port) {
			lit := netip.AddrPortFrom(a, port).String()
			return Block{BlockPrivateAddress, fmt.Sprintf("host %s is a private, loopback or link-local address; allow it by listing %q in sandbox.net.allow", host, lit)}, true
		}
	}
	return Block{}, false
}

// mustParseGlobs parses the built-in tables; a bad entry is a programming
// error caught by the package's tests.
func mustParseGlobs(in []string) []Glob {
	out := make([]Glob, len(in))
	for i, s := range in {
		g, err := ParseGlob(s)
		if err != nil {
			panic(err)
		}
		out[i] = g
	}
	return out
}
