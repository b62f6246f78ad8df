package bench

import (
	"log/slog"
	"strings"
	"testing"
)

// TestCodeModeGate runs row 9's gate measurement against the real stdio
// test server and the real gate: every call through the gate is allowed
// and answered as the server answers it (codeModeGate checks each), and
// the row and its target are reported. It asserts no time.
func TestCodeModeGate(t *testing.T) {
	e := &env{cfg: Config{Log: slog.New(slog.DiscardHandler)}, tmp: t.TempDir(), res: &Results{PhaseSeconds: map[string]float64{}}}
	var g CodeModeGate
	if err := e.codeModeGate(t.Context(), &g); err != nil {
		t.Fatal(err)
	}
	if g.Calls != codeModeGateCalls || g.Through.N != codeModeGateCalls || g.Direct.N != codeModeGateCalls {
		t.Fatalf("measured %d pairs (%d through the gate, %d direct), want %d", g.Calls, g.Through.N, g.Direct.N, codeModeGateCalls)
	}
	e.res.CodeMode = &CodeModeResult{Gate: g}
	e.res.evaluate()
	table := e.res.Table()
	if !strings.Contains(table, "through the gate") || e.res.met("codemode_gate") == "not measured" || e.res.met("codemode_bytes") != "not measured" {
		t.Fatalf("row 9 not reported as measured gate overhead and unmeasured queries:\n%s", table)
	}
	t.Logf("through the gate p50 %s p99 %s; direct p50 %s p99 %s", FormatMS(g.Through.P50), FormatMS(g.Through.P99), FormatMS(g.Direct.P50), FormatMS(g.Direct.P99))
}
