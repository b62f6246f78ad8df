package egresstest

import (
	"context"
	"slices"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// The rules and reason of Judge's verdicts.
const (
	JudgeAllowRule  = "test.allowed"
	JudgeDenyRule   = "test.method_denied"
	JudgeDenyReason = "this API may not be written to"
)

// Judge is a runner.RequestJudge for tests: it refuses a request whose
// method is one of DenyMethods (rule JudgeDenyRule, reason
// JudgeDenyReason), allows every other (JudgeAllowRule), and records each
// request it was asked about. Set DenyMethods before use; it is safe for
// concurrent use.
type Judge struct {
	DenyMethods []string

	mu   sync.Mutex
	seen []runner.HTTPRequest
}

// JudgeRequest records req and decides it.
func (j *Judge) JudgeRequest(_ context.Context, req runner.HTTPRequest) runner.HTTPVerdict {
	j.mu.Lock()
	j.seen = append(j.seen, req)
	j.mu.Unlock()
	if slices.Contains(j.DenyMethods, req.Method) {
		return runner.HTTPVerdict{Rule: JudgeDenyRule, Reason: JudgeDenyReason}
	}
	return runner.HTTPVerdict{Allow: true, Rule: JudgeAllowRule, Reason: "the test judge allows it"}
}

// Requests returns the requests judged so far, in order.
func (j *Judge) Requests() []runner.HTTPRequest {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.seen)
}
