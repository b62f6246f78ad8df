package egress

import (
	"net/netip"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/swap"
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

// Rules of intercepted requests (hosts in net.inspect or a secret's hosts).
const (
	// RuleHostMismatch: the TLS server name (SNI), the Host header or the
	// HTTP/2 :authority of a request on an intercepted connection is not
	// the host the CONNECT named.
	RuleHostMismatch = "egress.host_mismatch"
	// RuleTLSRefused: the client refused the proxy's certificate (a client
	// that pins its server's certificate) or the TLS handshake with the
	// client failed otherwise. The proxy never falls back to a tunnel.
	RuleTLSRefused = "egress.tls_refused"
	// RuleUpstreamUnverified: the upstream's certificate did not verify
	// against Config.UpstreamRoots for the host, so the request was not
	// sent (whatever the client verifies, the proxy verifies upstream).
	RuleUpstreamUnverified = "egress.upstream_unverified"
	// RuleUndecodable: a secret was injected and the response came back in
	// a Content-Encoding the proxy cannot decode, so it cannot be scrubbed
	// of the secret; the response is cut.
	RuleUndecodable = "egress.undecodable_response"
	// RuleNoJudge: the run has no RequestJudge, so no intercepted request
	// can be allowed.
	RuleNoJudge = "egress.no_judge"
	// RuleJudgeDenied: the RequestJudge refused without naming a rule.
	RuleJudgeDenied = "egress.judge_denied"
	// RuleSecretWrongHost: a secret's sentinel was sent to a host that is
	// not among the secret's hosts.
	RuleSecretWrongHost = swap.RuleWrongHost
	// RuleSecretMisplaced: a secret's sentinel was sent to one of its hosts
	// outside the place it is injected in (Secret.Inject).
	RuleSecretMisplaced = swap.RuleMisplaced
	// RuleSecretRequired: a request to the hosts of a secret with Require
	// lacks the sentinel in its place.
	RuleSecretRequired = swap.RuleRequired
	// RuleSecretPlaintext: a sentinel was sent over plain http://; secrets
	// are injected only into requests the proxy sends over verified TLS.
	RuleSecretPlaintext = swap.RulePlaintext
	// RuleSecretBodyTooLarge: a secret placed in the body was sent in a
	// body larger than MaxSecretBody, which the proxy would have to hold
	// whole to swap it.
	RuleSecretBodyTooLarge = swap.RuleBodyTooLarge
	// RuleMaxRefusals: the run has had MaxRequestRefusals intercepted
	// requests refused; every further one is refused.
	RuleMaxRefusals = "egress.max_refusals"
	// RuleRequestLines: a summary Event: the run made more than
	// MaxRequestLines intercepted requests, and Event.Omitted of them were
	// not written one by one.
	RuleRequestLines = "egress.request_lines"
)

// Bounds of one run's intercepted requests. A run is one RunIdentity: a
// Bind to another run starts the counts again.
const (
	// MaxRequestLines is how many intercepted-request Events one run
	// writes; further ones are counted, and one summary Event (rule
	// egress.request_lines, Omitted set) is written when the run is
	// unbound (Bind to another run, or Unregister).
	MaxRequestLines = 256
	// MaxRequestRefusals is how many intercepted requests of one run may
	// be refused; after that every further one is (rule egress.max_refusals).
	MaxRequestRefusals = 1024
	// MaxSecretBody caps a request body that carries a body-placed secret,
	// which the proxy holds whole to swap it.
	MaxSecretBody = swap.MaxBody
	// MaxBodyPreview caps Network.BodyPreview.
	MaxBodyPreview = 64 << 10
)

// Event is the audit record of one proxied request: one CONNECT tunnel,
// one forwarded HTTP request, or one request on an intercepted connection
// (Intercepted). A summary Event (rule egress.request_lines) has only
// Time, the run, Source, Rule, Reason and Omitted set; its Decision is
// empty.
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
	// For an intercepted request it is the one the proxy's upstream
	// connection for the client connection last dialed.
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
	// Intercepted marks a request the proxy decrypted and decided on its
	// own (or a TLS handshake of an intercepted CONNECT that failed). Its
	// BytesUp and BytesDown count body bytes only.
	Intercepted bool
	// Path is an intercepted request's path (escaped form, no query).
	Path string
	// Status is the HTTP status the client was sent; 0 when none was.
	Status int
	// Proto is the client's protocol: "HTTP/1.1" or "HTTP/2.0".
	Proto string
	// Secrets names the secrets injected into the request, never their values.
	Secrets []string
	// Omitted, on a summary Event, counts the request Events not written.
	Omitted int
}

// Auditor receives one Event per request: for a denied request before the
// client is answered, for an allowed one when it ends. It is called from
// many goroutines at once and should not block for long. An error is
// logged; it does not change the decision.
type Auditor interface {
	Egress(Event) error
}
