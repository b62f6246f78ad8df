package server_test

// Every nested call of code mode is audited, end to end: the real
// sidecar, the real Docker engine and a real MCP server (mcptest's, with
// one more tool that counts the calls it runs at once).

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

// busyServer is mcptest's HTTP server with a tool busy {ms} that answers
// after ms milliseconds and counts the calls it runs at once.
type busyServer struct {
	mu        sync.Mutex
	cur, peak int
	calls     int
}

type busyIn struct {
	MS int `json:"ms" jsonschema:"milliseconds"`
}

func (b *busyServer) start(t *testing.T, name string) mcpservers.Config {
	t.Helper()
	stop := make(chan struct{})
	s := mcptest.NewServer(mcptest.Options{Name: name, Records: 100, Stop: stop})
	mcp.AddTool(s, &mcp.Tool{Name: "busy", Description: "Answers after ms milliseconds.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in busyIn) (*mcp.CallToolResult, any, error) {
			b.mu.Lock()
			b.cur++
			b.calls++
			b.peak = max(b.peak, b.cur)
			b.mu.Unlock()
			defer func() {
				b.mu.Lock()
				b.cur--
				b.mu.Unlock()
			}()
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() {
		close(stop)
		srv.CloseClientConnections()
		srv.Close()
	})
	return mcpservers.Config{Name: name, Description: "busy test records over HTTP", URL: srv.URL}
}

func (b *busyServer) counts() (calls, peak int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls, b.peak
}

// rawBridge is Python that speaks the bridge's socket protocol directly,
// for lines the wrappers would never send.
const rawBridge = `import json, os, socket
def raw_conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(os.environ["GATEKEEPER_TOOLS"], "bridge.sock"))
    return s, s.makefile("rb")
def raw(c, line):
    c[0].sendall(line + b"\n")
    return json.loads(c[1].readline())
`

// countRun checks that every call a run's program made is in the audit
// log: the run's code_call lines, each one call, plus the counts of its
// closing line (omitted), equal the calls its program made, the run
// line's tool_calls and run_result's. It returns the run's lines.
func countRun(t *testing.T, path string, res map[string]any, made int) []audit.Record {
	t.Helper()
	runID, _ := res["run_id"].(string)
	calls, runs := codeCallLines(t, path)
	var mine []audit.Record
	lines, counted, closing := 0, 0, 0
	for _, rec := range calls {
		if rec.RunID != runID {
			continue
		}
		mine = append(mine, rec)
		if rec.Omitted != nil {
			closing++
			for _, n := range rec.Omitted {
				counted += n
			}
			continue
		}
		lines++
	}
	var runLine *audit.Record
	for i := range runs {
		if runs[i].RunID == runID {
			runLine = &runs[i]
		}
	}
	if runLine == nil {
		t.Fatalf("no run line of %s", runID)
	}
	if lines+counted != made || runLine.ToolCalls != made || res["tool_calls"] != float64(made) || closing > 1 {
		t.Errorf("run %s: %d code_call lines + %d counted in %d closing lines, run line tool_calls %d, run_result's %v; the program made %d calls",
			runID, lines, counted, closing, runLine.ToolCalls, res["tool_calls"], made)
	}
	return mine
}

// byRule counts a run's lines by decision, error kind and rule, and the
// closing line's counts as "omitted <rule>".
func byRule(lines []audit.Record) map[string]int {
	out := map[string]int{}
	for _, rec := range lines {
		if rec.Omitted != nil {
			for r, n := range rec.Omitted {
				out["omitted "+r] += n
			}
			continue
		}
		out[fmt.Sprintf("%s %s %s", rec.Decision, rec.ErrorKind, rec.Rule)]++
	}
	return out
}

// TestCodeModeAuditsEveryCallAndQueuesParallelOnes: 64 calls from 32
// threads under max_in_flight 4 are all answered, at most 4 at once at
// the server; 25 calls 5 past max_calls, malformed and oversize lines
// each get a line with their kind and rule; a flood of malformed lines
// gets the run's first 64 refusals a line each and one line counting the
// rest, and past 1024 refusals the bridge is closed, even to a valid call.
func TestCodeModeAuditsEveryCallAndQueuesParallelOnes(t *testing.T) {
	t.Parallel()
	busy := &busyServer{}
	h := startCodeMode(t, "", `code_calls:
  max_calls: 100
  max_argument_bytes: 1k
  timeout: 25s
  callable:
    places: [lookup, busy]
`, busy.start(t, "places"))
	c := h.connect(t)

	t.Run("64 calls from 32 threads are queued, not refused", func(t *testing.T) {
		q := c.open("")
		res, out := runCode(t, c, q, "toolu_pool", `from concurrent.futures import ThreadPoolExecutor
import gatekeeper_tools as gk
def one(i):
    try:
        gk.call("places", "busy", {"ms": 50})
        return "ok"
    except gk.ToolCallError as e:
        return "%s %s" % (e.kind, e.rule)
with ThreadPoolExecutor(max_workers=32) as ex:
    got = list(ex.map(one, range(64)))
print("answers", {k: got.count(k) for k in sorted(set(got))})
`)
		if res["reason"] != "exited" || res["exit_code"] != float64(0) || out != "answers {'ok': 64}\n" {
			t.Fatalf("run: %v\noutput: %s", res, out)
		}
		lines := countRun(t, h.auditPath, res, 64)
		if got := byRule(lines); fmt.Sprint(got) != fmt.Sprint(map[string]int{"allow  code_calls.callable": 64}) {
			t.Errorf("lines by rule: %v", got)
		}
		calls, peak := busy.counts()
		t.Logf("the server ran %d calls, at most %d at once", calls, peak)
		if calls != 64 || peak > 4 || peak < 1 {
			t.Errorf("the server ran %d calls, at most %d at once; want 64, at most max_in_flight (4)", calls, peak)
		}
	})

	t.Run("refusals each get a line with their kind and rule", func(t *testing.T) {
		// Five lines the wrappers would never send, then 25 calls, the
		// last 5 past max_calls.
		q := c.open(`{"code_calls":{"max_calls":25}}`)
		res, out := runCode(t, c, q, "toolu_refused", rawBridge+`import gatekeeper_tools as gk
from gatekeeper_tools import places
got = []
c = raw_conn()
for line in (b"not json", b'{"id":1,"server":"places"}', b'{"id":2,"server":"places","tool":"lookup","extra":1}',
             b'{"id":3,"server":"places","tool":"lookup","arguments":{"pad":"' + b"a" * 2000 + b'"}}',
             b'{"id":4,"server":"places","tool":"lookup","arguments":{"pad":"' + b"a" * 20000 + b'"}}'):
    a = raw(c, line)
    got.append("%s %s" % (a["error"]["kind"], a["error"]["rule"]))
for i in range(25):
    try:
        places.lookup(id=i + 1)
        got.append("ok")
    except gk.ToolCallError as e:
        got.append("%s %s" % (e.kind, e.rule))
print("answers", {k: got.count(k) for k in sorted(set(got))})
`)
		want := "answers {'bad_request code_calls.bad_request': 3, 'limit code_calls.max_argument_bytes': 2, 'limit code_calls.max_calls': 5, 'ok': 20}\n"
		if res["reason"] != "exited" || res["exit_code"] != float64(0) || out != want {
			t.Fatalf("run: %v\noutput: %s\nwant: %s", res, out, want)
		}
		lines := countRun(t, h.auditPath, res, 30)
		wantLines := map[string]int{
			"allow  code_calls.callable":                20,
			"deny limit " + runner.RuleMaxCalls:         5,
			"deny bad_request " + runner.RuleBadRequest: 3,
			"deny limit " + runner.RuleMaxArgumentBytes: 2,
		}
		if got := byRule(lines); fmt.Sprint(got) != fmt.Sprint(wantLines) {
			t.Errorf("lines by rule: %v; want %v", got, wantLines)
		}
	})

	t.Run("a flood of refusals is bounded and closes the bridge", func(t *testing.T) {
		q := c.open("")
		// 1,075 round trips through the bridge print nothing until the
		// end: under -race on a loaded 2-core machine that took over the
		// client's usual 10 s for a frame.
		c.wait = 2 * time.Minute
		defer func() { c.wait = 0 }()
		const flood = runner.MaxRefusals + 50
		res, out := runCode(t, c, q, "toolu_flood", rawBridge+fmt.Sprintf(`c = raw_conn()
kinds = {}
for i in range(%d):
    a = raw(c, b"not json %%d" %% i)
    r = a["error"]["rule"]
    kinds[r] = kinds.get(r, 0) + 1
a = raw(c, b'{"id":7,"server":"places","tool":"lookup","arguments":{"id":1}}')
print("flood", sorted(kinds.items()))
print("valid", a["ok"], a["error"]["rule"])
`, flood))
		want := fmt.Sprintf("flood [('%s', %d), ('%s', %d)]\nvalid False %s\n", runner.RuleBadRequest, runner.MaxRefusals, runner.RuleMaxRefusals, 50, runner.RuleMaxRefusals)
		if res["reason"] != "exited" || res["exit_code"] != float64(0) || out != want {
			t.Fatalf("run: %v\noutput: %s\nwant: %s", res, out, want)
		}
		lines := countRun(t, h.auditPath, res, flood+1)
		if len(lines) != runner.MaxRefusalLines+1 {
			t.Errorf("%d lines for the run; want %d: the refusals' own and one closing line", len(lines), runner.MaxRefusalLines+1)
		}
		wantLines := map[string]int{
			"deny bad_request " + runner.RuleBadRequest: runner.MaxRefusalLines,
			"omitted " + runner.RuleBadRequest:          runner.MaxRefusals - runner.MaxRefusalLines,
			"omitted " + runner.RuleMaxRefusals:         51,
		}
		if got := byRule(lines); fmt.Sprint(got) != fmt.Sprint(wantLines) {
			t.Errorf("lines by rule: %v; want %v", got, wantLines)
		}
		if len(lines) == 0 {
			return
		}
		if last := lines[len(lines)-1]; last.Omitted == nil || last.Rule != runner.RuleMaxRefusals || !strings.Contains(last.Reason, "closed") {
			t.Errorf("the closing line %+v; want it last, naming %s", last, runner.RuleMaxRefusals)
		}
	})
}
