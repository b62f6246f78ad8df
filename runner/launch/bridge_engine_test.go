package launch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"

	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/seccomp"
)

// These tests run the bridge in real sandboxes: `docker run` of a sandbox
// image under runc and runsc with no network, launch.Command (or
// WarmCommand) as its command, the input written by launch.Input.Write,
// standard output read through EndMarks and CallDemux and the calls
// answered by a Bridge with testCaller. The programs speak the socket
// protocol with a plain socket client (bridgeClient), as the program-side
// runtime will.

// testCaller is the ToolCaller of the engine tests. Its tools: echo
// (answers its arguments as structuredContent), big (a result of
// {"n": bytes}), slow and hold (answer only when ctx ends; hold records
// why).
type testCaller struct {
	mu    sync.Mutex
	calls []runner.NestedCall
	ended []error // ctx.Err() of each hold call, once it ended
	held  chan struct{}
}

func newTestCaller() *testCaller { return &testCaller{held: make(chan struct{}, 16)} }

func (c *testCaller) CallTool(ctx context.Context, call runner.NestedCall) runner.ToolResult {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	switch call.Tool {
	case "echo":
		return runner.ToolResult{Result: json.RawMessage(`{"content":[{"type":"text","text":"echo"}],"structuredContent":` + string(call.Arguments) + `}`)}
	case "big":
		var a struct{ N int }
		_ = json.Unmarshal(call.Arguments, &a)
		return runner.ToolResult{Result: json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("b", a.N) + `"}]}`)}
	case "slow", "hold":
		if call.Tool == "hold" {
			c.held <- struct{}{}
		}
		<-ctx.Done()
		c.mu.Lock()
		if call.Tool == "hold" {
			c.ended = append(c.ended, ctx.Err())
		}
		c.mu.Unlock()
		return runner.ToolResult{Err: &runner.ToolError{Kind: runner.ToolServer, Message: "ended"}}
	}
	return runner.ToolResult{Err: &runner.ToolError{Kind: runner.ToolDenied, Rule: "test.unknown", Message: "no such tool"}}
}

func (c *testCaller) seen() []runner.NestedCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]runner.NestedCall(nil), c.calls...)
}

// bridgeClient is the program's side of the socket protocol, in plain
// Python, as a workspace file.
const bridgeClient = `import json, os, socket

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(os.environ["GATEKEEPER_TOOLS"], "bridge.sock"))
    return s, s.makefile("rb")

def send(s, id, tool, args, server="srv"):
    s.sendall((json.dumps({"id": id, "server": server, "tool": tool, "arguments": args}) + "\n").encode())

def recv(f):
    line = f.readline()
    if not line:
        raise EOFError("the bridge closed the connection")
    return json.loads(line)

def call(s, f, id, tool, args, server="srv"):
    send(s, id, tool, args, server)
    return recv(f)
`

// testImage finds the default Python sandbox image (make images builds it).
func testImage(t *testing.T, lang string) string {
	t.Helper()
	out, err := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "gatekeeper-sandbox").Output()
	if err != nil {
		t.Fatalf("docker images: %v", err)
	}
	re := regexp.MustCompile(`^gatekeeper-sandbox:` + lang + `-[0-9a-f]+$`)
	for _, l := range strings.Fields(string(out)) {
		if re.MatchString(l) {
			return l
		}
	}
	t.Fatalf("no gatekeeper-sandbox:%s-<hash> image: build the sandbox images (make images)", lang)
	return ""
}

func skipWithoutEngine(t *testing.T) {
	t.Helper()
	if runnertest.SkipEngine() {
		t.Skipf("%s=1: skipping the engine tests", runnertest.SkipEngineEnv)
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Fatalf("no Docker engine (%v): start it (scripts/ensure-docker), or set %s=1 to skip", err, runnertest.SkipEngineEnv)
	}
}

type bridgeRun struct {
	rt       runner.Runtime
	lang     runner.Language
	code     string
	files    map[string]string
	tools    map[string][]byte
	limits   runner.CallLimits
	warm     bool
	noTools  bool
	timeout  time.Duration
	caller   *testCaller
	callerOf runner.ToolCaller
}

type bridgeResult struct {
	stdout, stderr string
	code           int
	codeOK         bool
	calls          int   // Bridge.Calls
	frameBytes     int64 // CallDemux.FrameBytes
}

func defaultLimits() runner.CallLimits {
	return runner.CallLimits{MaxCalls: 1000, MaxInFlight: 8, MaxArgumentBytes: 64 << 10, MaxResultBytes: 64 << 10, Timeout: 20 * time.Second}
}

// run runs one program in a fresh sandbox and returns once both end
// marks are in and the bridge is closed.
func (r bridgeRun) run(t *testing.T) bridgeResult {
	t.Helper()
	sb := runnertest.Sandbox()
	sb.MemoryBytes, sb.PIDs, sb.WorkspaceBytes, sb.TmpBytes = 512<<20, 128, 64<<20, 64<<20
	sb.Calls = r.limits
	files := map[string]string{"gk.py": bridgeClient}
	for k, v := range r.files {
		files[k] = v
	}
	if r.timeout == 0 {
		r.timeout = 60 * time.Second
	}
	spec := runner.Spec{Language: r.lang, Code: r.code, Files: files, Timeout: r.timeout, Sandbox: sb}
	if !r.noTools {
		spec.Caller, spec.ToolFiles = r.caller, r.tools
	}
	in, problems := launch.Check(spec, 6<<20)
	if len(problems) > 0 {
		t.Fatalf("Check: %v", problems)
	}
	life := r.timeout + 30*time.Second
	argv := launch.Command(life, life, launch.Env())
	if r.warm {
		var err error
		if argv, err = launch.WarmCommand(life, life, launch.Env(), launch.Warm{Language: r.lang}); err != nil {
			t.Fatal(err)
		}
	}
	lang := "python"
	if r.lang == runner.Node {
		lang = "node"
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), r.timeout+60*time.Second)
	defer cancel()
	pids := int64(256)
	security := []string{"no-new-privileges:true"}
	if r.rt == runner.Runsc { // as runner/docker gives it: Docker's default profile's clone3 errno is lost under gVisor (runner/seccomp)
		security = append(security, seccomp.DockerSecurityOpt())
	}
	tmpfs := "rw,noexec,nosuid,nodev,size=67108864"
	created, err := cli.ContainerCreate(ctx, &container.Config{
		User: "65534:65534", Env: launch.Env(), Entrypoint: argv, WorkingDir: launch.WorkspaceDir, Image: testImage(t, lang),
		AttachStdin: true, AttachStdout: true, AttachStderr: true, OpenStdin: true, StdinOnce: true,
	}, &container.HostConfig{
		NetworkMode: "none", Runtime: string(r.rt), ReadonlyRootfs: true, AutoRemove: false,
		Tmpfs:   map[string]string{launch.WorkspaceDir: tmpfs + ",mode=0700,uid=65534,gid=65534", launch.TmpDir: tmpfs + ",mode=1777"},
		CapDrop: []string{"ALL"}, SecurityOpt: security,
		LogConfig: container.LogConfig{Type: "none"},
		Resources: container.Resources{Memory: 512 << 20, MemorySwap: 512 << 20, PidsLimit: &pids},
	}, nil, nil, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer func() {
		_ = cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
	}()
	attach, err := cli.ContainerAttach(ctx, created.ID, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	defer attach.Close()
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	stdin := attach.Conn
	stdoutR, stdoutW := io.Pipe()
	stderrR, stderrW := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(stdoutW, stderrW, attach.Reader)
		stdoutW.CloseWithError(err)
		stderrW.CloseWithError(err)
	}()
	var out, errOut bytes.Buffer
	marks := launch.NewEndMarks(in.Tag)
	me := marks.Stream(&errOut, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // drained from the start: a write to stderr must not hold up stdout
		defer wg.Done()
		_, _ = io.Copy(me, stderrR)
		me.Flush()
	}()
	if r.warm {
		mark := make([]byte, len(launch.ReadyMark))
		if _, err := io.ReadFull(stdoutR, mark); err != nil || string(mark) != launch.ReadyMark {
			t.Fatalf("ready mark: %q, %v", mark, err)
		}
	}
	var caller runner.ToolCaller = r.caller
	if r.callerOf != nil {
		caller = r.callerOf
	}
	bridge := launch.NewBridge(ctx, caller, r.limits, stdin)
	demux := launch.NewCallDemux(in.Tag, bridge.LineMax(), &out, bridge.Call)
	mo := marks.Stream(demux, nil)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(mo, stdoutR)
		mo.Flush()
		demux.Flush()
	}()
	if _, err := in.Write(stdin, spec); err != nil {
		t.Errorf("write the input: %v", err)
	}
	if r.noTools {
		_ = attach.CloseWrite()
	}
	select {
	case <-marks.Ended():
	case <-ctx.Done():
		t.Errorf("no end marks: %v stderr %q stdout %q", ctx.Err(), errOut.String(), out.String())
	}
	bridge.Close()
	attach.Close()
	wg.Wait()
	code, ok := marks.ExitCode()
	return bridgeResult{stdout: out.String(), stderr: errOut.String(), code: code, codeOK: ok, calls: bridge.Calls(), frameBytes: demux.FrameBytes}
}

func runtimes(t *testing.T, f func(t *testing.T, rt runner.Runtime)) {
	skipWithoutEngine(t)
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) { f(t, rt) })
	}
}

func wantExit0(t *testing.T, res bridgeResult) {
	t.Helper()
	if !res.codeOK || res.code != 0 {
		t.Fatalf("exit %d (marks agree: %v)\nstdout: %s\nstderr: %s", res.code, res.codeOK, clip(res.stdout), clip(res.stderr))
	}
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:2000] + "\n…\n" + s[len(s)-2000:]
	}
	return s
}

// probeTools are wrapper files: a Python package and a Node module.
var probeTools = map[string][]byte{
	"python/gk_probe/__init__.py": []byte("VALUE = 'probe'\n"),
	"node/gk_probe/index.js":      []byte("module.exports = { VALUE: 'probe' };\n"),
}

// TestBridgeCallsAndBounds: a program calls through the bridge and gets
// its answers; every bound is enforced with a limit naming it, the run
// going on; fake frames it prints are output, not calls; the wrappers are
// importable and read-only; init stays out of the program's reach.
func TestBridgeCallsAndBounds(t *testing.T) {
	runtimes(t, func(t *testing.T, rt runner.Runtime) {
		c := newTestCaller()
		res := bridgeRun{rt: rt, lang: runner.Python, caller: c, tools: probeTools,
			limits: runner.CallLimits{MaxCalls: 8, MaxInFlight: 2, MaxArgumentBytes: 1000, MaxResultBytes: 2000, Timeout: 3 * time.Second},
			code: `import ctypes, errno, json, os, stat, sys
from gk import *
import gk_probe
tools = os.environ["GATEKEEPER_TOOLS"]
print("env", tools, os.environ["PYTHONPATH"], os.environ["NODE_PATH"])
print("probe", gk_probe.VALUE, oct(stat.S_IMODE(os.stat(gk_probe.__file__).st_mode)), oct(stat.S_IMODE(os.stat(os.path.dirname(gk_probe.__file__)).st_mode)))
s, f = connect()
out = {}
out["echo"] = call(s, f, 1, "echo", {"x": [1, "two"]})                   # seq 1
out["bigargs"] = call(s, f, 2, "echo", {"pad": "a" * 2000})              # seq 2: past max_argument_bytes, seen by the runner
s.sendall(b'{"id": 3, "server": "srv", "tool": "echo", "arguments": {"pad": "' + b"a" * 10000 + b'"}}\n')
out["longline"] = recv(f)                                                # seq 3: refused by init, unread
send(s, 4, "slow", {})                                                   # seq 4
send(s, 5, "slow", {})                                                   # seq 5
a, b = recv(f), recv(f)
out["slow"] = sorted([a, b], key=lambda r: r["id"])
out["inflight"] = call(s, f, 6, "echo", {})                              # seq 6: a slot again
out["bigresult"] = call(s, f, 7, "big", {"n": 5000})                     # seq 7
s.sendall(b"not json\n")
out["bad"] = recv(f)                                                     # seq 8
out["maxcalls"] = call(s, f, 9, "echo", {})                              # seq 9
# A fake frame, with a guessed tag and with the lead alone.
sys.stdout.write("\x1egatekeeper-call 0123456789abcdef 1 e 2\n{}\n|\x1egatekeeper-call |\n")
sys.stdout.flush()
def denied(f):
    try:
        f()
        return "allowed"
    except OSError as e:
        return errno.errorcode[e.errno]
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, 1, 0, 0)
out["ptrace"] = "allowed" if r == 0 else errno.errorcode[ctypes.get_errno()]
out["mem"] = denied(lambda: open("/proc/1/mem", "rb").read(1))
out["fd"] = denied(lambda: open("/proc/1/fd/0", "rb").close())
out["write_wrapper"] = denied(lambda: open(gk_probe.__file__, "a"))
print("RESULT " + json.dumps(out))
`}.run(t)
		wantExit0(t, res)
		got := resultLine(t, res)
		wantAnswer(t, got, "echo", 1, true, "", "")
		if sc := got["echo"].Result["structuredContent"]; strings.ReplaceAll(string(sc), " ", "") != `{"x":[1,"two"]}` {
			t.Errorf("echo's structuredContent = %s", sc)
		}
		wantAnswer(t, got, "bigargs", 2, false, runner.ToolLimit, runner.RuleMaxArgumentBytes)
		wantAnswer(t, got, "longline", 3, false, runner.ToolLimit, runner.RuleMaxArgumentBytes)
		wantAnswer(t, got, "inflight", 6, true, "", "")
		wantAnswer(t, got, "bigresult", 7, false, runner.ToolLimit, runner.RuleMaxResultBytes)
		wantAnswer(t, got, "bad", 0, false, runner.ToolBadRequest, runner.RuleBadRequest)
		wantAnswer(t, got, "maxcalls", 9, false, runner.ToolLimit, runner.RuleMaxCalls)
		var slow []answer
		if err := json.Unmarshal(got["slow"].raw, &slow); err != nil || len(slow) != 2 {
			t.Fatalf("slow answers %s: %v", got["slow"].raw, err)
		}
		for i, a := range slow {
			if a.ID != int64(4+i) || a.OK || a.Error.Kind != runner.ToolTimeout || a.Error.Rule != runner.RuleTimeout {
				t.Errorf("slow call %d answered %+v; want a timeout naming %s", 4+i, a, runner.RuleTimeout)
			}
		}
		for _, k := range []string{"ptrace", "mem", "fd"} {
			if v := string(got[k].raw); v != `"EPERM"` && v != `"EACCES"` {
				t.Errorf("%s on init: %s; want EPERM or EACCES", k, v)
			}
		}
		if v := string(got["write_wrapper"].raw); v != `"EACCES"` && v != `"EROFS"` {
			t.Errorf("writing a wrapper: %s; want EACCES", v)
		}
		wantIn(t, res.stdout, "env /tmp/.gatekeeper /tmp/.gatekeeper/python /tmp/.gatekeeper/node\n")
		wantIn(t, res.stdout, "probe probe 0o444 0o555\n")
		wantIn(t, res.stdout, "\x1egatekeeper-call 0123456789abcdef 1 e 2\n{}\n|\x1egatekeeper-call |\n")
		var seqs []int
		for _, call := range c.seen() {
			seqs = append(seqs, call.Seq)
			if call.Server != "srv" {
				t.Errorf("call %+v: server %q", call, call.Server)
			}
		}
		if fmt.Sprint(seqs) != "[1 4 5 6 7]" && fmt.Sprint(seqs) != "[1 5 4 6 7]" {
			t.Errorf("the caller saw calls of seq %v; want 1, 4, 5, 6, 7 (the others refused before it)", seqs)
		}
		if res.calls != 9 {
			t.Errorf("Bridge.Calls = %d; want 9", res.calls)
		}
	})
}

type answer struct {
	ID     int64                      `json:"id"`
	OK     bool                       `json:"ok"`
	Result map[string]json.RawMessage `json:"result"`
	Error  struct{ Kind, Rule, Message string }
	raw    json.RawMessage
}

func resultLine(t *testing.T, res bridgeResult) map[string]*answer {
	t.Helper()
	i := strings.Index(res.stdout, "RESULT ")
	if i < 0 {
		t.Fatalf("no RESULT line\nstdout: %s\nstderr: %s", clip(res.stdout), clip(res.stderr))
	}
	line, _, _ := strings.Cut(res.stdout[i+len("RESULT "):], "\n")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		t.Fatalf("RESULT %s: %v", line, err)
	}
	out := map[string]*answer{}
	for k, v := range raw {
		a := &answer{raw: v}
		_ = json.Unmarshal(v, a)
		out[k] = a
	}
	return out
}

func wantAnswer(t *testing.T, got map[string]*answer, key string, id int64, ok bool, kind, rule string) {
	t.Helper()
	a := got[key]
	if a == nil {
		t.Errorf("%s: no answer", key)
		return
	}
	if a.ID != id || a.OK != ok || a.Error.Kind != kind || a.Error.Rule != rule {
		t.Errorf("%s answered %s; want id %d ok %v kind %q rule %q", key, a.raw, id, ok, kind, rule)
	}
	if !ok && a.Error.Message == "" {
		t.Errorf("%s: an error without a message", key)
	}
}

func wantIn(t *testing.T, s, want string) {
	t.Helper()
	if !strings.Contains(s, want) {
		t.Errorf("output lacks %q\nstdout: %s", want, clip(s))
	}
}

// TestBridgeFlood: a child process floods standard output (writes of many
// sizes, most larger than PIPE_BUF) while the program makes calls whose
// lines take several frames: no output byte and no call is lost or
// corrupted. The workspace tar is large, so init's relay of it is tested
// too.
func TestBridgeFlood(t *testing.T) {
	runtimes(t, func(t *testing.T, rt runner.Runtime) {
		c := newTestCaller()
		res := bridgeRun{rt: rt, lang: runner.Python, caller: c, limits: defaultLimits(),
			files: map[string]string{"big.bin": strings.Repeat("0123456789abcdef", 256<<10)},
			code: `import json, subprocess, sys
from gk import *
assert len(open("big.bin").read()) == 4 << 20
flood = subprocess.Popen([sys.executable, "-c", """
import os
for i in range(3000):
    os.write(1, (b"%06d:" % i) + b"x" * (i % 9000) + b"\\n")
"""])
s, f = connect()
bad = 0
for i in range(150):
    pad = "p%d-" % i * (1 + i * 40)
    r = call(s, f, i, "echo", {"i": i, "pad": pad})
    if not r["ok"] or r["result"]["structuredContent"] != {"i": i, "pad": pad}:
        bad += 1
flood.wait()
print("\nCALLS bad=%d" % bad)
`}.run(t)
		wantExit0(t, res)
		var want strings.Builder
		for i := range 3000 {
			fmt.Fprintf(&want, "%06d:%s\n", i, strings.Repeat("x", i%9000))
		}
		got, _, _ := strings.Cut(res.stdout, "\nCALLS ")
		if got != want.String() {
			t.Errorf("the flood's output differs: got %d bytes, want %d", len(got), want.Len())
		}
		wantIn(t, res.stdout, "\nCALLS bad=0\n")
		if n := len(c.seen()); n != 150 || res.calls != 150 {
			t.Errorf("the caller saw %d calls, the bridge counted %d; want 150", n, res.calls)
		}
	})
}

// TestBridgeHugeArgument: a request of 100 MB is refused inside the
// sandbox as a limit, without the runner receiving more than one line's
// bound of it; the bridge goes on serving.
func TestBridgeHugeArgument(t *testing.T) {
	runtimes(t, func(t *testing.T, rt runner.Runtime) {
		c := newTestCaller()
		limits := defaultLimits()
		res := bridgeRun{rt: rt, lang: runner.Python, caller: c, limits: limits,
			code: `import json
from gk import *
s, f = connect()
s.sendall(b'{"id": 7, "server": "srv", "tool": "echo", "arguments": {"data": "')
chunk = b"x" * (1 << 20)
for _ in range(100):
    s.sendall(chunk)
s.sendall(b'"}}\n')
huge = recv(f)
after = call(s, f, 8, "echo", {"after": True})
print("RESULT " + json.dumps({"huge": huge, "after": after}))
`}.run(t)
		wantExit0(t, res)
		got := resultLine(t, res)
		wantAnswer(t, got, "huge", 7, false, runner.ToolLimit, runner.RuleMaxArgumentBytes)
		wantAnswer(t, got, "after", 8, true, "", "")
		if max := limits.MaxArgumentBytes + 8192; res.frameBytes > max {
			t.Errorf("the runner received %d bytes of frames; want at most %d (one line's bound)", res.frameBytes, max)
		}
		if n := len(c.seen()); n != 1 {
			t.Errorf("the caller saw %d calls; want 1 (the one after)", n)
		}
	})
}

// TestBridgeChildOutlivesTheProgram: a child that outlives the program and
// calls gets no answer: the call, if init forwarded it before the launcher
// reported the program's end, is cancelled when the bridge closes, and
// init has killed the child before it writes the end marks.
func TestBridgeChildOutlivesTheProgram(t *testing.T) {
	runtimes(t, func(t *testing.T, rt runner.Runtime) {
		c := newTestCaller()
		res := bridgeRun{rt: rt, lang: runner.Python, caller: c, limits: defaultLimits(),
			code: `import os, sys
from gk import *
s, f = connect()
r, w = os.pipe()
if os.fork() == 0:
    os.close(w)
    os.setsid()
    os.read(r, 1)  # the program has exited
    for _ in range(200):
        try:
            send(s, 99, "hold", {})
            print("CHILD ANSWERED", recv(f), flush=True)
        except Exception:
            pass
        try:
            s2, f2 = connect()
            send(s2, 98, "hold", {})
            print("CHILD ANSWERED", recv(f2), flush=True)
        except Exception:
            pass
    print("CHILD LIVES", flush=True)
    os._exit(0)
print("parent done", flush=True)
`}.run(t)
		wantExit0(t, res)
		if strings.Contains(res.stdout, "CHILD") {
			t.Errorf("the child got an answer or lived on: %s", clip(res.stdout))
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, err := range c.ended {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a held call of the child ended with %v; want it cancelled", err)
			}
		}
		t.Logf("calls forwarded from the child before the end: %d", len(c.calls))
	})
}

// TestBridgeWarmInterpreters: an interpreter started ahead, before the
// wrappers' directory existed, imports them (Python) or requires them
// (Node) and calls through the bridge, as a cold start does.
func TestBridgeWarmInterpreters(t *testing.T) {
	runtimes(t, func(t *testing.T, rt runner.Runtime) {
		for _, tc := range []struct {
			lang runner.Language
			code string
		}{
			{runner.Python, `import json, os
from gk import *
import gk_probe
s, f = connect()
print("RESULT " + json.dumps({"probe": gk_probe.VALUE, "call": call(s, f, 1, "echo", {"w": 1}), "path": os.environ["PYTHONPATH"]}))
`},
			{runner.Node, `const net = require('net');
const probe = require('gk_probe');
const s = net.connect(process.env.GATEKEEPER_TOOLS + '/bridge.sock');
let buf = '';
s.on('data', (d) => {
  buf += d;
  if (buf.includes('\n')) {
    console.log('RESULT ' + JSON.stringify({ probe: probe.VALUE, call: JSON.parse(buf), path: process.env.NODE_PATH }));
    s.end();
  }
});
s.write(JSON.stringify({ id: 1, server: 'srv', tool: 'echo', arguments: { w: 1 } }) + '\n');
`},
		} {
			t.Run(string(tc.lang), func(t *testing.T) {
				res := bridgeRun{rt: rt, lang: tc.lang, caller: newTestCaller(), tools: probeTools, limits: defaultLimits(), warm: true, code: tc.code}.run(t)
				wantExit0(t, res)
				got := resultLine(t, res)
				wantAnswer(t, got, "call", 1, true, "", "")
				if string(got["probe"].raw) != `"probe"` {
					t.Errorf("the wrapper's value: %s", got["probe"].raw)
				}
				if p := string(got["path"].raw); p != `"/tmp/.gatekeeper/python"` && p != `"/tmp/.gatekeeper/node"` {
					t.Errorf("the program's path variable: %s", p)
				}
			})
		}
	})
}
