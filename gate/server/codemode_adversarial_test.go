package server_test

// Code mode attacked from sandboxed code, end to end: the real sidecar, the
// real Docker engine and real MCP servers (runner/mcpservers/mcptest) that
// hang, die or are reached for across runs.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
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

// reachProgram is run twice at once, in two queries on two connections
// (label and base set apart their lookups). It calls a tool as it should,
// then reaches for every unix socket it can find (a walk of the usual
// places, the paths in /proc/net/unix, other processes' /tmp through
// /proc/<pid>/root), sends each one that accepts a lookup request and
// checks any answer is its own; then it writes call frames with guessed
// tags on its standard output, asking for a lookup it never makes. It
// prints "R made <n>": the calls that got an answer. The program labelled
// A then waits in a call to hang (until code_calls.timeout) so that the
// other program runs while it is alive.
const reachProgram = `import json, os, re, socket, stat, sys
import gatekeeper_tools as gk
from gatekeeper_tools import places
LABEL, BASE = %q, %d
made = 0
print("R own", places.lookup(id=BASE + 1)["name"] == "places-%%d" %% (BASE + 1))
made += 1
found = set()
def walk(root):
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            try:
                if stat.S_ISSOCK(os.lstat(p).st_mode):
                    found.add(p)
            except OSError:
                pass
for root in ("/tmp", "/run", "/var/run", "/dev", "/workspace", "/home", "/root"):
    walk(root)
try:
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        f = line.split()
        if len(f) >= 8:
            found.add("\0" + f[7][1:] if f[7].startswith("@") else f[7])
except OSError:
    pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        walk("/proc/%%s/root/tmp" %% pid)
print("R sockets", len(found) > 0)
for i, p in enumerate(sorted(found)):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(p)
    except OSError:
        continue
    rid = BASE * 1000 + i
    buf = b""
    try:
        s.sendall(json.dumps({"id": rid, "server": "places", "tool": "lookup", "arguments": {"id": BASE + 2}}).encode() + b"\n")
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except OSError:
        pass
    s.close()
    if buf:
        made += 1
        a = json.loads(buf.splitlines()[0])
        own = a.get("id") == rid and a.get("ok") and a["result"]["structuredContent"]["name"] == "places-%%d" %% (BASE + 2)
        print("R answer", bool(own))
guesses = ["0" * 32, "gatekeeper", "x"]
for f in ("/proc/1/cmdline", "/proc/1/environ"):
    try:
        guesses += sorted(set(w.decode() for w in re.findall(rb"[A-Za-z0-9_-]{16,}", open(f, "rb").read())))
    except OSError:
        pass
body = json.dumps({"id": 1, "server": "places", "tool": "lookup", "arguments": {"id": BASE + 3}})
for g in guesses:
    for flag in "ce":
        sys.stdout.write("\x1egatekeeper-call %%s 1 %%s %%d\n%%s\n" %% (g, flag, len(body), body))
        sys.stdout.flush()
print("R made", made)
if LABEL == "A":
    print("R ready")
    sys.stdout.flush()
    try:
        gk.call("places", "hang")
        print("R HANG answered")
    except gk.ToolCallError as e:
        print("R hang", e.kind)
`

// Two programs that run at the same time in two queries reach no further
// than their own bridge: each one's calls are audited under its own run
// and query, as many as it made itself, every answer it got is its own,
// and neither a socket it found nor a guessed call frame on its standard
// output made a call it did not send through its bridge.
func TestCodeModeTwoRunsAtOnceReachOnlyTheirOwnBridge(t *testing.T) {
	t.Parallel()
	// 8s: the run labelled A waits in hang while the other runs (recv
	// waits 10s for a frame).
	h := startCodeMode(t, "", `code_calls:
  timeout: 8s
  callable:
    places: [lookup, hang]
`, mcptest.HTTP(t, "places", 500, nil))
	ca, cb := h.connect(t), h.connect(t)
	qa, qb := ca.open(""), cb.open("")
	progA, progB := fmt.Sprintf(reachProgram, "A", 100), fmt.Sprintf(reachProgram, "B", 200)

	if d := ca.decide(qa, wire.SandboxTool, fmt.Sprintf(`{"language":"python","code":%q}`, progA), "toolu_a", sdkServer); d["decision"] != "allow" {
		t.Fatalf("decide A: %v", d)
	}
	ca.send(fmt.Sprintf(`{"type":"run","id":"r-a","query_id":%q,"tool_use_id":"toolu_a","language":"python","code":%q}`, qa, progA))
	var outA strings.Builder
	for !strings.Contains(outA.String(), "R ready\n") {
		r := ca.recv()
		if r["type"] != "output" {
			t.Fatalf("A ended before it was ready: %v\noutput: %s", r, outA.String())
		}
		outA.WriteString(fmt.Sprint(r["data"]))
	}
	resB, outB := runCode(t, cb, qb, "toolu_b", progB)
	resA, rest := recvResult(t, ca)
	outA.WriteString(rest)
	made := map[string]int{} // by run id: the calls its program made
	for _, r := range []struct {
		label string
		res   map[string]any
		out   string
		hang  int
	}{{"A", resA, outA.String(), 1}, {"B", resB, outB, 0}} {
		if r.res["reason"] != "exited" || r.res["exit_code"] != float64(0) {
			t.Fatalf("run %s: %v\noutput: %q", r.label, r.res, r.out)
		}
		n := -1
		for _, line := range strings.Split(r.out, "\n") {
			switch {
			case line == "R answer False", line == "R own False", line == "R HANG answered":
				t.Errorf("run %s: %s", r.label, line)
			case strings.HasPrefix(line, "R made "):
				_, _ = fmt.Sscan(strings.TrimPrefix(line, "R made "), &n)
			}
		}
		if n := strings.Count(r.out, "\x1egatekeeper-call "); n < 6 {
			t.Errorf("run %s: %d guessed call frames came out as its output, want them all (6 at least)", r.label, n)
		}
		if n < 2 || !strings.Contains(r.out, "R sockets True\n") {
			// 2: its lookup through the wrappers and its own bridge.sock.
			t.Fatalf("run %s made %d calls; output: %q", r.label, n, r.out)
		}
		if r.hang == 1 && !strings.Contains(r.out, "R hang "+runner.ToolTimeout+"\n") {
			t.Errorf("run %s's hang: %q", r.label, r.out)
		}
		made[r.res["run_id"].(string)] = n + r.hang
	}

	calls, runs := codeCallLines(t, h.auditPath)
	if len(runs) != 2 {
		t.Fatalf("%d run lines, want 2", len(runs))
	}
	sha := func(args string) string { s := sha256.Sum256([]byte(args)); return hex.EncodeToString(s[:]) }
	query := map[string]string{resA["run_id"].(string): qa, resB["run_id"].(string): qb}
	own := map[string]map[string]bool{
		resA["run_id"].(string): {sha(`{"id":101}`): true, sha(`{"id":102}`): true, sha(`{}`): true},
		resB["run_id"].(string): {sha(`{"id":201}`): true, sha(`{"id":202}`): true},
	}
	got := map[string]int{}
	for i, rec := range calls {
		got[rec.RunID]++
		if q, ok := query[rec.RunID]; !ok || rec.QueryID != q {
			t.Errorf("code_call line %d: run %q query %q, not one of the two runs with its own query", i, rec.RunID, rec.QueryID)
		}
		if !own[rec.RunID][rec.ArgumentsSHA256] {
			t.Errorf("code_call line %d of run %q has arguments its program never sent through its bridge: %+v", i, rec.RunID, rec)
		}
		if rec.Decision != "allow" {
			t.Errorf("code_call line %d: %+v", i, rec)
		}
	}
	for _, run := range runs {
		if got[run.RunID] != made[run.RunID] || run.ToolCalls != made[run.RunID] {
			t.Errorf("run %s (query %s): %d code_call lines, run line tool_calls %d; the program made %d", run.RunID, run.QueryID, got[run.RunID], run.ToolCalls, made[run.RunID])
		}
	}
}

// opsMarker is in the command, the URL and the error text of the servers
// of TestCodeModeAServerThatIsDownShowsNothingOfTheOperators.
const opsMarker = "opsmarker91d4"

// A server that is down shows the program and the model its name, the
// kind of failure and a reason in gatekeeper's words, nothing of the
// operator's: three servers whose command, URL and own error text carry a
// marker are down; the marker is in nothing the run and the model see
// (the query's tool description, the program's exceptions and output, the
// files of its wrappers, run_result), and it is in each one's code_call
// line, which denies the call by code_calls.tool_undescribed. A server
// that is up still answers in the same run.
func TestCodeModeAServerThatIsDownShowsNothingOfTheOperators(t *testing.T) {
	t.Parallel()
	bin, err := mcptest.Build(t.TempDir())
	must(t, err)
	says := `while read line; do id=$(echo "$line" | sed 's/.*"id":\([0-9]*\).*/\1/'); echo '{"jsonrpc":"2.0","id":'$id',"error":{"code":-32000,"message":"cannot open /etc/` + opsMarker + `.conf"}}'; done`
	h := startCodeMode(t, "", `code_calls:
  callable:
    nocmd: [lookup]
    nourl: [lookup]
    says: [lookup]
    people: [lookup]
`,
		mcpservers.Config{Name: "nocmd", Command: []string{"/opt/" + opsMarker + "/bin/internal-mcp"}},
		mcpservers.Config{Name: "nourl", URL: "http://127.0.0.1:9/" + opsMarker + "/mcp"},
		mcpservers.Config{Name: "says", Command: []string{"/bin/sh", "-c", says}},
		mcptest.Stdio(bin, "people", 10, nil))
	c := h.connect(t)
	opened := c.do(`{"type":"open_query","id":"o"}`)
	desc, _ := opened["tool_description"].(string)
	if opened["type"] != "query_opened" || strings.Count(desc, "unavailable now") != 3 {
		t.Fatalf("open_query: %v\nwant a description naming three servers unavailable", opened)
	}
	q := opened["query_id"].(string)
	res, out := runCode(t, c, q, "toolu_down", `import os
import gatekeeper_tools as gk
from gatekeeper_tools import people
m = "opsmarker" + "91d4"
seen = 0
for d, _, files in os.walk(os.environ["GATEKEEPER_TOOLS"]):
    for f in files:
        p = os.path.join(d, f)
        if os.path.isfile(p):
            seen += m in open(p, errors="replace").read()
print("wrapper files with the marker", seen)
for s in ["nocmd", "nourl", "says"]:
    try:
        gk.call(s, "lookup", {"id": 1})
        print(s, "ANSWERED")
    except gk.ToolCallError as e:
        print(s, e.kind, e.rule, ('mcp server "%s"' % s) in e.message, "could not be" in e.message)
        print(e.message)
print("lookup", people.lookup(id=3)["name"])
`)
	if res["reason"] != "exited" || res["exit_code"] != float64(0) {
		t.Fatalf("run: %v\noutput: %s", res, out)
	}
	for _, want := range []string{
		"wrapper files with the marker 0\n",
		"nocmd server code_calls.tool_undescribed True True\n",
		"nourl server code_calls.tool_undescribed True True\n",
		"says server code_calls.tool_undescribed True True\n",
		"lookup people-3\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for what, seen := range map[string]string{"the tool description": desc, "the output": out, "run_result": mustJSON(t, res)} {
		if strings.Contains(seen, opsMarker) {
			t.Errorf("%s holds the operator's marker:\n%s", what, seen)
		}
	}
	calls, _ := codeCallLines(t, h.auditPath)
	if len(calls) != 4 {
		t.Fatalf("%d code_call lines, want 4", len(calls))
	}
	for _, rec := range calls[:3] {
		if rec.Decision != "deny" || rec.Rule != gate.RuleUndescribed || rec.ErrorKind != runner.ToolServer || !strings.Contains(rec.Error, opsMarker) {
			t.Errorf("%s's code_call line: decision %q rule %q error_kind %q error %q; want a deny by %s with the raw error", rec.Server, rec.Decision, rec.Rule, rec.ErrorKind, rec.Error, gate.RuleUndescribed)
		}
	}
}
