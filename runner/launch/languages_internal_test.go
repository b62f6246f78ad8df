package launch

import (
	"maps"
	"slices"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// TestEveryRunnerLanguageHasAnInterpreter pins the launcher's interpreter
// table to runner.Languages, the one list of run languages: a language the
// gate allows must start here, and the launcher must not accept another.
func TestEveryRunnerLanguageHasAnInterpreter(t *testing.T) {
	t.Parallel()
	want := runner.Languages()
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(programs)); !slices.Equal(got, want) {
		t.Fatalf("the launcher starts %v; runner.Languages is %v", got, want)
	}
}
