//go:build kube

package kube

import (
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// TestPeakMemory runs a program that touches 64 MiB and exits at once, and
// one that touches nothing, in Pods under runc and gVisor, made for the
// run and taken from the warm pool. The first must report a peak of at
// least 64 MiB and no more than the 256 MiB limit, read from the Pod's
// cgroup on the node (the test runner runs on the test cluster's node);
// the second a peak at least 48 MiB lower, so that the figure follows
// what the program used rather than the sandbox's size.
func TestPeakMemory(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		for _, pooled := range []bool{false, true} {
			name := string(rt) + "/cold"
			if pooled {
				name = string(rt) + "/pooled"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				sb := runnertest.Sandbox()
				sb.Image, sb.Runtime, sb.CPUs = c.image, rt, 0.5
				var r *Runner
				if pooled {
					r = pooledRunner(t, sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sb}})
				} else {
					r = newTestRunner(t, testConfig(t, nil))
				}
				run := func(code string) runner.Result {
					t.Helper()
					spec := runnertest.Spec(code)
					spec.Sandbox = sb
					res, err := r.Run(t.Context(), spec)
					if err != nil {
						t.Fatal(err)
					}
					if res.Reason != runner.Exited || res.ExitCode != 0 || res.Stdout != "touched\n" {
						t.Fatalf("ended %s %d stdout %q stderr %q", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
					}
					if pooled {
						warmUp(t, r) // the next run is warm too
					}
					return res
				}
				big := run("b = bytearray(64 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint('touched')")
				small := run("print('touched')")
				t.Logf("peak of 64 MiB touched: %d bytes; of nothing touched: %d bytes", big.PeakMemoryBytes, small.PeakMemoryBytes)
				if big.PeakMemoryBytes < 64<<20 || big.PeakMemoryBytes > sb.MemoryBytes {
					t.Errorf("peak memory %d bytes, want between 64 MiB (%d) and the limit (%d)", big.PeakMemoryBytes, 64<<20, sb.MemoryBytes)
				}
				if small.PeakMemoryBytes <= 0 || small.PeakMemoryBytes > big.PeakMemoryBytes-48<<20 {
					t.Errorf("peak memory of a run that touched nothing %d bytes, want above 0 and at least 48 MiB below the other's %d", small.PeakMemoryBytes, big.PeakMemoryBytes)
				}
				if pooled {
					if hits := counterValue(t, r.Metrics().Hits); hits != 2 {
						t.Errorf("%v pool hits, want 2: both runs warm", hits)
					}
				}
			})
		}
	}
}
