package egresstest

import (
	"slices"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// The rules and reason of DenyMethods' verdicts.
const (
	JudgeAllowRule  = "test.allowed"
	JudgeDenyRule   = "test.method_denied"
	JudgeDenyReason = "this API may not be written to"
)

// DenyMethods returns a Judge.Decide that refuses a request whose method
// is one of methods (rule JudgeDenyRule, reason JudgeDenyReason) and
// allows every other (rule JudgeAllowRule): the method rule a policy
// would write for a read-only API.
func DenyMethods(methods ...string) func(runner.HTTPRequest) runner.HTTPVerdict {
	return func(req runner.HTTPRequest) runner.HTTPVerdict {
		if slices.Contains(methods, req.Method) {
			return runner.HTTPVerdict{Rule: JudgeDenyRule, Reason: JudgeDenyReason}
		}
		return runner.HTTPVerdict{Allow: true, Rule: JudgeAllowRule, Reason: "the test judge allows it"}
	}
}
