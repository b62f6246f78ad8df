package runner_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// gatedBackend records the order runs start in and blocks each run until
// its RunID's gate is released.
type gatedBackend struct {
	mu      sync.Mutex
	started []string
	active  int
	peak    int
	gates   map[string]chan struct{}
	startC  chan string
}

func newGated() *gatedBackend {
	return &gatedBackend{gates: map[string]chan struct{}{}, startC: make(chan string, 100)}
}

func (g *gatedBackend) gate(id string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.gates[id]
	if !ok {
		c = make(chan struct{})
		g.gates[id] = c
	}
	return c
}

func (g *gatedBackend) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	gate := g.gate(spec.RunID)
	g.mu.Lock()
	g.started = append(g.started, spec.RunID)
	g.active++
	g.peak = max(g.peak, g.active)
	g.mu.Unlock()
	g.startC <- spec.RunID
	<-gate
	g.mu.Lock()
	g.active--
	g.mu.Unlock()
	return runner.Result{RunID: spec.RunID, Reason: runner.Exited}, nil
}

func (g *gatedBackend) waitStart(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-g.startC:
		if got != want {
			t.Fatalf("run %s started, want %s", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("run %s did not start", want)
	}
}

func (g *gatedBackend) noStart(t *testing.T) {
	t.Helper()
	select {
	case got := <-g.startC:
		t.Fatalf("run %s started, want none to start", got)
	case <-time.After(50 * time.Millisecond):
	}
}

// waitQueued waits until n runs wait in q.
func waitQueued(t *testing.T, q *runner.Queue, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, w := q.Stats(); w == n {
			return
		}
		if time.Now().After(deadline) {
			_, w := q.Stats()
			t.Fatalf("%d runs wait, want %d", w, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestQueue(t *testing.T) {
	t.Parallel()
	t.Run("runs beyond the bound wait and start in arrival order", func(t *testing.T) {
		t.Parallel()
		g := newGated()
		q := runner.NewQueue(g, 2)
		var wg sync.WaitGroup
		run := func(id string) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := q.Run(t.Context(), runner.Spec{RunID: id}); err != nil {
					t.Errorf("run %s: %v", id, err)
				}
			}()
		}
		run("a")
		g.waitStart(t, "a")
		run("b")
		g.waitStart(t, "b")
		for i, id := range []string{"c", "d", "e"} {
			run(id)
			waitQueued(t, q, i+1)
		}
		g.noStart(t)
		close(g.gate("a"))
		g.waitStart(t, "c")
		close(g.gate("b"))
		g.waitStart(t, "d")
		close(g.gate("c"))
		g.waitStart(t, "e")
		close(g.gate("d"))
		close(g.gate("e"))
		wg.Wait()
		if g.peak != 2 {
			t.Errorf("%d runs at once, want at most (and at some point) 2", g.peak)
		}
		if r, w := q.Stats(); r != 0 || w != 0 {
			t.Errorf("after all runs: %d running, %d waiting; want 0, 0", r, w)
		}
	})
	t.Run("a cancelled waiter leaves the queue without running", func(t *testing.T) {
		t.Parallel()
		g := newGated()
		q := runner.NewQueue(g, 1)
		go q.Run(t.Context(), runner.Spec{RunID: "a"})
		g.waitStart(t, "a")

		ctx, cancel := context.WithCancel(t.Context())
		errC := make(chan error, 1)
		go func() {
			res, err := q.Run(ctx, runner.Spec{RunID: "b"})
			if res.RunID != "b" {
				t.Errorf("cancelled waiter's result has RunID %q, want b", res.RunID)
			}
			errC <- err
		}()
		waitQueued(t, q, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := q.Run(t.Context(), runner.Spec{RunID: "c"}); err != nil {
				t.Errorf("run c: %v", err)
			}
		}()
		waitQueued(t, q, 2)
		cancel()
		if err := <-errC; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter got %v, want context.Canceled", err)
		}
		waitQueued(t, q, 1)
		close(g.gate("a"))
		g.waitStart(t, "c") // b never starts
		close(g.gate("c"))
		<-done
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.started) != 2 || g.started[0] != "a" || g.started[1] != "c" {
			t.Errorf("started %v, want [a c]", g.started)
		}
	})
	t.Run("a context ended before Run does not run", func(t *testing.T) {
		t.Parallel()
		g := newGated()
		q := runner.NewQueue(g, 1)
		go q.Run(t.Context(), runner.Spec{RunID: "a"})
		g.waitStart(t, "a")
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := q.Run(ctx, runner.Spec{RunID: "b"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if _, w := q.Stats(); w != 0 {
			t.Errorf("%d waiting after a cancelled Run, want 0", w)
		}
		close(g.gate("a"))
	})
	t.Run("many concurrent runs never exceed the bound", func(t *testing.T) {
		t.Parallel()
		b := &countingBackend{}
		q := runner.NewQueue(b, 3)
		var wg sync.WaitGroup
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := t.Context()
				if i%5 == 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Duration(i%7)*time.Millisecond)
					defer cancel()
				}
				_, _ = q.Run(ctx, runner.Spec{})
			}()
		}
		wg.Wait()
		if b.peak > 3 {
			t.Errorf("%d runs at once, want at most 3", b.peak)
		}
		if r, w := q.Stats(); r != 0 || w != 0 {
			t.Errorf("after all runs: %d running, %d waiting; want 0, 0", r, w)
		}
	})
	t.Run("a bound below 1 is taken as 1", func(t *testing.T) {
		t.Parallel()
		b := &countingBackend{}
		q := runner.NewQueue(b, 0)
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = q.Run(t.Context(), runner.Spec{}) }()
		}
		wg.Wait()
		if b.peak != 1 {
			t.Errorf("%d runs at once, want 1", b.peak)
		}
	})
}

type countingBackend struct {
	mu           sync.Mutex
	active, peak int
}

func (c *countingBackend) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	c.mu.Lock()
	c.active++
	c.peak = max(c.peak, c.active)
	c.mu.Unlock()
	time.Sleep(time.Millisecond)
	c.mu.Lock()
	c.active--
	c.mu.Unlock()
	return runner.Result{}, nil
}
