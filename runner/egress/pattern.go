package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Pattern is one parsed sandbox.net.allow or sandbox.net.deny entry. The
// forms are:
//
//   - "example.com": exactly that host (after NormalizeHost, so
//     "EXAMPLE.com." and IDN spellings are the same pattern);
//   - "*.example.com": any strict subdomain ("a.example.com",
//     "a.b.example.com"), never "example.com" itself;
//   - an IP literal in any spelling NormalizeHost accepts ("10.0.0.1",
//     "::1", "[::1]"): exactly that address, whether the request names it
//     literally or a name resolves to it;
//
// each optionally followed by ":port" (IPv6 then needs brackets:
// "[::1]:8080"). A pattern without a port matches every port. "*" alone and
// a "*" anywhere but a leading "*." are refused. The zero Pattern matches
// nothing.
type Pattern struct {
	host     string     // normalized host; for a wildcard the part after "*."
	wildcard bool       // "*.host"
	ip       netip.Addr // valid when the pattern is an IP literal
	port     uint16     // 0 means any port
}

// ParsePattern parses one host pattern. Errors wrap ErrBadPattern.
func ParsePattern(s string) (Pattern, error) {
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
	if p.host, err = NormalizeHost(h); err != nil {
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
// to p.
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
// normalized (NormalizeHost's output); port 0 matches only a pattern
// without a port.
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

// matchAddr reports whether p is an IP-literal pattern naming addr on port.
func (p Pattern) matchAddr(addr netip.Addr, port uint16) bool {
	return p.ip.IsValid() && p.ip == addr && (p.port == 0 || p.port == port)
}

// Match reports whether pattern matches host (not normalized; no port) on
// port. It is the one-shot form of ParsePattern and Pattern.Match; errors
// wrap ErrBadPattern or ErrBadHost.
func Match(pattern, host string, port uint16) (bool, error) {
	p, err := ParsePattern(pattern)
	if err != nil {
		return false, err
	}
	h, err := NormalizeHost(host)
	if err != nil {
		return false, err
	}
	return p.Match(h, port), nil
}

// ValidateNetwork checks every pattern of n and returns all problems at
// once, each naming its location ("net.allow[2]: ..."), joined with
// errors.Join; each wraps ErrBadPattern. It returns nil when n is usable.
func ValidateNetwork(n runner.Network) error {
	_, err := compileNetwork(n)
	return err
}

// netPolicy is a runner.Network with its patterns parsed.
type netPolicy struct {
	enabled     bool
	allow, deny []Pattern
}

// compileNetwork parses n's patterns; see ValidateNetwork.
func compileNetwork(n runner.Network) (netPolicy, error) {
	var errs []error
	parse := func(field string, in []string) []Pattern {
		out := make([]Pattern, 0, len(in))
		for i, s := range in {
			p, err := ParsePattern(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("net.%s[%d]: %w", field, i, err))
				continue
			}
			out = append(out, p)
		}
		return out
	}
	np := netPolicy{enabled: n.Enabled, allow: parse("allow", n.Allow), deny: parse("deny", n.Deny)}
	if err := errors.Join(errs...); err != nil {
		return netPolicy{}, err
	}
	return np, nil
}

// firstMatch returns the first pattern in ps matching host and port.
func firstMatch(ps []Pattern, host string, port uint16) (Pattern, bool) {
	for _, p := range ps {
		if p.Match(host, port) {
			return p, true
		}
	}
	return Pattern{}, false
}

// hostGlob is a pattern of the built-in and configured always-denied host
// lists. A leading "*." matches one or more labels, as in Pattern; any other
// "*" matches within one label ("bedrock-runtime.*.amazonaws.com",
// "*-aiplatform.googleapis.com"). Ports are not part of a glob.
type hostGlob struct {
	text   string
	anySub bool
	labels []string
}

// parseHostGlob parses a glob; errors wrap ErrBadPattern.
func parseHostGlob(s string) (hostGlob, error) {
	g := hostGlob{text: s}
	rest := s
	if r, ok := strings.CutPrefix(rest, "*."); ok {
		g.anySub, rest = true, r
	}
	if !strings.Contains(rest, "*") {
		h, err := NormalizeHost(rest)
		if err != nil {
			return hostGlob{}, fmt.Errorf("%w %+q: %w", ErrBadPattern, clip(s), err)
		}
		if _, err := netip.ParseAddr(h); err == nil {
			return hostGlob{}, fmt.Errorf("%w %+q: a host list entry must be a domain name", ErrBadPattern, clip(s))
		}
		g.labels = strings.Split(h, ".")
		return g, nil
	}
	g.labels = strings.Split(asciiLower(rest), ".")
	for _, l := range g.labels {
		if !validLabel(strings.ReplaceAll(l, "*", "a")) {
			return hostGlob{}, fmt.Errorf("%w %+q: invalid label %+q", ErrBadPattern, clip(s), clip(l))
		}
	}
	return g, nil
}

// match reports whether the normalized host matches g.
func (g hostGlob) match(host string) bool {
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
