package main

import (
	"slices"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

// TestPolicyImages: the images whose absence the sidecar reports at start
// are the base image and those of ceilings.images, resolved, once each.
func TestPolicyImages(t *testing.T) {
	t.Parallel()
	_, file := writePolicy(t, `version: 1
workspace_root: ./ws
sandbox:
  fs: {image: python-data}
ceilings:
  images: [python, python-data, "registry.example/sandbox:1"]
`)
	eng, err := gate.New(t.Context(), gate.Config{PolicyFile: file, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := policyImages(t.Context(), eng)
	if err != nil {
		t.Fatal(err)
	}
	tag := func(name string) string {
		p, _ := profile.Lookup(name)
		return p.Tag()
	}
	want := []string{tag("python-data"), tag("python"), "registry.example/sandbox:1"}
	if !slices.Equal(got, want) {
		t.Fatalf("policyImages = %v, want %v", got, want)
	}
}
