package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// ValidateNetwork checks every pattern of n and returns all problems at
// once, each naming its location ("net.allow[2]: ..."), joined with
// errors.Join; each wraps nethost.ErrBadPattern or, for an allow pattern
// that spans a public suffix, nethost.ErrTooBroad. It returns nil when n is
// usable.
func ValidateNetwork(n runner.Network) error {
	_, err := compileNetwork(n)
	return err
}

// netPolicy is a runner.Network with its patterns parsed.
type netPolicy struct {
	enabled     bool
	allow, deny []nethost.Pattern
	// inspect are net.inspect and every secret's hosts: the hosts whose
	// CONNECTs are intercepted.
	inspect []nethost.Pattern
	preview int64
}

// compileNetwork parses n's patterns; see ValidateNetwork.
func compileNetwork(n runner.Network) (netPolicy, error) {
	allow, aerr := nethost.ParseList("net.allow", n.Allow, nethost.ParseAllow)
	deny, derr := nethost.ParseList("net.deny", n.Deny, nethost.ParsePattern)
	inspect, ierr := nethost.ParseList("net.inspect", n.Inspect, nethost.ParsePattern)
	errs := []error{aerr, derr, ierr}
	for i, s := range n.Secrets {
		hosts, err := nethost.ParseList(fmt.Sprintf("net.secrets[%d].hosts", i), s.Hosts, nethost.ParsePattern)
		errs = append(errs, err)
		inspect = append(inspect, hosts...)
	}
	if err := errors.Join(errs...); err != nil {
		return netPolicy{}, err
	}
	return netPolicy{
		enabled: n.Enabled, allow: allow, deny: deny,
		inspect: inspect,
		preview: min(max(n.BodyPreview, 0), MaxBodyPreview),
	}, nil
}

// intercepts reports whether requests to t are intercepted and decided
// one by one.
func (np netPolicy) intercepts(t target) bool {
	_, ok := firstMatch(np.inspect, func(p nethost.Pattern) bool { return p.Allows(t.host, t.port) })
	return ok
}

// firstMatch returns the first pattern in ps for which match holds.
func firstMatch(ps []nethost.Pattern, match func(nethost.Pattern) bool) (nethost.Pattern, bool) {
	for _, p := range ps {
		if match(p) {
			return p, true
		}
	}
	return nethost.Pattern{}, false
}

// verdict is the decision for one request, with what the client is told.
type verdict struct {
	decision Decision
	rule     string
	status   int    // HTTP status of a refusal
	reason   string // one sentence for the client and the audit log
	addrs    []netip.Addr
}

// deny builds a refusal.
func deny(status int, rule, format string, args ...any) verdict {
	return verdict{decision: Deny, rule: rule, status: status, reason: fmt.Sprintf(format, args...)}
}

// body is the plain-text reply to a refusal: one line a model can read.
func (v verdict) body() string {
	return fmt.Sprintf("gatekeeper egress denied: %s (rule %s)\n", v.reason, v.rule)
}

// target is a requested host and port, already normalized.
type target struct {
	host string
	port uint16
}

// String quotes host:port for messages.
func (t target) String() string {
	return strconv.Quote(net.JoinHostPort(t.host, strconv.Itoa(int(t.port))))
}

// checkName applies the name-level policy: the built-in lists, then
// net.deny, then net.allow. It does not resolve anything.
func (p *Proxy) checkName(np netPolicy, t target) verdict {
	switch {
	case !np.enabled:
		return deny(http.StatusForbidden, RuleDisabled, "host %s cannot be reached: networking is disabled for this sandbox (sandbox.net.enabled is false)", t)
	case nethost.IsMetadataHost(t.host):
		return deny(http.StatusForbidden, RuleMetadata, "host %s is a cloud metadata endpoint, which sandboxes may never reach", t)
	}
	for _, g := range p.vendors {
		if g.Match(t.host) {
			return deny(http.StatusForbidden, RuleModelVendor, "host %s is a model vendor API (%s), which sandboxes may never reach", t, g)
		}
	}
	if d, ok := firstMatch(np.deny, func(p nethost.Pattern) bool { return p.Match(t.host, t.port) }); ok {
		return deny(http.StatusForbidden, RuleDenylisted, "host %s matches sandbox.net.deny pattern %q", t, d)
	}
	a, ok := firstMatch(np.allow, func(p nethost.Pattern) bool { return p.Allows(t.host, t.port) })
	if !ok {
		return deny(http.StatusForbidden, RuleNotAllowlisted, "host %s is not in sandbox.net.allow", t)
	}
	return verdict{decision: Allow, rule: RuleAllowlisted, reason: fmt.Sprintf("host %s matches sandbox.net.allow pattern %q", t, a)}
}

// checkAddrs applies the address-level policy to every address the host
// is, or resolved to, given the name-level allow v. All must pass; the
// ones in the returned verdict are the only ones the proxy may dial.
func checkAddrs(np netPolicy, t target, v verdict, addrs []netip.Addr) verdict {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		class := nethost.ClassifyAddr(a)
		if class == nethost.AddrMetadata {
			return deny(http.StatusForbidden, RuleMetadata, "host %s resolves to %s, a cloud metadata endpoint, which sandboxes may never reach", t, a)
		}
		for _, d := range np.deny {
			if d.MatchAddr(a, t.port) {
				return deny(http.StatusForbidden, RuleDenylisted, "host %s resolves to %s, which matches sandbox.net.deny pattern %q", t, a, d)
			}
		}
		switch class {
		case nethost.AddrForbidden:
			return deny(http.StatusForbidden, RulePrivateAddress, "host %s resolves to %s, an unspecified, multicast or broadcast address, which sandboxes may never reach", t, a)
		case nethost.AddrPrivate:
			if !nethost.AllowsAddr(np.allow, a, t.port) {
				return deny(http.StatusForbidden, RulePrivateAddress, "host %s resolves to %s, a private, loopback or link-local address; allow it by listing %q in sandbox.net.allow", t, a, netip.AddrPortFrom(a, t.port).String())
			}
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	v.addrs = out
	return v
}

// decide runs the whole policy for t: names first, then resolution (for a
// name) and the address check. A resolution failure is a refusal.
func (p *Proxy) decide(ctx context.Context, np netPolicy, t target) verdict {
	v := p.checkName(np, t)
	if v.decision != Allow {
		return v
	}
	if ip, err := netip.ParseAddr(t.host); err == nil {
		return checkAddrs(np, t, v, []netip.Addr{ip})
	}
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", t.host)
	if err != nil || len(addrs) == 0 {
		if err == nil {
			err = errors.New("no addresses")
		}
		return deny(http.StatusBadGateway, RuleUnresolvable, "host %s cannot be resolved: %v", t, err)
	}
	return checkAddrs(np, t, v, addrs)
}
