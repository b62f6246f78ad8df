package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/docker"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// TraceCall is one kind of engine API call made while traced runs ran: how
// often per run and how long it took (request sent to response body
// closed, so a streaming call such as wait lasts as long as its container).
type TraceCall struct {
	Call   string  `json:"call"`
	PerRun float64 `json:"per_run"`
	P50    float64 `json:"p50_ms"`
	Max    float64 `json:"max_ms"`
}

// TraceEvent is an engine API call on the timeline of one run, in
// milliseconds from the run's start; a call that began before the run
// starts at a negative time.
type TraceEvent struct {
	Call  string  `json:"call"`
	Start float64 `json:"start_ms"`
	End   float64 `json:"end_ms"`
}

// RunTrace is where a run through gatekeeper's own Docker runner spends its
// time, seen from the engine API: every call by kind, and the timeline of
// the median run.
type RunTrace struct {
	Runtime  string       `json:"runtime"`
	Warm     bool         `json:"warm"`
	Runs     int          `json:"runs"`
	Total    Summary      `json:"total"`
	Calls    []TraceCall  `json:"calls"`
	Timeline []TraceEvent `json:"median_run_timeline"`
	Median   float64      `json:"median_run_ms"`
	// FirstLine is when the program's first statement ran, from Run's
	// start: the program prints the host clock (the container shares the
	// kernel's), so what comes before it is the engine, the launcher and
	// the interpreter's start.
	FirstLine Summary `json:"first_statement"`
	// Output is when the program's output reached the runner (through the
	// attach stream), from Run's start.
	Output Summary `json:"output_arrived"`
}

// traceCode prints the time its first statement runs, in Unix nanoseconds.
const traceCode = "import time\nprint(time.time_ns())\n"

type traceEvent struct {
	key        string
	start, end time.Time
}

// tracer records every engine API round trip by method and path.
type tracer struct {
	base   http.RoundTripper
	mu     sync.Mutex
	events []traceEvent
}

var (
	apiVersionRE = regexp.MustCompile(`^/v[0-9.]+`)
	hexIDRE      = regexp.MustCompile(`/[0-9a-f]{64}`)
	imageRE      = regexp.MustCompile(`^/images/.+/json$`)
)

func (t *tracer) RoundTrip(r *http.Request) (*http.Response, error) {
	p := apiVersionRE.ReplaceAllString(r.URL.Path, "")
	p = hexIDRE.ReplaceAllString(p, "/{id}")
	p = imageRE.ReplaceAllString(p, "/images/{name}/json")
	key := r.Method + " " + p
	t0 := time.Now()
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		t.record(key, t0)
		return resp, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, done: func() { t.record(key, t0) }}
	return resp, nil
}

func (t *tracer) record(key string, start time.Time) {
	t.mu.Lock()
	t.events = append(t.events, traceEvent{key: key, start: start, end: time.Now()})
	t.mu.Unlock()
}

func (t *tracer) take() []traceEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev := t.events
	t.events = nil
	return ev
}

// timedBody calls done once, at EOF or Close, whichever comes first.
type timedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// TraceRuns runs a two-line Python program n times with gatekeeper's own Docker runner
// (runner/docker, the sidecar's backend) under sb, through an engine client
// that times every API call, after one untimed run that fills the runner's
// caches. With warm, the runner has a warm pool of two containers for sb,
// full before each run (as in row 3, where other runs come between two
// warm ones), so each run's timeline shows the refill it starts.
func TraceRuns(ctx context.Context, sb runner.Sandbox, timeout time.Duration, n int, warm bool) (RunTrace, error) {
	tr := RunTrace{Runtime: string(sb.Runtime), Warm: warm, Runs: n}
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = client.DefaultDockerHost
	}
	if !strings.HasPrefix(host, "unix://") {
		return tr, fmt.Errorf("trace: DOCKER_HOST %s is not a Unix socket", host)
	}
	sock := strings.TrimPrefix(host, "unix://")
	t := &tracer{base: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation(), client.WithHTTPClient(&http.Client{Transport: t}))
	if err != nil {
		return tr, err
	}
	defer cli.Close()
	cfg := docker.Config{Instance: "bench-trace-cold", Client: cli}
	if warm {
		cfg.Instance = "bench-trace-warm"
		cfg.Pool = sandbox.PoolConfig{Size: 2, Sandboxes: []runner.Sandbox{sb}}
	}
	r, err := docker.New(cfg)
	if err != nil {
		return tr, err
	}
	if _, err := r.Cleanup(ctx); err != nil {
		return tr, err
	}
	defer func() {
		_ = r.Close()
		_, _ = r.Cleanup(context.WithoutCancel(ctx))
	}()
	spec := func(i int) runner.Spec {
		return runner.Spec{RunID: fmt.Sprintf("trace-%d", i), QueryID: "bench", Language: runner.Python, Code: traceCode, Timeout: timeout, Sandbox: sb}
	}
	if err := r.Warm(ctx); err != nil {
		return tr, fmt.Errorf("trace: fill the pool: %w", err)
	}
	if _, err := r.Run(ctx, spec(0)); err != nil {
		return tr, fmt.Errorf("trace warm-up run: %w", err)
	}
	type window struct{ start, end time.Time }
	var (
		totals  []time.Duration
		firsts  []time.Duration
		outputs []time.Duration
		windows []window
		events  []traceEvent
	)
	for i := range n {
		if err := r.Warm(ctx); err != nil { // waits for the previous run's refill
			return tr, fmt.Errorf("trace: refill the pool: %w", err)
		}
		if i == 0 {
			t.take() // the warm-up's calls
		}
		sp := spec(i + 1)
		var gotOutput time.Time
		var once sync.Once
		sp.OnOutput = func(runner.Stream, []byte) { once.Do(func() { gotOutput = time.Now() }) }
		t0 := time.Now()
		res, err := r.Run(ctx, sp)
		t1 := time.Now()
		if err != nil {
			return tr, fmt.Errorf("trace run: %w", err)
		}
		if res.ExitCode != 0 {
			return tr, fmt.Errorf("trace run exited %d: %s", res.ExitCode, res.Stderr)
		}
		var ns int64
		if _, err := fmt.Sscan(res.Stdout, &ns); err != nil {
			return tr, fmt.Errorf("trace run printed %q: %w", res.Stdout, err)
		}
		firsts = append(firsts, time.Unix(0, ns).Sub(t0))
		outputs = append(outputs, gotOutput.Sub(t0))
		totals = append(totals, t1.Sub(t0))
		windows = append(windows, window{t0, t1})
	}
	if warm {
		_ = r.Warm(ctx) // the last refill, so its calls are complete
	}
	time.Sleep(200 * time.Millisecond) // streams of the last run close
	events = t.take()
	tr.Total, tr.FirstLine, tr.Output = Summarize(totals), Summarize(firsts), Summarize(outputs)

	byKey := map[string][]time.Duration{}
	for _, e := range events {
		byKey[e.key] = append(byKey[e.key], e.end.Sub(e.start))
	}
	for k, ds := range byKey {
		s := Summarize(ds)
		tr.Calls = append(tr.Calls, TraceCall{Call: k, PerRun: float64(len(ds)) / float64(n), P50: s.P50, Max: s.Max})
	}
	sort.Slice(tr.Calls, func(i, j int) bool { return tr.Calls[i].P50 > tr.Calls[j].P50 })

	// The timeline of the median run: every call that overlapped it.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(totals[a] - totals[b]) })
	w := windows[order[n/2]]
	tr.Median = ms(w.end.Sub(w.start))
	for _, e := range events {
		if e.end.Before(w.start) || e.start.After(w.end) {
			continue
		}
		tr.Timeline = append(tr.Timeline, TraceEvent{Call: e.key, Start: ms(e.start.Sub(w.start)), End: ms(e.end.Sub(w.start))})
	}
	sort.Slice(tr.Timeline, func(i, j int) bool { return tr.Timeline[i].Start < tr.Timeline[j].Start })
	return tr, nil
}

// SandboxOf is the runner.Sandbox the sidecar derives from an effective
// policy with no deps directory and no network (gate.Effective.RunnerSandbox).
func SandboxOf(eff EffectiveSandbox, image string) runner.Sandbox {
	p := eff.Sandbox.Proc
	return runner.Sandbox{
		Image: image, Runtime: runner.Runtime(p.Runtime), UID: p.User, GID: p.User, CPUs: p.CPUs,
		MemoryBytes: p.Memory, PIDs: p.PIDs,
		WorkspaceBytes: eff.Sandbox.FS.Workspace.Size, TmpBytes: eff.Sandbox.FS.Tmp.Size,
		MaxOutputBytes: eff.Sandbox.Output.MaxBytes,
	}
}
