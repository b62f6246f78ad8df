package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatekeeper-ai/gatekeeper/gate/artifacts"
	"github.com/gatekeeper-ai/gatekeeper/gate/console"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

func cmdServe(ctx context.Context, args []string, env envLookup, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve [flags]", stderr)
	listen := fs.String("listen", defaultSocket(), "where to listen: unix:///path.sock or tcp://127.0.0.1:7777")
	allowRemote := fs.Bool("allow-remote", false, "allow a TCP listen address beyond loopback")
	hookListen := fs.String("hook-listen", "", "also serve the Claude Code hook endpoint (and /healthz and /readyz only) here, for the CLI's HTTP hooks: tcp://127.0.0.1:PORT (port 0 picks one)")
	tokenFile := fs.String("token-file", defaultTokenFile(), "bearer token file, created (mode 0600) with a random token if absent")
	engineOpts := engineFlags(fs, true)
	bundleOpts := bundleFlags(fs)
	auditOpts := auditFlags(fs)
	decisionLogOpts := decisionLogFlags(fs)
	var origins listFlag
	fs.Var(&origins, "allow-origin", "browser Origin allowed to connect (repeatable); any other Origin is refused")
	maxFrame := fs.Int64("max-frame-bytes", server.DefaultMaxFrameBytes, "largest frame accepted; a larger one closes the connection with 1009")
	maxRuns := fs.Int("max-runs", 4, "sandboxed runs at once; more wait in order")
	caps := capFlags(fs)
	debugEndpoints := fs.Bool("debug-endpoints", false, "serve Go's runtime profiles at /debug/pprof/ (goroutines, heap, CPU), behind the token")
	instance := fs.String("instance", "default", "name labelling this sidecar's containers; leftovers of the same name are removed at start, and a second sidecar of the same name on this host refuses to start while the first runs")
	watch := fs.Duration("watch-interval", time.Second, "how often to check the policy file and rego dir for changes (0 disables)")
	noRunner := fs.Bool("no-runner", false, "serve decisions only; every run answers runner_unavailable")
	backend := runnerFlag(fs)
	kubeOpts := kubeFlags(fs)
	stateDir := fs.String("state-dir", defaultStateDir(), "where the sidecar keeps each query's /workspace between its runs (under workspaces/<instance>, removed when the query closes and at start)")
	keepWorkspaces := fs.Bool("workspaces", true, "keep each query's /workspace between its runs; false starts every run from an empty /workspace")
	artifactsDir := fs.String("artifacts-dir", "", artifactsDirUsage)
	storeCode := fs.String("store-code", string(artifacts.OnError), "when an artifact keeps the run's code (its digest is always kept): never, on_error (the run did not exit 0 by itself) or always")
	egressOpts := egressFlags(fs)
	poolOpts := poolFlags(fs)
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	gcPercent := fs.Int("gc-percent", server.DefaultGCPercent, "the Go collector's GOGC for the sidecar (the GOGC environment variable wins); higher spends less CPU on collection and more memory")
	ui := fs.Bool("ui", false, "serve the live console at /ui/ on the listen address (docs/CONSOLE.md); a browser needs a tcp:// address")
	floodGC := fs.Int("flood-gc-percent", 25, "GOGC while any run streams over 256 KiB of output, so memory stays flat through output floods (negative: never switch)")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	if *backend == "kube" {
		*instance = kubeOpts.serving(fs, env, *instance)
	}
	log := newLogger(stderr, *logLevel)
	code, err := artifacts.ParseStoreCode(*storeCode)
	if err != nil {
		return err
	}
	if v, set := os.LookupEnv("GOGC"); set {
		if n, err := strconv.Atoi(v); err == nil {
			*gcPercent = n // the environment wins
		} else {
			*floodGC = -1 // GOGC=off or the like: leave the collector alone
		}
	} else {
		debug.SetGCPercent(*gcPercent)
	}

	eng, bundles, err := openPolicy(ctx, engineOpts, bundleOpts, fs, *stateDir, log)
	if err != nil {
		return err
	}
	servers, err := startMCPServers(ctx, eng, log)
	if err != nil {
		return err
	}
	if servers != nil {
		defer servers.Close()
	}
	alog, closeAudit, err := auditOpts.open(stdout, stderr, log)
	if err != nil {
		return err
	}
	defer closeAudit()
	token, err := server.LoadOrCreateToken(*tokenFile)
	if err != nil {
		return err
	}
	cfg := server.Config{
		Engine: eng, Auditor: alog, Token: token, AllowedOrigins: origins, Version: version,
		MaxFrameBytes: *maxFrame, Logger: log, GCPercent: *gcPercent, FloodGCPercent: *floodGC, StoreCode: code,
	}
	if servers != nil { // never a typed nil in the interface
		cfg.ToolServers = servers
	}
	if *artifactsDir != "" {
		d, err := artifacts.Open(*artifactsDir)
		if err != nil {
			return err
		}
		cfg.Artifacts = d
	}
	caps.apply(&cfg)
	if bundles != nil {
		cfg.Readiness = bundleReadiness(bundles, eng)
	}
	cfg.Debug = *debugEndpoints
	shipper, err := decisionLogOpts.open(alog, auditOpts.path, *instance, bundles != nil, log)
	if err != nil {
		return err
	}
	if shipper != nil {
		defer startDecisionLog(shipper, &cfg, eng)() // stops before the audit log closes
	}
	var sandboxes *sandboxRunner
	var con *console.Console
	if *ui {
		reg := prometheus.NewRegistry()
		ccfg := console.Config{Token: token, AuditPath: auditOpts.path, Engine: eng, Gatherer: reg, AllowRemote: *allowRemote, Version: version, Logger: log}
		if !*noRunner {
			ccfg.Runner = func(ctx context.Context) console.RunnerStatus {
				return runnerStatus(ctx, sandboxes, *backend, *instance)
			}
		}
		if con, err = console.New(ccfg); err != nil {
			return err
		}
		cfg.Registry, cfg.UI, cfg.RunObserver, cfg.ApprovalObserver, cfg.Auditor = reg, con.Handler(), con, con, con.Auditor(alog)
		go con.Run(ctx)
	}
	if !*noRunner {
		egressOpts.auditor = auditEgress{cfg.Auditor}
		if poolOpts.size > 0 {
			if poolOpts.base, err = baseSandbox(ctx, eng); err != nil {
				return err
			}
		}
		if *backend == "kube" {
			if refs, err := policyImages(ctx, eng); err == nil && len(refs) > 0 {
				kubeOpts.checkImage = refs[0] // the base policy's image
			}
		}
		rs, err := newSandboxRunner(ctx, runnerOptions{backend: *backend, kube: *kubeOpts, instance: *instance, lockDir: defaultLockDir(), maxRuns: *maxRuns, egress: *egressOpts, pool: *poolOpts, log: log})
		if err != nil {
			return err
		}
		defer rs.close()
		if *backend == "docker" {
			warnMissingImages(ctx, eng, log)
		}
		cfg.Runner = rs.queue
		sandboxes = rs
		if *keepWorkspaces {
			if cfg.Workspaces, err = openWorkspaces(*stateDir, *instance, log); err != nil {
				return err
			}
		}
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	if sandboxes != nil {
		if err := srv.Register(sandboxes.collectors...); err != nil {
			return err
		}
	}
	if shipper != nil {
		if err := srv.Register(shipper.Collectors()...); err != nil {
			return err
		}
	}
	ln, err := server.Listen(*listen, *allowRemote)
	if err != nil {
		return err
	}
	var hookLn net.Listener
	if *hookListen != "" {
		if hookLn, err = server.Listen(*hookListen, *allowRemote); err != nil {
			ln.Close()
			return err
		}
	}
	if bundles != nil {
		go runBundles(ctx, bundles, log)
	} else if *watch > 0 {
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
	addr := listenAddr(ln, *listen)
	log.Info("gatekeeper serving", "listen", addr, "policy", policyName(engineOpts, bundleOpts), "revision", eng.Revision(), "audit_log", auditOpts.path, "token_file", *tokenFile, "ui", *ui)
	fmt.Fprintf(stderr, "GATEKEEPER_URL=%s\n", clientURL(addr))
	if con != nil {
		if host, ok := strings.CutPrefix(addr, "tcp://"); ok {
			fmt.Fprintf(stderr, "GATEKEEPER_UI=http://%s%s\n", host, con.LoginURL())
		} else {
			fmt.Fprintf(stderr, "gatekeeper: the console is served on the Unix socket for gatekeeper tail; a browser needs a TCP address: serve --ui --listen tcp://127.0.0.1:7777\n")
		}
	}
	if hookLn == nil {
		return srv.Serve(ctx, ln)
	}
	hookURL := "http://" + hookLn.Addr().String() + wire.HookPath
	log.Info("serving Claude Code hooks", "url", hookURL)
	fmt.Fprintf(stderr, "GATEKEEPER_HOOK_URL=%s\n", hookURL)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hookErr := make(chan error, 1)
	go func() {
		hookErr <- srv.ServeHooks(ctx, hookLn)
		cancel() // one listener failing stops the other
	}()
	err = srv.Serve(ctx, ln)
	cancel()
	return errors.Join(err, <-hookErr)
}

// listenAddr is the address ln listens on, as --listen spells it: the
// port the system chose for tcp://host:0.
func listenAddr(ln net.Listener, listen string) string {
	if strings.HasPrefix(listen, "tcp://") {
		return "tcp://" + ln.Addr().String()
	}
	return listen
}

// runnerStatus is the console's view of the sandbox runner.
func runnerStatus(ctx context.Context, s *sandboxRunner, backend, instance string) console.RunnerStatus {
	if s == nil {
		return console.RunnerStatus{Backend: backend, Instance: instance, DefaultImage: defaultImageTag(), Error: "not started yet"}
	}
	return s.status(ctx)
}

// clientURL is the GATEKEEPER_URL a client uses for a listen address.
func clientURL(listen string) string {
	if len(listen) > 6 && listen[:6] == "tcp://" {
		return "ws://" + listen[6:]
	}
	return listen
}

// defaultImageTag is the image the default profile resolves to.
func defaultImageTag() string {
	ref, err := profile.Resolve(profile.Default)
	if err != nil {
		return err.Error()
	}
	return ref
}
