// Package swap is a trivial stand-in for the secret swapping package the
// swap helper writes in parallel: header placement only, plain value
// scrubbing. It exists so that runner/egress compiles and is dropped when
// the real package is merged.
package swap

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Rules of the refusals Plan and Watch return.
const (
	RuleWrongHost    = "egress.secret_wrong_host"
	RuleMisplaced    = "egress.secret_misplaced"
	RuleRequired     = "egress.secret_required"
	RulePlaintext    = "egress.secret_plaintext"
	RuleBodyTooLarge = "egress.secret_body_too_large"
)

// MaxBody is the largest body read whole to swap a body-placed secret.
const MaxBody = 1 << 20

// Refusal is a refused request.
type Refusal struct{ Rule, Reason string }

func (r *Refusal) Error() string { return r.Rule + ": " + r.Reason }

type secret struct {
	s        runner.Secret
	sentinel string
	hosts    []nethost.Pattern
}

// Set is the secrets of one sandbox.
type Set struct{ secrets []secret }

// New makes a Set.
func New(secrets []runner.Secret, sentinels map[string]string) (*Set, error) {
	s := &Set{}
	for _, sec := range secrets {
		hs, err := nethost.ParseList("secret hosts", sec.Hosts, nethost.ParsePattern)
		if err != nil {
			return nil, err
		}
		s.secrets = append(s.secrets, secret{s: sec, sentinel: sentinels[sec.Name], hosts: hs})
	}
	return s, nil
}

func (x secret) to(hostport string) bool {
	host, port, err := nethost.SplitHostPort(hostport, 443)
	if err != nil {
		return false
	}
	for _, p := range x.hosts {
		if p.Match(host, port) {
			return true
		}
	}
	return false
}

// Plaintext refuses a plain http request that holds any sentinel.
func (s *Set) Plaintext(r *http.Request, body []byte) *Refusal {
	var head bytes.Buffer
	r.Header.Write(&head)
	for _, x := range s.secrets {
		if x.sentinel != "" && (strings.Contains(r.URL.String(), x.sentinel) || strings.Contains(head.String(), x.sentinel) || bytes.Contains(body, []byte(x.sentinel))) {
			return &Refusal{RulePlaintext, "secret " + x.s.Name + " over plain http"}
		}
	}
	return nil
}

// BuffersBody reports whether a body-placed secret may go to host.
func (s *Set) BuffersBody(host string) bool {
	for _, x := range s.secrets {
		if x.s.Inject.Body && x.to(host) {
			return true
		}
	}
	return false
}

// Plan finds the secrets to inject into r, or a refusal.
func (s *Set) Plan(r *http.Request, host string, body []byte, complete bool) ([]string, *Refusal) {
	var names []string
	for _, x := range s.secrets {
		if x.sentinel == "" {
			continue
		}
		var head bytes.Buffer
		r.Header.Write(&head)
		anywhere := strings.Contains(r.URL.String(), x.sentinel) || strings.Contains(head.String(), x.sentinel) || bytes.Contains(body, []byte(x.sentinel))
		inPlace := x.s.Inject.Header != "" && strings.Contains(r.Header.Get(x.s.Inject.Header), x.sentinel) ||
			x.s.Inject.Body && bytes.Contains(body, []byte(x.sentinel))
		switch {
		case anywhere && !x.to(host):
			return nil, &Refusal{RuleWrongHost, "secret " + x.s.Name + " may not go to " + host}
		case anywhere && !inPlace:
			return nil, &Refusal{RuleMisplaced, "secret " + x.s.Name + " is not in its place"}
		case x.to(host) && x.s.Require && !inPlace:
			return nil, &Refusal{RuleRequired, "secret " + x.s.Name + " is required"}
		case inPlace:
			names = append(names, x.s.Name)
		}
	}
	return names, nil
}

func (s *Set) find(name string) (secret, bool) {
	for _, x := range s.secrets {
		if x.s.Name == name {
			return x, true
		}
	}
	return secret{}, false
}

// Inject swaps the header-placed sentinels of names.
func (s *Set) Inject(r *http.Request, names []string) {
	for _, n := range names {
		if x, ok := s.find(n); ok && x.s.Inject.Header != "" {
			r.Header.Set(x.s.Inject.Header, strings.ReplaceAll(r.Header.Get(x.s.Inject.Header), x.sentinel, x.s.Value.Reveal()))
		}
	}
}

// InjectBody swaps body-placed sentinels.
func (s *Set) InjectBody(body []byte, names []string) []byte {
	for _, n := range names {
		if x, ok := s.find(n); ok && x.s.Inject.Body {
			body = bytes.ReplaceAll(body, []byte(x.sentinel), []byte(x.s.Value.Reveal()))
		}
	}
	return body
}

// BodyPlaced reports whether one of names goes in the body.
func (s *Set) BodyPlaced(names []string) bool {
	for _, n := range names {
		if x, ok := s.find(n); ok && x.s.Inject.Body {
			return true
		}
	}
	return false
}

// Watch passes body through (the stand-in checks nothing).
func (s *Set) Watch(body io.Reader, host string) io.Reader { return body }

// Scrub reads body whole and replaces the values of names.
func (s *Set) Scrub(body io.Reader, names []string) io.Reader {
	b, err := io.ReadAll(body)
	for _, n := range names {
		if x, ok := s.find(n); ok && x.s.Value.Reveal() != "" {
			b = bytes.ReplaceAll(b, []byte(x.s.Value.Reveal()), []byte(x.sentinel))
		}
	}
	if err != nil {
		return io.MultiReader(bytes.NewReader(b), errReader{err})
	}
	return bytes.NewReader(b)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// ScrubHeader replaces the values of names in h.
func (s *Set) ScrubHeader(h http.Header, names []string) {
	for _, n := range names {
		x, ok := s.find(n)
		if !ok || x.s.Value.Reveal() == "" {
			continue
		}
		for k, vv := range h {
			for i, v := range vv {
				h[k][i] = strings.ReplaceAll(v, x.s.Value.Reveal(), x.sentinel)
			}
		}
	}
}
