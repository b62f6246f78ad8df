package runnertest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// SessionRunner is what Sessions needs of a backend: runs, sessions'
// ends, and a count of what it left.
type SessionRunner interface {
	Runner
	runner.SessionEnder
	Leftovers
}

var sessionCounter atomic.Int64

// session is one test session: its ID, workspace and the events the
// backend reported.
type session struct {
	t  *testing.T
	r  SessionRunner
	s  runner.Session
	ws runner.Workspace

	mu     sync.Mutex
	events []runner.SessionEvent
}

func newSession(t *testing.T, r SessionRunner, store *workspace.Store) *session {
	t.Helper()
	id := fmt.Sprintf("session-%d-%d", os.Getpid(), sessionCounter.Add(1))
	ws, err := store.Workspace(id)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{t: t, r: r, ws: ws}
	s.s = runner.Session{ID: id, IdleTimeout: time.Minute, MaxLifetime: 10 * time.Minute, Revision: "rev-1",
		Events: func(e runner.SessionEvent) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.events = append(s.events, e)
		}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.EndSession(ctx, id); err != nil {
			t.Errorf("EndSession: %v", err)
		}
	})
	return s
}

// run runs code (Python unless edit says otherwise) in the session.
func (s *session) run(code string, edit func(*runner.Spec)) runner.Result {
	s.t.Helper()
	spec := Spec(code)
	spec.Workspace = s.ws
	spec.QueryID = s.s.ID
	sess := s.s
	spec.Session = &sess
	if edit != nil {
		edit(&spec)
	}
	res, err := s.r.Run(s.t.Context(), spec)
	if err != nil {
		s.t.Fatalf("Run: %v", err)
	}
	return res
}

// kinds lists the events' kinds and end reasons.
func (s *session) kinds() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		k := string(e.Kind)
		if e.End != "" {
			k += ":" + string(e.End)
		}
		out = append(out, k)
	}
	return strings.Join(out, " ")
}

func wantRun(t *testing.T, res runner.Result, run int, stdout string) {
	t.Helper()
	if res.Reason != runner.Exited || res.ExitCode != 0 {
		t.Fatalf("run %d: reason %s, exit %d, want exited 0 (stdout %q, stderr %q)", run, res.Reason, res.ExitCode, clip(res.Stdout), clip(res.Stderr))
	}
	if res.Session == nil || res.Session.Run != run {
		t.Errorf("run %d: session %+v, want run %d", run, res.Session, run)
	}
	if res.Stdout != stdout {
		t.Errorf("run %d: stdout %q, want %q (stderr %q)", run, res.Stdout, stdout, clip(res.Stderr))
	}
}

// Sessions is the suite of runner.Session against a backend: the sandbox
// is kept between a session's runs and never shared with another session,
// it ends when it should and reports why, and nothing is left after.
//
// nodeImage is an image with Node for the Node case; "" leaves the case
// out (the Kubernetes suite's cluster holds the default image only; the
// Node kernel is the same program on every backend).
func Sessions(t *testing.T, newRunner func(t *testing.T) SessionRunner, nodeImage string) {
	r := newRunner(t)
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if n, err := r.Leftovers(ctx); err != nil || n != 0 {
			t.Errorf("leftovers after the session suite: %d, %v; want 0", n, err)
		}
	})
	store, err := workspace.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a session's runs share one sandbox: /tmp and /dev/shm written in one run are read in the next", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		wantRun(t, s.run(`open("/tmp/kept", "w").write("tmp"); open("/dev/shm/kept", "w").write("shm"); print("one")`, nil), 1, "one\n")
		wantRun(t, s.run(`print(open("/tmp/kept").read() + open("/dev/shm/kept").read())`, nil), 2, "tmpshm\n")
		if k := s.kinds(); k != "session_start" {
			t.Errorf("events %q, want one session_start", k)
		}
	})

	t.Run("two sessions never see each other's /tmp, /dev/shm, processes or sockets", func(t *testing.T) {
		t.Parallel()
		a, b := newSession(t, r, store), newSession(t, r, store)
		wantRun(t, a.run(`import subprocess, sys
open("/tmp/a-secret", "w").write("a")
open("/dev/shm/a-secret", "w").write("a")
subprocess.Popen(["sleep", "300"], start_new_session=True)
listen = """
import socket, time
t = socket.socket(); t.bind(("127.0.0.1", 8766)); t.listen()
u = socket.socket(socket.AF_UNIX); u.bind("\\0a-secret"); u.listen()
time.sleep(300)
"""
subprocess.Popen([sys.executable, "-c", listen], start_new_session=True)
import socket, time
for _ in range(50):
    try:
        socket.create_connection(("127.0.0.1", 8766), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)
print("a")`, nil), 1, "a\n")
		wantRun(t, b.run(`import errno, os, socket
print(os.path.exists("/tmp/a-secret"), os.path.exists("/dev/shm/a-secret"))
print(any(open(f"/proc/{p}/cmdline", "rb").read().startswith(b"sleep") for p in os.listdir("/proc") if p.isdigit()))
for fam, addr in ((socket.AF_INET, ("127.0.0.1", 8766)), (socket.AF_UNIX, "\0a-secret")):
    try:
        socket.socket(fam).connect(addr)
        print("reached", addr)
    except OSError as e:
        print(errno.errorcode[e.errno])`, nil), 1, "False False\nFalse\nECONNREFUSED\nECONNREFUSED\n")
		wantRun(t, a.run(`import socket
socket.create_connection(("127.0.0.1", 8766), timeout=2).close()
print("a still listens")`, nil), 2, "a still listens\n")
	})

	t.Run("EndSession removes the sandbox with a process still running in it, and reports the end", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		wantRun(t, s.run(`import subprocess
subprocess.Popen(["sleep", "300"], start_new_session=True)
print("started")`, nil), 1, "started\n")
		if err := r.EndSession(t.Context(), s.s.ID); err != nil {
			t.Fatal(err)
		}
		if k := s.kinds(); k != "session_start session_end:closed" {
			t.Errorf("events %q, want a start and an end for closed", k)
		}
		res := s.run(`import os; print(os.path.exists("/tmp/x"))`, nil)
		if res.Session == nil || res.Session.Run != 1 || res.StateLost != nil {
			t.Errorf("after EndSession: session %+v, state lost %+v; want a new session's run 1, nothing reported lost", res.Session, res.StateLost)
		}
	})

	t.Run("a policy change ends the session: the next run starts afresh and says why", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		wantRun(t, s.run(`open("/tmp/kept", "w").write("x"); print("one")`, nil), 1, "one\n")
		res := s.run(`import os; print(os.path.exists("/tmp/kept"))`, func(spec *runner.Spec) { spec.Sandbox.PIDs++ })
		wantRun(t, res, 1, "False\n")
		if res.StateLost == nil || res.StateLost.Reason != runner.EndPolicyChanged || !res.StateLost.Fresh {
			t.Errorf("state lost %+v, want policy_changed, fresh", res.StateLost)
		}
	})

	t.Run("an idle session expires: the next run starts afresh and says expired", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		s.s.IdleTimeout = 2 * time.Second
		wantRun(t, s.run(`open("/tmp/kept", "w").write("x"); print("one")`, nil), 1, "one\n")
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(s.kinds(), "session_end:expired") && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		res := s.run(`import os; print(os.path.exists("/tmp/kept"))`, nil)
		wantRun(t, res, 1, "False\n")
		if res.StateLost == nil || res.StateLost.Reason != runner.EndExpired || !res.StateLost.Fresh {
			t.Errorf("state lost %+v, want expired, fresh (events %q)", res.StateLost, s.kinds())
		}
	})

	t.Run("a session ends at its max lifetime: the next run starts afresh and says max_lifetime", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		s.s.MaxLifetime = 3 * time.Second
		wantRun(t, s.run(`open("/tmp/kept", "w").write("x"); print("one")`, nil), 1, "one\n")
		time.Sleep(3 * time.Second)
		res := s.run(`import os; print(os.path.exists("/tmp/kept"))`, func(spec *runner.Spec) { spec.Timeout = time.Second })
		wantRun(t, res, 1, "False\n")
		if res.StateLost == nil || res.StateLost.Reason != runner.EndMaxLifetime || !res.StateLost.Fresh {
			t.Errorf("state lost %+v, want max_lifetime, fresh (events %q)", res.StateLost, s.kinds())
		}
	})

	t.Run("each run of a session has its own bridge, and a background process finds none between runs", func(t *testing.T) {
		t.Parallel()
		testSessionBridge(t, newSession(t, r, store))
	})

	t.Run("Python keeps its variables, imports and open files, and shows a last bare expression", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		wantRun(t, s.run(`import json
x = 41
f = open("/tmp/f.txt", "w+")
n = f.write("hi")`, nil), 1, "")
		wantRun(t, s.run(`x += 1
f.seek(0)
print(x, json.dumps(f.read()))`, nil), 2, "42 \"hi\"\n")
		wantRun(t, s.run(`{"x": x}`, nil), 3, "{'x': 42}\n")
	})

	if nodeImage != "" {
		t.Run("Node keeps its top-level bindings", func(t *testing.T) {
			t.Parallel()
			s := newSession(t, r, store)
			node := func(spec *runner.Spec) { spec.Language, spec.Sandbox.Image = runner.Node, nodeImage }
			wantRun(t, s.run(`let a = 1; const b = {n: 2}; function f() { return a + b.n }; var c = "c";`, node), 1, "")
			wantRun(t, s.run(`a += 10; console.log(f(), a, b.n, c)`, node), 2, "13 11 2 c\n")
		})
	}

	t.Run("the shell keeps its working directory, environment and a background HTTP server", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		sh := func(spec *runner.Spec) { spec.Language = runner.Shell }
		wantRun(t, s.run(`mkdir -p /tmp/site && cd /tmp/site && echo served > index.html
export GREETING=hello
python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &
echo started`, sh), 1, "started\n")
		wantRun(t, s.run(`pwd
echo "$GREETING"
python3 - <<'PY'
import time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8765/index.html").read().decode(), end="")
        break
    except OSError:
        time.sleep(0.1)
PY`, sh), 2, "/tmp/site\nhello\nserved\n")
	})

	t.Run("a timeout that interrupts the program keeps the session", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		wantRun(t, s.run(`x = 5`, nil), 1, "")
		res := s.run("while True:\n    pass", func(spec *runner.Spec) { spec.Timeout = 2 * time.Second })
		if res.Reason != runner.TimedOut || res.ExitCode != 130 || res.StateLost != nil || !strings.Contains(res.Stderr, "KeyboardInterrupt") {
			t.Errorf("interrupted run: %s %d, state lost %+v, stderr %q; want timed_out 130 with KeyboardInterrupt, session kept", res.Reason, res.ExitCode, res.StateLost, clip(res.Stderr))
		}
		wantRun(t, s.run(`print(x)`, nil), 3, "5\n")
	})

	t.Run("a timeout the program ignores ends the session, and the run says state lost", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		wantRun(t, s.run("x = 5\nimport signal\n_ = signal.signal(signal.SIGINT, signal.SIG_IGN)", nil), 1, "")
		res := s.run("while True:\n    pass", func(spec *runner.Spec) { spec.Timeout = 2 * time.Second })
		if res.Reason != runner.TimedOut || res.StateLost == nil || res.StateLost.Reason != runner.EndTimedOut || res.StateLost.Fresh {
			t.Errorf("run that ignored SIGINT: %s, state lost %+v; want timed_out, state lost timed_out in this run", res.Reason, res.StateLost)
		}
		res = s.run(`print("x" in globals())`, nil)
		wantRun(t, res, 1, "False\n")
		if res.StateLost != nil {
			t.Errorf("the run after the loss reports it again: %+v", res.StateLost)
		}
		if k := s.kinds(); k != "session_start session_end:timed_out session_start" {
			t.Errorf("events %q, want a start, an end for timed_out, a start", k)
		}
	})

	t.Run("a memory bomb loses the session with state lost oom_killed", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		wantRun(t, s.run(`x = 5`, nil), 1, "")
		res := s.run(`b = []
while True:
    b.append(bytearray(16 << 20))`, nil)
		if res.Reason != runner.OOMKilled || res.StateLost == nil || res.StateLost.Reason != runner.EndOOMKilled || res.StateLost.Fresh {
			t.Errorf("memory bomb: %s %d, state lost %+v; want oom_killed, state lost oom_killed in this run", res.Reason, res.ExitCode, res.StateLost)
		}
		wantRun(t, s.run(`print("x" in globals())`, nil), 1, "False\n")
	})

	t.Run("the saved workspace carries over into a new session, and files changed in a run come back", func(t *testing.T) {
		t.Parallel()
		s := newSession(t, r, store)
		wantRun(t, s.run(`open("data.txt", "w").write("kept"); print("one")`, func(spec *runner.Spec) { spec.Sandbox.MaxFiles = 10 }), 1, "one\n")
		res := s.run(`open("more.txt", "w").write("new"); print(open("data.txt").read())`, func(spec *runner.Spec) { spec.Sandbox.MaxFiles = 10 })
		wantRun(t, res, 2, "kept\n")
		var names []string
		for _, f := range res.Files {
			names = append(names, f.Path+":"+string(f.Change))
		}
		if got := strings.Join(names, " "); got != "more.txt:created" {
			t.Errorf("files of run 2 %q, want only more.txt created", got)
		}
		if err := r.EndSession(t.Context(), s.s.ID); err != nil {
			t.Fatal(err)
		}
		wantRun(t, s.run(`print(open("data.txt").read(), open("more.txt").read())`, nil), 1, "kept new\n")
	})
}

// sessionRuns is how many runs a session has served before the lockdown
// checks run in it again (SessionLockdown).
const sessionRuns = 10

// SessionLockdown runs the conformance suite's outcome cases (the
// lockdown checks among them) inside sessions: each case at its session's
// first run, and again after sessionRuns runs of the same session that
// tried to loosen it (a background process, files in /tmp, a changed
// environment), so that what a session keeps never weakens what a run is
// held to.
func SessionLockdown(t *testing.T, newRunner func(t *testing.T) SessionRunner, o Options) {
	secret()
	r := newRunner(t)
	store, err := workspace.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	deps := depsDir(t)
	for _, tc := range outcomeCases(deps, o) {
		if tc.skip || tc.session == sessionSkip {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, r, store)
			one := func(what string) (lost bool) {
				spec := Spec(tc.code)
				if tc.edit != nil {
					tc.edit(&spec)
				}
				sess := s.s
				spec.Session, spec.QueryID = &sess, s.s.ID
				if spec.Workspace == nil {
					spec.Workspace = s.ws
				}
				res, err := s.r.Run(t.Context(), spec)
				if err != nil {
					t.Fatalf("%s: Run: %v", what, err)
				}
				t.Run(what, func(t *testing.T) { tc.check(t, res) })
				// A case that ends its session (a timeout, the OOM killer)
				// says so; the next run would start afresh.
				return res.StateLost != nil && !res.StateLost.Fresh
			}
			if one("at the session's first run") || t.Failed() || tc.session == sessionFirstOnly {
				return
			}
			for i := 2; i <= sessionRuns; i++ {
				// The fillers run under the case's sandbox (a change would
				// end the session), leave a process, files and a variable
				// behind, and the last empties /workspace and drops the
				// variable, as the case expects them.
				res := s.run(fmt.Sprintf(`import os, shutil, subprocess
os.environ["LD_PRELOAD"] = "/tmp/x.so"
open("/tmp/run-%d", "w").write("x")
if %d == 2:
    subprocess.Popen(["sleep", "600"], start_new_session=True)
if %d == %d:
    del os.environ["LD_PRELOAD"]
    for e in os.scandir("/workspace"):
        shutil.rmtree(e.path) if e.is_dir(follow_symlinks=False) else os.unlink(e.path)
print("run", %d)`, i, i, i, sessionRuns, i), func(spec *runner.Spec) {
					if tc.edit != nil {
						code := spec.Code
						tc.edit(spec)
						spec.Language, spec.Code, spec.Files, spec.Outputs = runner.Python, code, nil, nil
					}
				})
				if res.Reason != runner.Exited || res.StateLost != nil {
					t.Fatalf("filler run %d: %s, state lost %+v (stderr %q)", i, res.Reason, res.StateLost, clip(res.Stderr))
				}
			}
			_ = one(fmt.Sprintf("after %d runs of the same session", sessionRuns))
		})
	}
}

// bgCaller is a background process a run leaves behind: every 100 ms it
// tries to call srv.echo through the bridge and appends what happened to
// /tmp/bg.log (a connection error's errno name, or the answer's text).
const bgCaller = `import os, socket, subprocess, sys
prog = r"""
import errno, os, socket, time
tools = os.environ["GATEKEEPER_TOOLS"]
for i in range(600):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(tools + "/bridge.sock")
        s.sendall(b'{"id": 1, "server": "srv", "tool": "echo", "arguments": {"text": "bg"}}\n')
        got = s.makefile("rb").readline().decode().strip() or "EOF"
    except OSError as e:
        got = errno.errorcode.get(e.errno, str(e))
    with open("/tmp/bg.log", "a") as f:
        f.write("%.1f %s\n" % (time.time(), got))
    time.sleep(0.1)
"""
subprocess.Popen([sys.executable, "-c", prog], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ["GATEKEEPER_TOOLS"] + "/bridge.sock")
s.sendall(b'{"id": 1, "server": "srv", "tool": "echo", "arguments": {"text": "one"}}\n')
print("ANSWER" if b"one #1" in s.makefile("rb").readline() else "NO ANSWER")
`

// testSessionBridge: run 1 (with tools) calls once and leaves a process
// that keeps calling; between runs its calls find no bridge and reach no
// caller; run 2 (with tools, another caller) gets only its own calls and
// those the process made while it ran.
func testSessionBridge(t *testing.T, s *session) {
	files, err := toolwrap.Generate([]runner.ServerTools{bridgeServer})
	if err != nil {
		t.Fatal(err)
	}
	withTools := func(c *echoCaller) func(*runner.Spec) {
		return func(spec *runner.Spec) {
			spec.Caller, spec.ToolFiles = c, files
			spec.Sandbox.Calls = runner.CallLimits{MaxCalls: 1000, MaxInFlight: 4, MaxArgumentBytes: 1 << 10, MaxResultBytes: 4 << 10, Timeout: 20 * time.Second}
		}
	}
	first, second := &echoCaller{}, &echoCaller{}
	wantRun(t, s.run(bgCaller, withTools(first)), 1, "ANSWER\n")
	ended := time.Now()
	n1 := len(first.got())
	time.Sleep(2 * time.Second)
	if n := len(first.got()); n != n1 {
		t.Errorf("the first run's caller got %d calls after its run ended, want none", n-n1)
	}
	res := s.run(`import time
time.sleep(1)
print(open("/tmp/bg.log").read())`, withTools(second))
	if res.Reason != runner.Exited || res.ExitCode != 0 {
		t.Fatalf("run 2: %s %d (stderr %q)", res.Reason, res.ExitCode, clip(res.Stderr))
	}
	// Lines logged between the runs (a margin on both sides) found no
	// bridge: no socket, or one nobody listens on.
	var between, answered int
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		var at float64
		var what string
		if _, err := fmt.Sscanf(line, "%f %s", &at, &what); err != nil {
			t.Fatalf("bg.log line %q: %v", line, err)
		}
		when := time.Unix(0, int64(at*1e9))
		if when.After(ended.Add(300*time.Millisecond)) && when.Before(ended.Add(1700*time.Millisecond)) {
			between++
			if what != "ENOENT" && what != "ECONNREFUSED" {
				t.Errorf("a call between runs got %q, want no bridge (ENOENT or ECONNREFUSED)", line)
			}
		}
		if strings.Contains(what, "bg") {
			answered++
		}
	}
	if between < 5 {
		t.Errorf("%d calls logged between the runs, want at least 5 (log %q)", between, clip(res.Stdout))
	}
	for _, c := range second.got() {
		if c.Server != "srv" || c.Tool != "echo" || !strings.Contains(string(c.Arguments), "bg") {
			t.Errorf("the second run's caller got %+v, want only the background process's echoes", c)
		}
	}
	if len(second.got()) == 0 {
		t.Errorf("the background process made no call through the second run's bridge (answered %d)", answered)
	}
}
