// Package launch is the protocol between a sandbox backend and the launcher
// that runs inside each sandbox, whatever the backend (runner/docker,
// runner/kube): the sandbox's command (Command: a PID 1 backstop and the
// launcher script), the header line and workspace tar the backend writes
// on the sandbox's standard input (Header, WriteInput), the end marks that
// close both output streams (EndMarks), the snapshot of /workspace that
// follows the end mark on standard output (Snapshot), the output caps
// (Capped), and the checks of a Spec every backend applies (Check). A
// backend supplies the transport: an attach stream to a container or a
// Pod, and a kill.
package launch

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Paths inside the sandbox.
const (
	WorkspaceDir = "/workspace"
	TmpDir       = "/tmp"
)

// imagePath is the PATH in which the interpreter is looked up.
var imagePath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// ImagePath returns the directories of the program's PATH, in order.
func ImagePath() []string { return append([]string(nil), imagePath...) }

// Env returns the complete environment of the program: PATH, HOME and
// LANG; nothing of the sidecar's environment reaches the sandbox. A
// backend adds the proxy's variables for a networked run.
func Env() []string {
	return []string{
		"PATH=" + strings.Join(imagePath, ":"),
		"HOME=" + WorkspaceDir,
		"LANG=C.UTF-8",
	}
}

// BackstopGrace is how long past Spec.Timeout the in-sandbox
// `timeout -s KILL` ends the program by itself, should the sidecar die
// before it could kill it.
const BackstopGrace = 10 * time.Second

// SnapshotGrace is how long, after the program ended, the sandbox may take
// to send its snapshot of /workspace back; past it the sidecar ends the
// sandbox and the workspace is not saved. A backend adds it to the life
// (PID 1's timeout) of a sandbox whose run asks for a snapshot, and of
// every warm sandbox.
const SnapshotGrace = 30 * time.Second

// Program is how a runner.Language is started: the interpreter and its
// arguments, and the main file's name in /workspace.
type Program struct {
	Interp string   // looked up in the image's PATH
	Args   []string // before the main file
	Main   string
}

// programs is the one table of interpreters; runner.Languages is pinned to
// it by a test.
var programs = map[runner.Language]Program{
	runner.Python: {Interp: "python3", Args: []string{"-u"}, Main: "main.py"},
	runner.Shell:  {Interp: "sh", Main: "main.sh"},
	runner.Node:   {Interp: "node", Main: "main.js"},
}

// ProgramFor returns how lang is started; ok is false for a language the
// launcher does not know.
func ProgramFor(lang runner.Language) (p Program, ok bool) {
	p, ok = programs[lang]
	p.Args = append([]string(nil), p.Args...)
	return p, ok
}

// The sandbox's command is coreutils `timeout -s KILL <life>` running the
// launcher: timeout is the sandbox's PID 1, and the kernel drops SIGSTOP
// and SIGKILL sent to a PID namespace's init from inside it, so the
// program cannot stop this outer bound on the sandbox's life (it can stop
// the launcher's own, per-run timeout, which runs as its uid). When PID 1
// exits, the kernel kills every process of the sandbox. Being no init
// system, it does not reap orphaned processes: their zombies count
// towards the pids limit until the run ends.
//
// script is the launcher. After $1 it takes the options of a warm
// sandbox (WarmCommand: "--warm -", or "--warm <language> <hook file>
// <variable> <hook source>"), with which it writes the ready mark, or
// starts the language's interpreter ahead (see Warm), before it waits.
// It waits, at most $1, for a header line on
// standard input ("<seconds> <language> <tag> <snapshot>"), unpacks the
// workspace tar that follows into /workspace (exiting with 125, and no end
// marks, when it cannot), then, under coreutils `timeout -s KILL
// <seconds>`, runs the rest of its arguments (env -i and the program's
// environment) with the language's interpreter and main file, standard
// input from /dev/null. When the program has exited it ends every other
// process of the sandbox (kill -9 -1 reaches all of them but PID 1 and the
// launcher itself, all running as the sandbox user) and waits, briefly,
// until none is left but zombies, so that nothing writes to the streams or
// the workspace after: first for its own children (the shell's wait, which
// returns as soon as the killed ones are gone), then by looking at /proc,
// with short sleeps only while a killed orphan is still on its way out.
// (Looking at /proc at once found a process still dying after most kills,
// so nearly every run slept 10 ms there; waiting for the children first
// took that off a warm run's end, 31 → 22 ms for a hello world in
// python-data.) Then it writes the end mark with the program's exit
// status to both streams (see EndMarks). With a snapshot asked for
// (<snapshot> 1) it then writes, on standard output, a tar of /workspace
// and the snapshot mark "\x1egatekeeper-snap <tag> <tar's exit
// status>\x1e" (see Snapshot), having first given the owner read and
// write access to everything there (the program may have taken it away).
// It exits with the program's status. So a sandbox waits for its code
// without a clock running (a warm sandbox of a pool waits this way), the
// run's backstop starts when the code arrives, and a sandbox whose sidecar
// died ends by itself either way. The header is read byte by byte (the
// shell's read), so the tar that follows stays on standard input; the tag
// stays in the launcher's own variables, never on a command line or in an
// environment the program can read. The program is started through env -i
// because the shell adds variables of its own (PWD).
var script = func() string {
	var cases strings.Builder
	names := make([]string, 0, len(programs))
	for l := range programs {
		names = append(names, string(l))
	}
	sort.Strings(names)
	for _, n := range names {
		l := programs[runner.Language(n)]
		fmt.Fprintf(&cases, "  %s) cmd=\"%s\";;\n", n, strings.Join(append(append([]string{l.Interp}, l.Args...), l.Main), " "))
	}
	return `prog() {
  case $1 in
` + cases.String() + `  *) return 1;;
  esac
}
hold=$1
shift
wlang=
if [ "${1-}" = --warm ]; then
  wlang=$2
  shift 2
  if [ "$wlang" != - ]; then
    wfile=$1 wenv=$2 whook=$3
    shift 3
  fi
fi
wdir=` + warmDir + `
wpid=
if [ -n "$wlang" ] && [ "$wlang" != - ] && prog "$wlang" && mkdir -m 0700 "$wdir" && printf '%s' "$whook" >"$wdir/$wfile" && mkfifo -m 0600 "$wdir/go"; then
  exec 3<>"$wdir/go"
  timeout -s KILL 0 "$@" "$wenv" $cmd </dev/null 3>&- &
  wpid=$!
elif [ -n "$wlang" ]; then
  rm -rf "$wdir"
  printf '` + readyMarkPrintf + `'
fi
h=$(timeout -s KILL "$hold" /bin/sh -c 'IFS= read -r h && printf %s "$h"') || { echo "gatekeeper: no run arrived" >&2; exit 125; }
secs=${h%% *}
h=${h#* }
lang=${h%% *}
h=${h#* }
tag=${h%% *}
snap=${h#* }
case $secs in ''|*[!0-9]*) echo "gatekeeper: bad run header" >&2; exit 125;; esac
case $tag in ''|*[!0-9a-f]*) echo "gatekeeper: bad run header" >&2; exit 125;; esac
case $snap in 0|1) ;; *) echo "gatekeeper: bad run header" >&2; exit 125;; esac
prog "$lang" || { echo "gatekeeper: bad run header" >&2; exit 125; }
tar -x -f - -C ` + WorkspaceDir + ` --no-same-owner || { echo "gatekeeper: cannot unpack ` + WorkspaceDir + `" >&2; exit 125; }
if [ -n "$wpid" ] && [ "$lang" = "$wlang" ] && kill -0 "$wpid" 2>/dev/null; then
  [ ! -e "$wdir" ] || rm -rf "$wdir"
  printf 'go\n' >&3
  exec 3>&-
  (sleep "$secs"; kill -ALRM "$wpid") </dev/null >/dev/null 2>&1 &
  wait "$wpid"
  c=$?
else
  if [ -n "$wpid" ]; then
    exec 3>&-
    wait "$wpid"
  fi
  rm -rf "$wdir"
  timeout -s KILL "${secs}s" "$@" $cmd </dev/null 3>&-
  c=$?
fi
kill -9 -1 2>/dev/null
wait
n=0
while [ "$n" -lt 200 ]; do
  left=
  for f in /proc/[0-9]*/stat; do
    p=${f#/proc/}
    p=${p%/stat}
    if [ "$p" = 1 ] || [ "$p" = "$$" ]; then continue; fi
    read -r l 2>/dev/null <"$f" || continue
    l=${l##*) }
    case ${l%% *} in Z|X|x) ;; *) left=1; break;; esac
  done
  [ -z "$left" ] && break
  n=$((n+1))
  sleep 0.01
done
printf '\036gatekeeper-end %s %03d\036' "$tag" "$c"
printf '\036gatekeeper-end %s %03d\036' "$tag" "$c" >&2
if [ "$snap" = 1 ]; then
  chmod -R u+rwX ` + WorkspaceDir + ` 2>/dev/null
  tar -c -f - -C ` + WorkspaceDir + ` --hard-dereference . 2>/dev/null
  printf '\036gatekeeper-snap %s %03d\036' "$tag" "$?"
fi
exit "$c"`
}()

// readyMarkPrintf is ReadyMark as printf(1) writes it.
var readyMarkPrintf = strings.ReplaceAll(ReadyMark, "\x1e", `\036`)

// Script returns the launcher script (see Command).
func Script() string { return script }

// Command is the sandbox's whole command line: env -i with Env, then PID
// 1's `timeout -s KILL <life>`, the launcher, which waits at most wait for
// its header, and env -i with env, the program's environment. Durations
// are rounded up to whole seconds. An image needs /bin/sh, /usr/bin/env,
// tar and coreutils' timeout, plus the language's interpreter in PATH.
func Command(life, wait time.Duration, env []string) []string {
	return command(life, wait, nil, env)
}

// command is Command with the launcher's options (see WarmCommand) after
// the wait.
func command(life, wait time.Duration, opts, env []string) []string {
	argv := []string{"/usr/bin/env", "-i"}
	argv = append(argv, Env()...)
	argv = append(argv, "timeout", "-s", "KILL", Seconds(life), // PID 1: env and timeout exec
		"/bin/sh", "-c", script, "gatekeeper-launcher", Seconds(wait))
	argv = append(argv, opts...)
	argv = append(argv, "/usr/bin/env", "-i")
	return append(argv, env...)
}

// Seconds formats d as whole seconds, rounded up, for timeout(1): "17s".
func Seconds(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10) + "s"
}

// Header is the line the launcher waits for: the backstop in whole
// seconds (timeout plus BackstopGrace), the language, the run's tag for its
// end marks and whether to send a snapshot of /workspace back.
func Header(timeout time.Duration, lang runner.Language, tag string, snapshot bool) []byte {
	backstop := int64(math.Ceil((timeout + BackstopGrace).Seconds()))
	snap := 0
	if snapshot {
		snap = 1
	}
	return []byte(fmt.Sprintf("%d %s %s %d\n", backstop, lang, tag, snap))
}

// WantsSnapshot reports whether a run of spec sends /workspace back: to
// save it, or to return its files.
func WantsSnapshot(spec runner.Spec) bool {
	return spec.Workspace != nil || spec.Sandbox.MaxFiles > 0
}

// NewTag returns a fresh random tag for a run's end marks.
func NewTag() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
