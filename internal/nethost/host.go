// Package nethost is gatekeeper's one implementation of host names, host
// patterns and the built-in host blocks, shared by the gate (WebFetch,
// policy validation, override ceilings) and the egress proxy
// (runner/egress), so that what the policy says about a host means the
// same thing wherever it is enforced:
//
//   - Normalize turns any spelling of a host (case, IDN, full-width and
//     ignorable characters, every IPv4 spelling) into the one canonical
//     form every check compares;
//   - ParseURL reads the host and port of an http or https URL exactly as a
//     WHATWG URL parser (Node's new URL, which Claude Code uses) does;
//   - Pattern is one sandbox.net.allow, sandbox.net.deny or
//     ceilings.net_hosts entry, with Match, Allows and Covers;
//   - Pattern.CheckAllow refuses allow patterns that span a public suffix
//     or a wildcard DNS service (nip.io);
//   - Glob is the syntax of the built-in always-denied host lists;
//   - MetadataHosts, ModelVendorHosts and ClassifyAddr are the built-in
//     blocks no policy lifts, and CheckBuiltin applies them to a host as
//     written (the gate's WebFetch) with the proxy's own functions.
//
// Everything here is pure: no I/O, no state, safe for concurrent use.
package nethost

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Limits on host names, from RFC 1035 (in their ASCII form).
const (
	maxNameLen  = 253
	maxLabelLen = 63
	// maxHostInput bounds the raw input NormalizeHost looks at, so that a
	// hostile request cannot make IDNA mapping work on megabytes.
	maxHostInput = 1024
)

// Normalize returns the canonical form of host (no port), the form every
// policy check in this package compares:
//
//   - A DNS name is lower-cased, mapped and converted to punycode with the
//     IDNA Lookup profile (UTS 46, STD3 rules), and loses one trailing dot;
//     every label must be 1-63 ASCII letters, digits or hyphens and the name
//     at most 253 bytes.
//   - An IPv4 literal is parsed the way inet_aton and browsers (the WHATWG
//     URL standard) do: one to four dot-separated parts, each decimal,
//     0x-hex or 0-octal, the last part filling the remaining bytes, so
//     "127.1", "0x7f.0.0.1", "0177.0.0.1", "2130706433" and "0x7f000001" are
//     all "127.0.0.1". A name whose last label looks like a number but does
//     not parse ("1.2.3.256", "example.0x") is refused rather than resolved.
//   - An IPv6 literal, bare or in brackets ("[::1]"), is returned in RFC 5952
//     form without brackets; an IPv4-mapped address ("[::ffff:127.0.0.1]")
//     is returned as the IPv4 address. Zones are refused.
//
// Normalize is idempotent: normalizing its output returns the output.
// An input it cannot normalize returns an error wrapping ErrBadHost.
func Normalize(host string) (string, error) {
	return stable(host, normalizeHost)
}

// stable runs one normalizing pass and checks that a second pass over its
// output changes nothing. A few IDNA inputs only reach their canonical form
// after two passes; refusing them keeps normalization idempotent, which the
// policy relies on (a pattern and a host are normalized by the same
// function).
func stable(host string, pass func(string) (string, error)) (string, error) {
	out, err := pass(host)
	if err != nil {
		return "", err
	}
	if again, err := normalizeHost(out); err != nil || again != out {
		return "", fmt.Errorf("%w: %+q does not normalize to a stable form", ErrBadHost, clip(host))
	}
	return out, nil
}

// SplitHostPort splits hostport ("host", "host:port", "[v6]" or
// "[v6]:port") and normalizes the host with Normalize. A missing or
// empty port yields defaultPort; a defaultPort of 0 makes the port
// required. A bare IPv6 address with a port is refused as ambiguous. Errors
// wrap ErrBadHost.
func SplitHostPort(hostport string, defaultPort uint16) (host string, port uint16, err error) {
	h, p, err := cutPort(hostport)
	if err != nil {
		return "", 0, err
	}
	port = defaultPort
	if p != "" {
		if port, err = parsePort(p); err != nil {
			return "", 0, err
		}
	}
	if port == 0 {
		return "", 0, fmt.Errorf("%w: %+q has no port", ErrBadHost, clip(hostport))
	}
	if host, err = Normalize(h); err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// cutPort splits hostport into its host and (possibly empty) port text
// without validating either.
func cutPort(hostport string) (host, port string, err error) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", "", fmt.Errorf("%w: %+q has no closing bracket", ErrBadHost, clip(hostport))
		}
		host, rest := hostport[:end+1], hostport[end+1:]
		if rest == "" {
			return host, "", nil
		}
		if rest[0] != ':' {
			return "", "", fmt.Errorf("%w: %+q has text after the bracket", ErrBadHost, clip(hostport))
		}
		return host, rest[1:], nil
	}
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		return hostport, "", nil
	}
	if strings.IndexByte(hostport[:i], ':') >= 0 {
		return "", "", fmt.Errorf("%w: %+q: an IPv6 address with a port needs brackets", ErrBadHost, clip(hostport))
	}
	return hostport[:i], hostport[i+1:], nil
}

// parsePort parses a decimal port in 1-65535.
func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w: port %+q is not in 1-65535", ErrBadHost, clip(s))
	}
	return uint16(n), nil
}

// normalizeHost is one pass of Normalize.
func normalizeHost(host string) (string, error) {
	switch {
	case host == "":
		return "", fmt.Errorf("%w: empty host", ErrBadHost)
	case len(host) > maxHostInput:
		return "", fmt.Errorf("%w: host is longer than %d bytes", ErrBadHost, maxHostInput)
	case host[0] == '[':
		return normalizeBracketed(host)
	case strings.IndexByte(host, ':') >= 0:
		return normalizeIPv6(host)
	}
	return normalizeName(host)
}

// normalizeBracketed normalizes "[v6]".
func normalizeBracketed(host string) (string, error) {
	if host[len(host)-1] != ']' {
		return "", fmt.Errorf("%w: %+q has no closing bracket", ErrBadHost, clip(host))
	}
	return normalizeIPv6(host[1 : len(host)-1])
}

// normalizeName is one pass over a host that is not an IPv6 literal: a DNS
// name, an IDN or an IPv4 address in any spelling. A ':' or bracket in it
// is refused by the IDNA mapping (STD3 rules), never read as IPv6.
func normalizeName(host string) (string, error) {
	switch {
	case host == "":
		return "", fmt.Errorf("%w: empty host", ErrBadHost)
	case len(host) > maxHostInput:
		return "", fmt.Errorf("%w: host is longer than %d bytes", ErrBadHost, maxHostInput)
	}
	name, err := idna.Lookup.ToASCII(asciiLower(host))
	if err != nil {
		return "", fmt.Errorf("%w: %+q: %w", ErrBadHost, clip(host), err)
	}
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return "", fmt.Errorf("%w: %+q is empty once its trailing dot is removed", ErrBadHost, clip(host))
	}
	labels := strings.Split(name, ".")
	if endsInNumber(labels) {
		ip, ok := parseIPv4(labels)
		if !ok {
			return "", fmt.Errorf("%w: %+q ends in a number but is not an IPv4 address", ErrBadHost, clip(host))
		}
		return ip.String(), nil
	}
	if len(name) > maxNameLen {
		return "", fmt.Errorf("%w: name is longer than %d bytes", ErrBadHost, maxNameLen)
	}
	for _, l := range labels {
		if !validLabel(l) {
			return "", fmt.Errorf("%w: %+q has an invalid label %+q", ErrBadHost, clip(host), clip(l))
		}
	}
	return name, nil
}

// normalizeIPv6 parses an IPv6 literal without brackets.
func normalizeIPv6(s string) (string, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || !ip.Is6() {
		return "", fmt.Errorf("%w: %+q is not an IPv6 address", ErrBadHost, clip(s))
	}
	if ip.Zone() != "" {
		return "", fmt.Errorf("%w: %+q has a zone", ErrBadHost, clip(s))
	}
	return ip.Unmap().String(), nil
}

// validLabel reports whether l is 1-63 bytes of [a-z0-9-].
func validLabel(l string) bool {
	if l == "" || len(l) > maxLabelLen {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// endsInNumber is the WHATWG URL "ends in a number" test: the last label is
// all digits or 0x-hex, whatever its value; such a host must then parse as
// an IPv4 address or be refused.
func endsInNumber(labels []string) bool {
	last := labels[len(labels)-1]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	hex, ok := strings.CutPrefix(last, "0x")
	if !ok {
		hex, ok = strings.CutPrefix(last, "0X")
	}
	return ok && strings.Trim(hex, "0123456789abcdefABCDEF") == ""
}

// parseIPv4 parses dot-separated parts as inet_aton does: with n parts, the
// first n-1 are single bytes and the last fills the remaining 5-n bytes.
func parseIPv4(parts []string) (netip.Addr, bool) {
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 0xff {
				return netip.Addr{}, false
			}
			v |= n << (8 * (3 - i))
			continue
		}
		if n >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, false
		}
		v |= n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Number parses one part of an IPv4 literal: "0x"/"0X" prefix is
// hexadecimal ("0x" alone is 0), a leading 0 is octal, anything else is
// decimal. Values above 2^32-1 fail.
func parseIPv4Number(s string) (uint64, bool) {
	base := 10
	switch {
	case s == "":
		return 0, false
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
		if s == "" {
			return 0, true
		}
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	n, err := strconv.ParseUint(s, base, 32)
	return n, err == nil
}

// asciiLower lower-cases ASCII letters only; IDNA maps the rest.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.Map(func(r rune) rune {
				if 'A' <= r && r <= 'Z' {
					return r + ('a' - 'A')
				}
				return r
			}, s)
		}
	}
	return s
}

// clip shortens s for use in error messages and replies.
func clip(s string) string {
	const max = 128
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// IsLoopback reports whether host (a name or an IP literal, without a
// port or brackets) is this machine: "localhost" or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
