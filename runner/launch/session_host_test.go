package launch

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// hostSession is a session run on this host by session.pl itself, with a
// temporary directory standing in for /workspace and one for /tmp (the two
// arguments only tests pass).
type hostSession struct {
	t       *testing.T
	ws, tmp string
	runs    int
}

// sessionRun is what one client run gave: its streams and its fd 4 line.
type sessionRun struct {
	stdout, stderr, status string
}

func newHostSession(t *testing.T) *hostSession {
	t.Helper()
	for _, bin := range []string{"perl", "python3", "node", "sh"} {
		if _, err := exec.LookPath(bin); err != nil {
			missingTool(t, bin)
		}
	}
	s := &hostSession{t: t, ws: t.TempDir(), tmp: t.TempDir()}
	t.Cleanup(s.kill)
	return s
}

// kill ends the processes of this session: those whose command line names
// its tmp directory (the supervisor and the kernels), and their groups.
func (s *hostSession) kill() {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(s.tmp)) {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// run writes code as lang's main file and runs the client with a soft
// timeout of soft seconds.
func (s *hostSession) run(lang runner.Language, code string, soft int) sessionRun {
	s.t.Helper()
	p, _ := ProgramFor(lang)
	if err := os.WriteFile(filepath.Join(s.ws, p.Main), []byte(code), 0o644); err != nil {
		s.t.Fatal(err)
	}
	first := "0"
	if s.runs == 0 {
		first = "1"
	}
	s.runs++
	return s.client(string(lang), strconv.Itoa(soft), first)
}

func (s *hostSession) client(args ...string) sessionRun {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 60*time.Second)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		s.t.Fatal(err)
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		s.t.Fatal(err)
	}
	defer null.Close()
	argv := append([]string{"-e", SessionProgram(), "--", "client"}, args...)
	cmd := exec.CommandContext(ctx, "/usr/bin/perl", append(argv, s.ws, s.tmp)...)
	cmd.Dir = s.ws
	cmd.Env = append(Env()[:0:0], "PATH=/usr/local/bin:/usr/bin:/bin:"+os.Getenv("PATH"), "HOME="+s.ws, "LANG=C.UTF-8")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.ExtraFiles = []*os.File{null, w} // fd 3, fd 4
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	w.Close()
	st, _ := readAll(r)
	if err := cmd.Wait(); err != nil {
		s.t.Fatalf("the client: %v (stderr %q)", err, errb.String())
	}
	return sessionRun{stdout: out.String(), stderr: errb.String(), status: st}
}

func readAll(f *os.File) (string, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.String(), err
}

// sessionStep is one run of a session case and what it must give.
type sessionStep struct {
	lang        runner.Language
	code        string
	soft        int    // seconds; 0 is 10
	status      string // the fd 4 line, exactly
	stdout      string // exactly, unless stdoutHas
	stdoutHas   []string
	stderrHas   []string
	stderrLacks []string
	setup       func(t *testing.T, s *hostSession) // before the run
}

func (st sessionStep) check(t *testing.T, i int, got sessionRun) {
	t.Helper()
	if got.status != st.status {
		t.Errorf("run %d: status line %q, want %q (stdout %q, stderr %q)", i, got.status, st.status, got.stdout, got.stderr)
	}
	if st.stdoutHas == nil && got.stdout != st.stdout {
		t.Errorf("run %d: stdout %q, want %q (stderr %q)", i, got.stdout, st.stdout, got.stderr)
	}
	for _, w := range st.stdoutHas {
		if !strings.Contains(got.stdout, w) {
			t.Errorf("run %d: stdout %q lacks %q (stderr %q)", i, got.stdout, w, got.stderr)
		}
	}
	for _, w := range st.stderrHas {
		if !strings.Contains(got.stderr, w) {
			t.Errorf("run %d: stderr %q lacks %q", i, got.stderr, w)
		}
	}
	for _, w := range st.stderrLacks {
		if strings.Contains(got.stderr, w) {
			t.Errorf("run %d: stderr %q has %q", i, got.stderr, w)
		}
	}
}

func runSessionCases(t *testing.T, cases []sessionCase, start func(t *testing.T) sessionRunner) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := start(t)
			for i, st := range tc.steps {
				soft := st.soft
				if soft == 0 {
					soft = 60 // a step that is not about the timeout must not meet it, even a cold import of matplotlib under gVisor on a loaded machine
				}
				if st.setup != nil {
					st.setup(t, s.host())
				}
				st.check(t, i+1, s.run(st.lang, st.code, soft))
			}
		})
	}
}

// sessionRunner runs a session's client, on this host or in an image.
type sessionRunner interface {
	run(lang runner.Language, code string, soft int) sessionRun
	host() *hostSession
}

func (s *hostSession) host() *hostSession { return s }

type sessionCase struct {
	name  string
	steps []sessionStep
}

func TestSessionOnThisHost(t *testing.T) {
	t.Parallel()
	runSessionCases(t, append(sessionCases(), hostOnlyCases()...), func(t *testing.T) sessionRunner { return newHostSession(t) })
}

// hostOnlyCases need the test's view of the session's processes.
func hostOnlyCases() []sessionCase {
	return []sessionCase{
		{"a program's children inherit none of the kernel's or the supervisor's descriptors", []sessionStep{
			{lang: runner.Python, code: "import subprocess\nprint(subprocess.run('ls /proc/self/fd', shell=True, capture_output=True, text=True, close_fds=False).stdout.split())\n", status: "0 k\n", stdout: "['0', '1', '2', '3']\n"},
			{lang: runner.Shell, code: "ls /proc/self/fd | tr '\\n' ' '\n", status: "0 k\n", stdout: "0 1 2 3 "},
			{lang: runner.Node, code: "require('child_process').execSync('ls /proc/self/fd').toString().split('\\n').join(' ')", status: "0 k\n", stdout: "'0 1 2 3 '\n"},
		}},
		{"a supervisor that is gone is reported lost", []sessionStep{
			{lang: runner.Python, code: "x = 1\n", status: "0 k\n"},
			{lang: runner.Python, code: "print(x)\n", status: "125 l\n", stderrHas: []string{"supervisor is gone"},
				setup: func(t *testing.T, s *hostSession) { s.kill() }},
		}},
	}
}

// TestSessionClientKilledMidRunLosesTheSession: when the backstop kills the
// client during a run, the supervisor kills the kernel, and the next run
// reports the loss without running its code.
func TestSessionClientKilledMidRunLosesTheSession(t *testing.T) {
	t.Parallel()
	s := newHostSession(t)
	if got := s.run(runner.Python, "x = 1\n", 10); got.status != "0 k\n" {
		t.Fatalf("first run: %+v", got)
	}
	p, _ := ProgramFor(runner.Python)
	if err := os.WriteFile(filepath.Join(s.ws, p.Main), []byte("import time\nprint('started', flush=True)\ntime.sleep(60)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/perl", "-e", SessionProgram(), "--", "client", "python", "30", "0", s.ws, s.tmp)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + s.ws}
	var out bytes.Buffer
	cmd.Stdout = &out
	_ = cmd.Run() // killed by the context, as by the backstop
	if !strings.Contains(out.String(), "started") {
		t.Fatalf("the killed run printed %q, want it to have started", out.String())
	}
	time.Sleep(500 * time.Millisecond)
	got := s.client("python", "10", "0")
	if got.status != "125 l\n" || !strings.Contains(got.stderr, "client ended during the run") {
		t.Errorf("the run after the kill: %+v, want 125 l naming the client's end", got)
	}
}

// TestSessionClientReportsOneLineForBadArguments: whatever goes wrong, the
// client writes exactly one status line and exits 0.
func TestSessionClientReportsOneLineForBadArguments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"an unknown language", []string{"ruby", "10", "1"}, `no kernel for language "ruby"`},
		{"a timeout of zero", []string{"python", "0", "1"}, `bad timeout "0"`},
		{"no supervisor on a later run", []string{"python", "10", "0"}, "supervisor is gone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newHostSession(t)
			got := s.client(tc.args...)
			if got.status != "125 l\n" || !strings.Contains(got.stderr, tc.want) {
				t.Errorf("got %+v, want status 125 l and %q", got, tc.want)
			}
		})
	}
}

// TestSessionProgramCarriesTheKernelsByteForByte: perl reads back each
// kernel's source from the program exactly, whatever bytes it holds.
func TestSessionProgramCarriesTheKernelsByteForByte(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("perl"); err != nil {
		missingTool(t, "perl")
	}
	for _, l := range SessionLanguages() {
		prog := strings.Replace(SessionProgram(), "\nif ($role eq 'client') {", "\nprint $KERNEL{$ARGV[1]}; exit 0;\nif ($role eq 'client') {", 1)
		if prog == SessionProgram() {
			t.Fatal("the program's role dispatch moved: change this test with it")
		}
		out, err := exec.Command("/usr/bin/perl", "-e", prog, "--", "x", l).Output()
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if string(out) != kernels[runner.Language(l)].source {
			t.Errorf("the %s kernel read back differs from its source", l)
		}
	}
	weird := "a'b\\c\\'d\\\\'\n$x @y \x01\xff"
	out, err := exec.Command("/usr/bin/perl", "-e", "print "+perlQuote(weird)).Output()
	if err != nil || string(out) != weird {
		t.Errorf("perlQuote(%q) read back as %q (%v)", weird, out, err)
	}
	if n := len(SessionProgram()); n >= 128*1024 {
		t.Errorf("the session program is %d bytes: an argument must stay under 128 KiB", n)
	}
}

// missingTool skips a host test that needs bin, except in CI, where a
// missing toolchain fails the run.
func missingTool(t *testing.T, bin string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("no %s on this host (CI=true: a missing toolchain fails)", bin)
	}
	t.Skipf("no %s on this host", bin)
}
