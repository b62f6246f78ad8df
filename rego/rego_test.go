package rego_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/gatekeeper-ai/gatekeeper/rego"
)

// TestRegoTests runs every test_ rule in rego/*_test.rego through OPA's own
// test runner, compiled with gatekeeper's capabilities, as `opa test rego/` would.
func TestRegoTests(t *testing.T) {
	t.Parallel()
	mods := map[string]string{}
	err := fs.WalkDir(rego.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(rego.Files(), p)
		mods[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rego.Compile(mods)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	ch, err := tester.NewRunner().SetCompiler(c).SetModules(c.Modules).Run(t.Context(), c.Modules)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range ch {
		n++
		t.Run(strings.TrimPrefix(r.Package, "data.")+"."+r.Name, func(t *testing.T) {
			if r.Error != nil {
				t.Fatalf("%s: error: %v", r.Location, r.Error)
			}
			if r.Fail {
				t.Fatalf("%s: failed", r.Location)
			}
		})
	}
	if n < 40 {
		t.Errorf("ran %d Rego tests, want every test_ rule (at least 40)", n)
	}
}
