package gate_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// sdkSourceRego is an operator's module that keeps code away from any
// tool of a server the client's own process runs.
const sdkSourceRego = `package gatekeeper

deny contains {"rule": "ops.no_client_tools_from_code", "reason": "code may not call the client's in-process tools"} if {
	input.tool_kind == "code_call"
	input.mcp_server.source == "sdk"
}
`

// sourcedServers answers every call, and says its servers are the
// client's when sdk is set (gate.ToolSources).
type sourcedServers struct{ sdk bool }

func (sourcedServers) Tool(_ context.Context, _, tool string) (runner.ToolInfo, bool, error) {
	return runner.ToolInfo{Name: tool}, true, nil
}

func (sourcedServers) CallTool(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"content":[]}`), nil
}

type sdkSourced struct{ sourcedServers }

func (sdkSourced) Source(string) string { return "sdk" }

// TestTheSourceOfANestedCallsServerReachesThePolicy: a ToolServers that
// says a server is the client's (ToolSources) makes the policy see
// mcp_server.source "sdk", on which an operator's rule may deny; one that
// says nothing is "policy", and the same call is allowed.
func TestTheSourceOfANestedCallsServerReachesThePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, codeCallPolicy)
	must(t, os.WriteFile(filepath.Join(e.regoDir, "ops.rego"), []byte(sdkSourceRego), 0o644))
	q, err := e.engine(t).OpenQuery(t.Context(), "q_1", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	call := runner.NestedCall{Server: "crm", Tool: "get_customer", Arguments: json.RawMessage(`{"id":1}`), Seq: 1, InFlight: 1}
	for _, tc := range []struct {
		name    string
		servers gate.ToolServers
		rule    string
	}{
		{"an operator's server is source policy, and allowed", sourcedServers{}, ""},
		{"a server of the client is source sdk, and the operator's rule denies it", sdkSourced{}, "ops.no_client_tools_from_code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "r", QueryID: "q_1", ToolUseID: "toolu_1", Servers: tc.servers, Auditor: discardAuditor{}}).CallTool(t.Context(), call)
			switch {
			case tc.rule == "" && res.Err != nil:
				t.Errorf("denied: %+v", res.Err)
			case tc.rule != "" && (res.Err == nil || res.Err.Rule != tc.rule):
				t.Errorf("answer %+v; want a deny by %s", res, tc.rule)
			}
		})
	}
}
