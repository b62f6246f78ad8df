package gate

import (
	"slices"
	"strings"
	"testing"

	oparego "github.com/open-policy-agent/opa/v1/rego"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// TestTrustedSandboxSourcesAgreeWithRego pins the sources the built-in
// policy trusts the sandbox tool from to the two Go declarations: the wire's
// "sdk" (the SDK client's in-process server) and SourceGatekeeper (the
// sidecar's attestation of `gatekeeper mcp`). A source added on one side
// only would let the sandbox tool run from a server gatekeeper does not
// vouch for, or refuse its own. Rego's sandbox_tool is pinned to the
// protocol's SandboxTool likewise.
func TestTrustedSandboxSourcesAgreeWithRego(t *testing.T) {
	t.Parallel()
	got := builtinSet(t, "trusted_sandbox_sources")
	want := []string{wire.SourceSDK, SourceGatekeeper}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Rego trusts the sandbox tool from sources %v; the sidecar declares %v", got, want)
	}
	rs, err := oparego.New(oparego.Query("data.gatekeeper.sandbox_tool"), oparego.Compiler(builtinCompiler(t))).Eval(t.Context())
	if err != nil || len(rs) != 1 {
		t.Fatalf("data.gatekeeper.sandbox_tool: %v %v", rs, err)
	}
	if got := rs[0].Expressions[0].Value; got != wire.SandboxTool {
		t.Errorf("Rego's sandbox_tool is %v; the protocol's SandboxTool is %q", got, wire.SandboxTool)
	}
}

// TestCLISourcesAreANamespaceOfTheirOwn pins that no source a Claude Code
// CLI's hook input can produce (wire.SourceCLIPrefix followed by whatever
// the CLI reports) equals a source the WebSocket's decoder accepts, the
// sidecar's own attestation, or a source the built-in policy trusts to run
// code: a CLI that reports "sdk" for a server of type "sdk" is not the SDK
// client's in-process server.
func TestCLISourcesAreANamespaceOfTheirOwn(t *testing.T) {
	t.Parallel()
	if wire.SourceCLIPrefix == "" {
		t.Fatal("the CLI's sources have no prefix")
	}
	vocabulary := []string{wire.SourceSDK, wire.SourceStdio, wire.SourceSSE, wire.SourceHTTP, wire.SourceUnknown, SourceGatekeeper}
	for _, v := range append(vocabulary, builtinSet(t, "trusted_sandbox_sources")...) {
		if strings.HasPrefix(v, wire.SourceCLIPrefix) {
			t.Errorf("source %q is inside the CLI's namespace %q", v, wire.SourceCLIPrefix)
		}
	}
}
