package audit_test

import (
	"slices"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// TestRunOutcomesAreTheRunnersExitReasons pins the audit log's run
// outcomes to runner.ExitReasons, the one declaration of why a run ended:
// the sidecar writes audit.Outcome(result.Reason), so every reason must be
// an outcome, and every outcome but "error" (a run that did not run) a
// reason.
func TestRunOutcomesAreTheRunnersExitReasons(t *testing.T) {
	t.Parallel()
	outcomes := []audit.Outcome{audit.OutcomeExited, audit.OutcomeTimedOut, audit.OutcomeOOMKilled, audit.OutcomeCancelled}
	var reasons []audit.Outcome
	for _, r := range runner.ExitReasons() {
		reasons = append(reasons, audit.Outcome(r))
	}
	if !slices.Equal(reasons, outcomes) {
		t.Errorf("runner.ExitReasons as outcomes = %v, the audit log's run outcomes are %v", reasons, outcomes)
	}
	if slices.Contains(reasons, audit.OutcomeError) {
		t.Errorf("%q is an exit reason; it must stay the audit log's own outcome of a run that did not run", audit.OutcomeError)
	}
}
