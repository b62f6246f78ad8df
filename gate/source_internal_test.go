package gate

import (
	"slices"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// TestTrustedSandboxSourcesAgreeWithRego pins the sources the built-in
// policy trusts the sandbox tool from to the two Go declarations: the wire's
// "sdk" (the SDK client's in-process server) and SourceGatekeeper (the
// sidecar's attestation of `gatekeeper mcp`). A source added on one side
// only would let the sandbox tool run from a server gatekeeper does not
// vouch for, or refuse its own.
func TestTrustedSandboxSourcesAgreeWithRego(t *testing.T) {
	t.Parallel()
	got := builtinSet(t, "trusted_sandbox_sources")
	want := []string{wire.SourceSDK, SourceGatekeeper}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Rego trusts the sandbox tool from sources %v; the sidecar declares %v", got, want)
	}
	if SandboxTool != "mcp__"+SandboxServer+"__run" {
		t.Errorf("SandboxTool %q is not the run tool of SandboxServer %q", SandboxTool, SandboxServer)
	}
}
