//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/docker"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// BenchmarkHelloWorld runs a Python hello world through the backend, cold
// (a Pod per run) and warm (the pool's Pods), under runc and gVisor, beside
// the Docker backend (cold and warm) and `docker run --rm` in the same
// image, so that the figures are ratios taken in one run on one machine:
//
//	eval "$(scripts/ensure-kube env)"; go test -tags kube -run '^$' -bench HelloWorld -benchtime 10x ./runner/kube/
func BenchmarkHelloWorld(b *testing.B) {
	c := requireCluster(b)
	sb := runnertest.Sandbox()
	sb.Image, sb.CPUs = c.image, 0.5
	spec := func(rt runner.Runtime) runner.Spec {
		s := runnertest.Spec(`print("hello")`)
		s.Sandbox = sb
		s.Sandbox.Runtime = rt
		return s
	}
	type backend interface {
		Run(context.Context, runner.Spec) (runner.Result, error)
	}
	run := func(b *testing.B, r backend, rt runner.Runtime) {
		b.Helper()
		for b.Loop() {
			res, err := r.Run(b.Context(), spec(rt))
			if err != nil || res.Stdout != "hello\n" {
				b.Fatalf("Run = %+v, %v", res, err)
			}
		}
	}
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		b.Run("kube-cold-"+string(rt), func(b *testing.B) {
			r := newTestRunner(b, testConfig(b, nil))
			if _, err := r.Run(b.Context(), spec(rt)); err != nil { // the canary and the image's probe, once
				b.Fatal(err)
			}
			run(b, r, rt)
		})
		b.Run("kube-warm-"+string(rt), func(b *testing.B) {
			sbRT := sb
			sbRT.Runtime = rt
			cfg := testConfig(b, nil)
			cfg.Pool = sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sbRT}}
			r := newTestRunner(b, cfg)
			if err := r.Warm(b.Context()); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				if err := r.Warm(b.Context()); err != nil { // a warm Pod for each run, not timed
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := r.Run(b.Context(), spec(rt))
				if err != nil || res.Stdout != "hello\n" {
					b.Fatalf("Run = %+v, %v", res, err)
				}
			}
		})
		for _, warm := range []bool{false, true} {
			name := "docker-cold-" + string(rt)
			pool := sandbox.PoolConfig{}
			if warm {
				name = "docker-warm-" + string(rt)
				sbRT := sb
				sbRT.Runtime = rt
				pool = sandbox.PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{sbRT}}
			}
			b.Run(name, func(b *testing.B) {
				d, err := docker.New(docker.Config{Instance: fmt.Sprintf("kube-bench-%d-%d", os.Getpid(), instanceSeq.Add(1)), Pool: pool})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_, _ = d.Cleanup(ctx)
					d.Close()
				})
				if err := d.Warm(b.Context()); err != nil {
					b.Fatal(err)
				}
				if !warm {
					run(b, d, rt)
					return
				}
				for b.Loop() {
					b.StopTimer()
					if err := d.Warm(b.Context()); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					res, err := d.Run(b.Context(), spec(rt))
					if err != nil || res.Stdout != "hello\n" {
						b.Fatalf("Run = %+v, %v", res, err)
					}
				}
			})
		}
		b.Run("docker-run-rm-"+string(rt), func(b *testing.B) {
			for b.Loop() {
				out, err := exec.CommandContext(b.Context(), "docker", "run", "--rm", "--runtime", string(rt), "--network", "none", c.image, "python3", "-c", `print("hello")`).CombinedOutput()
				if err != nil || string(out) != "hello\n" {
					b.Fatalf("docker run: %v: %s", err, out)
				}
			}
		})
	}
}
