package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
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
}

// scripted is a Platform whose sandboxes follow a script.
type scripted struct {
	script  script
	made    atomic.Int32
	removed atomic.Int32
}

func (*scripted) Validate(runner.Spec, *Plan) ([]string, error)               { return nil, nil }
func (*scripted) Prepare(context.Context, *Plan, runner.Language) error       { return nil }
func (*scripted) Sweep(context.Context, func(string, bool) bool) (int, error) { return 0, nil }
func (*scripted) Close() error                                                { return nil }

func (pf *scripted) Create(_ context.Context, req CreateRequest) (Instance, error) {
	n := pf.made.Add(1)
	stdinR, stdinW := io.Pipe()
	s := &scriptedRun{pf: pf, id: fmt.Sprintf("s%d", n), pipes: NewPipes(), stdin: stdinW, done: make(chan struct{}), killed: make(chan struct{}), detachedC: make(chan struct{})}
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
	if err != nil || len(f) != 4 {
		end(125, false)
		return
	}
	_, _ = io.Copy(io.Discard, in) // the workspace, until the runner closes stdin
	sc := s.pf.script
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

func (s *scriptedRun) ID() string            { return s.id }
func (s *scriptedRun) Streams() Streams      { return s.pipes.Streams(s.stdin) }
func (s *scriptedRun) Done() <-chan struct{} { return s.done }
func (s *scriptedRun) Kill()                 { s.kill.Do(func() { close(s.killed) }) }
func (s *scriptedRun) StartMeter()           {}
func (s *scriptedRun) Peak() int64           { return 4 << 20 }
func (s *scriptedRun) Remove()               { s.pf.removed.Add(1) }

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
