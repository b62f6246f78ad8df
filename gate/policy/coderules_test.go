package policy

import (
	"reflect"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// TestCodeCallRulesNameTheFields pins runner's rule names for the bounds
// of nested calls to the code_calls fields an operator writes: a limit the
// program sees names the field to raise.
func TestCodeCallRulesNameTheFields(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[CodeCalls]()
	for field, rule := range map[string]string{
		"MaxCalls":         runner.RuleMaxCalls,
		"MaxInFlight":      runner.RuleMaxInFlight,
		"MaxArgumentBytes": runner.RuleMaxArgumentBytes,
		"MaxResultBytes":   runner.RuleMaxResultBytes,
		"Timeout":          runner.RuleTimeout,
	} {
		f, ok := typ.FieldByName(field)
		if !ok {
			t.Errorf("CodeCalls has no field %s", field)
			continue
		}
		if want := "code_calls." + f.Tag.Get("yaml"); rule != want {
			t.Errorf("the rule of CodeCalls.%s is %q, want %q", field, rule, want)
		}
	}
}
