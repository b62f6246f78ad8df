package gate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

const imagePolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [mcp__sandboxed_code__run]
ceilings:
  images: [python-data, "registry.example/sandbox:2"]
`

func tagOf(t *testing.T, name string) string {
	t.Helper()
	p, ok := profile.Lookup(name)
	if !ok {
		t.Fatalf("no profile %s", name)
	}
	return p.Tag()
}

// TestRunnerSandboxImage: a query's image is its override's choice within
// ceilings.images, else the base's, resolved to the profile's tag.
func TestRunnerSandboxImage(t *testing.T) {
	t.Parallel()
	eng := newEnv(t, imagePolicy).engine(t)
	tests := []struct {
		name      string
		override  string
		want      string
		violation string
	}{
		{"no override runs the default profile", ``, tagOf(t, profile.Default), ""},
		{"an empty image is the default profile, which needs no ceiling", `{"fs":{"image":""}}`, tagOf(t, profile.Default), ""},
		{"a profile within the ceilings runs its tag", `{"fs":{"image":"python-data"}}`, tagOf(t, "python-data"), ""},
		{"an image reference within the ceilings runs as written", `{"fs":{"image":"registry.example/sandbox:2"}}`, "registry.example/sandbox:2", ""},
		{"a profile outside the ceilings is refused", `{"fs":{"image":"node"}}`, "", `sandbox.fs.image "node" is not in ceilings.images (an override may choose: python, python-data, registry.example/sandbox:2)`},
		{"the tag of a profile is not its name", `{"fs":{"image":"` + tagOf(t, "python-data") + `"}}`, "", `sandbox.fs.image "` + tagOf(t, "python-data") + `" is not in ceilings.images`},
		{"an unknown profile is refused before the ceilings", `{"fs":{"image":"nodejs"}}`, "", `sandbox.fs.image: unknown image profile "nodejs"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var raw []byte
			if tc.override != "" {
				raw = []byte(tc.override)
			}
			q, err := eng.OpenQuery(t.Context(), "q", raw)
			if tc.violation != "" {
				var oe *gate.OverrideError
				if !errors.As(err, &oe) || len(oe.Violations) != 1 || !strings.Contains(oe.Violations[0], tc.violation) {
					t.Fatalf("OpenQuery = %v, want one violation containing %q", err, tc.violation)
				}
				return
			}
			must(t, err)
			eff, err := q.Effective(t.Context())
			must(t, err)
			sb, err := eff.RunnerSandbox()
			must(t, err)
			if sb.Image != tc.want {
				t.Fatalf("image %q, want %q", sb.Image, tc.want)
			}
		})
	}
}
