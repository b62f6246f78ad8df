package launch

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/seccomp"
)

// dockerSession is a session in a container of a sandbox image, run as the
// sandboxes run (user 1000, no network, /tmp and /workspace on tmpfs), each
// run by a `docker exec` of the client under `timeout -s KILL`, as the
// launcher runs it. Its fd 4 goes to a file read after the run.
type dockerSession struct {
	t    *testing.T
	id   string
	runs int
}

func newDockerSession(t *testing.T, runtime, image string) *dockerSession {
	t.Helper()
	args := []string{"run", "-d", "--rm", "--init", "--runtime", runtime, "--network", "none", "--user", "1000:1000",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges:true", "--pids-limit", "256", "--memory", "1g",
		"--tmpfs", "/tmp:mode=1777", "--tmpfs", "/workspace:uid=1000,gid=1000,mode=0755"}
	if runtime == string(runner.Runsc) { // as runner/docker: gVisor gets its own seccomp profile
		f := filepath.Join(t.TempDir(), "seccomp.json") // the CLI takes a file; the API, as runner/docker uses it, the JSON
		if err := os.WriteFile(f, []byte(strings.TrimPrefix(seccomp.DockerSecurityOpt(), "seccomp=")), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--security-opt", "seccomp="+f)
	}
	out, err := exec.CommandContext(t.Context(), "docker", append(args, "--entrypoint", "sleep", image, "600")...).Output()
	if err != nil {
		t.Fatalf("docker run %s: %v (%s)", image, err, stderrOf(err))
	}
	s := &dockerSession{t: t, id: strings.TrimSpace(string(out))}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", s.id).Run() })
	return s
}

func (s *dockerSession) host() *hostSession { return nil }

func (s *dockerSession) run(lang runner.Language, code string, soft int) sessionRun {
	s.t.Helper()
	p, _ := ProgramFor(lang)
	first := "0"
	if s.runs == 0 {
		first = "1"
	}
	s.runs++
	ctx, cancel := context.WithTimeout(s.t.Context(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"exec", "-i", "-w", WorkspaceDir, s.id, "/usr/bin/env", "-i"}, Env()...)
	argv = append(argv, "/bin/sh", "-c", `cat >"$0" && rm -f /tmp/.gk-status && exec timeout -s KILL 120s /usr/bin/perl -e "$1" -- client "$2" "$3" "$4" </dev/null 4>/tmp/.gk-status`,
		WorkspaceDir+"/"+p.Main, SessionProgram(), string(lang), strconv.Itoa(soft), first)
	cmd := exec.CommandContext(ctx, "docker", argv...)
	cmd.Stdin = strings.NewReader(code)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("docker exec of the client: %v (stderr %q)", err, errb.String())
	}
	st, err := exec.CommandContext(ctx, "docker", "exec", s.id, "cat", "/tmp/.gk-status").Output()
	if err != nil {
		s.t.Fatalf("read the status line: %v", err)
	}
	return sessionRun{stdout: out.String(), stderr: errb.String(), status: string(st)}
}

// sandboxImage finds gatekeeper-sandbox:<profile>-<hash>.
func sandboxImage(t *testing.T, profile string) string {
	t.Helper()
	out, err := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "gatekeeper-sandbox").Output()
	if err != nil {
		t.Fatalf("docker images: %v", err)
	}
	re := regexp.MustCompile(`^gatekeeper-sandbox:` + profile + `-[0-9a-f]+$`)
	for _, l := range strings.Fields(string(out)) {
		if re.MatchString(l) {
			return l
		}
	}
	t.Fatalf("no gatekeeper-sandbox:%s-<hash> image: build the sandbox images (make images)", profile)
	return ""
}

// TestSessionInImages runs the session cases in the real images: all of
// them in the node image (which has python3, node and dash), the Python
// ones and matplotlib's figures in python-data, under runc and gVisor. It needs the engine: run it
// under flock /tmp/gk-heavy.lock.
func TestSessionInImages(t *testing.T) {
	if runnertest.SkipEngine() {
		t.Skipf("%s=1: skipping the engine tests", runnertest.SkipEngineEnv)
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Fatalf("no Docker engine (%v): start it (scripts/ensure-docker), or set %s=1 to skip", err, runnertest.SkipEngineEnv)
	}
	t.Parallel()
	node, data := sandboxImage(t, "node"), sandboxImage(t, "python-data")
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt+"/node", func(t *testing.T) {
			t.Parallel()
			runSessionCases(t, sessionCases(), func(t *testing.T) sessionRunner { return newDockerSession(t, rt, node) })
		})
		t.Run(rt+"/python-data", func(t *testing.T) {
			t.Parallel()
			var py []sessionCase
			for _, c := range sessionCases() {
				only := true
				for _, st := range c.steps {
					only = only && st.lang == runner.Python
				}
				if only {
					py = append(py, c)
				}
			}
			runSessionCases(t, append(py, matplotlibCase()), func(t *testing.T) sessionRunner { return newDockerSession(t, rt, data) })
		})
	}
}

// matplotlibCase: the open figures of a run are saved in /workspace as
// PNG files named for the run, and closed.
func matplotlibCase() sessionCase {
	return sessionCase{"python matplotlib figures are saved as PNGs named for the run and closed", []sessionStep{
		{lang: runner.Python, code: "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.figure()\nplt.bar([1], [2])\nx = 1\n", status: "0 k\n", stdout: ""},
		{lang: runner.Python, code: "import os\nprint(sorted(f for f in os.listdir('.') if f.startswith('figure-')))\nprint([open(f, 'rb').read(8) == b'\\x89PNG\\r\\n\\x1a\\n' for f in ('figure-1-1.png', 'figure-1-2.png')])\nprint(plt.get_fignums(), x)\n",
			status: "0 k\n", stdout: "['figure-1-1.png', 'figure-1-2.png']\n[True, True]\n[] 1\n"},
		{lang: runner.Python, code: "import matplotlib\nprint(matplotlib.get_backend())\nplt.plot([0])\nplt.show()\n", status: "0 k\n", stdout: "agg\n", stderrLacks: []string{"Warning"}},
		{lang: runner.Python, code: "import os\nprint(os.path.exists('figure-3-1.png'))\n", status: "0 k\n", stdout: "True\n"},
	}}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
