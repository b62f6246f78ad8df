package docker

import (
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// TestPeakMemoryOfAShortRun checks that a run shorter than the engine's
// stats interval still reports what it used: the program touches 48 MiB
// and exits at once, long before the stats stream's first sample.
func TestPeakMemoryOfAShortRun(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	r := newTestRunner(t)
	spec := runnertest.Spec("b = bytearray(48 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint('touched')")
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != runner.Exited || res.ExitCode != 0 || res.Stdout != "touched\n" {
		t.Fatalf("ended %s %d stdout %q stderr %q", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
	}
	if res.PeakMemoryBytes < 48<<20 {
		t.Errorf("peak memory %d bytes; the program touched 48 MiB (%d bytes)", res.PeakMemoryBytes, 48<<20)
	}
}
