package egress

import (
	"net/netip"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// RunIdentity names the run a sandbox's traffic belongs to, and what
// decides its requests to intercepted hosts.
type RunIdentity struct {
	RunID   string
	QueryID string
	// Judge decides each request to an intercepted host (runner.Spec.Requests);
	// nil refuses every one.
	Judge runner.RequestJudge
}

// Registration is what the proxy knows of one sandbox: the run using it
// now (a session's sandbox serves several, one after another: see
// Proxy.Bind), its network policy, and the sentinels its secrets have in
// it (runner.Secret.Name → sentinel, from NewSentinels).
type Registration struct {
	Run       RunIdentity
	Network   runner.Network
	Sentinels map[string]string
}

// Decision is the outcome of the egress policy for one request.
type Decision string

// The two decisions. Anything the proxy refuses, for whatever reason, is a
// Deny; Allow means the policy let the request through, even if the
// upstream then failed (see Event.Error).
const (
	Allow Decision = "allow"
	Deny  Decision = "deny"
)

// Rules name why a request was decided as it was. They appear in Event.Rule,
// in the X-Gatekeeper-Rule response header and in the reply body.
const (
	// RuleAllowlisted: the host matched sandbox.net.allow and every address
	// it resolved to passed the address check.
	RuleAllowlisted = "egress.allowlisted"
	// RuleNotAllowlisted: no sandbox.net.allow pattern matched host:port.
	RuleNotAllowlisted = "egress.not_allowlisted"
	// RuleDenylisted: a sandbox.net.deny pattern matched the host, or one of
	// the addresses it resolved to. Deny always wins over allow.
	RuleDenylisted = "egress.denylisted"
	// RuleMetadata: the host or an address it resolved to is a cloud
	// metadata service (see nethost.MetadataHosts). No policy can allow it.
	RuleMetadata = "egress." + nethost.BlockMetadata
	// RuleModelVendor: the host is a model vendor API (see
	// nethost.ModelVendorHosts). No policy can allow it.
	RuleModelVendor = "egress." + nethost.BlockModelVendor
	// RulePrivateAddress: the host is, or resolved to, a loopback, private,
	// link-local, CGNAT or otherwise non-public address that is not itself
	// allowlisted as an IP literal; or to an unspecified, multicast or
	// broadcast address, which nothing can allow.
	RulePrivateAddress = "egress." + nethost.BlockPrivateAddress
	// RuleBadHost: the requested host or port cannot be normalized.
	RuleBadHost = "egress.bad_host"
	// RuleBadRequest: the request is neither CONNECT host:port nor an
	// absolute http:// URI.
	RuleBadRequest = "egress.bad_request"
	// RuleUnknownSource: the connection comes from an address no run is
	// registered for.
	RuleUnknownSource = "egress.unknown_source"
	// RuleDisabled: the run is registered with networking disabled.
	RuleDisabled = "egress.disabled"
	// RuleConnLimit: the sandbox already has Config.MaxConnsPerSandbox
	// connections open to the proxy.
	RuleConnLimit = "egress.conn_limit"
	// RuleUnresolvable: the allowed name did not resolve.
	RuleUnresolvable = "egress.unresolvable"
)

// Event is the audit record of one proxied request: one CONNECT tunnel or
// one forwarded HTTP request.
type Event struct {
	// Time is when the request arrived; Duration how long it lasted (zero
	// for a refusal).
	Time     time.Time
	Duration time.Duration
	// RunID and QueryID identify the run; empty for an unknown source.
	RunID, QueryID string
	// Source is the client (sandbox) address.
	Source netip.Addr
	// Method is "CONNECT" or the forwarded HTTP method.
	Method string
	// Host is the normalized host, or the raw text (clipped) when it could
	// not be normalized; Port is 0 then.
	Host string
	Port uint16
	// Addr is the upstream address dialed; zero when nothing was dialed.
	Addr netip.AddrPort
	// Decision, Rule and Reason say what the policy decided and why; Reason
	// is the sentence the client was sent.
	Decision Decision
	Rule     string
	Reason   string
	// BytesUp and BytesDown count bytes sent to and received from the
	// upstream (HTTP headers included for forwarded requests).
	BytesUp, BytesDown int64
	// Error says how an allowed request ended abnormally (dial failure,
	// byte limit, idle timeout, upstream error); empty when it ended cleanly.
	Error string
	// Intercepted, Path, Status, Proto, Secrets, Omitted: an intercepted
	// request's (stand-in).
	Intercepted bool
	Path        string
	Status      int
	Proto       string
	Secrets     []string
	Omitted     int
}

// Auditor receives one Event per request: for a denied request before the
// client is answered, for an allowed one when it ends. It is called from
// many goroutines at once and should not block for long. An error is
// logged; it does not change the decision.
type Auditor interface {
	Egress(Event) error
}
