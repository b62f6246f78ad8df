package gate_test

import (
	"encoding/json"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// BenchmarkDecide measures one in-process decision, the floor under every
// decision served over the socket.
func BenchmarkDecide(b *testing.B) {
	for _, bc := range []struct {
		name, tool string
		input      map[string]any
	}{
		{"host read", "Read", map[string]any{"file_path": "notes.txt"}},
		{"denied tool", "Bash", map[string]any{"command": "ls"}},
		{"sandbox run", wire.SandboxTool, map[string]any{"language": "python", "code": "print(1)"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnvB(b)
			q, err := e.OpenQuery(b.Context(), "q", nil)
			if err != nil {
				b.Fatal(err)
			}
			raw, _ := json.Marshal(bc.input)
			call := gate.Call{Event: gate.EventPreToolUse, ToolName: bc.tool, ToolInput: raw, ToolUseID: "t", MCPServer: &gate.MCPServer{Name: "sandboxed_code", Source: "sdk"}}
			for b.Loop() {
				if _, err := q.Decide(b.Context(), call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
