package docker

import (
	"slices"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// BenchmarkRunCold measures a Python hello world end to end (Run's call to
// its return) in a container created for the run.
func BenchmarkRunCold(b *testing.B) { benchmarkRun(b, false) }

// BenchmarkRunWarm measures the same run taking a warm container of the
// pool. The pool is refilled between runs, off the clock, as it is between
// an agent's runs; a run that missed would be cold.
func BenchmarkRunWarm(b *testing.B) { benchmarkRun(b, true) }

func benchmarkRun(b *testing.B, warm bool) {
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		b.Run(string(rt), func(b *testing.B) {
			requireRuntime(b, rt)
			sb := runnertest.Sandbox()
			sb.Runtime = rt
			var r *Runner
			if warm {
				r = newPooledRunner(b, sandbox.PoolConfig{Size: 2, Sandboxes: []runner.Sandbox{sb}})
			} else {
				r = newTestRunner(b)
			}
			if err := r.Warm(b.Context()); err != nil {
				b.Fatal(err)
			}
			spec := runnertest.Spec(`print("hello, world")`)
			spec.Sandbox = sb
			if _, err := r.Run(b.Context(), spec); err != nil { // the language check, cached
				b.Fatal(err)
			}
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				if warm {
					b.StopTimer()
					settle(b, r, 2)
					b.StartTimer()
				}
				begin := time.Now()
				res, err := r.Run(b.Context(), spec)
				took = append(took, time.Since(begin))
				if err != nil || res.Stdout != "hello, world\n" {
					b.Fatalf("Run = %+v, %v", res, err)
				}
			}
			b.StopTimer()
			if warm {
				if misses := counterValue(b, r.Metrics().Misses); misses != 0 {
					b.Errorf("%v runs missed the pool", misses)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(took[(len(took)*99)/100].Milliseconds()), "p99-ms")
		})
	}
}

// settle waits until the pool is full and the last run's container is
// removed, so that neither competes with the next run for the engine.
func settle(b *testing.B, r *Runner, size int) {
	b.Helper()
	if err := r.Warm(b.Context()); err != nil {
		b.Fatal(err)
	}
	for range 200 {
		list, err := r.pf.containers(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if len(list) <= size {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal("the last run's container was not removed within 2s")
}

// BenchmarkRunWarmVsCold alternates a cold and a warm hello world, so that
// both see the same machine (shared machines drift), and reports each
// one's p50 and their ratio.
func BenchmarkRunWarmVsCold(b *testing.B) {
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		b.Run(string(rt), func(b *testing.B) {
			requireRuntime(b, rt)
			sb := runnertest.Sandbox()
			sb.Runtime = rt
			pooled := newPooledRunner(b, sandbox.PoolConfig{Size: 2, Sandboxes: []runner.Sandbox{sb}})
			cold := newTestRunner(b)
			spec := runnertest.Spec(`print("hello, world")`)
			spec.Sandbox = sb
			settle(b, pooled, 2)
			for _, r := range []*Runner{pooled, cold} { // the language check, cached
				if _, err := r.Run(b.Context(), spec); err != nil {
					b.Fatal(err)
				}
			}
			var warmT, coldT []time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				settle(b, pooled, 2)
				b.StartTimer()
				// Cold first: it leaves nothing behind, while the warm run's
				// removal and refill would run on during the next run.
				for _, r := range []*Runner{cold, pooled} {
					begin := time.Now()
					res, err := r.Run(b.Context(), spec)
					if err != nil || res.Stdout != "hello, world\n" {
						b.Fatalf("Run = %+v, %v", res, err)
					}
					if r == pooled {
						warmT = append(warmT, time.Since(begin))
					} else {
						coldT = append(coldT, time.Since(begin))
					}
				}
			}
			b.StopTimer()
			slices.Sort(warmT)
			slices.Sort(coldT)
			w, c := warmT[len(warmT)/2], coldT[len(coldT)/2]
			b.ReportMetric(float64(w.Milliseconds()), "warm-p50-ms")
			b.ReportMetric(float64(c.Milliseconds()), "cold-p50-ms")
			b.ReportMetric(float64(w)/float64(c), "warm/cold")
		})
	}
}

// BenchmarkRunWarmSnapshot alternates two warm hello worlds on one pool:
// one with a query's workspace (it starts from the snapshot the one before
// saved and sends its own back, as every run through the sidecar does),
// one with no snapshot at all (no workspace, no files returned), and
// reports each one's p50 and their ratio: what the snapshot costs.
func BenchmarkRunWarmSnapshot(b *testing.B) {
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		b.Run(string(rt), func(b *testing.B) {
			requireRuntime(b, rt)
			sb := runnertest.Sandbox()
			sb.Runtime = rt
			r := newPooledRunner(b, sandbox.PoolConfig{Size: 2, Sandboxes: []runner.Sandbox{sb}})
			store, err := workspace.OpenStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			ws, err := store.Workspace("bench")
			if err != nil {
				b.Fatal(err)
			}
			bare := runnertest.Spec(`print("hello, world")`)
			bare.Sandbox = sb
			saved := bare
			saved.Workspace = ws
			saved.Sandbox.MaxFiles, saved.Sandbox.MaxFilesBytes = 20, 4<<20
			settle(b, r, 2)
			if _, err := r.Run(b.Context(), bare); err != nil { // the language check, cached
				b.Fatal(err)
			}
			var with, without []time.Duration
			b.ResetTimer()
			for i := range b.N {
				order := []runner.Spec{bare, saved}
				if i%2 == 1 {
					order[0], order[1] = saved, bare
				}
				for _, spec := range order {
					b.StopTimer()
					settle(b, r, 2)
					b.StartTimer()
					begin := time.Now()
					res, err := r.Run(b.Context(), spec)
					took := time.Since(begin)
					if err != nil || res.Stdout != "hello, world\n" {
						b.Fatalf("Run = %+v, %v", res, err)
					}
					if spec.Workspace != nil {
						if res.Workspace != runner.WorkspaceSaved {
							b.Fatalf("workspace %q: %s", res.Workspace, res.WorkspaceNote)
						}
						with = append(with, took)
					} else {
						without = append(without, took)
					}
				}
			}
			b.StopTimer()
			if misses := counterValue(b, r.Metrics().Misses); misses != 0 {
				b.Errorf("%v runs missed the pool", misses)
			}
			slices.Sort(with)
			slices.Sort(without)
			w, n := with[len(with)/2], without[len(without)/2]
			b.ReportMetric(float64(w.Microseconds())/1000, "snapshot-p50-ms")
			b.ReportMetric(float64(n.Microseconds())/1000, "none-p50-ms")
			b.ReportMetric(float64(w)/float64(n), "snapshot/none")
		})
	}
}
