// Package soak is gatekeeper's soak and fault suite (make soak, and a short
// profile in make test): N agent sessions keep a realistic mix of tool
// calls and sandboxed runs going against one sidecar for a fixed time,
// while faults are injected at known times, each with its expected outcome
// checked: the Docker engine restarted and frozen, the sidecar killed and
// started again, the audit log's filesystem full, the policy file replaced
// by a broken and then a stricter one, and misbehaving clients. At the end
// every request is accounted for on both sides (the clients' replies, the
// audit log), the audit chain is verified across its rotations, and the
// sidecar's goroutines, fds and memory and the engine's containers,
// networks and firewall rules are compared with before. The figures go to
// RELIABILITY.md.
//
// The sidecar's engine is one the soak starts for itself (Engine), so that
// restarting and freezing it touches nobody else.
package soak

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/internal/tmpfs"
)

// Config says what to soak and for how long.
type Config struct {
	// Repo is the repository root (ts-client/ for the SDK sessions).
	Repo string
	// Gatekeeper is bin/gatekeeper; Node runs the SDK sessions.
	Gatekeeper, Node string
	// Image is the sandbox image tag, copied from the machine's engine.
	Image string
	// Work holds logs and the audit log's mount; Out receives results.json
	// and the chart; Report, when set, is RELIABILITY.md, whose results
	// section is replaced.
	Work, Out, Report string
	// State holds the soak engine's data root (not on overlayfs); Run its
	// exec root and socket (a short path).
	State, Run string
	// Profile names the run in the report ("short" or "long").
	Profile string
	// Sessions is the number of raw protocol sessions (a third of them,
	// at least 2, ask for sandboxed runs); SDKSessions the number of real
	// Agent SDK sessions through @gatekeeper/client.
	Sessions, SDKSessions int
	// Duration is how long the load runs; the faults are spread over it.
	Duration time.Duration
	// AuditBytes is the size of the audit log's filesystem (a tmpfs) and
	// AuditMaxBytes the size at which the log rotates.
	AuditBytes, AuditMaxBytes int64
	// IdleConns is the number of idle connections of the misbehaving
	// clients; OpenQueryFlood the open_query frames of the client that
	// never closes its queries; Burst the frames of the burst.
	IdleConns, OpenQueryFlood, Burst int
	// LatencyFactor is the bound on the p99 decision latency during each
	// fault, as a multiple of the quiet p99 of the same run.
	LatencyFactor float64
	Log           *slog.Logger
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Sessions, 12)
	def(&c.IdleConns, 1000)
	def(&c.OpenQueryFlood, 200000)
	def(&c.Burst, 10000)
	if c.SDKSessions < 0 {
		c.SDKSessions = 0
	}
	if c.Duration <= 0 {
		c.Duration = 150 * time.Second
	}
	if c.AuditBytes <= 0 {
		c.AuditBytes = 96 << 20
	}
	if c.AuditMaxBytes <= 0 {
		c.AuditMaxBytes = 1 << 20
	}
	if c.LatencyFactor <= 0 {
		c.LatencyFactor = 10
	}
	if c.Profile == "" {
		c.Profile = "custom"
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// instance labels the sidecar's containers, networks and firewall rules.
const instance = "soak"

// Window is a stretch of the run in which a fault was in force (Start to
// End, recovery included).
type Window struct {
	Name       string
	Start, End time.Time
}

// Check is one asserted outcome.
type Check struct {
	Fault  string `json:"fault"`
	What   string `json:"what"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// soak is one run's state.
type soak struct {
	cfg      Config
	log      *slog.Logger
	begin    time.Time
	engine   *Engine
	sidecar  *Sidecar
	world    World
	policy   string // the policy file
	auditDir string // the tmpfs
	headFile string
	// sidecarLog is the sidecar's log, read once the load stopped, for
	// the judge (starved).
	sidecarLog string
	rec        *Recorder
	gate       *Gate
	noNet      atomic.Bool  // holds networked runs back (see engineRestart)
	netRuns    atomic.Int64 // networked runs under way
	sessions   []*Session

	mu        sync.Mutex
	windows   []Window
	checks    []Check
	samples   []Sample
	revisions map[string]Variant
	swaps     swapTimes
	kill      killTimes
	disk      diskTimes
	bad       []BadResult
	notes     []string
	baseline  Sample
	// baseGoroutines are the baseline's goroutines by top frame.
	baseGoroutines map[string]int
	leaks          []Resources
	// load is the load's context; sdk the batch of SDK sessions running.
	load       context.Context
	sdk        *sdkRun
	sdkBatches int
	sdkResults []SDKResult
}

func (s *soak) window(name string, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, Window{Name: name, Start: start, End: time.Now()})
}

func (s *soak) check(fault, what string, ok bool, detail string, args ...any) {
	if len(args) > 0 {
		detail = fmt.Sprintf(detail, args...)
	}
	s.mu.Lock()
	s.checks = append(s.checks, Check{Fault: fault, What: what, OK: ok, Detail: detail})
	s.mu.Unlock()
	if ok {
		s.log.Info("check passed", "fault", fault, "what", what, "detail", detail)
	} else {
		s.log.Error("CHECK FAILED", "fault", fault, "what", what, "detail", detail)
	}
}

func (s *soak) note(format string, args ...any) {
	s.mu.Lock()
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// Run runs the soak and writes its report. It returns the results, and an
// error when the soak could not run or a check failed.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	cfg.defaults()
	s := &soak{cfg: cfg, log: cfg.Log, rec: &Recorder{}, gate: &Gate{}, revisions: map[string]Variant{}}
	if err := os.MkdirAll(cfg.Work, 0o755); err != nil {
		return nil, err
	}
	cleanup, err := s.setup(ctx)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	res, err := s.run(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.writeReport(res); err != nil {
		return res, err
	}
	if failed := res.Failed(); len(failed) > 0 {
		return res, fmt.Errorf("%d of %d checks failed:\n  %s", len(failed), len(res.Checks), strings.Join(failed, "\n  "))
	}
	return res, nil
}

// setup makes the world, the engine, the audit log's filesystem and the
// sidecar. The returned cleanup undoes what was made, whatever failed.
func (s *soak) setup(ctx context.Context) (func(), error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	tmp, err := os.MkdirTemp("", "gksoak-")
	if err != nil {
		return cleanup, err
	}
	undo = append(undo, func() { os.RemoveAll(tmp) })
	s.world = World{WS: filepath.Join(tmp, "ws"), Home: filepath.Join(tmp, "home")}
	for _, d := range []string{filepath.Join(s.world.WS, "out"), filepath.Join(s.world.Home, ".ssh")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return cleanup, err
		}
	}
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(s.world.WS, fmt.Sprintf("f%d.txt", i)), []byte("soak line\n"), 0o644); err != nil {
			return cleanup, err
		}
	}
	if err := os.WriteFile(filepath.Join(s.world.Home, ".ssh", "id_rsa"), []byte("not a key\n"), 0o600); err != nil {
		return cleanup, err
	}
	s.policy = filepath.Join(tmp, "policy.yaml")
	if err := writeAtomic(s.policy, policyYAML(Base, s.world.WS)); err != nil {
		return cleanup, err
	}

	s.log.Info("soak: starting a private Docker engine in a network namespace of its own")
	name := fmt.Sprintf("gksoak-%d", os.Getpid())
	eng, err := StartEngine(ctx, name, s.cfg.State, s.cfg.Run, s.log)
	if err != nil {
		return cleanup, fmt.Errorf("start the soak's engine: %w", err)
	}
	s.engine = eng
	undo = append(undo, eng.Close)
	s.log.Info("soak: copying the sandbox image into it", "image", s.cfg.Image)
	host, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return cleanup, err
	}
	err = eng.LoadImage(ctx, host, s.cfg.Image)
	host.Close()
	if err != nil {
		return cleanup, err
	}

	s.auditDir = filepath.Join(tmp, "audit")
	if err := os.Mkdir(s.auditDir, 0o700); err != nil {
		return cleanup, err
	}
	if err := tmpfs.MountDir(s.auditDir, s.cfg.AuditBytes); err != nil {
		return cleanup, fmt.Errorf("mount a tmpfs for the audit log (the soak needs root): %w", err)
	}
	undo = append(undo, func() {
		// Keep the audit set with the logs, for a look after the run.
		_ = exec.Command("cp", "-a", s.auditDir, filepath.Join(s.cfg.Work, "audit")).Run()
		if err := tmpfs.Unmount(s.auditDir); err != nil {
			s.log.Warn("unmount the audit log's tmpfs", "err", err)
		}
	})
	os.RemoveAll(filepath.Join(s.cfg.Work, "audit"))
	s.headFile = filepath.Join(s.cfg.Work, "audit.head")
	os.Remove(s.headFile)

	socket := filepath.Join(tmp, "gk.sock")
	token := filepath.Join(tmp, "token")
	argv := eng.InNetns(s.cfg.Gatekeeper, "serve",
		"--listen", "unix://"+socket, "--policy", s.policy, "--token-file", token,
		"--audit-log", filepath.Join(s.auditDir, "audit.jsonl"),
		"--audit-max-bytes", fmt.Sprint(s.cfg.AuditMaxBytes), "--audit-compress",
		"--audit-head", s.headFile, "--audit-head-interval", "2s",
		"--instance", instance, "--watch-interval", "500ms", "--pool-size", "2", "--max-runs", "4",
		// Room for the idle connections and everyone else; past it the
		// idle client's extra connections find the cap.
		"--max-conns", fmt.Sprint(s.maxConns()),
		"--debug-endpoints", "--log-level", "info")
	env := []string{"DOCKER_HOST=" + eng.Host(), "HOME=" + s.world.Home}
	s.log.Info("soak: starting the sidecar")
	sc, err := StartSidecar(ctx, argv, env, socket, token, filepath.Join(s.cfg.Work, "serve.log"))
	if err != nil {
		return cleanup, err
	}
	s.sidecar = sc
	undo = append(undo, func() {
		if sc.proc != nil {
			select {
			case <-sc.proc.Done():
			default:
				_ = sc.Stop()
			}
		}
	})
	return cleanup, nil
}

// maxConns is the sidecar's --max-conns: the idle connections, the load's
// and SDK sessions' connections, and a margin for probes and the
// misbehaving clients that come and go.
func (s *soak) maxConns() int { return s.cfg.IdleConns + s.cfg.Sessions + 2*s.cfg.SDKSessions + 16 }

// run runs the load and the faults, then accounts for everything.
func (s *soak) run(ctx context.Context) (*Results, error) {
	if err := s.waitWarm(ctx); err != nil {
		return nil, err
	}
	rev, err := s.sidecar.Revision(ctx)
	if err != nil {
		return nil, err
	}
	s.revisions[rev] = Base
	if s.baseline, err = s.idle(ctx, "baseline"); err != nil {
		return nil, err
	}
	s.baseGoroutines = goroutineGroups(s.saveGoroutines(ctx, "baseline"))
	s.log.Info("soak: idle sidecar before the load", "goroutines", s.baseline.Goroutines, "fds", s.baseline.FDs, "rss_mib", s.baseline.RSS>>20)

	load, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	s.load = load
	s.begin = time.Now()
	var wg sync.WaitGroup
	nRunners := max(2, s.cfg.Sessions/3)
	for i := range s.cfg.Sessions {
		ss := &Session{ID: i + 1, Runner: i < nRunners, Dialer: s.sidecar.Dialer(), World: s.world, Rec: s.rec, Gate: s.gate, NoNet: &s.noNet, NetRuns: &s.netRuns}
		s.sessions = append(s.sessions, ss)
		wg.Go(func() { ss.Run(load) })
	}
	sampler := s.sample(load)
	s.sdk = s.startSDK(load)

	plan := s.plan()
	gap := s.gap(plan)
	s.log.Info("soak: load running", "sessions", s.cfg.Sessions, "runners", nRunners, "sdk_sessions", s.cfg.SDKSessions,
		"duration", s.cfg.Duration, "quiet_gap", gap)
	for _, st := range plan {
		sleep(ctx, gap)
		if ctx.Err() != nil {
			break
		}
		s.log.Info("soak: fault", "name", st.name, "at", time.Since(s.begin).Round(time.Second))
		st.run(ctx)
	}
	sleep(ctx, gap)
	s.log.Info("soak: stopping the load")
	s.sdkResults = append(s.sdkResults, s.sdk.wait())
	cancelLoad()
	wg.Wait()
	<-sampler
	return s.finish(ctx, time.Now())
}

// step is one fault of the plan.
type step struct {
	name string
	min  time.Duration // about how long it takes
	run  func(ctx context.Context)
}

// plan is the order of the faults. The sidecar's SIGKILL comes last, after
// the first leak check (which compares the same process before and after
// the other faults).
func (s *soak) plan() []step {
	return []step{
		{"engine restart", 20 * time.Second, s.engineRestart},
		{"engine frozen", 25 * time.Second, s.engineFreeze},
		{"audit disk full", 15 * time.Second, s.diskFull},
		{"policy swap", 15 * time.Second, s.policySwap},
		{"misbehaving clients", 60 * time.Second, s.misbehave},
		{"leak check", 15 * time.Second, s.leakCheck},
		{"sidecar SIGKILL", 20 * time.Second, s.sidecarKill},
	}
}

// gap is the quiet time before each step and after the last, so that the
// load runs about Duration in all (at least 5 s each).
func (s *soak) gap(plan []step) time.Duration {
	busy := time.Duration(0)
	for _, st := range plan {
		busy += st.min
	}
	return max(5*time.Second, (s.cfg.Duration-busy)/time.Duration(len(plan)+1))
}

// waitWarm waits until the warm pool is full, so that the baseline is an
// idle sidecar at rest.
func (s *soak) waitWarm(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m, err := s.sidecar.Metrics(ctx)
		if err == nil && m["gatekeeper_pool_warm_containers"] >= 2 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm pool did not fill within 2 minutes (metrics err %v); see %s", err, strings.Join(s.sidecar.LogFiles(), ", "))
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// settle waits until the sidecar's goroutines and fds stop changing (three
// equal readings in a row, a second apart; at most 30 s) and returns the
// last reading.
func (s *soak) settle(ctx context.Context) (Sample, error) {
	var last Sample
	same := 0
	for i := 0; i < 30 && same < 3; i++ {
		cur, err := s.sidecar.Sample(ctx)
		if err != nil {
			return cur, err
		}
		if cur.Goroutines == last.Goroutines && cur.FDs == last.FDs {
			same++
		} else {
			same = 0
		}
		last = cur
		sleep(ctx, time.Second)
	}
	return last, nil
}

// sample reads the sidecar's resources every second until ctx ends; the
// returned channel is closed then.
func (s *soak) sample(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if sm, err := s.sidecar.Sample(ctx); err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, sm)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return done
}

// writeAtomic replaces path with content through a rename, as an operator
// (or a Kubernetes ConfigMap) replaces a file.
func writeAtomic(path, content string) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
