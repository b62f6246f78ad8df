package server_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// TestDecideAnHTTPRequest: a decide frame of event http_request is
// decided by the query's policy as a run's request would be, under the
// operator's module, and audited; no request is made.
func TestDecideAnHTTPRequest(t *testing.T) {
	t.Parallel()
	if gate.EventHTTPRequest != wire.EventHTTPRequest {
		t.Fatalf("the gate's event %q and the wire's %q differ", gate.EventHTTPRequest, wire.EventHTTPRequest)
	}
	h := start(t, options{
		policy: "version: 1\nworkspace_root: ./ws\nsandbox:\n  net: {enabled: true, allow: [api.github.com], inspect: [api.github.com]}\n",
		rego: `package gatekeeper

deny contains {"rule": "github.read_only", "reason": "only GET"} if {
	input.http.host == "api.github.com"
	not input.http.method in {"GET", "HEAD"}
}
`,
	})
	c := h.connect(t)
	q := c.open("")
	for _, tc := range []struct{ method, decision, rule string }{
		{"GET", "allow", "http.allowed"},
		{"DELETE", "deny", "github.read_only"},
	} {
		r := c.do(fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"http_request","http":{"method":%q,"host":"api.github.com","path":"/repos/our-org/x"}}`, q, tc.method))
		if r["type"] != "decision" || r["decision"] != tc.decision || r["rule"] != tc.rule || !strings.HasPrefix(r["decision_id"].(string), "d_") {
			t.Errorf("%s: %v", tc.method, r)
		}
	}
	rep, err := audit.VerifyFile(h.auditPath)
	must(t, err)
	if rep.Lines != 3 {
		t.Errorf("audit has %d lines, want 3", rep.Lines)
	}
	data, err := os.ReadFile(h.auditPath)
	must(t, err)
	if !strings.Contains(string(data), `"event":"http_request"`) || !strings.Contains(string(data), `"rule":"github.read_only"`) {
		t.Errorf("audit lines: %s", data)
	}
}
