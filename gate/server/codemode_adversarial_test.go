package server_test

// Code mode attacked from sandboxed code, end to end: the real sidecar, the
// real Docker engine and real MCP servers (runner/mcpservers/mcptest) that
// hang, die or are reached for across runs.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

// codeCallLines verifies the audit chain and returns its code_call lines
// and run lines.
func codeCallLines(t *testing.T, path string) (calls, runs []audit.Record) {
	t.Helper()
	if _, err := audit.VerifyFile(path); err != nil {
		t.Fatalf("audit verify: %v", err)
	}
	for _, rec := range readAudit(t, path) {
		switch rec.Kind {
		case audit.KindCodeCall:
			calls = append(calls, rec)
		case audit.KindRun:
			runs = append(runs, rec)
		}
	}
	return calls, runs
}

// A server that never answers costs the program one call and the timeout
// of code_calls, not its run: the call fails with kind timeout naming the
// bound, and a call to another server in the same run still works.
func TestCodeModeAServerThatHangsMidCallTimesOutAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	bin, err := mcptest.Build(t.TempDir())
	must(t, err)
	h := startCodeMode(t, "", `code_calls:
  timeout: 1s
  callable:
    slow: [hang]
    places: [lookup]
`, mcptest.Stdio(bin, "slow", 10, nil), mcptest.HTTP(t, "places", 10, nil))
	c := h.connect(t)
	q := c.open("")
	res, out := runCode(t, c, q, "toolu_hang", `import gatekeeper_tools as gk
from gatekeeper_tools import places
try:
    gk.call("slow", "hang", {})
    print("HANG answered")
except gk.ToolCallError as e:
    print("hang", e.kind, e.rule, "1s" in e.message)
print("lookup", places.lookup(id=7)["name"])
`)
	if res["reason"] != "exited" || res["exit_code"] != float64(0) {
		t.Fatalf("run: %v\noutput: %s", res, out)
	}
	if want := fmt.Sprintf("hang %s %s True\nlookup places-7\n", runner.ToolTimeout, runner.RuleTimeout); out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	calls, runs := codeCallLines(t, h.auditPath)
	if len(runs) != 1 || runs[0].ToolCalls != 2 || len(calls) != 2 {
		t.Fatalf("run lines %+v, %d code_call lines; want one run with 2 calls", runs, len(calls))
	}
	hung, lookup := calls[0], calls[1]
	if hung.Server != "slow" || hung.Tool != "hang" || hung.ErrorKind != runner.ToolTimeout || hung.CallSeq != 1 || hung.RunID != runs[0].RunID {
		t.Errorf("the hung call's line: %+v", hung)
	}
	if lookup.Server != "places" || lookup.Tool != "lookup" || lookup.ErrorKind != "" || lookup.Decision != "allow" || lookup.CallSeq != 2 {
		t.Errorf("the lookup's line: %+v", lookup)
	}
}

// A stdio server that dies mid-call fails that call with kind server and a
// message naming the server; the MCP client starts it again, so the next
// call to the same server, in the same run and in a later one, answers
// (from a new process).
func TestCodeModeAServerThatDiesMidCallFailsThatCallAndIsStartedAgain(t *testing.T) {
	t.Parallel()
	bin, err := mcptest.Build(t.TempDir())
	must(t, err)
	h := startCodeMode(t, "", `code_calls:
  callable:
    people: [crash, lookup, pid]
`, mcptest.Stdio(bin, "people", 10, nil))
	c := h.connect(t)
	q := c.open("")
	res, out := runCode(t, c, q, "toolu_crash", `import gatekeeper_tools as gk
before = gk.call("people", "pid")["structuredContent"]["pid"]
try:
    gk.call("people", "crash")
    print("CRASH answered")
except gk.ToolCallError as e:
    print("crash", e.kind, e.rule == "", '"people"' in e.message)
print("lookup", gk.call("people", "lookup", {"id": 7})["structuredContent"]["name"])
after = gk.call("people", "pid")["structuredContent"]["pid"]
print("new process", after != before)
`)
	if res["reason"] != "exited" || res["exit_code"] != float64(0) {
		t.Fatalf("run: %v\noutput: %s", res, out)
	}
	if want := fmt.Sprintf("crash %s True True\nlookup people-7\nnew process True\n", runner.ToolServer); out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	res, out = runCode(t, c, q, "toolu_after", `import gatekeeper_tools as gk
print("lookup", gk.call("people", "lookup", {"id": 8})["structuredContent"]["name"])
`)
	if res["reason"] != "exited" || res["exit_code"] != float64(0) || out != "lookup people-8\n" {
		t.Fatalf("the later run: %v\noutput: %s", res, out)
	}
	calls, runs := codeCallLines(t, h.auditPath)
	if len(runs) != 2 || runs[0].ToolCalls != 4 || runs[1].ToolCalls != 1 || len(calls) != 5 {
		t.Fatalf("run lines %+v, %d code_call lines; want runs of 4 and 1 calls", runs, len(calls))
	}
	for i, rec := range calls {
		crash := i == 1
		if rec.Decision != "allow" || (rec.ErrorKind == runner.ToolServer) != crash || (rec.Error != "") != crash {
			t.Errorf("code_call line %d (%s): decision %s error_kind %q error %q", i, rec.Tool, rec.Decision, rec.ErrorKind, rec.Error)
		}
	}
	if crash := calls[1]; crash.Tool != "crash" || !strings.Contains(crash.Error, `"people"`) || crash.RunID != runs[0].RunID {
		t.Errorf("the crashed call's line: %+v", crash)
	}
}
