package toolwrap_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

// TestPythonImportsAreTheWrappers pins PythonImports, which warm
// interpreters preload, to the modules the generated Python files import
// (gatekeeper_tools itself and __future__ aside).
func TestPythonImportsAreTheWrappers(t *testing.T) {
	t.Parallel()
	files, err := toolwrap.Generate(servers())
	if err != nil {
		t.Fatal(err)
	}
	imp := regexp.MustCompile(`(?m)^\s*(?:import ([a-z0-9_.]+)(?: as \w+)?|from ([a-z0-9_.]+) import .*)$`)
	var got []string
	for name, data := range files {
		if !strings.HasSuffix(name, ".py") {
			continue
		}
		for _, m := range imp.FindAllStringSubmatch(string(data), -1) {
			mod := m[1] + m[2]
			if mod == "__future__" || mod == toolwrap.PythonPackage || strings.HasPrefix(mod, toolwrap.PythonPackage+".") {
				continue
			}
			if !slices.Contains(got, mod) {
				got = append(got, mod)
			}
		}
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(toolwrap.PythonImports())); !slices.Equal(got, want) {
		t.Errorf("the Python wrappers import %v; PythonImports is %v", got, want)
	}
}
