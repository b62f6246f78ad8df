package launch

import (
	_ "embed"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// A session sandbox (runner.Session) keeps one interpreter per language,
// a kernel, for its query's runs. Its launcher runs, for each run, instead
// of the program:
//
//	timeout -s KILL <backstop>s env -i <env> /usr/bin/perl -e "$SESSION" -- client <lang> <soft seconds> <first>
//
// where $SESSION is SessionProgram, with standard input from /dev/null,
// the run's streams, cwd /workspace and fd 4 a pipe to init. The client
// writes exactly one line on fd 4, "<code> <state>\n" (see SessionState),
// then exits 0. On the session's first run (first 1) it starts the
// supervisor: a daemon (setsid, its own process group, no inherited
// descriptor) listening on a Unix socket in /tmp/.gatekeeper-session
// (0700). The supervisor starts a language's kernel at that language's
// first run (`<interpreter> <args> -c|-e <kernel source> <control fifo>
// <status fifo> <main file>`, in its own process group, cwd /workspace,
// the client's environment), tells it to run the main file, relays its
// output to the client and answers the kernel's code. At the soft timeout
// it interrupts the kernel's group (SIGINT; a kernel still starting gets it
// once it wrote "ready", its handler in place), and kills the group after
// InterruptGrace. Output that background processes write between runs is
// kept, the last SessionKeep bytes per stream, and sent at the start of the
// next run, after a line on standard error saying how many bytes were
// dropped, when some were.

// InterruptGrace is how long a kernel has, after the interrupt at a run's
// soft timeout, to end the run before the supervisor kills it (state
// SessionTimedOut). A backend's hard deadline for a session run is the
// run's timeout plus InterruptGrace plus a margin.
const InterruptGrace = 3 * time.Second

// SessionKeep is how many bytes per stream of what background processes
// write between runs are kept for the next run: the last ones.
const SessionKeep = 65536

// SessionDir is the directory of the supervisor's socket and the kernels'
// fifos.
const SessionDir = TmpDir + "/.gatekeeper-session"

// SessionState is the state a session client reports after the code.
type SessionState byte

// Session states, as the client writes them on fd 4.
const (
	// SessionKept: the run's code ended and the interpreter lives on.
	SessionKept SessionState = 'k'
	// SessionInterrupted: the soft timeout passed, the interrupt stopped
	// the code within InterruptGrace, and the interpreter lives on.
	SessionInterrupted SessionState = 'i'
	// SessionTimedOut: the soft timeout passed and the interpreter did not
	// stop within InterruptGrace: it was killed, its state is lost.
	SessionTimedOut SessionState = 't'
	// SessionLost: an interpreter of the session ended (in the run, or
	// between runs: then the code did not run, code 125), or the
	// supervisor is gone.
	SessionLost SessionState = 'l'
)

//go:embed session.pl
var sessionSource string

//go:embed kernel.py
var pythonKernel string

//go:embed kernel.js
var nodeKernel string

//go:embed kernel.sh
var shellKernel string

// kernels are the session kernels' sources and the interpreter's option
// that runs a source given as an argument.
var kernels = map[runner.Language]struct{ source, flag string }{
	runner.Python: {pythonKernel, "-c"},
	runner.Node:   {nodeKernel, "-e"},
	runner.Shell:  {shellKernel, "-c"},
}

// sessionProgram is session.pl with the kernels, their command lines and
// main files, and InterruptGrace filled in.
var sessionProgram = func() string {
	var names []string
	for l := range kernels {
		names = append(names, string(l))
	}
	sort.Strings(names)
	var ks, is, ms []string
	for _, n := range names {
		l := runner.Language(n)
		p, ok := ProgramFor(l)
		if !ok {
			panic("launch: a session kernel for unknown language " + n)
		}
		argv := append(append([]string{p.Interp}, p.Args...), kernels[l].flag)
		q := make([]string, len(argv))
		for i, a := range argv {
			q[i] = perlQuote(a)
		}
		ks = append(ks, perlQuote(n)+" => "+perlQuote(kernels[l].source))
		is = append(is, perlQuote(n)+" => ["+strings.Join(q, ", ")+"]")
		ms = append(ms, perlQuote(n)+" => "+perlQuote(p.Main))
	}
	return strings.NewReplacer(
		"__KERNELS__", strings.Join(ks, ",\n  "),
		"__INTERPS__", strings.Join(is, ", "),
		"__MAINS__", strings.Join(ms, ", "),
		"__GRACE__", fmt.Sprint(int(math.Ceil(InterruptGrace.Seconds()))),
	).Replace(sessionSource)
}()

// perlQuote returns s as a Perl single-quoted string literal, which stands
// for s byte for byte: only the backslash and the quote are escaped there.
// s must hold no NUL byte (no command-line argument can).
func perlQuote(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		panic("launch: a NUL byte in a session program's string")
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// SessionProgram returns the session client's and supervisor's program
// (perl -e), with the kernels' sources in it.
func SessionProgram() string { return sessionProgram }

// SessionLanguages returns the languages a session has a kernel for,
// sorted.
func SessionLanguages() []string {
	var out []string
	for _, l := range runner.Languages() {
		if _, ok := kernels[l]; ok {
			out = append(out, string(l))
		}
	}
	return out
}
