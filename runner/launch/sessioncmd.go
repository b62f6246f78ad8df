package launch

import "time"

// SessionCommand is the command of a session's sandbox: Command's, with
// init (PID 1) serving one run after another instead of one, and the
// launcher handing each run to the session's program (SessionProgram)
// instead of starting the language's interpreter itself. init waits at
// most wait for the first run's header and at most idle for each later
// one, and ends the sandbox after life, whatever runs. Between runs it
// reads standard input for the next header only: a session's input is
// always in frames (Input.Write), so that no run's input reaches another.
// After each run it writes the end marks with the session's state (see
// MarkState) and, asked for, the snapshot; after a run that lost the
// session (MarkTimedOut, MarkLost), or a launcher that reported no
// status, it kills every process of the sandbox and exits. It never
// kills the session's processes between runs that kept it: that is what
// a session keeps. With e (not nil), the launcher writes e's files at the
// session's first run, as EgressCommand's does.
func SessionCommand(life, wait, idle time.Duration, env []string, e *Egress) []string {
	return command(life, wait, wholeSeconds(idle), append([]string{"--session", SessionProgram()}, e.options()...), env)
}
