package launch

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// A warm sandbox is one a backend starts before its run is known (a pool's).
// Its launcher (WarmCommand) writes the ready mark on standard output once
// the sandbox can take its run without delay, and only then does the
// backend send the header: the mark is the only output before it. The
// backend reads the mark off the stream before the run (see ReadyMark), so
// the run's output starts after it.
//
// With a Warm.Language the launcher also starts that language's
// interpreter ahead, as `<interpreter> <args> <main file>` under the
// program's environment (env -i), in a process group of its own under
// `timeout -s KILL 0` (no clock yet), standard input from /dev/null: the
// same command line a cold run starts, whose main file does not exist yet.
// A hook the interpreter loads during its start (Python: sitecustomize
// found through PYTHONPATH; Node: NODE_OPTIONS=--require) removes itself
// and the variable, imports Warm.Preload, writes the ready mark and blocks
// on a fifo in /tmp. When the header names that language, the launcher
// unpacks the workspace, sends the interpreter the constant line "go" and
// waits for it; the interpreter then runs the main file as a cold start
// does. The run's backstop is a SIGALRM to that timeout after the run's
// seconds, which makes it kill the group as a cold run's timeout does.
// When the header names another language (or the interpreter died), the
// launcher kills the interpreter's group and starts the run cold. The tag
// never leaves PID 1 (init) either way; see docs/SANDBOX.md, "Interpreters
// started ahead", for what a program can and cannot tell.

// ReadyMark is what a warm sandbox writes on standard output when it is
// ready for its run; nothing precedes it.
const ReadyMark = "\x1egatekeeper-ready\x1e"

// warmDir is where the launcher puts the hook and the fifo; the hook
// removes it before the run.
const warmDir = "/tmp/.gatekeeper-warm"

// Warm is what a warm sandbox starts before its run arrives.
type Warm struct {
	// Language is the interpreter started ahead (Python or Node); empty
	// starts none (a shell needs no head start).
	Language runner.Language
	// Preload are Python modules the interpreter imports while it waits
	// (dotted names).
	Preload []string
	// Reads are paths relative to /workspace that the preloaded modules
	// read when imported (configuration files): when the run's workspace
	// holds one, the interpreter starts afresh (a cold start in the warm
	// sandbox), so that the run sees what a cold start would.
	Reads []string
}

//go:embed warm.py
var pythonHook string

//go:embed warm.js
var nodeHook string

// warmStart is how an interpreter is started ahead: the hook's file name
// in warmDir, the environment variable that makes the interpreter load it,
// and the hook's source for a Warm.
type warmStart struct {
	file string
	env  string
	hook func(Warm) string
}

var warmStarts = map[runner.Language]warmStart{
	runner.Python: {
		file: "sitecustomize.py",
		env:  "PYTHONPATH=" + warmDir + ":" + ToolsDir + "/python", // the hook leaves the program's part (Env)
		hook: func(w Warm) string {
			pre, _ := json.Marshal(nonNil(w.Preload)) // a JSON list of plain strings is a Python list
			reads, _ := json.Marshal(nonNil(w.Reads))
			return pythonHook + fmt.Sprintf("\n_gatekeeper_warm(%s, %s)\n", pre, reads)
		},
	},
	runner.Node: {
		file: "hook.js",
		env:  "NODE_OPTIONS=--require=" + warmDir + "/hook.js",
		hook: func(Warm) string { return nodeHook },
	},
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

var (
	moduleRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	readRE   = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)
)

// Check returns every problem with w: a language that cannot be started
// ahead, preloads for another language than Python, a module name that is
// not a dotted identifier, a read path that is not clean and relative.
func (w Warm) Check() error {
	var problems []string
	if w.Language != "" {
		if _, ok := warmStarts[w.Language]; !ok {
			problems = append(problems, fmt.Sprintf("language %q cannot be started ahead (only %s)", w.Language, strings.Join(WarmLanguageNames(), ", ")))
		}
	}
	if (len(w.Preload) > 0 || len(w.Reads) > 0) && w.Language != runner.Python {
		problems = append(problems, "preloads and reads are for Python only")
	}
	for _, m := range w.Preload {
		if !moduleRE.MatchString(m) {
			problems = append(problems, fmt.Sprintf("preload %q is not a module name", m))
		}
	}
	for _, p := range w.Reads {
		if !readRE.MatchString(p) || path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." {
			problems = append(problems, fmt.Sprintf("read %q is not a clean path below /workspace", p))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("warm start: %s", strings.Join(problems, "; "))
	}
	return nil
}

// WarmLanguageNames returns the languages whose interpreter can be started
// ahead, sorted.
func WarmLanguageNames() []string {
	var out []string
	for _, l := range runner.Languages() {
		if _, ok := warmStarts[l]; ok {
			out = append(out, string(l))
		}
	}
	return out
}

// CanStartAhead reports whether lang's interpreter can be started ahead.
func CanStartAhead(lang runner.Language) bool {
	_, ok := warmStarts[lang]
	return ok
}

// WarmCommand is the command of a warm sandbox: Command's, with the
// launcher told to write the ready mark and, for w.Language, to start that
// interpreter ahead (see Warm). Command's sandboxes stay as they were: no
// mark, nothing started before the header.
func WarmCommand(life, wait time.Duration, env []string, w Warm) ([]string, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	extra := []string{"--warm", "-"}
	if w.Language != "" {
		ws := warmStarts[w.Language]
		extra = []string{"--warm", string(w.Language), ws.file, ws.env, ws.hook(w)}
	}
	return command(life, wait, "0", extra, env), nil
}
