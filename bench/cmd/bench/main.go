// Command bench is the driver of `make bench`: it measures gatekeeper
// against the alternatives (see package bench), prints the table and
// writes bench/results.json, bench/results.md and bench/latency.svg. main
// only wires: flags, logging, a signal-cancelled context, then run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// quote reads a file to quote in the report; a missing one is logged.
func quote(log *slog.Logger, path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		log.Warn("nothing to quote", "err", err)
		return ""
	}
	return string(b)
}

// withoutOPA are the phases that start no OPA server.
var withoutOPA = []string{"runs", "memory", "trace", "profiles", "interpreters", "pool", "kube", "seccomp", "codemode", "sessions", "egress", "compare"}

// onlyWithoutOPA says whether only names phases that start no OPA server.
func onlyWithoutOPA(only []string) bool {
	if len(only) == 0 {
		return false
	}
	for _, p := range only {
		if !slices.Contains(withoutOPA, p) {
			return false
		}
	}
	return true
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
	fs.StringVar(&cfg.Repo, "repo", ".", "repository root")
	fs.StringVar(&cfg.Gatekeeper, "gatekeeper", "bin/gatekeeper", "the sidecar binary")
	fs.StringVar(&cfg.OPA, "opa", "", "the opa binary (required)")
	fs.StringVar(&cfg.Docker, "docker", "docker", "the docker CLI")
	fs.StringVar(&cfg.Node, "node", "node", "node")
	fs.StringVar(&cfg.Image, "image", "", "the sandbox image tag (required)")
	fs.StringVar(&cfg.Work, "work", "bench/out", "logs and intermediate files")
	fs.StringVar(&cfg.Out, "out", "bench", "where results.json, results.md and latency.svg go")
	fs.IntVar(&cfg.Decisions, "decisions", 5000, "samples per decision series")
	fs.IntVar(&cfg.Warmup, "warmup", 500, "untimed decision calls per series first")
	fs.IntVar(&cfg.Runs, "runs", 40, "container runs per series")
	fs.IntVar(&cfg.TraceRuns, "trace-runs", 10, "traced runs through the runner, cold and then warm")
	fs.IntVar(&cfg.ProfileRuns, "profile-runs", 20, "runs per series of row 5 (hello world per image profile) and per side of row 10's pairs")
	fs.IntVar(&cfg.Rounds, "rounds", 3, "interleaved throughput rounds per level")
	fs.DurationVar(&cfg.Slice, "slice", 500*time.Millisecond, "length of one throughput slice")
	fs.IntVar(&cfg.FloodMiB, "flood-mib", 100, "MiB the output-flood run prints")
	fs.BoolVar(&cfg.Perf, "perf", true, "profile the sidecar with perf(1) under the heaviest load")
	fs.DurationVar(&cfg.DecisionLogOutage, "decision-log-outage", 5*time.Minute, "row 12's receiver outage")
	fs.BoolVar(&cfg.Merge, "merge", false, "lay this run's rows over the existing results.json (with -only: measure some rows again, keep the others)")
	fs.BoolVar(&cfg.Kube, "kube", false, "also measure rows 6 and 7 on Kubernetes Pods (--runner kube, the cluster of the environment: scripts/ensure-kube env)")
	pprofTop := fs.String("pprof-top", "", "file with `go tool pprof -top` output to quote")
	regoBench := fs.String("rego-bench", "", "file with `go test -bench RegoDecision` output to quote")
	only := fs.String("only", "", "comma-separated phases: decisions, throughput, runs, profiles, memory, trace, interpreters, pool, kube, seccomp, codemode, sessions, egress, decisionlog, compare")
	conns := fs.String("conns", "1,16,64", "throughput concurrency levels")
	sessions := fs.String("pool-sessions", "8,32", "the pool phase's levels of concurrent sessions")
	think := fs.String("pool-think", "5s,1s", "the pool phase's pauses between a session's runs")
	md := fs.String("benchmarks-md", "", "BENCHMARKS.md whose results section to replace")
	render := fs.Bool("render", false, "measure nothing: write results.md (and -benchmarks-md's section) again from results.json")
	fs.Func("compare", "a sidecar build for the compare phase, NAME=BINARY[;ENV=VALUE...] (repeat; the first is the baseline)", func(s string) error {
		v, err := bench.ParseVariant(s)
		if err == nil {
			cfg.Compare = append(cfg.Compare, v)
		}
		return err
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *render {
		cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		res, err := bench.Render(cfg)
		if err != nil {
			return err
		}
		return splice(stdout, res, *md)
	}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	if cfg.Image == "" && *only != "compare" {
		return fmt.Errorf("-image is required (but for -only compare)")
	}
	if cfg.OPA == "" && !onlyWithoutOPA(cfg.Only) {
		return fmt.Errorf("-opa is required (but for -only with phases that start no OPA: %s)", strings.Join(withoutOPA, ", "))
	}
	for _, c := range strings.Split(*conns, ",") {
		var n int
		if _, err := fmt.Sscan(c, &n); err != nil || n <= 0 {
			return fmt.Errorf("-conns: %q is not a positive number", c)
		}
		cfg.Conns = append(cfg.Conns, n)
	}
	for _, c := range strings.Split(*sessions, ",") {
		var n int
		if _, err := fmt.Sscan(c, &n); err != nil || n <= 1 {
			return fmt.Errorf("-pool-sessions: %q is not a number over 1", c)
		}
		cfg.PoolSessions = append(cfg.PoolSessions, n)
	}
	for _, t := range strings.Split(*think, ",") {
		d, err := time.ParseDuration(t)
		if err != nil || d < 0 {
			return fmt.Errorf("-pool-think: %q is not a duration", t)
		}
		cfg.PoolThink = append(cfg.PoolThink, d)
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.PprofTop, cfg.RegoBench = quote(cfg.Log, *pprofTop), quote(cfg.Log, *regoBench)
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		fmt.Fprintln(stdout, res.Table())
		return fmt.Errorf("phases failed: %s (bench/results.* written; %s left as it was)", strings.Join(res.Failed, ", "), *md)
	}
	return splice(stdout, res, *md)
}

// splice prints the table and replaces md's results section, when md is set.
func splice(stdout io.Writer, res *bench.Results, md string) error {
	fmt.Fprintln(stdout, res.Table()) // the evidence under it is in results.md
	if md == "" {
		return nil
	}
	doc, err := os.ReadFile(md)
	if err != nil {
		return err
	}
	out, err := bench.SpliceMarkdown(doc, res.Markdown())
	if err != nil {
		return fmt.Errorf("%s: %w", md, err)
	}
	return os.WriteFile(md, out, 0o644)
}
