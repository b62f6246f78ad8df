package rego_test

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/gatekeeper-ai/gatekeeper/rego"
)

// TestExamples runs the test_ rules of rego/examples/*_test.rego over the
// built-in policy with the examples as operator modules, checked and
// compiled as the sidecar loads them (CompilePolicy), as `opa test rego/
// rego/examples/` would run them.
func TestExamples(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob("examples/*.rego")
	if err != nil || len(paths) < 2 {
		t.Fatalf("examples: %v, %v", paths, err)
	}
	mods := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		mods[p] = string(b)
	}
	// The sidecar's own check of operator modules, with the tests left out.
	operator := maps.Clone(mods)
	maps.DeleteFunc(operator, func(name, _ string) bool { return strings.HasSuffix(name, "_test.rego") })
	if _, err := rego.CompilePolicy(operator); err != nil {
		t.Fatalf("the sidecar refuses an example: %v", err)
	}
	builtin, err := rego.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(mods, builtin)
	c, err := rego.Compile(mods)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := tester.NewRunner().SetCompiler(c).SetModules(c.Modules).Filter("http_github_readonly_test").Run(t.Context(), c.Modules)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range ch {
		n++
		if r.Error != nil || r.Fail {
			t.Errorf("%s: %s failed: %v", r.Location, r.Name, r.Error)
		}
	}
	if n < 6 {
		t.Errorf("ran %d example tests, want at least 6", n)
	}
}
