package server

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// TestAServerOfBothOwnersReachesNeither: the open_query that declares a
// server named like one of the policy's mcp_servers is refused, so only a
// policy reloaded since can make a query's declared server and an
// operator's share a name; then a run's servers reach neither (no call is
// taken for a call to the other), list neither, and say the source of
// the name is the operator's, not the client's.
func TestAServerOfBothOwnersReachesNeither(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policy := "version: 1\nworkspace_root: ./ws\nmcp_servers:\n  notes:\n    command: [/bin/false]\ncode_calls:\n  callable:\n    notes: [search]\n"
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, err := gate.New(t.Context(), gate.Config{PolicyFile: filepath.Join(dir, "policy.yaml"), Home: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := eng.OpenQuery(t.Context(), "q_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	eff, err := q.Effective(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sdk := newSDKTools(nil, "q_1", []wire.SDKServer{
		{Name: "notes", Tools: []wire.SDKTool{{Name: "search", InputSchema: json.RawMessage(`{}`)}}},
		{Name: "todo", Tools: []wire.SDKTool{{Name: "add", InputSchema: json.RawMessage(`{}`)}}},
	})
	joined := newQueryTools(nil, sdk, eff)
	if _, _, err := joined.Tool(t.Context(), "notes", "search"); err == nil || !strings.Contains(err.Error(), "neither is called") {
		t.Errorf("Tool of the shared name: %v; want the clash", err)
	}
	if _, err := joined.CallTool(t.Context(), "notes", "search", json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "neither is called") {
		t.Errorf("CallTool of the shared name: %v; want the clash", err)
	}
	if got := joined.Source("notes"); got != gate.SourcePolicy {
		t.Errorf("Source(notes) = %q; want %q", got, gate.SourcePolicy)
	}
	if got := joined.Source("todo"); got != wire.SourceSDK {
		t.Errorf("Source(todo) = %q; want %q", got, wire.SourceSDK)
	}
	listed, err := joined.List(t.Context())
	if err != nil || len(listed) != 1 || listed[0].Name != "todo" {
		t.Errorf("List = %+v, %v; want todo alone", listed, err)
	}
	if info, ok, err := joined.Tool(t.Context(), "todo", "add"); err != nil || !ok || info.Name != "add" {
		t.Errorf("Tool(todo, add) = %+v, %v, %v", info, ok, err)
	}
}
