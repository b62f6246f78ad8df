// Package swap is the egress proxy's handling of secrets inside one
// intercepted HTTP request: where a sentinel may be, which refusal a
// misplaced one earns, the swap of a sentinel for its secret's value, and
// the scrubbing of the value out of the response. It does no I/O of its own
// and knows nothing of TLS or of the policy; the proxy (runner/egress)
// calls it in this order for each request to host H ("name:port"):
//
//  1. Plan(r, H, preview, complete): the names of the secrets to inject, or
//     a Refusal. When BuffersBody(H) is true and the body is longer than
//     the preview, the proxy first reads the whole body (CheckBodySize
//     bounds it to MaxBody) and plans with complete=true; a body it streams
//     instead goes through Watch(body, H), which refuses any sentinel in
//     it, since a streamed body is never swapped.
//  2. The policy decides the request; a deny injects nothing.
//  3. Inject(r, names) and, when BodyPlaced(names), InjectBody(body, names):
//     only now does the request hold the values.
//  4. ScrubHeader(resp.Header, names) and Scrub(resp.Body, names): the
//     response returns with every injected value, and its base64, URL and
//     JSON spellings, replaced by the sentinel. The proxy drops
//     Content-Length and asks for no Content-Encoding it cannot decode.
//
// A Set is safe for concurrent use. No value ever appears in a Refusal, an
// error or anything a Set formats: they name a secret and a place.
package swap

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// The rules of a Set's refusals (the proxy re-exports them).
const (
	// RuleWrongHost: a sentinel in a request to a host its secret may not go to.
	RuleWrongHost = "egress.secret_wrong_host"
	// RuleMisplaced: a sentinel elsewhere than its secret's inject place,
	// in a request to one of its hosts.
	RuleMisplaced = "egress.secret_misplaced"
	// RuleRequired: with require, a request to the secret's hosts without
	// the sentinel in its place.
	RuleRequired = "egress.secret_required"
	// RulePlaintext: a sentinel in a plain http:// request.
	RulePlaintext = "egress.secret_plaintext"
	// RuleBodyTooLarge: a body the proxy must read whole (BuffersBody) is
	// longer than MaxBody.
	RuleBodyTooLarge = "egress.secret_body_too_large"
)

// MaxBody is the largest request body the proxy reads whole to find and
// swap a body-placed sentinel (see BuffersBody and CheckBodySize).
const MaxBody = 1 << 20

// maxCredentials bounds the Basic credentials a Set remembers per secret
// for Scrub (see Inject).
const maxCredentials = 64

// ErrUnscrubbable is the error of a Scrub reader whose output would have
// held a secret's value even after every occurrence in its input was
// replaced: the value overlaps its sentinel and the input spells the rest
// of it next to a replaced one. The proxy cuts the response.
var ErrUnscrubbable = errors.New("swap: the response cannot be scrubbed of a secret's value; it was cut")

// Refusal is a request refused for where a sentinel is, or is not. Reason
// names the secret, the place and the host, never a value or a sentinel.
type Refusal struct{ Rule, Reason string }

// Error returns "rule: reason".
func (r *Refusal) Error() string { return r.Rule + ": " + r.Reason }

// refuse builds a Refusal.
func refuse(rule, format string, args ...any) *Refusal {
	return &Refusal{Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

// Set is one sandbox's secrets with their sentinels, compiled by New.
type Set struct {
	secrets []*secret
	byName  map[string]*secret
}

// secret is one runner.Secret, compiled.
type secret struct {
	name     string
	hosts    []nethost.Pattern
	hostList string // the hosts as written, for messages
	place    runner.SecretPlace
	require  bool
	value    runner.Hidden // Reveal only where it is written or looked for
	sentinel string
	forms    []string // what Scrub replaces: the value and its encodings

	mu          sync.Mutex
	credentials []string // Basic credentials Inject wrote, newest last
}

// New compiles secrets with the sentinels made for them (name →
// sentinel). Every secret must have a sentinel of at least 16 letters,
// digits, '_' or '-' (so that no encoding changes it), all distinct and
// none inside another; hosts are allow-list patterns (nethost.ParseAllow);
// exactly one place is set; a value fits its place (a valid header value;
// no ':' in a Basic user) and is not spelled by the sentinels themselves,
// so that Scrub can tell them apart. Errors name the secret, never a value;
// all problems are returned at once, joined.
func New(secrets []runner.Secret, sentinels map[string]string) (*Set, error) {
	s := &Set{byName: make(map[string]*secret, len(secrets))}
	var errs []error
	for i, sec := range secrets {
		c, err := compile(sec, sentinels[sec.Name])
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("secrets[%d] %q: %w", i, sec.Name, err))
			continue
		case s.byName[sec.Name] != nil:
			errs = append(errs, fmt.Errorf("secrets[%d] %q: a second secret of that name", i, sec.Name))
			continue
		}
		s.secrets = append(s.secrets, c)
		s.byName[c.name] = c
	}
	errs = append(errs, s.checkSentinels()...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, c := range s.secrets {
		c.forms = s.scrubForms(c)
	}
	return s, nil
}

// compile checks one secret and parses its hosts.
func compile(sec runner.Secret, sentinel string) (*secret, error) {
	v := sec.Value.Reveal()
	var errs []error
	if sec.Name == "" {
		errs = append(errs, errors.New("no name"))
	}
	if err := checkSentinel(sentinel); err != nil {
		errs = append(errs, err)
	}
	if len(sec.Hosts) == 0 {
		errs = append(errs, errors.New("no hosts"))
	}
	hosts, err := nethost.ParseList("hosts", sec.Hosts, nethost.ParseAllow)
	if err != nil {
		errs = append(errs, err)
	}
	if err := checkPlace(sec.Inject); err != nil {
		errs = append(errs, err)
	}
	switch {
	case v == "":
		errs = append(errs, errors.New("the value is empty"))
	case (sec.Inject.Header != "" || sec.Inject.Basic != "" || sec.Inject.Query != "") && !httpguts.ValidHeaderFieldValue(v):
		errs = append(errs, fmt.Errorf("the value holds a control character, which %s cannot carry", sec.Inject))
	case (sec.Inject.Basic == runner.BasicUser || sec.Inject.Basic == runner.BasicEither) && strings.Contains(v, ":"):
		errs = append(errs, fmt.Errorf("the value holds ':', which %s cannot carry (it ends the user)", sec.Inject))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &secret{
		name: sec.Name, hosts: hosts, hostList: strings.Join(sec.Hosts, ", "),
		place: sec.Inject, require: sec.Require, value: sec.Value, sentinel: sentinel,
	}, nil
}

// checkSentinel checks a sentinel's spelling (see New).
func checkSentinel(s string) error {
	if len(s) < 16 {
		return errors.New("no sentinel of at least 16 characters")
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return errors.New("a sentinel may hold only letters, digits, '_' and '-'")
		}
	}
	return nil
}

// checkPlace checks that exactly one place is set, and set right.
func checkPlace(p runner.SecretPlace) error {
	n := 0
	for _, set := range []bool{p.Header != "", p.Basic != "", p.Query != "", p.Body} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return fmt.Errorf("inject names %d places; exactly one of header, basic, query and body is needed", n)
	case p.Header != "" && !httpguts.ValidHeaderFieldName(p.Header):
		return fmt.Errorf("inject header %q is not a header name", p.Header)
	case p.Header != "" && strings.EqualFold(p.Header, "Host"):
		return errors.New("inject header Host is the request's host, not a place for a secret")
	case p.Basic != "" && p.Basic != runner.BasicUser && p.Basic != runner.BasicPassword && p.Basic != runner.BasicEither:
		return fmt.Errorf("inject basic %q is none of %q, %q and %q", p.Basic, runner.BasicUser, runner.BasicPassword, runner.BasicEither)
	}
	return nil
}

// checkSentinels checks the sentinels against each other and against the
// values (see New).
func (s *Set) checkSentinels() []error {
	var errs []error
	for _, a := range s.secrets {
		for _, b := range s.secrets {
			if a != b && strings.Contains(a.sentinel, b.sentinel) {
				errs = append(errs, fmt.Errorf("secrets %q and %q: the sentinel of the second is inside the first's", a.name, b.name))
			}
		}
		if s.inSentinels(a.value.Reveal()) {
			errs = append(errs, fmt.Errorf("secret %q: its value is spelled by the sentinels, so it could not be scrubbed; use a real credential", a.name))
		}
		for _, b := range s.secrets {
			if strings.Contains(a.value.Reveal(), b.sentinel) {
				errs = append(errs, fmt.Errorf("secret %q: its value holds the sentinel of %q", a.name, b.name))
			}
		}
	}
	return errs
}

// inSentinels reports whether v occurs in any sentinel or in any two of
// them side by side, where a scrubbed response could spell it by itself.
func (s *Set) inSentinels(v string) bool {
	for _, a := range s.secrets {
		for _, b := range s.secrets {
			if strings.Contains(a.sentinel+b.sentinel, v) {
				return true
			}
		}
	}
	return false
}

// String lists the secrets' names and places, never a value.
func (s *Set) String() string {
	parts := make([]string, len(s.secrets))
	for i, c := range s.secrets {
		parts[i] = fmt.Sprintf("%s (%s, to %s)", c.name, c.place, c.hostList)
	}
	return "swap.Set[" + strings.Join(parts, "; ") + "]"
}

// GoString is String.
func (s *Set) GoString() string { return s.String() }

// Format writes String whatever the verb, so that no verb prints a field.
func (s *Set) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.String())) }

// Names returns the names of the Set's secrets, in its order. Scrubbing a
// response with all of them, not only with those injected into its
// request, also catches a value an upstream stored when it was injected
// into an earlier request (a body or a query it keeps) and now returns.
func (s *Set) Names() []string {
	out := make([]string, len(s.secrets))
	for i, c := range s.secrets {
		out[i] = c.name
	}
	return out
}

// lookup returns the named secrets, in the Set's order, skipping unknown
// names and duplicates.
func (s *Set) lookup(names []string) []*secret {
	out := make([]*secret, 0, len(names))
	for _, c := range s.secrets {
		if slices.Contains(names, c.name) {
			out = append(out, c)
		}
	}
	return out
}

// allows reports whether c's value may go to host (normalized) on port.
func (c *secret) allows(host string, port uint16) bool {
	for _, p := range c.hosts {
		if p.Allows(host, port) {
			return true
		}
	}
	return false
}

// remember keeps a Basic credential Inject wrote, so that Scrub replaces it
// whole.
func (c *secret) remember(cred string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(c.credentials, cred) {
		return
	}
	c.credentials = append(c.credentials, cred)
	if len(c.credentials) > maxCredentials {
		c.credentials = slices.Delete(c.credentials, 0, len(c.credentials)-maxCredentials)
	}
}

// rememberedCredentials returns a copy of the remembered credentials.
func (c *secret) rememberedCredentials() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.credentials)
}
