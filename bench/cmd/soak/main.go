// Command soak is the driver of `make soak` and of the short profile in
// `make test` (see package bench/soak): it runs the load and the faults,
// prints every check, and writes bench/soak/results.json,
// bench/soak/timeline.svg and, with -reliability-md, the results section
// of RELIABILITY.md. It exits non-zero when a check failed. main only
// wires: flags (each with a SOAK_* environment default), logging, a
// signal-cancelled context, then run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/bench/soak"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// profiles are the sizes of the two runs: short in make test, long in
// make soak. Each is sized for a 2-core machine; SOAK_SESSIONS and
// SOAK_SECONDS scale them.
var profiles = map[string]struct {
	seconds, sessions, sdk int
}{
	"short": {150, 12, 2},
	"long":  {900, 16, 2},
}

// envInt is the integer in environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg soak.Config
	profile := fs.String("profile", envOr("SOAK_PROFILE", "short"), "short (make test) or long (make soak); env SOAK_PROFILE")
	fs.StringVar(&cfg.Repo, "repo", ".", "repository root")
	fs.StringVar(&cfg.Gatekeeper, "gatekeeper", "bin/gatekeeper", "the sidecar binary")
	fs.StringVar(&cfg.Node, "node", "node", "node, for the Agent SDK sessions")
	fs.StringVar(&cfg.Image, "image", "", "the sandbox image tag (required; gatekeeper image build prints it)")
	fs.StringVar(&cfg.Work, "work", "bench/soak/out", "logs, the audit set, intermediate files")
	fs.StringVar(&cfg.Out, "out", "", "where results.json and timeline.svg go (default: the work directory)")
	fs.StringVar(&cfg.Report, "reliability-md", "", "RELIABILITY.md, whose results section is replaced")
	fs.StringVar(&cfg.State, "state", envOr("GATEKEEPER_STATE_DIR", "/var/lib/gatekeeper")+"/soak", "the soak engine's data root's parent (not on overlayfs)")
	fs.StringVar(&cfg.Run, "run", "/run/gksoak", "the soak engine's exec root's parent (a short path)")
	sessions := fs.Int("sessions", 0, "raw protocol sessions; env SOAK_SESSIONS (default by profile)")
	seconds := fs.Int("seconds", 0, "seconds of load; env SOAK_SECONDS (default by profile)")
	sdk := fs.Int("sdk-sessions", -1, "Agent SDK sessions; env SOAK_SDK_SESSIONS (default by profile)")
	fs.IntVar(&cfg.IdleConns, "idle-conns", 1000, "idle connections of the misbehaving clients")
	fs.IntVar(&cfg.OpenQueryFlood, "open-query-flood", 200000, "open_query frames of the client that never closes its queries")
	fs.IntVar(&cfg.Burst, "burst", 10000, "frames of the burst")
	fs.Float64Var(&cfg.LatencyFactor, "latency-factor", 10, "bound on each fault's p99 decision latency, as a multiple of the quiet p99")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p, ok := profiles[*profile]
	if !ok {
		return fmt.Errorf("-profile %q: want short or long", *profile)
	}
	if cfg.Image == "" {
		return fmt.Errorf("-image is required")
	}
	cfg.Profile = *profile
	cfg.Sessions = pick(*sessions, envInt("SOAK_SESSIONS", p.sessions))
	cfg.Duration = time.Duration(pick(*seconds, envInt("SOAK_SECONDS", p.seconds))) * time.Second
	cfg.SDKSessions = envInt("SOAK_SDK_SESSIONS", p.sdk)
	if *sdk >= 0 {
		cfg.SDKSessions = *sdk
	}
	if cfg.Out == "" {
		cfg.Out = cfg.Work
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	res, err := soak.Run(ctx, cfg)
	if res != nil {
		fmt.Fprintln(stderr, res.Markdown())
	}
	return err
}

func pick(flagValue, def int) int {
	if flagValue > 0 {
		return flagValue
	}
	return def
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
