package docker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
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

// TestReadStallOfBothCgroupLayouts reads stall figures from cgroup
// directories laid out as v2 keeps them (one directory) and as a v1 host
// with the v2 hierarchy beside it does (pressure in one, memory in the
// other), and fails on a missing or malformed file: a cgroup that went.
func TestReadStallOfBothCgroupLayouts(t *testing.T) {
	t.Parallel()
	const (
		mem = "some avg10=1.00 avg60=0.50 avg300=0.10 total=900000\nfull avg10=0.90 avg60=0.40 avg300=0.10 total=750000\n"
		cpu = "some avg10=80.00 avg60=70.00 avg300=20.00 total=4000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3000000\n"
	)
	write := func(dir string, files map[string]string) string {
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	want := sandbox.Stall{MemoryFull: 750 * time.Millisecond, CPUSome: 4 * time.Second, MemoryBytes: 268435456}
	v2 := write(t.TempDir(), map[string]string{"memory.pressure": mem, "cpu.pressure": cpu, "memory.current": "268435456\n"})
	hybridPSI := write(t.TempDir(), map[string]string{"memory.pressure": mem, "cpu.pressure": cpu})
	hybridMem := write(t.TempDir(), map[string]string{"memory.usage_in_bytes": "268435456\n"})
	noFull := write(t.TempDir(), map[string]string{"memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n", "cpu.pressure": cpu, "memory.current": "1\n"})
	gone := filepath.Join(t.TempDir(), "gone")
	cases := []struct {
		name     string
		psi, mem string
		v2, ok   bool
	}{
		{"cgroup v2 is read from its one directory", v2, v2, true, true},
		{"a v1 host's hybrid layout is read from both", hybridPSI, hybridMem, false, true},
		{"a pressure file without its full line is not read", noFull, noFull, true, false},
		{"a cgroup that went is not read", gone, gone, true, false},
		{"v1 memory looked for as v2's is not read", hybridPSI, hybridMem, true, false},
	}
	for _, tc := range cases {
		got, ok := readStall(tc.psi, tc.mem, tc.v2)
		switch {
		case ok != tc.ok:
			t.Errorf("%s: ok %v, want %v", tc.name, ok, tc.ok)
		case ok && got != want:
			t.Errorf("%s: %+v, want %+v", tc.name, got, want)
		}
	}
}
