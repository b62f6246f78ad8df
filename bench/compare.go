package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Variant is one build of the sidecar the compare phase measures beside
// the others: a change's before and after, built from two commits.
type Variant struct {
	Name   string   `json:"name"`
	Binary string   `json:"binary"`
	Env    []string `json:"env,omitempty"`
	Args   []string `json:"args,omitempty"`
}

// ParseVariant reads NAME=BINARY, optionally followed by ;ENV=VALUE and
// ;--flag items ("after=bin/gk;GOGC=200;--audit-sync").
func ParseVariant(s string) (Variant, error) {
	parts := strings.Split(s, ";")
	name, bin, ok := strings.Cut(parts[0], "=")
	if !ok || name == "" || bin == "" {
		return Variant{}, fmt.Errorf("variant %q is not NAME=BINARY", s)
	}
	v := Variant{Name: name, Binary: bin}
	for _, e := range parts[1:] {
		switch {
		case strings.HasPrefix(e, "--"):
			v.Args = append(v.Args, e)
		case strings.Contains(e, "="):
			v.Env = append(v.Env, e)
		default:
			return Variant{}, fmt.Errorf("variant %q: %q is neither ENV=VALUE nor a --flag", s, e)
		}
	}
	return v, nil
}

// CompareResult is the compare phase: for each concurrency level, each
// variant's decisions/s, sidecar CPU per decision and per-request latency
// from the Go client, all variants measured in the same rounds with their
// order rotating; and, when perf is installed, each variant's profile at
// the heaviest level.
type CompareResult struct {
	Variants []Variant               `json:"variants"`
	Levels   []CompareLevel          `json:"levels"`
	Profiles map[string]*PerfProfile `json:"profiles,omitempty"`
}

// CompareLevel is one concurrency level of the compare phase.
type CompareLevel struct {
	Conns int           `json:"connections"`
	Sides []CompareSide `json:"sides"`
}

// CompareSide is one variant at one level: its rate and CPU (as in the
// throughput rows) and the round trip of every request of its slices.
type CompareSide struct {
	Name    string  `json:"name"`
	Rate    Rate    `json:"rate"`
	Latency Summary `json:"latency"`
	// SlicesPerRequest is how many times per decision one of the
	// sidecar's threads was put on a CPU (/proc/PID/task/*/schedstat):
	// each wake-up of a thread that had blocked counts, so hand-offs that
	// park and wake threads show here.
	SlicesPerRequest float64 `json:"thread_slices_per_request"`
	// PeakRSS is the sidecar's highest VmRSS sampled during its slices.
	PeakRSS int64 `json:"peak_rss_bytes"`
}

// compare measures every Config.Compare variant interleaved: row 2's load
// (the benchmark Read, one decide at a time per connection, the Go client
// in this process on the same CPUs) at each level of Config.Conns.
func (e *env) compare(ctx context.Context) error {
	type side struct {
		v       Variant
		sc      *Sidecar
		workers []Worker
		lat     *latencies
		cpu     time.Duration
		self    time.Duration
		slices  int64
		peak    int64
		rate    Rate
	}
	var sides []*side
	for i, v := range e.cfg.Compare {
		// No warm pool: decisions only, and no containers of its own.
		sc, err := e.startSidecarBinary(ctx, v.Binary, "runc", SidecarOptions{Name: fmt.Sprintf("cmp%d", i), Env: v.Env, Args: append([]string{"--pool-size", "0"}, v.Args...)})
		if err != nil {
			return fmt.Errorf("variant %s: %w", v.Name, err)
		}
		defer sc.Stop()
		sides = append(sides, &side{v: v, sc: sc})
	}
	mkFrame, want := e.decideFrame(), e.wantRule()
	res := &CompareResult{Variants: e.cfg.Compare, Profiles: map[string]*PerfProfile{}}
	maxConns := 0
	for _, n := range e.cfg.Conns {
		maxConns = max(maxConns, n)
	}
	for _, n := range e.cfg.Conns {
		var closers []func()
		closeAll := func() {
			for _, c := range closers {
				c()
			}
		}
		for _, sd := range sides {
			ws, closeW, err := GatekeeperWorkers(ctx, sd.sc, n, mkFrame, want)
			if err != nil {
				closeAll()
				return fmt.Errorf("%s: %w", sd.v.Name, err)
			}
			closers = append(closers, closeW)
			sd.lat = &latencies{}
			sd.workers = sd.lat.wrap(ws)
			sd.cpu, sd.self, sd.slices, sd.peak, sd.rate = 0, 0, 0, 0, Rate{}
		}
		for _, sd := range sides {
			if _, _, err := Slice(sd.workers, 200*time.Millisecond); err != nil {
				closeAll()
				return fmt.Errorf("%s warm-up: %w", sd.v.Name, err)
			}
			sd.lat.reset()
		}
		perfs := map[string]*perfRecording{}
		if n == maxConns && e.cfg.Perf {
			for i, sd := range sides {
				p, err := startPerf(sd.sc.PID(), filepath.Join(e.cfg.Work, fmt.Sprintf("perf-cmp%d.data", i)))
				if err != nil {
					e.res.Notes = append(e.res.Notes, "perf: "+err.Error())
					break
				}
				perfs[sd.v.Name] = p
			}
		}
		for r := range e.cfg.Rounds {
			for k := range sides {
				sd := sides[(r+k)%len(sides)]
				c0, s0, t0 := cpuTime(sd.sc.PID()), cpuTime(os.Getpid()), timeSlices(sd.sc.PID())
				sampler := SampleRSS(sd.sc.PID(), 25*time.Millisecond)
				count, elapsed, err := Slice(sd.workers, e.cfg.Slice)
				peak, _ := sampler.Stop()
				sd.peak = max(sd.peak, peak)
				sd.cpu += cpuTime(sd.sc.PID()) - c0
				sd.self += cpuTime(os.Getpid()) - s0
				sd.slices += timeSlices(sd.sc.PID()) - t0
				if err != nil {
					closeAll()
					return fmt.Errorf("%s with %d connections: %w", sd.v.Name, n, err)
				}
				sd.rate.Requests += count
				sd.rate.Seconds += elapsed.Seconds()
			}
		}
		for name, p := range perfs {
			prof, err := p.stop(ctx)
			if err != nil {
				e.res.Notes = append(e.res.Notes, fmt.Sprintf("perf of %s: %v", name, err))
				continue
			}
			res.Profiles[name] = prof
		}
		closeAll()
		lvl := CompareLevel{Conns: n}
		for _, sd := range sides {
			sd.rate.PerSecond = float64(sd.rate.Requests) / sd.rate.Seconds
			sd.rate.ServerCPUPerRequestUS = float64(sd.cpu.Microseconds()) / float64(sd.rate.Requests)
			sd.rate.ServerCores = sd.cpu.Seconds() / sd.rate.Seconds
			sd.rate.ClientCores = sd.self.Seconds() / sd.rate.Seconds
			lvl.Sides = append(lvl.Sides, CompareSide{Name: sd.v.Name, Rate: sd.rate, Latency: Summarize(sd.lat.all()),
				SlicesPerRequest: float64(sd.slices) / float64(sd.rate.Requests), PeakRSS: sd.peak})
			e.cfg.Log.Info("bench: compare", "conns", n, "variant", sd.v.Name, "per_s", int(sd.rate.PerSecond),
				"cpu_us", int(sd.rate.ServerCPUPerRequestUS), "p50_us", int(lvl.Sides[len(lvl.Sides)-1].Latency.P50*1000))
		}
		res.Levels = append(res.Levels, lvl)
	}
	e.res.Compare = res
	return nil
}

// timeSlices is how many times pid's threads have been put on a CPU.
func timeSlices(pid int) int64 {
	_, _, n := schedstat(pid)
	return n
}

// latencies collects the round trip of every request of a set of workers.
type latencies struct {
	mu  sync.Mutex
	per [][]time.Duration
}

// wrap returns workers that time each call of ws into l.
func (l *latencies) wrap(ws []Worker) []Worker {
	l.per = make([][]time.Duration, len(ws))
	out := make([]Worker, len(ws))
	for i, w := range ws {
		out[i] = func() error {
			t0 := time.Now()
			err := w()
			d := time.Since(t0)
			l.mu.Lock()
			l.per[i] = append(l.per[i], d)
			l.mu.Unlock()
			return err
		}
	}
	return out
}

func (l *latencies) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.per {
		l.per[i] = l.per[i][:0]
	}
}

func (l *latencies) all() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, p := range l.per {
		out = append(out, p...)
	}
	return out
}

// compareMarkdown renders the compare phase: one row per level and
// variant, each ratio against the first variant.
func (c *CompareResult) markdown(b *strings.Builder) {
	names := make([]string, len(c.Variants))
	for i, v := range c.Variants {
		names[i] = "`" + v.Name + "`"
	}
	fmt.Fprintf(b, "\n#### Variants compared (%s), interleaved in the same rounds\n\n", strings.Join(names, ", "))
	b.WriteString("| connections | variant | decisions/s | × first | sidecar CPU per decision | × first | p50 | p99 | thread wake-ups per decision | peak RSS | sidecar cores | load-generator cores |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, l := range c.Levels {
		first := l.Sides[0]
		for _, s := range l.Sides {
			fmt.Fprintf(b, "| %d | %s | %.0f | %.2f× | %.0f µs | %.2f× | %s | %s | %.2f | %.1f MiB | %.2f | %.2f |\n", l.Conns, s.Name,
				s.Rate.PerSecond, Ratio(s.Rate.PerSecond, first.Rate.PerSecond),
				s.Rate.ServerCPUPerRequestUS, Ratio(s.Rate.ServerCPUPerRequestUS, first.Rate.ServerCPUPerRequestUS),
				FormatMS(s.Latency.P50), FormatMS(s.Latency.P99), s.SlicesPerRequest, mib(s.PeakRSS), s.Rate.ServerCores, s.Rate.ClientCores)
		}
	}
	for _, v := range c.Variants {
		p := c.Profiles[v.Name]
		if p == nil {
			continue
		}
		fmt.Fprintf(b, "\n<details><summary>perf profile of `%s` at the heaviest level (%d samples)</summary>\n\n", v.Name, p.Samples)
		p.markdown(b)
		b.WriteString("\n</details>\n")
	}
	for _, v := range c.Variants {
		fmt.Fprintf(b, "\n- `%s`: `%s`", v.Name, strings.Join(append(append(slices.Clone(v.Env), v.Binary), v.Args...), " "))
	}
	b.WriteString("\n")
}
