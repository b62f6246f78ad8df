package gate

import (
	"errors"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestParseDecisionReadsOnlyAWellFormedDecision feeds parseDecision the
// Rego values a broken policy could produce: only an object of exactly
// decision, reason and rule, all non-empty strings, with a known decision,
// is a decision.
func TestParseDecisionReadsOnlyAWellFormedDecision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value string // Rego
		want  Decision
	}{
		{name: "an allow is read", value: `{"decision": "allow", "reason": "r", "rule": "x.y"}`, want: Decision{Decision: Allow, Reason: "r", Rule: "x.y"}},
		{name: "an ask is read", value: `{"decision": "ask", "reason": "r", "rule": "x.y"}`, want: Decision{Decision: Ask, Reason: "r", Rule: "x.y"}},
		{name: "a string is no decision", value: `"allow"`},
		{name: "a set of the three keys is no decision", value: `{"decision", "reason", "rule"}`},
		{name: "an array is no decision", value: `["allow", "r", "x"]`},
		{name: "a fourth key is refused", value: `{"decision": "allow", "reason": "r", "rule": "x", "extra": 1}`},
		{name: "a missing rule is refused", value: `{"decision": "allow", "reason": "r", "ruler": "x"}`},
		{name: "an empty reason is refused", value: `{"decision": "allow", "reason": "", "rule": "x"}`},
		{name: "a rule that is not a string is refused", value: `{"decision": "allow", "reason": "r", "rule": 1}`},
		{name: "an unknown decision is refused", value: `{"decision": "Allow", "reason": "r", "rule": "x"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := ast.ParseTerm(tc.value)
			if err != nil {
				t.Fatal(err)
			}
			d, err := parseDecision(v.Value)
			if tc.want.Decision == "" {
				if !errors.Is(err, ErrBadDecision) {
					t.Fatalf("parseDecision(%s) = %+v, %v; want an error wrapping ErrBadDecision", tc.value, d, err)
				}
				return
			}
			if err != nil || d != tc.want {
				t.Fatalf("parseDecision(%s) = %+v, %v; want %+v", tc.value, d, err, tc.want)
			}
		})
	}
}
