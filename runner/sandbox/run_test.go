package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// The run loop and the pool against a platform whose sandboxes are
// goroutines speaking the launch protocol: what the runner decides from
// what a sandbox does. The backends' suites (runnertest) hold the real
// sandboxes to the same outcomes.

// script is what a scripted sandbox's program does once its input is in.
type script struct {
	exit   int  // the exit status its end marks carry
	hang   bool // it never ends by itself
	oom    bool // it dies of the memory limit: no marks, the platform reports the OOM
	nomark bool // it exits without end marks (the launcher died)
	// pending, in a run with tools, makes two calls as init forwards
	// them: "quick", whose answer it reads, then "pending", after which
	// it ends once pending is closed (the caller has the call), leaving
	// the call unanswered.
	pending <-chan struct{}
}

// scripted is a Platform whose sandboxes follow a script.
type scripted struct {
	script  script
	made    atomic.Int32
	removed atomic.Int32
	last    atomic.Pointer[scriptedRun] // the sandbox made last
}

func (*scripted) Validate(runner.Spec, *Plan) ([]string, error)               { return nil, nil }
func (*scripted) Prepare(context.Context, *Plan, runner.Language) error       { return nil }
func (*scripted) Sweep(context.Context, func(string, bool) bool) (int, error) { return 0, nil }
func (*scripted) Close() error                                                { return nil }

func (pf *scripted) Create(_ context.Context, req CreateRequest) (Instance, error) {
	n := pf.made.Add(1)
	stdinR, stdinW := io.Pipe()
	s := &scriptedRun{pf: pf, id: fmt.Sprintf("s%d", n), pipes: NewPipes(), stdin: stdinW, done: make(chan struct{}), killed: make(chan struct{}), detachedC: make(chan struct{}), stdinEnded: make(chan struct{})}
	pf.last.Store(s)
	go s.launch(stdinR, req.Plan.PoolKey != "")
	return s, nil
}

type scriptedRun struct {
	pf        *scripted
	id        string
	pipes     *Pipes
	stdin     io.WriteCloser
	done      chan struct{}
	killed    chan struct{}
	kill      sync.Once
	mu        sync.Mutex
	code      int
	oom       bool
	detached  bool
	detachedC chan struct{}
	// In a run with tools: the answer to "quick", and what came on
	// standard input after it until its end (stdinEnded).
	answer, rest string
	stdinEnded   chan struct{}
}

// launch plays the launcher: the ready mark for a warm sandbox, then the
// header and the workspace, then the script.
func (s *scriptedRun) launch(stdin *io.PipeReader, warm bool) {
	stdout, stderr := s.pipes.Writers()
	end := func(code int, oom bool) {
		s.mu.Lock()
		s.code, s.oom = code, oom
		s.mu.Unlock()
		s.pipes.End(nil)
		close(s.done)
	}
	if warm {
		if _, err := io.WriteString(stdout, launch.ReadyMark); err != nil {
			end(125, false)
			return
		}
	}
	in := bufio.NewReader(stdin)
	header, err := in.ReadString('\n')
	f := strings.Fields(header)
	tools := len(f) == 5 // the header names the bridge's line limit
	if err != nil || len(f) != 4 && !tools {
		end(125, false)
		return
	}
	sc := s.pf.script
	if !tools {
		_, _ = io.Copy(io.Discard, in) // the workspace, until the runner closes stdin
	} else if !s.bridge(in, stdout, f[2], sc.pending) {
		end(125, false)
		return
	}
	switch {
	case sc.hang:
		<-s.killed
		end(137, false)
	case sc.oom:
		end(137, true)
	default:
		fmt.Fprint(stdout, "out\n")
		fmt.Fprint(stderr, "err\n")
		if sc.nomark {
			end(sc.exit, false)
			return
		}
		mark := fmt.Sprintf("\x1egatekeeper-end %s %03d\x1e", f[2], sc.exit)
		fmt.Fprint(stdout, mark)
		fmt.Fprint(stderr, mark)
		// The platform reports the exit once the runner let go (an
		// engine's report comes after the marks): the marks end the run.
		<-s.detachedC
		end(sc.exit, false)
	}
}

// bridge plays init's side of the bridge: it reads the tools' and the
// workspace's frames up to "w 0", makes the script's calls, then reads
// standard input to its end in the background.
func (s *scriptedRun) bridge(in *bufio.Reader, stdout io.Writer, tag string, pending <-chan struct{}) bool {
	frame := func() (string, string, bool) {
		head, err := in.ReadString('\n')
		f := strings.Fields(head)
		if err != nil || len(f) < 2 {
			return "", "", false
		}
		var n int
		if _, err := fmt.Sscan(f[len(f)-1], &n); err != nil {
			return "", "", false
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(in, body); err != nil {
			return "", "", false
		}
		return f[0], string(body), true
	}
	for {
		k, body, ok := frame()
		if !ok {
			return false
		}
		if k == "w" && body == "" {
			break
		}
	}
	call := func(n int, tool string) {
		line := fmt.Sprintf(`{"id":%d,"server":"srv","tool":%q,"arguments":{}}`, n, tool)
		fmt.Fprintf(stdout, "\x1egatekeeper-call %s %d e %d\n%s\n", tag, n, len(line), line)
	}
	call(1, "quick")
	k, answer, ok := frame()
	if !ok || k != "a" {
		return false
	}
	call(2, "pending")
	<-pending
	s.mu.Lock()
	s.answer = answer
	s.mu.Unlock()
	go func() {
		defer close(s.stdinEnded)
		rest, _ := io.ReadAll(in)
		s.mu.Lock()
		s.rest = string(rest)
		s.mu.Unlock()
	}()
	return true
}

func (s *scriptedRun) ID() string            { return s.id }
func (s *scriptedRun) Streams() Streams      { return s.pipes.Streams(s.stdin) }
func (s *scriptedRun) Done() <-chan struct{} { return s.done }
func (s *scriptedRun) Kill()                 { s.kill.Do(func() { close(s.killed) }) }
func (s *scriptedRun) StartMeter()           {}
func (s *scriptedRun) Peak() int64           { return 4 << 20 }
func (s *scriptedRun) Remove()               { s.pf.removed.Add(1) }

// wasKilled says whether the runner called Kill.
func (s *scriptedRun) wasKilled() bool {
	select {
	case <-s.killed:
		return true
	default:
		return false
	}
}

func (s *scriptedRun) Detach() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.detached {
		s.detached = true
		s.pipes.Drop()
		close(s.detachedC)
	}
}

func (s *scriptedRun) Exit(_ context.Context, e Ending) (Exit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.ByItself {
		return Exit{PeakMemoryBytes: 1 << 20}, nil
	}
	return Exit{Code: s.code, OOMKilled: s.oom}, nil
}

func newScripted(t *testing.T, sc script, pool PoolConfig) (*Runner, *scripted) {
	t.Helper()
	pf := &scripted{script: sc}
	r, err := New(pf, Config{Instance: "unit", DefaultImage: "img:test", MinMemoryBytes: 6 << 20, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, pf
}

func scriptedSpec(timeout time.Duration) runner.Spec {
	spec := runnertest.Spec("print(1)")
	spec.Timeout = timeout
	spec.Sandbox.MaxFiles = 0 // no snapshot
	return spec
}

func TestTheRunLoopEndsAsTheSandboxDid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		script   script
		timeout  time.Duration
		cancel   bool
		reason   runner.ExitReason
		code     int
		output   bool
		peak     int64
		killed   bool
		removals int32
	}{
		{"a program that exits by itself ends the run by its marks, with their code and its peak", script{exit: 3}, time.Minute, false, runner.Exited, 3, true, 4 << 20, false, 1},
		{"a program past its timeout is killed and timed out", script{hang: true}, 50 * time.Millisecond, false, runner.TimedOut, 137, false, 0, true, 1},
		{"a run whose caller leaves is killed and cancelled", script{hang: true}, time.Minute, true, runner.Cancelled, 137, false, 0, true, 1},
		{"a sandbox the platform says the memory limit killed is OOM-killed", script{oom: true}, time.Minute, false, runner.OOMKilled, 137, false, 0, false, 1},
		{"a sandbox that ended without marks reports the platform's status", script{nomark: true, exit: 2}, time.Minute, false, runner.Exited, 2, true, 0, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, pf := newScripted(t, tc.script, PoolConfig{})
			ctx := t.Context()
			if tc.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
			}
			res, err := r.Run(ctx, scriptedSpec(tc.timeout))
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason != tc.reason || res.ExitCode != tc.code {
				t.Errorf("ended %s with %d, want %s with %d", res.Reason, res.ExitCode, tc.reason, tc.code)
			}
			if tc.output && (res.Stdout != "out\n" || res.Stderr != "err\n") {
				t.Errorf("stdout %q stderr %q, want the program's output without its marks", res.Stdout, res.Stderr)
			}
			if tc.peak != 0 && res.PeakMemoryBytes != tc.peak {
				t.Errorf("peak %d, want the meter's %d, read as the marks came", res.PeakMemoryBytes, tc.peak)
			}
			if killed := pf.last.Load().wasKilled(); killed != tc.killed {
				t.Errorf("killed %v, want %v", killed, tc.killed)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if got := pf.removed.Load(); got != tc.removals {
				t.Errorf("%d removals, want %d", got, tc.removals)
			}
		})
	}
}

func TestAWarmSandboxServesOneRun(t *testing.T) {
	t.Parallel()
	spec := scriptedSpec(time.Minute)
	r, pf := newScripted(t, script{exit: 0}, PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{spec.Sandbox}})
	if err := r.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	warm := r.Ready()
	if len(warm) != 1 {
		t.Fatalf("%d warm sandboxes, want 1", len(warm))
	}
	res, err := r.Run(t.Context(), spec)
	if err != nil || res.Reason != runner.Exited || res.Stdout != "out\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if hits := r.Metrics().Hits; counter(t, hits) != 1 {
		t.Errorf("%v hits, want 1", counter(t, hits))
	}
	if err := r.AwaitWarm(t.Context(), spec.Sandbox); err != nil {
		t.Fatal(err)
	}
	if now := r.Ready(); len(now) != 1 || now[0] == warm[0] {
		t.Errorf("warm sandboxes %v after the run, want one replacing %v", now, warm)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if made, removed := pf.made.Load(), pf.removed.Load(); made != removed {
		t.Errorf("%d sandboxes made, %d removed; want all removed", made, removed)
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// pendingCaller answers "quick" at once and holds "pending" until its ctx
// ends.
type pendingCaller struct {
	started   chan struct{} // closed when "pending" is called
	cancelled atomic.Bool   // "pending"'s ctx ended before it returned
}

func (c *pendingCaller) CallTool(ctx context.Context, call runner.NestedCall) runner.ToolResult {
	if call.Tool == "quick" {
		return runner.ToolResult{Result: []byte(`{"content":[{"type":"text","text":"quick"}]}`)}
	}
	close(c.started)
	<-ctx.Done()
	c.cancelled.Store(true)
	return runner.ToolResult{Result: []byte(`{"content":[{"type":"text","text":"too late"}]}`)}
}

// TestARunsEndCancelsItsPendingCallsAndDropsTheirAnswers: the run loop
// lifts the call frames out of standard output, answers on standard input
// after the input, and when the program ends with a call still pending it
// cancels the call, drops its answer and closes standard input, all before
// Run returns.
func TestARunsEndCancelsItsPendingCallsAndDropsTheirAnswers(t *testing.T) {
	t.Parallel()
	caller := &pendingCaller{started: make(chan struct{})}
	r, pf := newScripted(t, script{pending: caller.started}, PoolConfig{})
	spec := scriptedSpec(time.Minute)
	spec.Caller = caller
	spec.Sandbox.Calls = runner.CallLimits{MaxCalls: 10, MaxInFlight: 2, MaxArgumentBytes: 1 << 10, MaxResultBytes: 1 << 10, Timeout: time.Minute}
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !caller.cancelled.Load() {
		t.Error("the pending call's ctx had not ended when Run returned")
	}
	if res.Reason != runner.Exited || res.ExitCode != 0 || string(res.Stdout) != "out\n" {
		t.Errorf("result %v %d, stdout %q; want exited 0 and the program's output only", res.Reason, res.ExitCode, res.Stdout)
	}
	if res.ToolCalls != 2 {
		t.Errorf("ToolCalls = %d, want 2", res.ToolCalls)
	}
	s := pf.last.Load()
	select {
	case <-s.stdinEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the sandbox's standard input was not closed after the run")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want := `{"id":1,"ok":true,"result":{"content":[{"type":"text","text":"quick"}]}}`; s.answer != want {
		t.Errorf("the answer to the first call: %q, want %q", s.answer, want)
	}
	if s.rest != "" {
		t.Errorf("standard input after the first answer: %q; the pending call's answer must be dropped", s.rest)
	}
}

// TestARunWithoutToolsGetsNoBridge: without Spec.Caller the header is the
// four fields it always was and standard input closes after the
// workspace (the scripted sandbox waits for its end before it runs).
func TestARunWithoutToolsGetsNoBridge(t *testing.T) {
	t.Parallel()
	r, _ := newScripted(t, script{}, PoolConfig{})
	res, err := r.Run(t.Context(), scriptedSpec(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != runner.Exited || res.ExitCode != 0 || res.ToolCalls != 0 || string(res.Stdout) != "out\n" {
		t.Errorf("result %+v", res)
	}
}

// holding is a scripted Platform whose Prepare or Create (at) says it was
// entered, then waits until the run's context ends, as a cluster's wait
// for a Pod does; what its Create made is removed in the background.
type holding struct {
	*scripted
	at      string // "prepare" or "create"
	entered chan struct{}
}

func (s *holding) Prepare(ctx context.Context, _ *Plan, _ runner.Language) error {
	if s.at != "prepare" {
		return nil
	}
	close(s.entered)
	<-ctx.Done()
	return fmt.Errorf("the canary of its runtime class: %w", ctx.Err())
}

func (s *holding) Create(ctx context.Context, req CreateRequest) (Instance, error) {
	if s.at != "create" {
		return s.scripted.Create(ctx, req)
	}
	close(s.entered)
	<-ctx.Done()
	s.made.Add(1)
	req.Background(func() { s.removed.Add(1) })
	return nil, fmt.Errorf("pod did not start: %w", ctx.Err())
}

// TestACancelBeforeTheProgramStartsEndsTheRunCancelled cancels a run
// while it waits for the platform's checks, for its sandbox's creation, and
// for a warm sandbox being made: each ends as a cancel during the program
// does, with a cancelled Result (not an error), and leaves nothing: what
// was made for it is removed, and the warm sandbox it waited for goes to
// the pool.
func TestACancelBeforeTheProgramStartsEndsTheRunCancelled(t *testing.T) {
	t.Parallel()
	spec := scriptedSpec(time.Minute)
	cases := []struct {
		name string
		at   string // where the platform stalls; "": the pool's wait
	}{
		{"while the platform is prepared", "prepare"},
		{"while its sandbox is created", "create"},
		{"while it waits for a warm sandbox being made", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pf := &holding{scripted: &scripted{script: script{hang: true}}, at: tc.at, entered: make(chan struct{})}
			var pool PoolConfig
			if tc.at == "" {
				pool = PoolConfig{Size: 1, Sandboxes: []runner.Sandbox{spec.Sandbox}}
			}
			r, err := New(pf, Config{Instance: "unit", DefaultImage: "img:test", MinMemoryBytes: 6 << 20, Pool: pool})
			if err != nil {
				t.Fatal(err)
			}
			release := r.HoldWarmUps()
			// With a pool: a warm sandbox is being made, held, once this returns.
			if err := r.AwaitWarm(t.Context(), spec.Sandbox); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			type ran struct {
				res runner.Result
				err error
			}
			done := make(chan ran, 1)
			go func() {
				res, err := r.Run(ctx, spec)
				done <- ran{res, err}
			}()
			if tc.at != "" {
				<-pf.entered
			} else {
				for r.Awaiting() == 0 {
					select {
					case got := <-done:
						t.Fatalf("the run ended (%+v, %v) without waiting for the held warm sandbox", got.res, got.err)
					case <-time.After(time.Millisecond):
					}
				}
			}
			cancel()
			got := <-done
			if got.err != nil || got.res.Reason != runner.Cancelled || got.res.ExitCode != 137 || got.res.Stdout != "" {
				t.Errorf("Run = %s %d stdout %q, %v; want a cancelled Result with 137, no output, and no error", got.res.Reason, got.res.ExitCode, got.res.Stdout, got.err)
			}
			release()
			if n := r.Awaiting(); n != 0 {
				t.Errorf("%d runs wait for a warm sandbox, want 0", n)
			}
			if tc.at == "" {
				// The claimed warm-up and the one started in its place.
				if ready, made := r.Ready(), pf.made.Load(); len(ready) != int(made) || made == 0 {
					t.Errorf("warm sandboxes %v of %d made once the held ones went on, want every one in the pool", ready, made)
				}
				if hits := counter(t, r.Metrics().Hits); hits != 0 {
					t.Errorf("%v hits, want 0: the cancelled run took no sandbox", hits)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if made, removed := pf.made.Load(), pf.removed.Load(); made != removed {
				t.Errorf("%d sandboxes made, %d removed; want all removed", made, removed)
			}
		})
	}
}

// TestAWorkspaceRunCancelledBeforeItStartsIsNotSaved: a run of a query's
// workspace cancelled before its sandbox started says so in its Result,
// as one cancelled later does.
func TestAWorkspaceRunCancelledBeforeItStartsIsNotSaved(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := notStarted(ctx, runner.Result{}, runner.Spec{Workspace: noWorkspace{}}, context.Canceled)
	if err != nil || res.Reason != runner.Cancelled || res.Workspace != runner.WorkspaceNotSaved ||
		!strings.Contains(res.WorkspaceNote, "cancelled before its sandbox started") {
		t.Errorf("notStarted = %+v, %v; want cancelled, not saved, and why", res, err)
	}
	res, err = notStarted(t.Context(), runner.Result{}, runner.Spec{}, runner.ErrUnavailable)
	if !errors.Is(err, runner.ErrUnavailable) || res.Reason != "" {
		t.Errorf("notStarted with a live context = %+v, %v; want the error as it was", res, err)
	}
}

// noWorkspace is a Workspace with nothing saved that keeps no snapshot.
type noWorkspace struct{}

func (noWorkspace) Saved() (io.ReadCloser, int64, error) { return nil, 0, nil }
func (noWorkspace) Replace(string, int64) error          { return errors.New("this workspace keeps nothing") }
func (noWorkspace) TempDir() string                      { return os.TempDir() }
