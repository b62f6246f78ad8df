package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// refusingBridge stands in for the runner's bridge: its program makes an
// allowed and a denied call through the gate, then the bridge refuses
// one call itself (Refused) and counts three more past its lines
// (Omitted), as the real bridge does.
type refusingBridge struct{}

func (refusingBridge) Run(ctx context.Context, s runner.Spec) (runner.Result, error) {
	for i, tool := range []string{"get_customer", "delete_customer"} {
		s.Caller.CallTool(ctx, runner.NestedCall{Server: "crm", Tool: tool, Arguments: json.RawMessage(`{"id":1}`), Seq: i + 1, InFlight: 1})
	}
	rr := s.Caller.(runner.RefusalRecorder)
	rr.Refused(runner.ToolRefusal{Call: runner.NestedCall{Seq: 3}, Err: runner.ToolError{Kind: runner.ToolBadRequest, Rule: runner.RuleBadRequest, Message: "not JSON"}})
	rr.Omitted(runner.RefusalCounts{ByRule: map[string]int{runner.RuleMaxCalls: 3}})
	return runner.Result{RunID: s.RunID, Reason: runner.Exited, Duration: time.Millisecond, Runtime: runner.Runc, ToolCalls: 6}, nil
}

// TestMetricsCountCodeCallDecisions: gatekeeper_decisions_total counts a
// program's nested calls under event code_call, by decision and rule, the
// bridge's own refusals and the omitted ones included, beside the model's
// own calls under their event; the console's overview sums the family.
func TestMetricsCountCodeCallDecisions(t *testing.T) {
	t.Parallel()
	h := start(t, options{runner: refusingBridge{}, policy: codeCallPolicy, tune: func(c *server.Config) { c.ToolServers = crmServer{} }})
	c := h.connect(t)
	q := c.open("")
	c.decide(q, wire.SandboxTool, `{"language":"python","code":"x"}`, "toolu_1", sdkServer)
	if r := c.do(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":"toolu_1","language":"python","code":"x"}`, q)); r["type"] != "run_result" {
		t.Fatalf("run: %v", r)
	}
	body := scrapeMetrics(t, h)
	for _, want := range []string{
		`gatekeeper_decisions_total{decision="allow",event="PreToolUse",rule="tools.allow_list"} 1`,
		`gatekeeper_decisions_total{decision="allow",event="code_call",rule="code_calls.callable"} 1`,
		`gatekeeper_decisions_total{decision="deny",event="code_call",rule="code_calls.not_callable"} 1`,
		`gatekeeper_decisions_total{decision="deny",event="code_call",rule="` + runner.RuleBadRequest + `"} 1`,
		`gatekeeper_decisions_total{decision="deny",event="code_call",rule="` + runner.RuleMaxCalls + `"} 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s; the family is:\n%s", want, family(body, "gatekeeper_decisions_total{"))
		}
	}
}

// scrapeMetrics reads the sidecar's /metrics.
func scrapeMetrics(t *testing.T, h *harness) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://gatekeeper/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := h.httpClient().Do(req)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(body)
}

// family is the lines of body that start with prefix.
func family(body, prefix string) string {
	var out []string
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
