package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/runner/docker"
)

func cmdServe(ctx context.Context, args []string, env envLookup, stderr io.Writer) error {
	fs := newFlags("serve", "serve [flags]", stderr)
	listen := fs.String("listen", defaultSocket(), "where to listen: unix:///path.sock or tcp://127.0.0.1:7777")
	allowRemote := fs.Bool("allow-remote", false, "allow a TCP listen address beyond loopback")
	tokenFile := fs.String("token-file", defaultTokenFile(), "bearer token file, created (mode 0600) with a random token if absent")
	policyFile := fs.String("policy", "sandbox.policy.yaml", "policy file")
	regoDir := fs.String("rego-dir", "", "directory of extra .rego files loaded into the built-in packages")
	auditLog := fs.String("audit-log", defaultAuditLog(), "audit log file (JSON lines, hash-chained)")
	auditSync := fs.Bool("audit-sync", false, "fsync the audit log after every line")
	var origins listFlag
	fs.Var(&origins, "allow-origin", "browser Origin allowed to connect (repeatable); any other Origin is refused")
	maxFrame := fs.Int64("max-frame-bytes", 1<<20, "largest frame accepted; a larger one closes the connection with 1009")
	maxRuns := fs.Int("max-runs", 4, "sandboxed runs at once; more wait in order")
	instance := fs.String("instance", "default", "name labelling this sidecar's containers; leftovers of the same name are removed at start")
	watch := fs.Duration("watch-interval", time.Second, "how often to check the policy file and rego dir for changes (0 disables)")
	decisionTimeout := fs.Duration("decision-timeout", time.Second, "longest a policy evaluation may take; then the call is denied")
	noRunner := fs.Bool("no-runner", false, "serve decisions only; every run answers runner_unavailable")
	egressOpts := egressFlags(fs)
	poolOpts := poolFlags(fs)
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	gcPercent := fs.Int("gc-percent", 100, "the Go collector's GOGC for the sidecar (the GOGC environment variable wins); higher spends less CPU on collection")
	floodGC := fs.Int("flood-gc-percent", 25, "GOGC while any run streams over 256 KiB of output, so memory stays flat through output floods (negative: never switch)")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	log := newLogger(stderr, *logLevel)
	if v, set := os.LookupEnv("GOGC"); set {
		if n, err := strconv.Atoi(v); err == nil {
			*gcPercent = n // the environment wins
		} else {
			*floodGC = -1 // GOGC=off or the like: leave the collector alone
		}
	} else {
		debug.SetGCPercent(*gcPercent)
	}

	eng, err := gate.New(ctx, gate.Config{PolicyFile: *policyFile, RegoDir: *regoDir, DecisionTimeout: *decisionTimeout, Logger: log})
	if err != nil {
		return err
	}
	alog, err := audit.Open(*auditLog, audit.Options{Sync: *auditSync})
	if err != nil {
		return err
	}
	defer alog.Close()
	token, err := server.LoadOrCreateToken(*tokenFile)
	if err != nil {
		return err
	}
	cfg := server.Config{
		Engine: eng, Auditor: alog, Token: token, AllowedOrigins: origins, Version: version,
		MaxFrameBytes: *maxFrame, Logger: log, GCPercent: *gcPercent, FloodGCPercent: *floodGC,
	}
	var sandboxes *docker.Runner
	if !*noRunner {
		egressOpts.auditor = auditEgress{alog}
		if poolOpts.size > 0 {
			if poolOpts.base, err = baseSandbox(ctx, eng); err != nil {
				return err
			}
		}
		rs, err := newSandboxRunner(ctx, runnerOptions{instance: *instance, maxRuns: *maxRuns, egress: *egressOpts, pool: *poolOpts, log: log})
		if err != nil {
			return err
		}
		defer rs.close()
		warnMissingImages(ctx, eng, log)
		cfg.Runner = rs.queue
		sandboxes = rs.docker
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	if sandboxes != nil {
		if err := srv.Register(sandboxes.Collectors()...); err != nil {
			return err
		}
	}
	ln, err := server.Listen(*listen, *allowRemote)
	if err != nil {
		return err
	}
	if *watch > 0 {
		go eng.Watch(ctx, *watch)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = eng.Reload(ctx) // logged by Reload; a refused reload keeps the old policy
			}
		}
	}()
	log.Info("gatekeeper serving", "listen", *listen, "policy", *policyFile, "revision", eng.Revision(), "audit_log", *auditLog, "token_file", *tokenFile)
	fmt.Fprintf(stderr, "GATEKEEPER_URL=%s\n", clientURL(*listen))
	return srv.Serve(ctx, ln)
}

// clientURL is the GATEKEEPER_URL a client uses for a listen address.
func clientURL(listen string) string {
	if len(listen) > 6 && listen[:6] == "tcp://" {
		return "ws://" + listen[6:]
	}
	return listen
}
