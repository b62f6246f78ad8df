package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docker/docker/client"
	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/console"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/internal/instancelock"
	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/docker"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/image"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/kube"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

type runnerOptions struct {
	backend  string // docker or kube
	kube     kubeOptions
	instance string
	// lockDir holds the instance locks (internal/instancelock): the
	// sidecar that removes the instance's leftovers holds its lock.
	lockDir string
	maxRuns int
	egress  egressOptions
	pool    poolOptions
	log     *slog.Logger
}

// poolOptions are the warm pool's flags and the sandbox it keeps warm.
type poolOptions struct {
	size, min    int
	idle         time.Duration
	all          bool
	interpreters bool
	maxMemory    int64
	maxSessions  int
	base         *runner.Sandbox // the base policy's sandbox; nil: none pinned
}

// poolFlags registers the warm pool's flags on fs.
func poolFlags(fs *flag.FlagSet) *poolOptions {
	o := &poolOptions{}
	fs.IntVar(&o.size, "pool-size", 8, "the most warm sandboxes (containers or Pods) kept ready per pooled sandbox, as demand asks (0 disables the pool)")
	fs.IntVar(&o.min, "pool-min", 2, "the fewest warm sandboxes kept ready per pooled sandbox, whatever the demand (1 to --pool-size)")
	fs.BoolVar(&o.interpreters, "pool-interpreters", true, "warm sandboxes of the image profiles start their interpreter and preload its heavy modules ahead")
	fs.DurationVar(&o.idle, "pool-idle", sandbox.DefaultPoolIdle, "a warm sandbox unused for this long is replaced")
	fs.BoolVar(&o.all, "pool-all", false, "pool every sandbox a run uses, not only the base policy's")
	fs.Int64Var(&o.maxMemory, "pool-max-memory", 0, "the most bytes of memory limits all warm sandboxes together may hold; 0 means half the Docker engine's memory (with --runner kube: no bound but the nodes' room, which warm Pods give up to runs)")
	fs.IntVar(&o.maxSessions, "max-sessions", sandbox.DefaultMaxIdleSessions, "the most sessions (sandbox.session) whose sandbox may wait for their query's next run; one more ends the one idle longest, whose next run reports state_lost evicted. Idle sessions also count against --pool-max-memory")
	return o
}

// config is the warm pool's configuration, the same for every backend.
func (o poolOptions) config() sandbox.PoolConfig {
	if o.size <= 0 {
		return sandbox.PoolConfig{}
	}
	c := sandbox.PoolConfig{Size: o.size, Min: min(max(o.min, 1), o.size), Idle: o.idle, All: o.all,
		Interpreters: o.interpreters, MaxMemoryBytes: o.maxMemory}
	if o.base != nil {
		c.Sandboxes = []runner.Sandbox{*o.base}
	}
	return c
}

// baseSandbox is the sandbox of the base policy (no override), which the
// pool keeps warm; nil when it cannot be pooled (network or deps).
func baseSandbox(ctx context.Context, eng *gate.Engine) (*runner.Sandbox, error) {
	eff, err := baseEffective(ctx, eng)
	if err != nil {
		return nil, err
	}
	sb, err := eff.RunnerSandbox()
	if err != nil {
		return nil, err
	}
	if sb.Network.Enabled || sb.DepsDir != "" {
		return nil, nil
	}
	return &sb, nil
}

// baseEffective is the effective policy of a query without an override.
func baseEffective(ctx context.Context, eng *gate.Engine) (*gate.Effective, error) {
	q, err := eng.OpenQuery(ctx, "base", nil)
	if err != nil {
		return nil, err
	}
	return q.Effective(ctx)
}

// policyImages are the images the policy lets runs use: the base image
// and those of ceilings.images, resolved.
func policyImages(ctx context.Context, eng *gate.Engine) ([]string, error) {
	eff, err := baseEffective(ctx, eng)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range append([]string{eff.Policy.Sandbox.FS.Image}, eff.Policy.Ceilings.Images...) {
		ref, err := profile.Resolve(name)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	return out, nil
}

// warnMissingImages logs each image of the policy the engine lacks, with
// the command that builds it: runs that use it fail until it is there.
func warnMissingImages(ctx context.Context, eng *gate.Engine, log *slog.Logger) {
	refs, err := policyImages(ctx, eng)
	if err != nil {
		log.Warn("cannot list the policy's sandbox images", "err", err)
		return
	}
	missing, err := image.Missing(ctx, nil, refs)
	if err != nil {
		log.Warn("cannot check the policy's sandbox images (is the docker engine up?)", "err", err)
		return
	}
	for _, ref := range missing {
		log.Warn("sandbox image missing: runs that use it fail until it is there", "image", ref, "fix", profile.BuildHint(ref))
	}
}

// egressOptions are the egress proxy's flags and where its events go.
type egressOptions struct {
	auditor     egress.Auditor
	maxConns    int
	idleTimeout time.Duration
	maxBytes    int64
	caFile      string
	upstreamCA  string
}

// egressFlags registers the egress proxy's flags on fs.
func egressFlags(fs *flag.FlagSet) *egressOptions {
	o := &egressOptions{}
	fs.IntVar(&o.maxConns, "egress-max-conns", egress.DefaultMaxConnsPerSandbox, "connections one networked sandbox may hold open to the egress proxy")
	fs.DurationVar(&o.idleTimeout, "egress-idle-timeout", egress.DefaultIdleTimeout, "an egress tunnel or request with no traffic for this long is closed")
	fs.Int64Var(&o.maxBytes, "egress-max-bytes", egress.DefaultMaxBytesPerConn, "bytes each way one egress tunnel or request may carry")
	fs.StringVar(&o.caFile, "egress-ca-file", "", "keep the egress proxy's CA (which signs the certificates of intercepted hosts) in this file, mode 0600, made if missing; without it the CA is made at start and lives in memory only")
	fs.StringVar(&o.upstreamCA, "egress-upstream-ca", "", "a PEM file of CA certificates the egress proxy trusts, besides the system's, when it verifies an intercepted host (a company's private CA)")
	return o
}

// newEgressProxy makes the egress proxy networked sandboxes reach the
// outside through, with its CA (made now, or loaded from --egress-ca-file);
// the runner serves it on each sandbox network.
func newEgressProxy(o egressOptions, log *slog.Logger) (*egress.Proxy, error) {
	ca, err := egressCA(o.caFile)
	if err != nil {
		return nil, err
	}
	roots, err := upstreamRoots(o.upstreamCA)
	if err != nil {
		return nil, err
	}
	return egress.New(egress.Config{
		Auditor: o.auditor, MaxConnsPerSandbox: o.maxConns, IdleTimeout: o.idleTimeout, MaxBytesPerConn: o.maxBytes, Logger: log, CA: ca,
		UpstreamRoots: roots,
	})
}

// upstreamRoots is the system's roots and the certificates of file; nil
// (the system's roots) without one. A file with no certificate is an error.
func upstreamRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--egress-upstream-ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--egress-upstream-ca %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// egressCA is the egress proxy's CA: kept in file, or in memory without one.
func egressCA(file string) (*egress.CA, error) {
	if file == "" {
		ca, err := egress.NewCA()
		if err != nil {
			return nil, fmt.Errorf("make the egress CA: %w", err)
		}
		return ca, nil
	}
	ca, err := egress.LoadOrCreateCA(file)
	if err != nil {
		return nil, fmt.Errorf("--egress-ca-file %s: %w", file, err)
	}
	return ca, nil
}

// auditEgress writes each egress request to the audit log as a kind
// "egress" line.
type auditEgress struct{ w server.Auditor }

func (a auditEgress) Egress(ev egress.Event) error {
	return a.w.Write(egressRecord(ev))
}

// egressRecord is ev's audit line: every field of it but the source and
// the upstream address; an intercepted request's secrets by name only
// (an Event never holds a value).
func egressRecord(ev egress.Event) audit.Record {
	return audit.Record{
		Kind: audit.KindEgress, RunID: ev.RunID, QueryID: ev.QueryID, Method: ev.Method, Host: ev.Host, Port: int(ev.Port),
		Intercepted: ev.Intercepted, Path: ev.Path, Status: ev.Status, Proto: ev.Proto, Secrets: ev.Secrets,
		Decision: string(ev.Decision), Rule: ev.Rule, Reason: ev.Reason, BytesUp: ev.BytesUp, BytesDown: ev.BytesDown,
		DurationMS: ev.Duration.Milliseconds(), Error: ev.Error, OmittedRequests: ev.Omitted,
	}
}

// logEgress logs each egress request (gatekeeper run has no audit log).
type logEgress struct{ log *slog.Logger }

func (l logEgress) Egress(ev egress.Event) error {
	args := []any{"run_id", ev.RunID, "method", ev.Method, "host", ev.Host, "port", ev.Port}
	if ev.Intercepted {
		args = append(args, "path", ev.Path, "status", ev.Status, "proto", ev.Proto, "secrets", ev.Secrets)
	}
	if ev.Omitted > 0 {
		args = append(args, "omitted", ev.Omitted)
	}
	args = append(args, "decision", ev.Decision, "rule", ev.Rule, "bytes_up", ev.BytesUp, "bytes_down", ev.BytesDown, "error", ev.Error)
	l.log.Info("egress", args...)
	return nil
}

// sandboxBackend is what serve needs of a sandbox backend (docker.Runner,
// kube.Runner) besides running: removing what a killed predecessor left,
// warming its pool, and stopping.
type sandboxBackend interface {
	runner.Backend
	Cleanup(ctx context.Context) (int, error)
	Warm(ctx context.Context) error
	Close() error
}

// sandboxRunner is the sandbox backend (--runner docker or kube) behind a
// FIFO queue of --max-runs.
type sandboxRunner struct {
	backend    sandboxBackend
	queue      *runner.Queue
	collectors []prometheus.Collector
	status     func(context.Context) console.RunnerStatus
	warmed     chan struct{} // closed when the start-up checks and the pool's warm-up returned
	lock       *instancelock.Lock
}

// cleanupAtStartTimeout bounds the removal of a predecessor's leftovers at
// start: an engine or API server that does not answer must not keep the
// sidecar from serving decisions.
const cleanupAtStartTimeout = 30 * time.Second

// runnerFlag registers --runner, the sandbox backend, on fs.
func runnerFlag(fs *flag.FlagSet) *string {
	return fs.String("runner", "docker", "the sandbox backend: docker (the local Docker engine) or kube (Pods on a Kubernetes cluster: --kubeconfig, --namespace, --kube-*; docs/KUBERNETES.md)")
}

// openBackend makes the sandbox backend of o.backend with the egress proxy
// for networked sandboxes. checks, when not nil, runs the backend's
// start-up checks. It neither removes what a predecessor left nor warms a
// pool: a one-shot run (gatekeeper run) must not remove the sandboxes of
// another run of the same instance.
func openBackend(o runnerOptions) (s *sandboxRunner, checks func(context.Context), err error) {
	if o.backend != "docker" && o.backend != "kube" {
		return nil, nil, fmt.Errorf("--runner %q: want docker or kube", o.backend)
	}
	proxy, err := newEgressProxy(o.egress, o.log)
	if err != nil {
		return nil, nil, err
	}
	if o.backend == "kube" {
		return newKubeRunner(o, proxy)
	}
	s, err = newDockerRunner(o, proxy)
	return s, nil, err
}

// newSandboxRunner makes the runner of o.backend (openBackend) behind a
// FIFO queue of o.maxRuns, and removes the sandboxes a killed predecessor
// of the same instance left. First it takes the instance's lock in
// o.lockDir: while a live sidecar holds the instance, the error says so
// and how to name another, and nothing is removed. A Docker engine or
// cluster that is down is not an error: decisions are served and runs
// answer runner_unavailable.
func newSandboxRunner(ctx context.Context, o runnerOptions) (*sandboxRunner, error) {
	if o.lockDir == "" {
		return nil, errors.New("no instance lock directory") // never remove leftovers unguarded
	}
	lock, err := instancelock.Acquire(o.lockDir, o.backend, o.instance)
	if err != nil {
		return nil, err
	}
	s, checks, err := openBackend(o)
	if err != nil {
		lock.Release()
		return nil, err
	}
	s.lock = lock
	if st, ok := s.backend.(interface{ Start(context.Context) error }); ok {
		// The Kubernetes backend checks its permissions and takes the
		// instance's Lease, the cluster's guard, before removing anything.
		if err := st.Start(ctx); err != nil {
			_ = s.backend.Close()
			lock.Release()
			return nil, err
		}
	}
	s.queue, s.warmed = runner.NewQueue(s.backend, o.maxRuns), make(chan struct{})
	cctx, cancel := context.WithTimeout(ctx, cleanupAtStartTimeout)
	defer cancel()
	if n, err := s.backend.Cleanup(cctx); err != nil {
		o.log.Warn("cannot remove what a previous sidecar left (is the "+o.backend+" runner's engine up?); runs will answer runner_unavailable until it is", "runner", o.backend, "err", err)
	} else if n > 0 {
		o.log.Info("removed leftover sandboxes of a previous sidecar", "runner", o.backend, "instance", o.instance, "count", n)
	}
	// The checks and the pool's warm-up run while the sidecar serves; a
	// failure is retried by the runner and only logged here.
	go func() {
		defer close(s.warmed)
		if checks != nil {
			checks(ctx)
		}
		if err := s.backend.Warm(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("warm pool not filled at start; runs are cold until it is", "err", err)
		}
	}()
	return s, nil
}

// newDockerRunner makes the Docker backend.
func newDockerRunner(o runnerOptions, proxy *egress.Proxy) (*sandboxRunner, error) {
	d, err := docker.New(docker.Config{Instance: o.instance, Egress: proxy, Pool: o.pool.config(), MaxIdleSessions: o.pool.maxSessions, Logger: o.log})
	if err != nil {
		return nil, err
	}
	return &sandboxRunner{backend: d, collectors: d.Collectors(), status: func(ctx context.Context) console.RunnerStatus {
		st := console.RunnerStatus{Backend: "docker", Instance: o.instance, DefaultImage: defaultImageTag()}
		es, err := d.Status(ctx)
		if err != nil {
			st.Error = err.Error()
		}
		st.Engine, st.Runtimes = es.Version, es.Runtimes
		return st
	}}, nil
}

// openWorkspaces opens the store of the queries' workspaces of instance
// under stateDir and removes what a killed predecessor of the same
// instance left there.
func openWorkspaces(stateDir, instance string, log *slog.Logger) (*workspace.Store, error) {
	store, err := workspace.OpenStore(filepath.Join(stateDir, "workspaces", instance))
	if err != nil {
		return nil, err
	}
	n, err := store.Cleanup()
	if err != nil {
		return nil, err
	}
	if n > 0 {
		log.Info("removed leftover query workspaces", "instance", instance, "count", n, "dir", store.Dir())
	}
	return store, nil
}

// close waits for the start-up checks and the warm-up, then stops the
// pool (removing its warm sandboxes) and releases the backend's client.
func (s *sandboxRunner) close() {
	<-s.warmed
	_ = s.backend.Close()
	s.lock.Release()
}

func cmdRun(ctx context.Context, args []string, env envLookup, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("run", `run [--policy FILE] [--rego-dir DIR] --lang `+strings.Join(runner.LanguageNames(), "|")+` [--sandbox-policy JSON] [--timeout-ms N] [--file [PATH=]LOCAL]... [--output PATH]... [--runner docker|kube] [--human] (-c CODE | FILE | -)

Runs one piece of code in the sandbox of the policy, with no agent, and prints
the result as JSON (or readably with --human). The policy is loaded as serve
loads it, from the same flags (--policy, --rego-dir, --claude-code-dir), and
the run is decided, checked and built as the sidecar decides, checks and
builds a run frame (its rules, the operator's included; timeout, files, the
sandbox): what the sidecar would refuse, run refuses with the same rule or
message. A run the policy denies prints the decision as JSON, as decide
does, and exits 1 with no sandbox made. --runner kube runs it in a Pod of
the cluster that serve --runner kube uses, with the same flags.
Exit status: the program's; 1 when the policy denies the run.`, stderr)
	engineOpts := engineFlags(fs, true)
	lang := fs.String("lang", string(runner.Python), "one of "+strings.Join(runner.LanguageNames(), ", "))
	code := fs.String("c", "", "the code to run")
	override := fs.String("sandbox-policy", "", "a per-run override of the sandbox section, as JSON (checked against the ceilings)")
	timeoutMS := fs.Int64("timeout-ms", 0, "the run's timeout in milliseconds, at most the policy's sandbox.proc.timeout (the run frame's timeout_ms); 0 is that timeout")
	var files, outputs repeatedFlag
	fs.Var(&files, "file", "put the local file LOCAL at PATH in /workspace (default: LOCAL's base name); repeatable, within sandbox.output.max_files and max_files_bytes")
	fs.Var(&outputs, "output", "a file or directory of /workspace whose files the run returns, changed or not (\".\" for all); repeatable")
	human := fs.Bool("human", false, "print the output and a one-line summary instead of JSON")
	instance := fs.String("instance", "cli", "container label of this run")
	backend := runnerFlag(fs)
	kubeOpts := kubeFlags(fs)
	egressOpts := egressFlags(fs)
	if err := parse(fs, args, env); err != nil {
		return err
	}
	src := *code
	switch {
	case src != "" && fs.NArg() > 0:
		return fmt.Errorf("run: give the code with -c or as a file, not both")
	case src == "" && fs.NArg() == 1 && fs.Arg(0) == "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		src = string(b)
	case src == "" && fs.NArg() == 1:
		b, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		src = string(b)
	case src == "":
		fs.Usage()
		return exitError(2)
	}
	req := gate.RunRequest{RunID: "r_" + uuid.NewString(), QueryID: "cli", Language: *lang, Code: src, Outputs: outputs}
	if flagSet(fs, "timeout-ms") {
		req.TimeoutMS = timeoutMS
	}
	var err error
	if req.Files, err = readRunFiles(files); err != nil {
		return err
	}
	eng, err := engineOpts.open(ctx, quietLogger())
	if err != nil {
		return err
	}
	var raw []byte
	if *override != "" {
		raw = []byte(*override)
	}
	q, err := eng.OpenQuery(ctx, "cli", raw)
	if err != nil {
		if oe, ok := err.(*gate.OverrideError); ok {
			return fmt.Errorf("run: %s:\n  %s", oe.Error(), strings.Join(oe.Violations, "\n  "))
		}
		return err
	}
	// The run is decided by the call the sidecar re-decides a run frame
	// by, and runs under the policy that allowed it.
	d, err := decideRun(ctx, q, req)
	if d.Decision != gate.Allow {
		res := decideResult{Decision: gate.Deny, Reason: d.Reason, Rule: d.Rule, PolicyRevision: d.Revision, PolicyHash: d.PolicyHash}
		if err != nil {
			res.Error = err.Error()
		}
		if err := writeJSON(stdout, res); err != nil {
			return err
		}
		return exitError(1)
	}
	eff := d.Effective
	log := newLogger(stderr, "warn")
	events := slog.New(slog.NewTextHandler(stderr, nil))
	// The program calls the policy's MCP servers as a sidecar's run does;
	// with no audit log here, each nested call is a line on stderr.
	servers, err := runToolServers(eff, log)
	if err != nil {
		return err
	}
	if servers != nil {
		defer servers.Close()
		// A one-shot run holds up no other, so it waits for each server's
		// whole connect, where a sidecar's run waits gate.DefaultListWait.
		for name, err := range servers.Connect(ctx) {
			if err != nil {
				log.Warn("mcp server unavailable: its calls fail in this run", "mcp_server", name, "err", err)
			}
		}
		req.ToolServers, req.Auditor = servers, logCodeCalls{events}
		req.Wrappers = gate.NewWrappers(servers, gate.WrapperOptions{Logger: log})
	}
	// The sidecar's run handler builds its Spec with the same function.
	spec, err := eff.RunSpec(ctx, req)
	if err != nil {
		return err
	}
	egressOpts.auditor = logEgress{events}
	// No pool: one run takes a sandbox made for it.
	sr, _, err := openBackend(runnerOptions{backend: *backend, kube: *kubeOpts, instance: *instance, egress: *egressOpts, log: log})
	if err != nil {
		return err
	}
	defer sr.backend.Close()
	// The program's output and the names of its files are the model's text:
	// on a terminal, escape sequences in them are written as escapes.
	outW, errW := untrusted.NewTerminalWriter(stdout), untrusted.NewTerminalWriter(stderr)
	if *human {
		spec.OnOutput = func(s runner.Stream, b []byte) {
			if s == runner.Stdout {
				outW.Write(b)
			} else {
				errW.Write(b)
			}
		}
	}
	res, err := sr.backend.Run(ctx, spec)
	outW.Flush()
	errW.Flush()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if *human {
		writeRunSummary(stderr, res)
	} else {
		// The same report a run_result frame carries, from the same mapping.
		if err := writeJSON(stdout, wire.NewRunReport(res)); err != nil {
			return err
		}
	}
	if res.ExitCode != 0 {
		return exitError(res.ExitCode)
	}
	return nil
}

// decideRun decides the run of req in q as the sidecar's run handler
// decides a run frame (server.RunCall). A file that is not UTF-8 goes into
// the call as a client sends it, in base64.
func decideRun(ctx context.Context, q *gate.Query, req gate.RunRequest) (gate.Decision, error) {
	r := wire.Run{Language: req.Language, Code: req.Code, TimeoutMS: req.TimeoutMS, Outputs: req.Outputs}
	if len(req.Files) > 0 { // a run frame's files are nil when empty
		r.Files = make(map[string]wire.FileContent, len(req.Files))
		for p, data := range req.Files {
			r.Files[p] = wire.FileContent{Data: data, Base64: !utf8.ValidString(data)}
		}
	}
	call, err := server.RunCall(&r)
	if err != nil {
		return gate.Decision{Decision: gate.Deny, Rule: gate.RuleError, Reason: err.Error()}, err
	}
	return q.Decide(ctx, call)
}

// readRunFiles reads run --file's [PATH=]LOCAL arguments into the run's
// files, keyed by their path in /workspace.
func readRunFiles(args []string) (map[string]string, error) {
	files := make(map[string]string, len(args))
	for _, a := range args {
		dest, local, ok := strings.Cut(a, "=")
		if !ok {
			dest, local = filepath.Base(a), a
		}
		if dest == "" || local == "" {
			return nil, fmt.Errorf("run: --file %q: want [PATH=]LOCAL", a)
		}
		if _, dup := files[dest]; dup {
			return nil, fmt.Errorf("run: --file %q: %s is given twice", a, dest)
		}
		b, err := os.ReadFile(local)
		if err != nil {
			return nil, fmt.Errorf("run: --file: %w", err)
		}
		files[dest] = string(b)
	}
	return files, nil
}

// writeRunSummary writes what run --human prints after the output: how
// the run ended and each file it returned, the names quoted
// (untrusted.Quote), so that no name can retitle or clear the terminal or
// write a line of its own.
func writeRunSummary(w io.Writer, res runner.Result) {
	note := ""
	if res.Truncated {
		note = " output truncated"
	}
	fmt.Fprintf(w, "-- exit %d (%s) in %s on %s/%s%s\n", res.ExitCode, res.Reason, res.Duration.Round(time.Millisecond), res.Image, res.Runtime, note)
	for _, f := range res.Files {
		fmt.Fprintf(w, "-- file %s (%s, %d bytes, %s)\n", untrusted.Quote(f.Path), f.Change, f.Size, untrusted.Terminal(f.MediaType))
	}
}

func cmdImageBuild(ctx context.Context, args []string, env envLookup, stdout, stderr io.Writer) error {
	var profiles strings.Builder
	for _, p := range profile.All() {
		fmt.Fprintf(&profiles, "  %-12s %s\n", p.Name, p.About)
	}
	fs := newFlags("image build", `image build [--all | PROFILE...]

Builds sandbox image profiles from Debian packages, with no registry:
debootstrap makes the base from the machine's apt mirror, each profile adds
packages in a chroot, the layers are cached in the state directory and
loaded through the Docker API. A profile whose image exists is left as it is.
With no PROFILE, builds the default profile (`+profile.Default+`). Prints each
profile's tag on stdout, what was built and how long it took on stderr.

Profiles (sandbox.fs.image names one; docs/SANDBOX.md):
`+profiles.String(), stderr)
	all := fs.Bool("all", false, "build every profile")
	node := fs.Bool("node", false, "no longer supported: Node.js is the node profile (gatekeeper image build node)")
	toKube := fs.Bool("kube", false, "also load each image into the node's containerd for --runner kube, with no registry (docs/KUBERNETES.md)")
	loader := kube.ImageLoader{}
	fs.StringVar(&loader.Ctr, "kube-ctr", "ctr", "with --kube: containerd's ctr binary")
	fs.StringVar(&loader.Address, "kube-containerd", kube.DefaultContainerd, "with --kube: the node's containerd socket")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	names := fs.Args()
	switch {
	case *node:
		return errors.New("image build: --node is gone: Node.js and npm are the node profile now: gatekeeper image build node")
	case *all && len(names) > 0:
		return errors.New("image build: give --all or profile names, not both")
	case *all:
		names = profile.Names()
	case len(names) == 0:
		names = []string{profile.Default}
	}
	for _, n := range names {
		if _, ok := profile.Lookup(n); !ok {
			return fmt.Errorf("image build: unknown profile %q (profiles: %s)", n, strings.Join(profile.Names(), ", "))
		}
	}
	begin := time.Now()
	for _, n := range names {
		res, err := image.Build(ctx, image.Options{Profile: n})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, res.Tag)
		fmt.Fprintln(stderr, buildSummary(n, res))
		if *toKube {
			t0 := time.Now()
			if err := loadIntoKube(ctx, loader, res.Tag); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "%s: loaded into the cluster's containerd at %s in %s\n", n, loader.Address, time.Since(t0).Round(time.Millisecond))
		}
	}
	if len(names) > 1 {
		fmt.Fprintf(stderr, "image build: %d profiles in %s\n", len(names), time.Since(begin).Round(time.Millisecond))
	}
	return nil
}

// loadIntoKube copies the image ref from the Docker engine (docker save)
// into the cluster's containerd.
func loadIntoKube(ctx context.Context, l kube.ImageLoader, ref string) error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	archive, err := cli.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("save %s from the Docker engine: %w", ref, err)
	}
	defer archive.Close()
	return l.Load(ctx, ref, archive)
}

// buildSummary is the line `image build` prints on stderr for a profile.
func buildSummary(name string, res image.Result) string {
	if res.Existed {
		return fmt.Sprintf("%s: %s exists (%s)", name, res.Tag, mib(res.Size))
	}
	var layers []string
	for _, l := range res.Layers {
		if l.Cached {
			layers = append(layers, l.Profile+" cached")
		} else {
			layers = append(layers, fmt.Sprintf("%s built in %s", l.Profile, l.Duration.Round(100*time.Millisecond)))
		}
	}
	return fmt.Sprintf("%s: %s built in %s (%s), %s; log %s", name, res.Tag, res.Duration.Round(100*time.Millisecond), strings.Join(layers, ", "), mib(res.Size), res.Log)
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
