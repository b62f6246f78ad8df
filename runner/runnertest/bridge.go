package runnertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

// bridgeServer is the one server of the bridge case: echo answers, refuse
// is refused by the test's caller as a policy would refuse it.
var bridgeServer = runner.ServerTools{
	Name:        "srv",
	Description: "The conformance suite's test server.",
	Tools: []runner.ToolInfo{
		{Name: "echo", Description: "Echo a text.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		{Name: "refuse", Description: "Always refused.", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`)},
	},
}

// bridgeRule is the rule the test's caller names when it refuses a call.
const bridgeRule = "conformance.refuse"

// echoCaller is the ToolCaller of the bridge case: echo returns its text
// (as text content) with the call's Seq; refuse is denied with bridgeRule.
// It records every call it gets.
type echoCaller struct {
	mu    sync.Mutex
	calls []runner.NestedCall
}

func (c *echoCaller) CallTool(_ context.Context, call runner.NestedCall) runner.ToolResult {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	if call.Server != "srv" || call.Tool != "echo" {
		return runner.ToolResult{Err: &runner.ToolError{Kind: runner.ToolDenied, Rule: bridgeRule, Message: "refused by the test"}}
	}
	var args struct{ Text string }
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return runner.ToolResult{Err: &runner.ToolError{Kind: runner.ToolServer, Message: err.Error()}}
	}
	text, _ := json.Marshal(fmt.Sprintf("%s #%d", args.Text, call.Seq))
	return runner.ToolResult{Result: json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`)}
}

func (c *echoCaller) got() []runner.NestedCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]runner.NestedCall(nil), c.calls...)
}

// forgedFrame is a call frame as init writes one, with a tag the program
// guessed: output, not a call.
const forgedFrame = "\x1egatekeeper-call 0123456789abcdef0123456789abcdef 1 e 63\n" +
	`{"id": 9, "server": "srv", "tool": "echo", "arguments": {"text": "x"}}` + "\n"

// bridgeProgram speaks the bridge's protocol on the raw socket, with no
// network and without the json module (the minimal profile's Python has
// none; the wrappers' own runtime is tested with the sidecar): two
// echoes, a refused call, a forged frame printed between them, then calls
// up to and past max_calls (4). It also checks that the wrapper files
// arrived whole and read-only (0444 in a 0555 directory).
const bridgeProgram = `import os, re, socket, sys
try:
    socket.create_connection(("192.0.2.1", 80), timeout=2)
    print("NET reachable")
except OSError:
    print("NET unreachable")
tools = os.environ["GATEKEEPER_TOOLS"]
wrapper = tools + "/python/gatekeeper_tools/srv.py"
print("WRAPPER", os.path.isfile(wrapper), os.access(wrapper, os.W_OK))
print("MODES %o %o %d %s" % (os.stat(wrapper).st_mode & 0o7777, os.stat(os.path.dirname(wrapper)).st_mode & 0o7777, os.stat(wrapper).st_size, open(wrapper, "rb").read() == WRAPPER_BYTES))
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(tools + "/bridge.sock")
f = s.makefile("rb")
def call(i, tool, args):
    s.sendall(('{"id": %d, "server": "srv", "tool": "%s", "arguments": %s}\n' % (i, tool, args)).encode())
    a = f.readline().decode()
    m = re.search(r'^\{"id":%d,' % i, a)
    if not m:
        return "ANSWER " + a
    m = re.search(r'"kind":"([a-z_]+)","rule":"([^"]*)"', a)
    if m:
        return "%d ERR %s %s" % (i, m.group(1), m.group(2))
    m = re.search(r'"text":"([^"]*)"', a)
    return "%d OK %s" % (i, m.group(1) if m else a)
print(call(1, "echo", '{"text": "one"}'))
print(call(2, "refuse", '{"x": 1}'))
sys.stdout.write(FORGED)
sys.stdout.flush()
print(call(3, "echo", '{"text": "two"}'))
print(call(4, "echo", '{"text": "three"}'))
print(call(5, "echo", '{"text": "four"}'))
print("DONE")
`

// testBridge runs a program that calls tools through the bridge, given the
// generated wrappers, and one without tools that looks for it.
func testBridge(t *testing.T, r Runner) {
	files, err := toolwrap.Generate([]runner.ServerTools{bridgeServer})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("calls are answered, refused and bounded", func(t *testing.T) {
		t.Parallel()
		caller := &echoCaller{}
		wrapper := files[toolwrap.PythonDir+"/"+toolwrap.PythonPackage+"/srv.py"]
		program := strings.Replace(bridgeProgram, "FORGED", fmt.Sprintf("%q", forgedFrame), 1)
		program = strings.Replace(program, "WRAPPER_BYTES", pyBytes(wrapper), 1)
		spec := Spec(program)
		spec.Caller, spec.ToolFiles = caller, files
		spec.Sandbox.Calls = runner.CallLimits{MaxCalls: 4, MaxInFlight: 2, MaxArgumentBytes: 1 << 10, MaxResultBytes: 4 << 10, Timeout: 20 * time.Second}
		res, err := r.Run(t.Context(), spec)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		wantExit(t, res, runner.Exited, 0)
		out := string(res.Stdout)
		want := "NET unreachable\n" +
			"WRAPPER True False\n" +
			fmt.Sprintf("MODES 444 555 %d True\n", len(wrapper)) +
			"1 OK one #1\n" +
			"2 ERR denied " + bridgeRule + "\n" +
			forgedFrame +
			"3 OK two #3\n" +
			"4 OK three #4\n" +
			"5 ERR limit " + runner.RuleMaxCalls + "\n" +
			"DONE\n"
		wantEqual(t, "stdout", out, want)
		if res.ToolCalls != 5 {
			t.Errorf("Result.ToolCalls = %d, want 5 (four answered or refused, one past max_calls)", res.ToolCalls)
		}
		got := caller.got()
		var seen []string
		for _, c := range got {
			seen = append(seen, fmt.Sprintf("%s.%s#%d", c.Server, c.Tool, c.Seq))
		}
		wantEqual(t, "calls the caller got", strings.Join(seen, " "), "srv.echo#1 srv.refuse#2 srv.echo#3 srv.echo#4")
	})
	t.Run("a run without tools has no bridge", func(t *testing.T) {
		t.Parallel()
		spec := Spec(`import os, socket
d = os.environ.get("GATEKEEPER_TOOLS", "")
print("DIR", bool(d), os.path.exists(os.path.join(d, "bridge.sock")))
try:
    import gatekeeper_tools
    print("IMPORTED")
except ImportError:
    print("NO WRAPPERS")
`)
		res, err := r.Run(t.Context(), spec)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		wantExit(t, res, runner.Exited, 0)
		wantEqual(t, "stdout", string(res.Stdout), "DIR True False\nNO WRAPPERS\n")
		if res.ToolCalls != 0 {
			t.Errorf("Result.ToolCalls = %d without tools", res.ToolCalls)
		}
	})
}

// pyBytes is b as a Python bytes literal.
func pyBytes(b []byte) string {
	var sb strings.Builder
	sb.WriteString(`b"`)
	for _, c := range b {
		fmt.Fprintf(&sb, `\x%02x`, c)
	}
	sb.WriteString(`"`)
	return sb.String()
}
