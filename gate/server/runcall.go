package server

import (
	"encoding/json"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// RunCall is the gate.Call by which a run frame is re-decided before it
// runs: event run, the sandbox tool of gatekeeper's in-process server,
// and the run's language, code, files, timeout_ms, outputs and to_agent as its
// tool_input. `gatekeeper run` decides its run by the same call, so that
// a rule (an operator's among them) refuses there what it refuses here.
func RunCall(r *wire.Run) (gate.Call, error) {
	input := map[string]any{"language": r.Language, "code": r.Code}
	if r.Files != nil {
		input["files"] = r.Files
	}
	if r.TimeoutMS != nil {
		input["timeout_ms"] = *r.TimeoutMS
	}
	if r.Outputs != nil {
		input["outputs"] = r.Outputs
	}
	if r.ToAgent != nil {
		input["to_agent"] = r.ToAgent
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return gate.Call{}, err
	}
	return gate.Call{Event: gate.EventRun, ToolName: wire.SandboxTool, ToolInput: raw, ToolUseID: r.ToolUseID,
		MCPServer: &gate.MCPServer{Name: wire.SandboxServer, Source: wire.SourceSDK}}, nil
}
