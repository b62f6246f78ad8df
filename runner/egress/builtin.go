package egress

import (
	"net/netip"
	"slices"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
)

// Read-only tables of what a sandbox may never reach. They are package
// variables only so that they are built once; nothing writes them, and the
// exported accessors hand out copies.
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
	// modelVendorHosts are model vendor API hosts, in nethost.Glob syntax.
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

// MetadataHosts returns the cloud metadata names and addresses every
// sandbox is denied (rule egress.metadata), whatever its policy says. The
// caller owns the returned slice.
func MetadataHosts() []string {
	out := slices.Clone(metadataNames)
	for _, a := range metadataAddrs {
		out = append(out, a.String())
	}
	return out
}

// ModelVendorHosts returns the model vendor API hosts every sandbox is
// denied (rule egress.model_vendor), whatever its policy says; Config.
// ExtraVendorHosts adds to them. A leading "*." matches one or more labels;
// any other "*" matches within one label. The caller owns the returned
// slice.
func ModelVendorHosts() []string {
	return slices.Clone(modelVendorHosts)
}

// addrClass is what the address check makes of one resolved address.
type addrClass int

const (
	classPublic    addrClass = iota // reachable when the name is allowed
	classPrivate                    // reachable only when the literal address is allowed
	classForbidden                  // never: unspecified, multicast, broadcast
	classMetadata                   // never: a cloud metadata address
)

// classify sorts a resolved or literal address.
func classify(a netip.Addr) addrClass {
	a = a.Unmap().WithZone("")
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case slices.Contains(metadataAddrs, a):
		return classMetadata
	case a.IsUnspecified() || a.IsMulticast() || a == broadcastAddr:
		return classForbidden
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return classPrivate
		}
	}
	return classPublic
}

// isMetadataHost reports whether the normalized host names a metadata
// service, by name or by address.
func isMetadataHost(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return classify(a) == classMetadata
	}
	return slices.Contains(metadataNames, host)
}

// mustParseGlobs parses the built-in tables; a bad entry is a programming
// error caught by the package's tests.
func mustParseGlobs(in []string) []nethost.Glob {
	out := make([]nethost.Glob, len(in))
	for i, s := range in {
		g, err := nethost.ParseGlob(s)
		if err != nil {
			panic(err)
		}
		out[i] = g
	}
	return out
}
