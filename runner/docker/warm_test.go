package docker

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// probeCode prints, as JSON, what a Python program can see of how it was
// started: everything a cold start fixes and a preloaded interpreter must
// give it the same. Its first statement reads __main__'s globals before
// it defines any.
const probeCode = `g0 = sorted(globals())
import json, os, resource, signal, sys
st = {"main_globals": g0}
st["argv"] = sys.argv
st["orig_argv"] = sys.orig_argv
st["file"] = __file__
st["name"] = __name__
st["spec"] = repr(__spec__)
st["cwd"] = os.getcwd()
st["env"] = dict(os.environ)
st["path"] = sys.path
st["flags"] = repr(sys.flags)
st["stdin"] = sys.stdin.read()
st["stdin_tty"] = sys.stdin.isatty()
st["stdout_unbuffered"] = sys.stdout.write_through
st["umask"] = os.umask(0o022)
st["ids"] = [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups())]
st["group_is_parent"] = os.getpgrp() == os.getppid()
st["fds"] = sorted(os.listdir("/proc/self/fd"))
st["signals"] = {str(s): repr(signal.getsignal(s)) for s in sorted(signal.valid_signals()) if s not in (signal.SIGKILL, signal.SIGSTOP)}
st["blocked"] = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
st["rlimits"] = {n: resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_")}
st["tmp"] = sorted(os.listdir("/tmp"))
st["proc_signals"] = [l for l in open("/proc/self/status") if l.startswith(("SigBlk", "SigIgn", "SigCgt"))]
st["workspace"] = sorted(os.listdir("."))
st["sitecustomize"] = "sitecustomize" in sys.modules
st["warnings_filters"] = repr(__import__("warnings").filters)
st["excepthook"] = repr(sys.excepthook)
st["modules"] = sorted(sys.modules)
print(json.dumps(st, sort_keys=True))
`

// runIn runs Python code in sb on r, after waiting for r's pool (if any)
// to be full, and fails t unless the run returns a result.
func runIn(t *testing.T, r *Runner, sb runner.Sandbox, code string) runner.Result {
	t.Helper()
	return runInLanguage(t, r, sb, runner.Python, code)
}

// runInLanguage is runIn for a run of lang.
func runInLanguage(t *testing.T, r *Runner, sb runner.Sandbox, lang runner.Language, code string) runner.Result {
	t.Helper()
	spec := runnertest.Spec(code)
	spec.Sandbox, spec.Language = sb, lang
	return runSpec(t, r, spec)
}

// runSpec runs spec on r once r's pool (if any) is full, and fails t
// unless the run returns a result.
func runSpec(t *testing.T, r *Runner, spec runner.Spec) runner.Result {
	t.Helper()
	if err := r.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// nodeProbeCode is probeCode for Node.js.
const nodeProbeCode = `const fs = require("fs");
const st = {
  argv: process.argv, execArgv: process.execArgv, env: process.env, cwd: process.cwd(),
  cache: Object.keys(require.cache), isMain: require.main === module, filename: __filename, paths: module.paths,
  stdin: fs.readFileSync(0, "utf8"), umask: process.umask(),
  listeners: ["SIGINT", "SIGTERM", "SIGUSR1", "SIGPIPE", "exit", "uncaughtException"].map((s) => process.listenerCount(s)),
  fds: fs.readdirSync("/proc/self/fd").length,
  tmp: fs.readdirSync("/tmp").sort(), workspace: fs.readdirSync(".").sort(),
  procSignals: fs.readFileSync("/proc/self/status", "utf8").split("\n").filter((l) => /^Sig(Blk|Ign|Cgt)/.test(l)),
};
console.log(JSON.stringify(st));
`

// probe runs the probe of lang in sb and returns what it printed.
func probe(t *testing.T, r *Runner, sb runner.Sandbox, lang runner.Language) map[string]any {
	t.Helper()
	code := probeCode
	if lang == runner.Node {
		code = nodeProbeCode
	}
	res := runInLanguage(t, r, sb, lang, code)
	if res.Reason != runner.Exited || res.ExitCode != 0 {
		t.Fatalf("probe: %s %d, stdout %q stderr %q", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("probe printed %q: %v", res.Stdout, err)
	}
	return st
}

// warmProfiles are the profiles whose warm containers start an
// interpreter ahead, with the language of the runs probed: python (the
// modules of the tools' wrappers preloaded, toolwrap.PythonImports),
// python-data (those, numpy, pandas and matplotlib) and node (Node.js
// started ahead, its first interpreter).
var warmProfiles = []struct {
	name     string
	lang     runner.Language
	preloads bool
}{{"python", runner.Python, true}, {"python-data", runner.Python, true}, {"node", runner.Node, false}}

// TestWarmInterpreterStartsTheRunAsAColdStart runs the probe in a cold
// container and in warm ones whose interpreter was started ahead (and,
// for python-data, preloaded pandas): the program must see the same argv,
// environment, cwd, __main__, stdin, signal dispositions, mask, limits,
// descriptors and files, and nothing of the hook that held it.
func TestWarmInterpreterStartsTheRunAsAColdStart(t *testing.T) {
	t.Parallel()
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		for _, prof := range warmProfiles {
			t.Run(string(rt)+"/"+prof.name, func(t *testing.T) {
				t.Parallel()
				requireRuntime(t, rt)
				sb := runnertest.Sandbox()
				sb.Runtime, sb.Image = rt, profileImages[prof.name]
				cold := probe(t, newTestRunner(t), sb, prof.lang)

				r := newPooledRunner(t, sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}, Interpreters: true})
				for i := range 2 { // the first container and its replacement
					warm := probe(t, r, sb, prof.lang)
					for _, k := range slices.Sorted(maps.Keys(cold)) {
						if k == "modules" && prof.preloads {
							continue // the preloaded modules are there before the program
						}
						c, _ := json.Marshal(cold[k])
						w, _ := json.Marshal(warm[k])
						if string(c) != string(w) {
							t.Errorf("run %d: %s is %s warm, %s cold", i, k, w, c)
						}
					}
				}
				if got := counterValue(t, r.Metrics().InterpreterHits); got != 2 {
					t.Errorf("%v runs found their interpreter started ahead, want 2: the probe compared nothing", got)
				}
			})
		}
	}
}

// TestWarmInterpreterPreloads checks the preload happened: a warm
// python-data run finds pandas imported before its first line, a cold one
// does not, and pandas works the same in both.
func TestWarmInterpreterPreloads(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	sb := runnertest.Sandbox()
	sb.Image = profileImages["python-data"]
	code := `import sys
print(sorted(m for m in ("numpy", "pandas", "matplotlib", "matplotlib.pyplot") if m in sys.modules))
import pandas as pd
print(pd.DataFrame({"a": [1]}))`
	frame := "   a\n0  1\n"
	cold := runIn(t, newTestRunner(t), sb, code)
	if want := "[]\n" + frame; cold.Stdout != want || cold.ExitCode != 0 {
		t.Errorf("cold: stdout %q stderr %q, want %q", cold.Stdout, cold.Stderr, want)
	}
	r := newPooledRunner(t, sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}, Interpreters: true})
	warm := runIn(t, r, sb, code)
	if want := "['matplotlib', 'matplotlib.pyplot', 'numpy', 'pandas']\n" + frame; warm.Stdout != want || warm.ExitCode != 0 {
		t.Errorf("warm: stdout %q stderr %q, want %q", warm.Stdout, warm.Stderr, want)
	}
	if got := counterValue(t, r.Metrics().InterpreterHits); got != 1 {
		t.Errorf("%v interpreter hits, want 1", got)
	}
}

// TestWarmInterpreterCarriesNothingOver lets one run change everything it
// can of its preloaded interpreter and its container (a preloaded
// module's attributes, builtins, the environment, signal handlers, files
// in /tmp and /workspace, a process left running); the next run of the
// same pool must see none of it, in a container of its own.
func TestWarmInterpreterCarriesNothingOver(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	sb := runnertest.Sandbox()
	sb.Image = profileImages["python-data"]
	r := newPooledRunner(t, sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}, Interpreters: true})
	taint := `import builtins, os, signal, subprocess, sys
import pandas, numpy
pandas.gatekeeper_taint = 1
numpy.random.seed(12345)
builtins.gatekeeper_taint = 1
sys.modules["gatekeeper_taint"] = sys
os.environ["GATEKEEPER_TAINT"] = "1"
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
open("/tmp/gatekeeper_taint", "w").write("x")
open("gatekeeper_taint", "w").write("x")
subprocess.Popen(["sleep", "301"], start_new_session=True)
print(open("/proc/self/cgroup").read().split("/docker/")[1].split()[0][:64])`
	check := `import builtins, os, signal, sys
import pandas
print(open("/proc/self/cgroup").read().split("/docker/")[1].split()[0][:64])
print(hasattr(pandas, "gatekeeper_taint"), hasattr(builtins, "gatekeeper_taint"), "gatekeeper_taint" in sys.modules,
      "GATEKEEPER_TAINT" in os.environ, signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL,
      os.path.exists("/tmp/gatekeeper_taint"), os.path.exists("gatekeeper_taint"),
      any(open(f"/proc/{p}/cmdline").read() == "sleep\\x00301\\x00" for p in os.listdir("/proc") if p.isdigit()))`
	var ids []string
	for i, code := range []string{taint, check} {
		res := runIn(t, r, sb, code)
		if res.ExitCode != 0 {
			t.Fatalf("run %d: exit %d, stderr %q", i, res.ExitCode, res.Stderr)
		}
		id, rest, _ := strings.Cut(res.Stdout, "\n")
		ids = append(ids, id)
		if i == 1 {
			if want := "False False False False True False False False\n"; rest != want {
				t.Errorf("the second run saw %q, want %q", rest, want)
			}
		}
	}
	if ids[0] == ids[1] || len(ids[1]) != 64 {
		t.Errorf("the runs ran in containers %q and %q, want two", ids[0], ids[1])
	}
	if got := counterValue(t, r.Metrics().InterpreterHits); got != 2 {
		t.Errorf("%v interpreter hits, want 2", got)
	}
}

// TestConformanceRuncWarmInterpreters runs the conformance suite in warm
// containers that started Python ahead: every limit and end mark must
// hold as in a cold start, for Python runs (which take the interpreter)
// and for shell runs (whose launcher drops it and starts theirs).
func TestConformanceRuncWarmInterpreters(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	var mu sync.Mutex
	var runners []*Runner
	runnertest.Conformance(t, func(t *testing.T) runnertest.Runner {
		r := newPooledRunner(t, sandbox.PoolConfig{Size: 2, Idle: 5 * time.Minute, All: true, Interpreters: true})
		mu.Lock()
		runners = append(runners, r)
		mu.Unlock()
		return pooledRuntime{r, runner.Runc}
	})
	t.Cleanup(func() {
		var hits float64
		for _, r := range runners {
			hits += counterValue(t, r.Metrics().InterpreterHits)
		}
		t.Logf("pool: %v runs found their interpreter started", hits)
		if hits < 10 {
			t.Errorf("only %v runs found their interpreter started ahead, want most of the suite's", hits)
		}
	})
}

// TestWarmInterpreterSeesTheRunsWorkspaceAsAColdStart gives a
// preloaded interpreter a workspace that changes what an import finds: a
// module shadowing a preloaded one, a configuration file a preloaded
// module read at import. The program must see what a cold start sees.
func TestWarmInterpreterSeesTheRunsWorkspaceAsAColdStart(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	sb := runnertest.Sandbox()
	sb.Image = profileImages["python-data"]
	cases := []struct {
		name  string
		files map[string]string
		code  string
		want  string
	}{
		{"a numpy.py in the workspace shadows numpy", map[string]string{"numpy.py": "VALUE = 'mine'\n"},
			"import numpy\nprint(numpy.VALUE)", "mine\n"},
		{"a numpy package in the workspace shadows numpy", map[string]string{"numpy/__init__.py": "VALUE = 'package'\n"},
			"import numpy\nprint(numpy.VALUE)", "package\n"},
		{"a matplotlibrc in the workspace is read", map[string]string{"matplotlibrc": "figure.dpi: 42\n"},
			"import matplotlib\nprint(matplotlib.rcParams['figure.dpi'])", "42.0\n"},
		{"an untouched workspace keeps the preload", map[string]string{"data.csv": "a\n1\n"},
			"import sys\nprint('pandas' in sys.modules)", "True\n"},
	}
	r := newPooledRunner(t, sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}, Interpreters: true})
	for _, tc := range cases {
		// One pool, one run at a time: each takes the warm container.
		spec := runnertest.Spec(tc.code)
		spec.Sandbox, spec.Files = sb, tc.files
		res := runSpec(t, r, spec)
		if res.Stdout != tc.want || res.ExitCode != 0 {
			t.Errorf("%s: stdout %q stderr %q exit %d, want %q", tc.name, res.Stdout, res.Stderr, res.ExitCode, tc.want)
		}
	}
	if got := counterValue(t, r.Metrics().InterpreterHits); got != float64(len(cases)) {
		t.Errorf("%v interpreter hits, want %d: some runs did not take the preloaded container", got, len(cases))
	}
}
