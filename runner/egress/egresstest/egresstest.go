// Package egresstest holds what the backends' tests of networked
// sandboxes share: an auditor that records the proxy's events, a
// resolver that knows only the test's names and a request judge that
// records what it decides. Neither claims a security
// property; the tests that use them run real sandboxes through the real
// proxy.
package egresstest

import (
	"context"
	"net"
	"net/netip"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
)

// Recorder is an egress.Auditor that keeps every event. It is safe for
// concurrent use; the zero value is ready.
type Recorder struct {
	mu     sync.Mutex
	events []egress.Event
}

// Egress records ev.
func (r *Recorder) Egress(ev egress.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []egress.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]egress.Event(nil), r.events...)
}

// Resolver resolves the names it maps; any other name does not exist
// (a *net.DNSError with IsNotFound), so a test never reaches DNS.
type Resolver map[string][]netip.Addr

// LookupNetIP returns the addresses of host.
func (m Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host (test resolver)", Name: host, IsNotFound: true}
}

// Judge is a runner.RequestJudge that records every request and answers
// with Decide, or allows everything (rule "http.allowed") when Decide is
// nil. It is safe for concurrent use; set Decide before use.
type Judge struct {
	Decide func(runner.HTTPRequest) runner.HTTPVerdict

	mu   sync.Mutex
	reqs []runner.HTTPRequest
}

// JudgeRequest records req and decides it.
func (j *Judge) JudgeRequest(_ context.Context, req runner.HTTPRequest) runner.HTTPVerdict {
	j.mu.Lock()
	j.reqs = append(j.reqs, req)
	j.mu.Unlock()
	if j.Decide == nil {
		return runner.HTTPVerdict{Allow: true, Rule: "http.allowed", Reason: "the test judge allows everything"}
	}
	return j.Decide(req)
}

// Requests returns a copy of the requests judged so far.
func (j *Judge) Requests() []runner.HTTPRequest {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]runner.HTTPRequest(nil), j.reqs...)
}
