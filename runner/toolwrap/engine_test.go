package toolwrap_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// TestWrappersInTheSandboxImages runs the programs of the host tests with
// the interpreters of the sandbox images (python, node), the generated tree
// mounted read-only where the launcher puts it, against the fake bridge
// through a socket in that tree. It needs the engine and the images (make
// image); run it under the shared lock. It claims no security property:
// the bridge is a fake and the socket a bind mount (so runc, as gVisor
// would need --host-uds to pass it).
func TestWrappersInTheSandboxImages(t *testing.T) {
	if runnertest.SkipEngine() {
		t.Skip(runnertest.SkipEngineEnv + "=1")
	}
	docker := lookPath(t, "docker")
	for _, c := range []struct {
		profile, file string
		program       []byte
		argv          []string
		env           []string
	}{
		{"python", "main.py", programPy, []string{"python3", "-B", "/prog/main.py"}, []string{"PYTHONPATH=/tmp/.gatekeeper/python", "HOSTILE=" + jsonString(hostile)}},
		{"node", "main.js", programJS, []string{"node", "/prog/main.js"}, []string{"NODE_PATH=/tmp/.gatekeeper/node"}},
	} {
		t.Run(c.profile, func(t *testing.T) {
			p, ok := profile.Lookup(c.profile)
			if !ok {
				t.Fatalf("no profile %s", c.profile)
			}
			dir := writeTree(t, servers())
			b := serveBridge(t, dir, barrierN)
			progDir := t.TempDir()
			if err := os.Chmod(progDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(progDir, c.file), c.program, 0o644); err != nil {
				t.Fatal(err)
			}
			argv := []string{docker, "run", "--rm", "--runtime", "runc", "--network", "none", "--user", profile.User,
				"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
				"-v", dir + ":/tmp/.gatekeeper:ro", "-v", progDir + ":/prog:ro",
				"-e", "GATEKEEPER_TOOLS=/tmp/.gatekeeper", "-e", "BARRIER=" + strconv.Itoa(barrierN)}
			for _, e := range c.env {
				argv = append(argv, "-e", e)
			}
			argv = append(argv, p.Tag())
			argv = append(argv, c.argv...)
			checkProgram(t, c.profile+" in its image", b, runProgram(t, argv))
		})
	}
}
