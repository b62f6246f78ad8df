package wire_test

import (
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// TestWithRuleMatchesTheSharedCases pins WithRule and RuleTag to
// testdata/rule-text.json, which @gatekeeper/client's declarations.test.ts
// reads for its withRule and ruleTag: a model reading a deny from the CLI's
// hook and one from the SDK client reads the rule's name the same way.
func TestWithRuleMatchesTheSharedCases(t *testing.T) {
	t.Parallel()
	var cases []struct{ Name, Text, Rule, Want string }
	readShared(t, "rule-text.json", &cases)
	if len(cases) < 5 {
		t.Fatalf("testdata/rule-text.json has %d cases", len(cases))
	}
	for _, c := range cases {
		if got := wire.WithRule(c.Text, c.Rule); got != c.Want {
			t.Errorf("%s: WithRule(%q, %q) = %q, want %q", c.Name, c.Text, c.Rule, got, c.Want)
		}
		if c.Rule != "" && !strings.HasSuffix(c.Want, " "+wire.RuleTag(c.Rule)) {
			t.Errorf("%s: %q does not end in RuleTag(%q) = %q", c.Name, c.Want, c.Rule, wire.RuleTag(c.Rule))
		}
	}
}
