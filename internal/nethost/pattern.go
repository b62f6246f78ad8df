package nethost

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Pattern is one parsed host pattern: a sandbox.net.allow,
// sandbox.net.deny or ceilings.net_hosts entry. The forms are:
//
//   - "example.com": exactly that host (after Normalize, so "EXAMPLE.com."
//     and IDN spellings are the same pattern);
//   - "*.example.com": any strict subdomain ("a.example.com",
//     "a.b.example.com"), never "example.com" itself;
//   - an IP literal in any spelling Normalize accepts ("10.0.0.1", "::1",
//     "[::1]"): exactly that address, whether a request names it literally
//     or (in the egress proxy) a name resolves to it;
//
// each optionally followed by ":port" (IPv6 then needs brackets:
// "[::1]:8080"). A pattern without a port matches every port. "*" alone, a
// "*" anywhere but a leading "*.", a wildcard over an IP address and CIDR
// ranges are refused. The zero Pattern matches nothing.
type Pattern struct {
	host     string     // normalized host; for a wildcard the part after "*."
	wildcard bool       // "*.host"
	ip       netip.Addr // valid when the pattern is an IP literal
	port     uint16     // 0 means any port
}

// ParsePattern parses one host pattern. Errors wrap ErrBadPattern.
func ParsePattern(s string) (Pattern, error) {
	if strings.Contains(s, "/") {
		return Pattern{}, fmt.Errorf("%w %+q: a host pattern names a host (example.com), not a URL, path or address range", ErrBadPattern, clip(s))
	}
	if ip, err := netip.ParseAddr(s); err == nil && ip.Is6() && ip.Zone() == "" {
		// A bare IPv6 address cannot carry a port, so it is one whole host.
		ip = ip.Unmap()
		return Pattern{host: ip.String(), ip: ip}, nil
	}
	h, ps, err := cutPort(s)
	if err != nil {
		return Pattern{}, fmt.Errorf("%w %+q: %w", ErrBadPattern, clip(s), err)
	}
	var p Pattern
	if ps != "" || strings.HasSuffix(s, ":") {
		if p.port, err = parsePort(ps); err != nil {
			return Pattern{}, fmt.Errorf("%w %+q: %w", ErrBadPattern, clip(s), err)
		}
	}
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		p.wildcard, h = true, rest
	}
	if strings.Contains(h, "*") {
		return Pattern{}, fmt.Errorf("%w %+q: only a leading \"*.\" wildcard is supported", ErrBadPattern, clip(s))
	}
	if p.host, err = Normalize(h); err != nil {
		return Pattern{}, fmt.Errorf("%w %+q: %w", ErrBadPattern, clip(s), err)
	}
	if ip, err := netip.ParseAddr(p.host); err == nil {
		if p.wildcard {
			return Pattern{}, fmt.Errorf("%w %+q: a wildcard needs a domain name, not an IP address", ErrBadPattern, clip(s))
		}
		p.ip = ip
	}
	return p, nil
}

// String returns the canonical spelling of p, which ParsePattern maps back
// to p. A policy writes every pattern in this spelling (the gate's
// validation refuses any other), so that two equal patterns are equal
// strings for Rego too.
func (p Pattern) String() string {
	h := p.host
	switch {
	case p.wildcard:
		h = "*." + h
	case p.ip.Is6():
		h = "[" + h + "]"
	}
	if p.port != 0 {
		return fmt.Sprintf("%s:%d", h, p.port)
	}
	return h
}

// Match reports whether p matches host and port. host must already be
// normalized (Normalize's output); port 0 matches only a pattern without a
// port. This is the matching of deny lists; an allow list uses Allows.
func (p Pattern) Match(host string, port uint16) bool {
	if p.host == "" || (p.port != 0 && p.port != port) {
		return false
	}
	switch {
	case p.ip.IsValid():
		ip, err := netip.ParseAddr(host)
		return err == nil && ip == p.ip
	case p.wildcard:
		return strings.HasSuffix(host, "."+p.host)
	default:
		return host == p.host
	}
}

// Allows is Match for an allow list: a wildcard never reaches across a
// public suffix below it. "*.amazonaws.com" allows "ec2.amazonaws.com" but
// not "bucket.s3.amazonaws.com", because "s3.amazonaws.com" is a public
// suffix (anyone can have a bucket there) and such a host belongs to
// whoever registered "bucket", not to the domain the pattern names. The
// host's public suffix must lie strictly above the wildcard's domain.
func (p Pattern) Allows(host string, port uint16) bool {
	if !p.Match(host, port) {
		return false
	}
	return !p.wildcard || p.reaches(host)
}

// reaches reports whether host, a name below the wildcard p, has its
// public suffix strictly above p's domain: whether the wildcard may allow
// it. The one rule behind Allows and Covers.
func (p Pattern) reaches(host string) bool {
	suffix, _ := publicsuffix.PublicSuffix(host)
	return strings.HasSuffix(p.host, "."+suffix)
}

// MatchAddr reports whether p is an IP-literal pattern naming addr on port.
func (p Pattern) MatchAddr(addr netip.Addr, port uint16) bool {
	return p.ip.IsValid() && p.ip == addr && (p.port == 0 || p.port == port)
}

// Covers reports whether every host and port q allows, p allows too
// (Allows): the test of an override's allow pattern q against a
// ceilings.net_hosts entry p. "*.example.com" covers "a.example.com",
// "*.a.example.com" and "*.example.com"; "*.amazonaws.com" does not cover
// "bucket.s3.amazonaws.com" or "*.bucket.s3.amazonaws.com", across the
// public suffix "s3.amazonaws.com", which it does not allow either; a
// pattern without a port covers the same host with any port; a wildcard
// never covers an IP address. The zero Pattern covers nothing and is
// covered by nothing.
func (p Pattern) Covers(q Pattern) bool {
	switch {
	case p.host == "" || q.host == "":
		return false
	case p.port != 0 && p.port != q.port:
		return false
	case p.ip.IsValid() || q.ip.IsValid():
		return p.ip == q.ip
	case p.wildcard:
		return q.wildcard && q.host == p.host || strings.HasSuffix(q.host, "."+p.host) && p.reaches(q.host)
	default:
		return !q.wildcard && q.host == p.host
	}
}

// CheckAllow refuses a pattern too broad for an allow list: a wildcard
// whose domain is itself a public suffix, so that it would match hosts that
// any number of unrelated parties can register. The Public Suffix List
// (golang.org/x/net/publicsuffix) decides, in all of its sections:
//
//   - ICANN suffixes: "*.com", "*.co.uk", "*.foo.ck" (every name under ck is
//     a suffix);
//   - the private section, where a company lets its users create names:
//     "*.github.io", "*.s3.amazonaws.com", "*.herokuapp.com",
//     "*.googleapis.com" (Cloud Storage buckets);
//   - a top-level domain the list does not know: "*.internal", "*.corp".
//
// Exact hosts are never too broad ("github.io" is one host), and neither
// is a wildcard below a suffix ("*.example.co.uk", "*.me.github.io").
//
// It also refuses a wildcard at or below a wildcard DNS service
// (WildcardDNSServices: "*.nip.io", "*.app.sslip.io"): such a domain is not
// a public suffix, but its name servers answer a name under it with
// whatever address the name spells ("10.0.0.1.nip.io" is 10.0.0.1), so the
// wildcard reaches every address there is. An exact host under one is one
// host ("203.0.113.7.nip.io").
//
// Patterns that could match every host at all ("*", "*.", CIDR ranges,
// wildcards over addresses) do not parse. Errors wrap ErrTooBroad.
func (p Pattern) CheckAllow() error {
	if !p.wildcard {
		return nil
	}
	suffix, icann := publicsuffix.PublicSuffix(p.host)
	if suffix != p.host {
		if svc, ok := wildcardDNSService(p.host); ok {
			return fmt.Errorf("%w: %q would match every host under %q, a wildcard DNS service that answers a name under it with any address the name spells (10.0.0.1.%s is 10.0.0.1), so it would reach every address; allow the exact hosts you need",
				ErrTooBroad, p.String(), svc, svc)
		}
		return nil
	}
	var what string
	switch {
	case icann:
		what = "a public suffix"
	case !strings.Contains(suffix, "."):
		what = "a top-level domain"
	default:
		what = "a public suffix where anyone can register a name (the private section of the Public Suffix List)"
	}
	return fmt.Errorf("%w: %q would match every host under %q, %s; allow the hosts themselves, or a wildcard under one domain you trust (such as \"*.example.%s\")",
		ErrTooBroad, p.String(), p.host, what, p.host)
}

// wildcardDNS are public DNS services that resolve a name under them to an
// address written in the name, whatever it is, each checked against its
// own documentation:
//
//   - nip.io and sslip.io (one service, github.com/cunnie/sslip.io:
//     "127-0-0-1.sslip.io" is 127.0.0.1, and 10.0.0.1.nip.io is 10.0.0.1);
//   - xip.io, the original such service (now gone, so whoever holds the
//     domain next answers for it);
//   - traefik.me (github.com/pyrou/traefik.me: "10.0.0.1.traefik.me
//     resolves to 10.0.0.1", every other name to 127.0.0.1);
//   - rbndr.us (github.com/taviso/rbndr: "7f000001.c0a80001.rbndr.us"
//     answers 127.0.0.1 or 192.168.0.1 at random, for DNS rebinding);
//   - 1u.ms (github.com/neex/1u.ms: "make-1.2.3.4-rr.1u.ms" is 1.2.3.4,
//     "make-1.2.3.4-rebind-169.254-169.254-rr.1u.ms" rebinds, and
//     "make-example.com-rr.1u.ms" is a CNAME to any name).
//
// Services that answer every name with loopback only (localtest.me, lvh.me)
// are not listed: they reach no address but the loopback one, which the
// egress proxy refuses unless it is allowlisted as a literal.
var wildcardDNS = []string{"nip.io", "sslip.io", "xip.io", "traefik.me", "rbndr.us", "1u.ms"}

// WildcardDNSServices returns the domains of the wildcard DNS services
// CheckAllow refuses wildcards over. The caller owns the returned slice.
func WildcardDNSServices() []string {
	return slices.Clone(wildcardDNS)
}

// wildcardDNSService returns the wildcard DNS service the normalized name
// is, or lies under.
func wildcardDNSService(name string) (string, bool) {
	for _, svc := range wildcardDNS {
		if name == svc || strings.HasSuffix(name, "."+svc) {
			return svc, true
		}
	}
	return "", false
}

// ParseAllow parses an allow-list pattern: ParsePattern, then CheckAllow.
// Errors wrap ErrBadPattern or ErrTooBroad.
func ParseAllow(s string) (Pattern, error) {
	p, err := ParsePattern(s)
	if err != nil {
		return Pattern{}, err
	}
	if err := p.CheckAllow(); err != nil {
		return Pattern{}, err
	}
	return p, nil
}

// ParseList parses every entry of the pattern list named name
// ("net.allow") with parse (ParsePattern or ParseAllow). It reports every
// bad entry at once, each as "name[i]: ...", joined with errors.Join.
func ParseList(name string, in []string, parse func(string) (Pattern, error)) ([]Pattern, error) {
	out := make([]Pattern, 0, len(in))
	var errs []error
	for i, s := range in {
		p, err := parse(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", name, i, err))
			continue
		}
		out = append(out, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Match reports whether pattern matches host (not normalized; no port) on
// port. It is the one-shot form of ParsePattern and Pattern.Match; errors
// wrap ErrBadPattern or ErrBadHost.
func Match(pattern, host string, port uint16) (bool, error) {
	p, err := ParsePattern(pattern)
	if err != nil {
		return false, err
	}
	h, err := Normalize(host)
	if err != nil {
		return false, err
	}
	return p.Match(h, port), nil
}

// Glob is a pattern of the built-in and configured always-denied host
// lists. A leading "*." matches one or more labels, as in Pattern; any other
// "*" matches within one label ("bedrock-runtime.*.amazonaws.com",
// "*-aiplatform.googleapis.com"). Ports are not part of a glob. The zero
// Glob matches nothing.
type Glob struct {
	text   string
	anySub bool
	labels []string
}

// ParseGlob parses a glob; errors wrap ErrBadPattern.
func ParseGlob(s string) (Glob, error) {
	g := Glob{text: s}
	rest := s
	if r, ok := strings.CutPrefix(rest, "*."); ok {
		g.anySub, rest = true, r
	}
	if !strings.Contains(rest, "*") {
		h, err := Normalize(rest)
		if err != nil {
			return Glob{}, fmt.Errorf("%w %+q: %w", ErrBadPattern, clip(s), err)
		}
		if _, err := netip.ParseAddr(h); err == nil {
			return Glob{}, fmt.Errorf("%w %+q: a host list entry must be a domain name", ErrBadPattern, clip(s))
		}
		g.labels = strings.Split(h, ".")
		return g, nil
	}
	g.labels = strings.Split(asciiLower(rest), ".")
	for _, l := range g.labels {
		if !validLabel(strings.ReplaceAll(l, "*", "a")) {
			return Glob{}, fmt.Errorf("%w %+q: invalid label %+q", ErrBadPattern, clip(s), clip(l))
		}
	}
	return g, nil
}

// String returns the glob as written.
func (g Glob) String() string { return g.text }

// Match reports whether the normalized host matches g.
func (g Glob) Match(host string) bool {
	if len(g.labels) == 0 {
		return false
	}
	hl := strings.Split(host, ".")
	switch {
	case g.anySub && len(hl) <= len(g.labels):
		return false
	case !g.anySub && len(hl) != len(g.labels):
		return false
	}
	hl = hl[len(hl)-len(g.labels):]
	for i, pat := range g.labels {
		// Labels hold only [a-z0-9*-], so path.Match cannot fail.
		if ok, _ := path.Match(pat, hl[i]); !ok {
			return false
		}
	}
	return true
}
