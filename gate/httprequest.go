package gate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// EventHTTPRequest is the event of one request of a sandboxed run to a
// host the egress proxy intercepts (sandbox.net.inspect, or a secret's
// hosts): rego/http_requests.rego.
const EventHTTPRequest = "http_request"

// RuleHTTPAllowed is the built-in policy's rule that allows a request no
// deny finding refuses.
const RuleHTTPAllowed = "http.allowed"

// HTTPJudge is the gate's runner.RequestJudge for one run: it decides
// each request to an intercepted host with the Rego of the effective
// policy revision the run was allowed under (whatever reloads since), as
// CodeCaller decides the run's nested calls. It writes no audit line: the
// egress proxy's Event for the request does. Safe for concurrent use.
type HTTPJudge struct {
	eff             *Effective
	runID, queryID  string
	decisionTimeout time.Duration
}

var _ runner.RequestJudge = (*HTTPJudge)(nil)

// HTTPJudge returns the judge of the requests of run runID of query
// queryID under eff.
func (eff *Effective) HTTPJudge(runID, queryID string) *HTTPJudge {
	j := &HTTPJudge{eff: eff, runID: runID, queryID: queryID, decisionTimeout: time.Second}
	if eff != nil && eff.snap != nil && eff.snap.decisionTimeout > 0 {
		j.decisionTimeout = eff.snap.decisionTimeout
	}
	return j
}

// JudgeRequest decides req. Anything but an allow of the policy (a deny,
// an ask, which no one can answer for a request, an error, a timeout, an
// undefined result) refuses it, with a rule and a reason the program
// reads in the proxy's 403.
func (j *HTTPJudge) JudgeRequest(ctx context.Context, req runner.HTTPRequest) runner.HTTPVerdict {
	d := j.eff.DecideHTTP(ctx, HTTPInput{RunID: j.runID, QueryID: j.queryID, Request: req}, j.decisionTimeout)
	switch d.Decision {
	case Allow:
		return runner.HTTPVerdict{Allow: true, Rule: d.Rule, Reason: d.Reason}
	case Ask:
		return runner.HTTPVerdict{Rule: d.Rule, Reason: d.Reason + " (a request cannot wait for a human's approval, so it is refused)"}
	}
	return runner.HTTPVerdict{Rule: d.Rule, Reason: d.Reason}
}

// HTTPInput is one request to decide, with the run and query it belongs
// to: what the judge and a decide frame of event http_request give
// DecideHTTP.
type HTTPInput struct {
	RunID, QueryID string
	Request        runner.HTTPRequest
}

// DecideHTTP evaluates the policy of eff's revision for one request
// (event http_request) within timeout (0 means the engine's decision
// timeout). It always returns a usable Decision: an error is a deny with
// rule gatekeeper.error and a reason that says what went wrong.
func (eff *Effective) DecideHTTP(ctx context.Context, in HTTPInput, timeout time.Duration) Decision {
	if eff == nil || eff.snap == nil {
		return failClosed("", "", fmt.Errorf("no effective policy for this run's requests"))
	}
	if timeout <= 0 {
		timeout = time.Second
		if eff.snap.decisionTimeout > 0 {
			timeout = eff.snap.decisionTimeout
		}
	}
	// A request whose context has ended is gone: it is refused without
	// a decision, which the evaluator could otherwise still reach.
	err := ctx.Err()
	var v ast.Value
	if err == nil {
		v, err = evalDecision(ctx, eff.snap.decide, httpInput(eff, in), timeout)
	}
	var d Decision
	if err == nil {
		d, err = parseDecision(v)
	}
	if err != nil {
		d = failClosed(eff.Revision, eff.Hash, err)
		d.Reason = strings.Replace(d.Reason, "this call", "this request", 1)
	}
	d.Revision, d.PolicyHash, d.Effective = eff.Revision, eff.Hash, eff
	return d
}

var (
	kHTTP, kMethod, kScheme         = ast.StringTerm("http"), ast.StringTerm("method"), ast.StringTerm("scheme")
	kPath, kQuery, kProto, kHeaders = ast.StringTerm("path"), ast.StringTerm("query"), ast.StringTerm("proto"), ast.StringTerm("headers")
	kBodyBytes, kBody, kSecrets     = ast.StringTerm("body_bytes"), ast.StringTerm("body"), ast.StringTerm("secrets")
	httpEventTerm                   = ast.StringTerm(EventHTTPRequest)
)

// httpInput builds the Rego input of a request (documented in
// rego/http_requests.rego). tool_name and tool_kind are "http_request",
// so that the tool-call rules of the built-in policy, which read them,
// leave a request alone.
func httpInput(eff *Effective, in HTTPInput) ast.Value {
	r := in.Request
	obj := ast.NewObjectWithCapacity(7)
	obj.Insert(kEvent, httpEventTerm)
	obj.Insert(kToolName, httpEventTerm)
	obj.Insert(kToolKind, httpEventTerm)
	obj.Insert(kRunID, ast.StringTerm(in.RunID))
	obj.Insert(kQueryID, ast.StringTerm(in.QueryID))
	obj.Insert(kPolicy, eff.term)
	obj.Insert(kHTTP, ast.ObjectTerm(
		ast.Item(kMethod, ast.StringTerm(r.Method)),
		ast.Item(kScheme, ast.StringTerm(r.Scheme)),
		ast.Item(kHost, ast.StringTerm(r.Host)),
		ast.Item(kPort, ast.IntNumberTerm(int(r.Port))),
		ast.Item(kPath, ast.StringTerm(r.Path)),
		ast.Item(kQuery, ast.StringTerm(r.Query)),
		ast.Item(kProto, ast.StringTerm(r.Proto)),
		ast.Item(kHeaders, ast.ArrayTerm(stringTerms(r.Headers)...)),
		ast.Item(kBodyBytes, ast.IntNumberTerm(int(r.BodyBytes))),
		ast.Item(kBody, ast.StringTerm(strings.ToValidUTF8(string(r.Body), "\uFFFD"))),
		ast.Item(kSecrets, ast.ArrayTerm(stringTerms(r.Secrets)...)),
	))
	return obj
}
