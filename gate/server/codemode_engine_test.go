package server_test

// Code mode end to end: the real sidecar, the real Docker engine, real OPA
// with an operator module, and two real MCP servers (a stdio one and a
// streamable HTTP one, from runner/mcpservers/mcptest) that a sandboxed
// program with no network calls through the generated wrappers.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

// codeModeRego denies a lookup of record 13 from code, on the argument's
// value.
const codeModeRego = `package gatekeeper

deny contains {"rule": "ops.no_13", "reason": "record 13 may not be read from code"} if {
	input.event == "code_call"
	input.code_call.tool == "lookup"
	input.code_call.arguments.id == 13
}
`

// codeModeProgram pages through the 500 records of people, joins the ten
// best scores with places' lookup of the same ids, writes a CSV and prints
// a three-line summary; then tries a tool that is not callable and a
// lookup the operator's rule denies.
const codeModeProgram = `import csv
import gatekeeper_tools as gk
from gatekeeper_tools import people, places
rows, page = [], 1
while True:
    p = people.records(page=page, size=100)
    rows += p["records"]
    if not p["more"]:
        break
    page += 1
best = sorted(rows, key=lambda r: (-r["score"], r["id"]))[:10]
with open("joined.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "name", "score", "place"])
    for r in best:
        w.writerow([r["id"], r["name"], r["score"], places.lookup(id=r["id"])["name"]])
print("records", len(rows), "pages", page)
print("best", best[0]["id"], best[0]["score"])
print("csv rows", len(list(csv.reader(open("joined.csv")))) - 1)
try:
    gk.call("people", "delete_record", {"id": 1})
    print("DELETE answered")
except gk.ToolCallDenied as e:
    print("DENIED", e.rule)
try:
    places.lookup(id=13)
    print("LOOKUP 13 answered")
except gk.ToolCallDenied as e:
    print("DENIED", e.rule)
`

func TestCodeModeOnTheRealEngineWithRealMCPServers(t *testing.T) {
	t.Parallel()
	bin, err := mcptest.Build(t.TempDir())
	must(t, err)
	h := startCodeMode(t, codeModeRego, `code_calls:
  callable:
    people: [records]
    places: [lookup]
`, mcptest.Stdio(bin, "people", 500, nil), mcptest.HTTP(t, "places", 500, nil))
	c := h.connect(t)
	c.wait = 2 * time.Minute // the program's first output can take long on a loaded machine
	run := func(t *testing.T, q, id, code string) (map[string]any, string) {
		t.Helper()
		return runCode(t, c, q, id, code)
	}

	q := c.open("")
	res, out := run(t, q, "toolu_cm", codeModeProgram)
	if res["reason"] != "exited" || res["exit_code"] != float64(0) {
		t.Fatalf("run: %v\noutput: %s", res, out)
	}
	want := "records 500 pages 5\n" +
		"best 57 99\n" + // record i scores i*7%100: 99 first at i=57
		"csv rows 10\n" +
		"DENIED code_calls.not_callable\n" +
		"DENIED ops.no_13\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	const calls = 5 + 10 + 2
	rep, err := audit.VerifyFile(h.auditPath)
	if err != nil {
		t.Fatalf("audit verify: %v", err)
	}
	var lines []audit.Record
	var runLine *audit.Record
	for _, rec := range readAudit(t, h.auditPath) {
		switch rec.Kind {
		case audit.KindCodeCall:
			lines = append(lines, rec)
		case audit.KindRun:
			runLine = &rec
		}
	}
	if runLine == nil || runLine.ToolCalls != calls {
		t.Fatalf("run line %+v; want tool_calls %d", runLine, calls)
	}
	if res["tool_calls"] != float64(calls) {
		t.Errorf("run_result's tool_calls %v, want %d: the client reports what the audit log counts", res["tool_calls"], calls)
	}
	if len(lines) != calls {
		t.Fatalf("%d code_call lines (of %d verified), want one per nested call: %d", len(lines), rep.Lines, calls)
	}
	rules := map[string]int{}
	for i, rec := range lines {
		if rec.RunID != runLine.RunID || rec.QueryID != q || rec.ToolUseID != "toolu_cm" || rec.CallSeq != i+1 {
			t.Errorf("code_call line %d: run %q query %q tool use %q seq %d", i, rec.RunID, rec.QueryID, rec.ToolUseID, rec.CallSeq)
		}
		if rec.ArgumentsSHA256 == "" || rec.ArgumentsBytes == 0 {
			t.Errorf("code_call line %d has no arguments hash and size: %+v", i, rec)
		}
		rules[fmt.Sprintf("%s %s.%s %s", rec.Decision, rec.Server, rec.Tool, rec.Rule)]++
	}
	wantRules := map[string]int{
		"allow people.records code_calls.callable":          5,
		"allow places.lookup code_calls.callable":           10,
		"deny people.delete_record code_calls.not_callable": 1,
		"deny places.lookup ops.no_13":                      1,
	}
	if fmt.Sprint(rules) != fmt.Sprint(wantRules) {
		t.Errorf("code_call lines by decision, tool and rule: %v, want %v", rules, wantRules)
	}

	t.Run("an override that narrows callable holds in the program", func(t *testing.T) {
		q := c.open(`{"code_calls":{"callable":{"people":["records"]}}}`)
		res, out := run(t, q, "toolu_narrow", `import gatekeeper_tools as gk
from gatekeeper_tools import people
print("page", len(people.records(page=1, size=3)["records"]))
try:
    from gatekeeper_tools import places
    print("IMPORTED places")
except ImportError:
    print("no places module")
try:
    gk.call("places", "lookup", {"id": 1})
    print("LOOKUP answered")
except gk.ToolCallDenied as e:
    print("DENIED", e.rule)
`)
		if res["reason"] != "exited" || res["exit_code"] != float64(0) {
			t.Fatalf("run: %v\noutput: %s", res, out)
		}
		if want := "page 3\nno places module\nDENIED code_calls.not_callable\n"; out != want {
			t.Errorf("output:\n%s\nwant:\n%s", out, want)
		}
	})
	t.Run("an override that widens callable is refused", func(t *testing.T) {
		r := c.do(`{"type":"open_query","id":"wide","sandbox_policy":{"code_calls":{"callable":{"people":["records","delete_record"]}}}}`)
		if r["code"] != "policy_override_rejected" || !strings.Contains(fmt.Sprint(r), "code_calls.callable") {
			t.Errorf("open_query with a wider callable: %v", r)
		}
	})
}

// startCodeMode starts the sidecar on the real engine with a client of
// these MCP servers, their mcp_servers section and codeCalls (the policy's
// code_calls section) added to the test policy, and rego as the operator's
// module.
func startCodeMode(t *testing.T, rego, codeCalls string, cfgs ...mcpservers.Config) *harness {
	t.Helper()
	servers, err := mcpservers.New(cfgs, mcpservers.Options{})
	must(t, err)
	t.Cleanup(func() { _ = servers.Close() })
	var b strings.Builder
	b.WriteString("mcp_servers:\n")
	for _, cfg := range cfgs {
		fmt.Fprintf(&b, "  %s:\n    description: %q\n", cfg.Name, cfg.Name+" test server")
		if cfg.URL != "" {
			fmt.Fprintf(&b, "    url: %q\n", cfg.URL)
		} else {
			fmt.Fprintf(&b, "    command: %s\n", mustJSON(t, cfg.Command))
		}
	}
	// 30s: a run's calls cross real servers on a loaded machine.
	policy := strings.Replace(testPolicy, "proc: {timeout: 10s}", "proc: {timeout: 30s}", 1) + b.String() + codeCalls
	return start(t, options{runner: realRunner(t), policy: policy, rego: rego,
		tune: func(c *server.Config) { c.ToolServers = servers }})
}

// runCode decides and runs a Python program in query q on c, and returns
// its run_result and output.
func runCode(t *testing.T, c *client, q, id, code string) (map[string]any, string) {
	t.Helper()
	if d := c.decide(q, wire.SandboxTool, fmt.Sprintf(`{"language":"python","code":%q}`, code), id, sdkServer); d["decision"] != "allow" {
		t.Fatalf("decide %s: %v", id, d)
	}
	c.send(fmt.Sprintf(`{"type":"run","id":"r-%s","query_id":%q,"tool_use_id":%q,"language":"python","code":%q}`, id, q, id, code))
	return recvResult(t, c)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}
