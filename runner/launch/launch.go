// Package launch is the protocol between a sandbox backend and the launcher
// that runs inside each sandbox, whatever the backend (runner/docker,
// runner/kube): the sandbox's command (Command: a PID 1 backstop and the
// launcher script), the header line and workspace tar the backend writes
// on the sandbox's standard input (Header, WriteInput), the end marks that
// close both output streams (EndMarks), the snapshot of /workspace that
// follows the end mark on standard output (Snapshot), the output caps
// (Capped), the checks of a Spec every backend applies (Check), and, in
// a run with tools (runner.Spec.Caller), the bridge that carries the
// program's nested calls from $GATEKEEPER_TOOLS/bridge.sock to the runner
// as tagged frames on standard output and their answers back on standard
// input (CallDemux, Bridge; see bridge.go). A backend supplies the
// transport: an attach stream to a container or a Pod, and a kill. A
// backend that runs a Spec with Tools keeps standard input open after
// Input.Write, feeds standard output through EndMarks, then CallDemux,
// then its cap, and closes the Bridge when the run ended.
package launch

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	goruntime "runtime"
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

// Env returns the complete environment of the program: PATH, HOME, LANG
// and the bridge's (GATEKEEPER_TOOLS, and PYTHONPATH and NODE_PATH naming
// the wrappers below it: see ToolsDir), the same in every run, with
// tools or without; nothing of the sidecar's environment reaches the
// sandbox. A backend adds the proxy's variables for a networked run.
func Env() []string {
	return append(baseEnv(),
		"GATEKEEPER_TOOLS="+ToolsDir,
		"PYTHONPATH="+ToolsDir+"/python",
		"NODE_PATH="+ToolsDir+"/node",
	)
}

// baseEnv is init's environment, and the start of the program's.
func baseEnv() []string {
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

// The sandbox's PID 1 is init (below), a perl program: perl-base is in
// every Debian image, and unlike a shell or coreutils it can make itself
// undumpable (prctl PR_SET_DUMPABLE 0, which an execve would reset) and
// then stay the one process it is, without exec. It is the only process
// of the sandbox the runner trusts, and the program cannot reach it:
//   - it is undumpable, so a process of the same uid without
//     CAP_SYS_PTRACE (the program) can neither ptrace it nor read or write
//     its memory (/proc/1/mem, process_vm_readv), its environment or its
//     open files (/proc/1/fd): the kernel's ptrace access check refuses
//     them all, under runc and in gVisor's kernel alike;
//   - it is the PID namespace's init, so the kernel drops SIGKILL and
//     SIGSTOP sent to it from inside and every signal it has no handler
//     for; its one handler, SIGALRM's, ends the sandbox only once its life
//     is over, and ignores a SIGALRM that comes early;
//   - the run's tag lives in its memory alone: init reads the header from
//     standard input itself and never puts the tag on a command line, in
//     an environment or in a file.
//
// What the program can reach (it runs as the same uid) are the launcher
// shell and the run's own timeout: they hold nothing the program could not
// know, and all the launcher reports (the program's exit status) the
// program decides anyway.
//
// init: makes itself undumpable (or exits with 125), arms SIGALRM for the
// sandbox's life (<life> seconds, after which it exits with 137 and the
// kernel kills every process of the sandbox), starts the launcher shell
// with a pipe to it (fd 5, the run's "<seconds> <language> <snapshot>")
// and one from it (fd 4, the program's exit status), and waits, at most
// <wait> seconds, for the header line on standard input
// ("<seconds> <language> <tag> <snapshot>"), read byte by byte so that the
// tar that follows stays on standard input for the launcher. It then
// waits for the launcher's exit, kills every other process of the sandbox
// (kill -9 -1 from PID 1 reaches them all) and reaps them until it has no
// child left: as init it inherits every orphan, so then nothing but itself
// is left to write to the streams or the workspace, without polling
// /proc and however the program tried to outlive its run. With a status
// from the launcher it writes the end mark with it to both streams (see
// EndMarks) and, with a snapshot asked for, a tar of /workspace on
// standard output and the snapshot mark
// "\x1egatekeeper-snap <tag> <tar's exit status>\x1e" (see Snapshot),
// having first given the owner read and write access to everything there
// (the program may have taken it away); it exits with the program's
// status. Without one (the launcher could not unpack the workspace, or was
// killed) it writes no marks and exits with the launcher's status. Being
// no init system it reaps nothing before the run's end: orphaned zombies
// count towards the pids limit until then.
//
// script is the launcher shell. It takes the options of a session
// (SessionCommand: "--session <program>"), then those of a sandbox whose
// traffic the egress proxy intercepts ("--egress <CA> <files>": see
// Egress, written once the workspace is unpacked), then those of a warm sandbox
// (WarmCommand: "--warm -", or "--warm <language> <hook file> <variable>
// <hook source>"), with which it writes the ready mark, or starts the
// language's interpreter ahead (see Warm), before it waits for init's line
// on fd 5. It unpacks the workspace tar on standard input into /workspace
// (exiting with 125 when it cannot), then, under coreutils `timeout -s
// KILL <seconds>`, runs the rest of its arguments (env -i and the
// program's environment) with the language's interpreter and main file,
// standard input from /dev/null and neither of init's pipes open, and
// writes the program's exit status to fd 4. So a sandbox waits for its
// code without a clock running (a warm sandbox of a pool waits this way),
// the run's backstop starts when the code arrives, and a sandbox whose
// sidecar died ends by itself either way. The program is started through
// env -i because the shell adds variables of its own (PWD).
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
sprog=
if [ "${1-}" = --session ]; then
  sprog=$2
  shift 2
fi
eca= efiles=
if [ "${1-}" = --egress ]; then
  eca=$2 efiles=$3
  shift 3
fi
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
  timeout -s KILL 0 "$@" "$wenv" $cmd </dev/null 3>&- 4>&- 5<&- 7<&- &
  wpid=$!
elif [ -n "$wlang" ]; then
  rm -rf "$wdir"
  printf '` + readyMarkPrintf + `'
fi
IFS= read -r h <&5 || exit 125
exec 5<&-
secs=${h%% *}
h=${h#* }
lang=${h%% *}
h=${h#* }
h=${h#* }
tools=${h%% *}
first=${h#"$tools"}
first=${first# }
prog "$lang" || { echo "gatekeeper: bad run header" >&2; exit 125; }
if [ "$tools" = 1 ]; then
  exec 0</dev/null
  tar -x -f - -C ` + WorkspaceDir + ` --no-same-owner <&7 4>&- 7<&- || { echo "gatekeeper: cannot unpack ` + WorkspaceDir + `" >&2; exit 125; }
else
  tar -x -f - -C ` + WorkspaceDir + ` --no-same-owner 4>&- 7<&- || { echo "gatekeeper: cannot unpack ` + WorkspaceDir + `" >&2; exit 125; }
fi
exec 7<&-
if [ -n "$eca" ] && [ "$first" != 0 ]; then
  edir=` + EgressDir + ` esys=` + systemCAFile + `
` + egressWrite + `
fi
if [ -n "$sprog" ]; then
  timeout -s KILL "${secs}s" "$@" /usr/bin/perl -e "$sprog" -- client "$lang" "$((secs - ` + strconv.Itoa(int(BackstopGrace/time.Second)) + `))" "$first" </dev/null
  exit 0
fi
if [ -n "$wpid" ] && [ "$lang" = "$wlang" ] && kill -0 "$wpid" 2>/dev/null; then
  [ ! -e "$wdir" ] || rm -rf "$wdir"
  printf 'go\n' >&3
  exec 3>&-
  (sleep "$secs"; kill -ALRM "$wpid") </dev/null >/dev/null 2>&1 4>&- &
  wait "$wpid"
  c=$?
else
  if [ -n "$wpid" ]; then
    exec 3>&-
    wait "$wpid"
  fi
  rm -rf "$wdir"
  timeout -s KILL "${secs}s" "$@" $cmd </dev/null 3>&- 4>&-
  c=$?
fi
printf '%d\n' "$c" >&4
exit "$c"`
}()

// initProgram is PID 1's program, init (see script). Its arguments: the prctl system
// call's number, the sandbox's life and the longest wait for the header,
// in whole seconds, then the launcher's command line.
var initProgram = `my ($nr, $life, $hold, $idle, @launcher) = @ARGV;
sub fail { syswrite STDERR, "gatekeeper: $_[0]\n"; exit 125 }
sub status { $_[0] & 127 ? 128 + ($_[0] & 127) : $_[0] >> 8 }
sub end { kill 'KILL', -1; 1 while waitpid(-1, 0) > 0; exit $_[0] }
$$ == 1 or fail("the launcher is not the sandbox's PID 1");
syscall($nr, 4, 0, 0, 0, 0) == 0 && syscall($nr, 3, 0, 0, 0, 0) == 0 or fail("cannot make PID 1 undumpable");
my $end = time + $life;
$SIG{ALRM} = sub { exit 137 if time >= $end };
alarm $life;
our $ib = '';
sub more {
  my $until = shift;
  my $rin = '';
  vec($rin, 0, 1) = 1;
  for (;;) {
    my $left = $until - time;
    $left > 0 or return 0;
    select(my $r = $rin, undef, undef, $left) > 0 or next;
    my $n = sysread STDIN, $ib, 65536, length $ib;
    next if !defined $n && $! == 4;
    return $n ? 1 : 0;
  }
}
sub line {
  my ($wait, $h, $c, $rin, $until) = (shift, '', '', '', time + shift);
  if ($wait) {
    for (;;) {
      if ($ib =~ /\Aa [0-9]{1,15} ([0-9]{1,12})\n/) {
        my $l = $+[0] + $1;
        if (length $ib >= $l) { substr($ib, 0, $l) = ''; next }
      } elsif ($ib =~ /\A([^\n]{0,255})\n/) {
        $h = $1;
        substr($ib, 0, $+[0]) = '';
        return $h;
      } elsif (length $ib > 300) {
        fail("bad run header");
      }
      more($until) or fail("no run arrived");
    }
  }
  vec($rin, 0, 1) = 1;
  for (;;) {
    my $left = $until - time;
    $left > 0 or fail("no run arrived");
    select(my $r = $rin, undef, undef, $left) > 0 or next;
    my $n = sysread STDIN, $c, 1;
    next if !defined $n && $! == 4;
    $n or fail("no run arrived");
    return $h if $c eq "\n";
    $h .= $c;
    length $h < 256 or fail("bad run header");
  }
}
our ($tag, $run, $max);
for (my $first = 1; ; $first = 0) {
  $^F = 8;
  pipe(SR, SW) && pipe(IR, IW) && pipe(WR, WW) or fail("no pipe: $!");
  fileno(SR) == 3 && fileno(SW) == 4 && fileno(IR) == 5 && fileno(IW) == 6 && fileno(WR) == 7 && fileno(WW) == 8 or fail("a file other than standard input, output and error is open");
  $^F = 2;
  my $sh = fork;
  defined $sh or fail("cannot fork: $!");
  if (!$sh) {
    close SR; close IW; close WW;
    exec { $launcher[0] } @launcher;
    exit 125;
  }
  close SW; close IR; close WR;
  my $h = line($idle, $first ? $hold : $idle);
  $h =~ /^([0-9]+) ([a-z0-9_-]+) ([0-9a-f]+) ([01])(?: ([0-9]{1,15}))?\z/ or fail("bad run header");
  my $snap;
  ($tag, $snap, $max) = ($3, $4, $5);
  $run = "$1 $2 $4 " . (defined $5 || $idle ? 1 : 0) . ($idle ? " $first" : '') . "\n";
  if (defined $max) {
    bridge();
  } elsif ($idle) {
    syswrite IW, $run;
    close IW;
    for (;;) {
      if ($ib =~ /\Aw ([0-9]{1,12})\n/) {
        my ($l, $n) = ($+[0], $1);
        if (length $ib >= $l + $n) {
          my $p = substr($ib, $l, $n);
          substr($ib, 0, $l + $n) = '';
          last if $n == 0;
          while (length $p) {
            my $w = syswrite WW, $p;
            if (defined $w) { substr($p, 0, $w) = '' } elsif ($! != 4) { last }
          }
          next;
        }
      } elsif (length $ib >= 40 || index($ib, "\n") >= 0) {
        fail("bad run input");
      }
      more(time + $hold) or fail("the run's input ended early");
    }
    close WW;
  } else {
    close STDIN;
    close WW;
    syswrite IW, $run;
    close IW;
  }
  waitpid $sh, 0;
  my $st = $?;
  if ($idle) { 1 while waitpid(-1, 1) > 0 } else { kill 'KILL', -1; 1 while waitpid(-1, 0) > 0 }
  my $got = '';
  1 while length $got < 64 && sysread SR, $got, 64, length $got;
  close SR;
  my $code;
  if ($idle) {
    $got =~ /^([0-9]{1,3}) ([kitl])\n\z/ && $1 <= 255 or end(status($st) || 125);
    $code = $1;
    my $m = sprintf "\x1egatekeeper-end %s %03d%s\x1e", $tag, $code, $2 eq 'k' ? '' : " $2";
    syswrite STDOUT, $m;
    syswrite STDERR, $m;
    $code = -1 if $2 eq 'l' || $2 eq 't';
  } else {
    $got =~ /^([0-9]{1,3})\n\z/ && $1 <= 255 or exit status($st);
    $code = $1;
    my $m = sprintf "\x1egatekeeper-end %s %03d\x1e", $tag, $code;
    syswrite STDOUT, $m;
    syswrite STDERR, $m;
  }
  if ($snap) {
    system '/bin/sh', '-c', 'chmod -R u+rwX ` + WorkspaceDir + ` 2>/dev/null; exec tar -c -f - -C ` + WorkspaceDir + ` --hard-dereference . 2>/dev/null';
    syswrite STDOUT, sprintf "\x1egatekeeper-snap %s %03d\x1e", $tag, status($?);
  }
  exit $code if !$idle;
  end(137) if $code < 0;
  system '/bin/sh', '-c', 'chmod -R u+w ` + ToolsDir + ` 2>/dev/null; exec rm -rf ` + ToolsDir + `' if defined $max;
}
` + initBridge

// prctl is the prctl system call's number for the architectures the
// images are built for; init refuses to start (exit 125) with any other
// number, for it checks that it is undumpable.
var prctl = map[string]int{"amd64": 157, "arm64": 167}

// readyMarkPrintf is ReadyMark as printf(1) writes it.
var readyMarkPrintf = strings.ReplaceAll(ReadyMark, "\x1e", `\036`)

// Script returns the launcher script (see Command).
func Script() string { return script }

// Command is the sandbox's whole command line: env -i with Env, then PID
// 1 (init: perl), which ends the sandbox after life and waits at most wait
// for its header, then the launcher shell and env -i with env, the
// program's environment. Durations are rounded up to whole seconds. An
// image needs /bin/sh, /usr/bin/env, /usr/bin/perl (perl-base), tar and
// coreutils' timeout, plus the language's interpreter in PATH.
func Command(life, wait time.Duration, env []string) []string {
	return command(life, wait, "0", nil, env)
}

// command is Command with the launcher's options (see WarmCommand) after
// its name.
func command(life, wait time.Duration, idle string, opts, env []string) []string {
	nr, ok := prctl[goruntime.GOARCH]
	if !ok {
		nr = -1 // init fails closed: no such system call
	}
	argv := []string{"/usr/bin/env", "-i"}
	argv = append(argv, baseEnv()...)
	argv = append(argv, "/usr/bin/perl", "-e", initProgram, "--", strconv.Itoa(nr), wholeSeconds(life), wholeSeconds(wait), idle, // PID 1: env execs perl
		"/bin/sh", "-c", script, "gatekeeper-launcher")
	argv = append(argv, opts...)
	argv = append(argv, "/usr/bin/env", "-i")
	return append(argv, env...)
}

// Init returns PID 1's program (see Command), for tests that check a
// backend's command line.
func Init() string { return initProgram }

// wholeSeconds is d in whole seconds, rounded up.
func wholeSeconds(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
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
