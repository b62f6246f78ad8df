package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// SessionResult is row 10: sessions (sandbox.session), a sandbox kept for
// a query's runs, each pair measured against what a query without one
// does in the same run.
type SessionResult struct {
	// Data is the second call of a notebook-style analysis: in a session
	// whose first run read the CSV into df, `print(len(df))`; without
	// one, a warm single-use run reading the CSV again and printing it.
	Data *SessionPair `json:"data,omitempty"`
	// Hello is a hello world in a live session against a warm single-use
	// run, on the default profile.
	Hello *SessionPair `json:"hello,omitempty"`
	// Scale is row 7's load with sessions on and off.
	Scale *SessionScale `json:"scale,omitempty"`
	// Memory is an idle session's memory per image profile, and how many
	// fit in the pool's memory budget.
	Memory *SessionMemory `json:"memory,omitempty"`
}

// SessionPair is one pair of series measured in Rounds rounds, their
// order alternating run by run: end to end (decide, run, run_result) and
// to the first output. Ratio is the session's p50 over the single-use
// one's over all samples; Low and High the least and most of the rounds'
// own ratios of p50s.
type SessionPair struct {
	Profile     string  `json:"profile"`
	Code        string  `json:"code"`
	Alternative string  `json:"alternative"`
	Rounds      int     `json:"rounds"`
	Session     Summary `json:"session"`
	Single      Summary `json:"single_use"`
	SessionTTFO Summary `json:"session_first_output"`
	SingleTTFO  Summary `json:"single_use_first_output"`
	Ratio       float64 `json:"ratio"`
	Low         float64 `json:"ratio_low"`
	High        float64 `json:"ratio_high"`
	// CSVBytes is the size of the CSV the data pair reads (0 for hello).
	CSVBytes int `json:"csv_bytes,omitempty"`
}

// SessionScale is the scale pair: ScaleSessions agent sessions thinking
// about a second, on fresh sidecars with the default flags, their queries
// with a session (On) and without (Off); Single is one session with a
// session, the reference of the time to first output. The creations are
// the containers the engine created for each sidecar during its window.
type SessionScale struct {
	Single       PoolLoad  `json:"single"`
	On           PoolLoad  `json:"on"`
	Off          PoolLoad  `json:"off"`
	OnCreations  Creations `json:"on_creations"`
	OffCreations Creations `json:"off_creations"`
}

// Creations counts containers the engine created: Total, of which Warm
// were the pool's (runner.LabelPool: made ahead, claimed later) and the
// rest made for a run that found none (cold).
type Creations struct {
	Total int `json:"total"`
	Warm  int `json:"warm"`
}

// Cold is the creations made for a run.
func (c Creations) Cold() int { return c.Total - c.Warm }

// SessionMemory is the memory of idle sessions: one per profile, and the
// budget they count against (--pool-max-memory's default: half the
// engine's memory) with the cap on idle sessions (--max-sessions).
type SessionMemory struct {
	BudgetBytes int64               `json:"budget_bytes"`
	MaxSessions int                 `json:"max_sessions_default"`
	Profiles    []SessionMemoryUsed `json:"profiles"`
}

// SessionMemoryUsed is one profile's idle session after a hello world:
// its sandbox's memory limit (what the budget counts) and its use as the
// engine reports it (`docker stats`), and how many such sessions the
// budget holds by each.
type SessionMemoryUsed struct {
	Profile    string `json:"profile"`
	Language   string `json:"language"`
	LimitBytes int64  `json:"limit_bytes"`
	UsedBytes  int64  `json:"used_bytes"`
	FitByLimit int64  `json:"fit_by_limit"`
	FitByUse   int64  `json:"fit_by_use"`
}

// sessionOverride turns a session on for one query.
var sessionOverride = map[string]any{"session": map[string]any{"idle_timeout": "5m"}}

// sessionRounds is how many rounds a pair's samples are cut into for the
// spread of its ratio.
const sessionRounds = 5

// scaleSessions is the scale pair's level; scaleSingleWindow the window
// of its single-session reference.
const (
	scaleSessions     = 32
	scaleSingleWindow = 40 * time.Second
)

// csvRows is how many rows dataCSV holds (about 2.2 MB: within the frame
// limit the data sidecar is given, and sandbox.output.max_files_bytes).
const csvRows = 60000

// dataFrameLimit is the data sidecar's --max-frame-bytes: the CSV goes
// in the run frame.
const dataFrameLimit = 8 << 20

// Row 10's programs.
const (
	dataLoad   = "import pandas as pd\ndf = pd.read_csv(\"data.csv\")\nprint(len(df))"
	dataSecond = "print(len(df))"
)

// dataCSV is the CSV the data pair reads: csvRows rows of four columns.
func dataCSV() string {
	var b strings.Builder
	b.WriteString("id,name,value,category\n")
	for i := range csvRows {
		fmt.Fprintf(&b, "%d,customer-%06d,%d.%04d,%s\n", i, i*7919%1000003, i%9973, i%10000, []string{"alpha", "beta", "gamma", "delta"}[i%4])
	}
	return b.String()
}

// sessions measures row 10. Its parts are independent: one that fails is
// left out (its rows say "not measured") and the others still run.
func (e *env) sessions(ctx context.Context) error {
	res := &SessionResult{}
	e.res.Sessions = res
	var errs []error
	pol, err := policyWithImage(e.policy["runc"], "session-data", interpreterProfile)
	if err != nil {
		return err
	}
	csv := dataCSV()
	if res.Data, err = e.sessionPair(ctx, pairSpec{
		Name: "session-data", Policy: pol, Profile: interpreterProfile, Args: []string{"--max-frame-bytes", strconv.Itoa(dataFrameLimit)},
		Files: map[string]string{"data.csv": csv}, First: dataLoad, Session: dataSecond, Single: dataLoad, Want: fmt.Sprintf("%d\n", csvRows),
	}); err != nil {
		errs = append(errs, fmt.Errorf("data pair: %w", err))
	} else {
		res.Data.CSVBytes = len(csv)
	}
	if res.Hello, err = e.sessionPair(ctx, pairSpec{
		Name: "session-hello", Policy: e.policy["runc"], Profile: "default",
		First: helloCode, Session: helloCode, Single: helloCode, Want: "hello, world\n",
	}); err != nil {
		errs = append(errs, fmt.Errorf("hello pair: %w", err))
	}
	if res.Scale, err = e.sessionScale(ctx); err != nil {
		errs = append(errs, fmt.Errorf("scale: %w", err))
	}
	if res.Memory, err = e.sessionMemory(ctx); err != nil {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	}
	return errors.Join(errs...)
}

// pairSpec is one pair of row 10: a sidecar of Policy started with Args,
// one query with a session and one without. Each query's first run
// (untimed) gets Files and runs First in the session, Single without;
// then the session's runs are Session, the single-use ones Single, each
// printing Want.
type pairSpec struct {
	Name, Policy, Profile        string
	Args                         []string
	Files                        map[string]string
	First, Session, Single, Want string
}

// sessionPair measures one pair, e.cfg.ProfileRuns runs a side.
func (e *env) sessionPair(ctx context.Context, p pairSpec) (*SessionPair, error) {
	sc, c, single, _, err := e.sidecarQuery(ctx, "runc", SidecarOptions{Name: p.Name, Policy: p.Policy, Args: p.Args})
	if err != nil {
		return nil, err
	}
	defer sc.Stop()
	defer c.Close()
	sess, _, err := c.OpenQuery(sessionOverride)
	if err != nil {
		return nil, err
	}
	n := 0
	run := func(q, code string, files map[string]string, inSession bool) (RunOutcome, error) {
		if !inSession {
			// A warm single-use run finds its pool full, as in row 6.
			if err := waitPoolFull(ctx, sc, 2); err != nil {
				return RunOutcome{}, err
			}
		}
		n++
		out, err := c.DecideAndRunRequest(RunRequest{Query: q, ToolUseID: fmt.Sprintf("toolu_bench_%s_%d", p.Name, n),
			Language: "python", Code: code, Files: files, Outputs: []string{}})
		if err != nil {
			return out, err
		}
		return out, checkSessionRun(out, p.Want, inSession)
	}
	if _, err := run(sess, p.First, p.Files, true); err != nil {
		return nil, fmt.Errorf("the session's first run: %w", err)
	}
	if _, err := run(single, p.Single, p.Files, false); err != nil {
		return nil, fmt.Errorf("the single-use query's first run: %w", err)
	}
	for range 2 { // untimed: page cache, the pool's refill
		if _, err := run(sess, p.Session, nil, true); err != nil {
			return nil, fmt.Errorf("warm-up in the session: %w", err)
		}
		if _, err := run(single, p.Single, nil, false); err != nil {
			return nil, fmt.Errorf("warm-up without a session: %w", err)
		}
	}
	var took, ttfo [2][]time.Duration // [0] the session, [1] single use
	for i := range e.cfg.ProfileRuns {
		for j := range 2 {
			side := (i + j) % 2
			q, code := sess, p.Session
			if side == 1 {
				q, code = single, p.Single
			}
			t0 := time.Now()
			out, err := run(q, code, nil, side == 0)
			if err != nil {
				return nil, fmt.Errorf("run %d: %w", i, err)
			}
			took[side], ttfo[side] = append(took[side], time.Since(t0)), append(ttfo[side], out.FirstOutput)
		}
	}
	e.res.samples[p.Name+"/session"], e.res.samples[p.Name+"/single_use"] = took[0], took[1]
	r := &SessionPair{Profile: p.Profile, Code: p.Session, Alternative: p.Single, Rounds: sessionRounds,
		Session: Summarize(took[0]), Single: Summarize(took[1]), SessionTTFO: Summarize(ttfo[0]), SingleTTFO: Summarize(ttfo[1])}
	r.Ratio = Ratio(r.Session.P50, r.Single.P50)
	r.Low, r.High = RoundRatios(took[0], took[1], sessionRounds)
	e.cfg.Log.Info("bench: session pair", "pair", p.Name, "session_p50_ms", r.Session.P50, "single_use_p50_ms", r.Single.P50, "ratio", r.Ratio, "low", r.Low, "high", r.High)
	return r, nil
}

// checkSessionRun says what is wrong with a run that should have printed
// want, in a live session (one that lost nothing) when inSession.
func checkSessionRun(out RunOutcome, want string, inSession bool) error {
	r := out.Result
	switch {
	case inSession && r.Session == nil:
		return fmt.Errorf("the run reported no session: is sandbox.session on for the query?")
	case inSession && r.StateLost != nil:
		return fmt.Errorf("the session lost its state (%s): %s", r.StateLost.Reason, r.StateLost.Lost)
	case !inSession && r.Session != nil:
		return fmt.Errorf("a run of the query without a session reported one")
	case r.ExitCode != 0 && strings.Contains(r.Stderr, "NameError"):
		return fmt.Errorf("the session kept its sandbox but not its interpreter's globals (NameError): %.300s", r.Stderr)
	case r.ExitCode != 0 || r.Stdout != want:
		return fmt.Errorf("exited %d (%s) with stdout %.200q stderr %.300q", r.ExitCode, r.Reason, r.Stdout, r.Stderr)
	}
	return nil
}

// RoundRatios cuts a and b (samples taken in the same rounds, in order)
// into rounds equal parts and returns the least and the most of the parts'
// ratios of p50s: the spread of a's p50 over b's. Zeros when a part would
// be empty.
func RoundRatios(a, b []time.Duration, rounds int) (low, high float64) {
	n := min(len(a), len(b))
	if rounds <= 0 || n < rounds {
		return 0, 0
	}
	for k := range rounds {
		lo, hi := k*n/rounds, (k+1)*n/rounds
		r := Ratio(Summarize(a[lo:hi]).P50, Summarize(b[lo:hi]).P50)
		if k == 0 || r < low {
			low = r
		}
		if k == 0 || r > high {
			high = r
		}
	}
	return low, high
}

// sessionScale measures the scale pair: one session, then 32 with
// sessions on and 32 with them off, each on a fresh sidecar with the
// default flags.
func (e *env) sessionScale(ctx context.Context) (*SessionScale, error) {
	s := &SessionScale{}
	level := func(name string, spec loadSpec) (PoolLoad, Creations, error) {
		sc, err := e.startSidecar(ctx, "runc", SidecarOptions{Name: name})
		if err != nil {
			return PoolLoad{}, Creations{}, err
		}
		defer sc.Stop()
		spec.Name = name
		w, err := watchCreations(ctx, e.cfg.Docker, "bench-"+name)
		if err != nil {
			return PoolLoad{}, Creations{}, err
		}
		l, span, err := e.load(ctx, sc, spec)
		made := w.Stop(span)
		if err != nil {
			return l, made, err
		}
		e.cfg.Log.Info("bench: session scale", "level", name, "runs_per_s", l.PerSec, "first_output_p50_ms", l.FirstOutput.P50,
			"first_output_p99_ms", l.FirstOutput.P99, "creations", made.Total, "warm_creations", made.Warm, "session_starts", l.SessionStarts, "state_lost", l.StateLost)
		return l, made, nil
	}
	var err error
	if s.Single, _, err = level("session-scale-1", loadSpec{Sessions: 1, Think: time.Second, Window: scaleSingleWindow, Override: sessionOverride}); err != nil {
		return nil, fmt.Errorf("1 session: %w", err)
	}
	if s.On, s.OnCreations, err = level("session-scale-on", loadSpec{Sessions: scaleSessions, Think: time.Second, Override: sessionOverride}); err != nil {
		return nil, fmt.Errorf("%d sessions on: %w", scaleSessions, err)
	}
	if s.Off, s.OffCreations, err = level("session-scale-off", loadSpec{Sessions: scaleSessions, Think: time.Second}); err != nil {
		return nil, fmt.Errorf("%d sessions off: %w", scaleSessions, err)
	}
	return s, nil
}

// creationWatch streams the engine's container create events for one
// sidecar instance, from before a load until Stop: the engine keeps only
// its last few hundred events, fewer than a busy window makes, so they are
// read as they happen rather than asked for afterwards.
type creationWatch struct {
	cmd *exec.Cmd
	out strings.Builder
}

// watchCreations starts `docker events` for instance's container creations.
func watchCreations(ctx context.Context, docker, instance string) (*creationWatch, error) {
	w := &creationWatch{}
	w.cmd = exec.CommandContext(ctx, docker, "events", "--filter", "type=container", "--filter", "event=create",
		"--filter", "label="+runner.LabelInstance+"="+instance,
		"--format", `{{.TimeNano}} pool={{index .Actor.Attributes "`+runner.LabelPool+`"}}`)
	w.cmd.Stdout = &w.out
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("docker events: %w", err)
	}
	return w, nil
}

// Stop ends the stream and counts the creations within span.
func (w *creationWatch) Stop(span [2]time.Time) Creations {
	time.Sleep(500 * time.Millisecond) // the engine's last events on their way
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
	return countCreations(w.out.String(), span)
}

// countCreations counts the lines of creationWatch's format ("TIMENANO
// pool=KEY") whose time is within span; a KEY marks the pool's.
func countCreations(events string, span [2]time.Time) Creations {
	var c Creations
	for _, l := range strings.Split(events, "\n") {
		ts, pool, ok := strings.Cut(strings.TrimSpace(l), " ")
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ns < span[0].UnixNano() || ns > span[1].UnixNano() {
			continue
		}
		c.Total++
		if pool != "pool=" {
			c.Warm++
		}
	}
	return c
}

// sessionMemory measures an idle session's memory for every profile, on
// sidecars without a pool, so that the instance's one container is the
// session's.
func (e *env) sessionMemory(ctx context.Context) (*SessionMemory, error) {
	total, err := exec.CommandContext(ctx, e.cfg.Docker, "info", "--format", "{{.MemTotal}}").Output()
	if err != nil {
		return nil, fmt.Errorf("docker info: %w", err)
	}
	engine, err := strconv.ParseInt(strings.TrimSpace(string(total)), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("docker info: memory %q: %w", total, err)
	}
	m := &SessionMemory{BudgetBytes: engine / 2, MaxSessions: sandbox.DefaultMaxIdleSessions}
	for _, name := range profile.Names() {
		u, err := e.idleSession(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", name, err)
		}
		if u.LimitBytes > 0 {
			u.FitByLimit = m.BudgetBytes / u.LimitBytes
		}
		if u.UsedBytes > 0 {
			u.FitByUse = m.BudgetBytes / u.UsedBytes
		}
		m.Profiles = append(m.Profiles, u)
		e.cfg.Log.Info("bench: idle session", "profile", name, "used_mib", mib(u.UsedBytes), "limit_mib", mib(u.LimitBytes), "fit_by_limit", u.FitByLimit, "fit_by_use", u.FitByUse)
	}
	return m, nil
}

// idleSessionSettle is how long a session idles before its memory is read.
const idleSessionSettle = 2 * time.Second

// idleSession starts a session on profile name, runs its hello world and
// reads the session sandbox's memory while it idles.
func (e *env) idleSession(ctx context.Context, name string) (SessionMemoryUsed, error) {
	u := SessionMemoryUsed{Profile: name}
	pol, err := policyWithImage(e.policy["runc"], "session-"+name, name)
	if err != nil {
		return u, err
	}
	inst := "sessmem-" + name
	sc, c, _, _, err := e.sidecarQuery(ctx, "runc", SidecarOptions{Name: inst, Policy: pol, Args: []string{"--pool-size", "0"}})
	if err != nil {
		return u, err
	}
	defer sc.Stop()
	defer c.Close()
	q, _, err := c.OpenQuery(sessionOverride)
	if err != nil {
		return u, err
	}
	lang, code := helloFor(name)
	u.Language = lang
	out, err := c.DecideAndRun(q, "toolu_bench_sessmem_"+name, lang, code)
	if err != nil {
		return u, err
	}
	if err := checkSessionRun(out, "hello, world\n", true); err != nil {
		return u, err
	}
	time.Sleep(idleSessionSettle)
	ids, err := exec.CommandContext(ctx, e.cfg.Docker, "ps", "-q", "--no-trunc", "--filter", "label=gatekeeper.instance=bench-"+inst).Output()
	if err != nil {
		return u, fmt.Errorf("docker ps: %w", err)
	}
	f := strings.Fields(string(ids))
	if len(f) != 1 {
		return u, fmt.Errorf("the sidecar without a pool has %d containers, want the session's one", len(f))
	}
	lim, err := exec.CommandContext(ctx, e.cfg.Docker, "inspect", "--format", "{{.HostConfig.Memory}}", f[0]).Output()
	if err != nil {
		return u, fmt.Errorf("docker inspect: %w", err)
	}
	if u.LimitBytes, err = strconv.ParseInt(strings.TrimSpace(string(lim)), 10, 64); err != nil {
		return u, fmt.Errorf("the session's memory limit %q: %w", lim, err)
	}
	st, err := exec.CommandContext(ctx, e.cfg.Docker, "stats", "--no-stream", "--format", "{{.MemUsage}}", f[0]).Output()
	if err != nil {
		return u, fmt.Errorf("docker stats: %w", err)
	}
	used, _, _ := strings.Cut(string(st), "/")
	if u.UsedBytes, err = ParseDockerBytes(used); err != nil {
		return u, fmt.Errorf("docker stats: %w", err)
	}
	return u, nil
}

// ParseDockerBytes reads a size as `docker stats` prints it ("12.5MiB",
// "980KiB", "1.2GiB", "512B").
func ParseDockerBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("size %q is not a number of %s", s, u.suffix)
			}
			return int64(v * u.mult), nil
		}
	}
	return 0, fmt.Errorf("size %q has no unit", s)
}
