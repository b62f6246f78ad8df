package wire_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// TestSandboxNamesMatchTheSharedFile pins SandboxServer and SandboxTool to
// testdata/sandbox-tool.json, which @gatekeeper/client's
// declarations.test.ts pins SANDBOX_SERVER and RUN_TOOL to: a client that
// named its run tool otherwise would offer the model a tool whose calls no
// run frame can follow. The description too (SandboxDescription): a query
// whose code calls no tool shows the same text through either client.
func TestSandboxNamesMatchTheSharedFile(t *testing.T) {
	t.Parallel()
	var want struct{ Server, Tool, Description string }
	readShared(t, "sandbox-tool.json", &want)
	if wire.SandboxServer != want.Server || wire.SandboxTool != want.Tool {
		t.Errorf("SandboxServer, SandboxTool = %q, %q; testdata/sandbox-tool.json has %q, %q", wire.SandboxServer, wire.SandboxTool, want.Server, want.Tool)
	}
	if wire.SandboxDescription != want.Description {
		t.Errorf("SandboxDescription differs from testdata/sandbox-tool.json's description:\n%s\n%s", wire.SandboxDescription, want.Description)
	}
}

// readShared decodes testdata/name, a file the TypeScript client's tests
// read too, into v.
func readShared(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("testdata/%s: %v", name, err)
	}
}
