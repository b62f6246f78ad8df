package rego_test

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/rego"
)

// TestEveryNumericCeilingIsCheckedInRego pins policy.Ceilings to
// rego/constraints.rego: each number the sidecar hands over as
// input.ceilings (the JSON of policy.Ceilings) is read there, so that a
// ceiling added in Go cannot go unchecked.
func TestEveryNumericCeilingIsCheckedInRego(t *testing.T) {
	t.Parallel()
	src, err := fs.ReadFile(rego.Files(), "constraints.rego")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(policy.Default().Ceilings)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case float64:
			paths = append(paths, prefix)
		case map[string]any:
			for k, sub := range v {
				walk(prefix+"."+k, sub)
			}
		}
	}
	walk("input.ceilings", tree)
	if len(paths) < 10 {
		t.Fatalf("found %d numeric ceilings (%q), want every one of policy.Ceilings", len(paths), paths)
	}
	for _, p := range paths {
		if !strings.Contains(string(src), p+`, "unit"`) {
			t.Errorf("constraints.rego checks no limit against %s", p)
		}
	}
}
