package sandbox

import (
	"fmt"
	"time"
)

// StallMeter is an Instance whose pressure stall figures (Linux PSI, read
// from its cgroup) can be read during its run.
type StallMeter interface {
	// Stall reads the sandbox's figures now; ok is false when the
	// platform cannot see them (no PSI, a cgroup layout it does not know,
	// an engine on another host).
	Stall() (s Stall, ok bool)
}

// Stall is one reading of a sandbox's pressure. The durations are totals
// since its cgroup was made; the monitor works on their growth.
type Stall struct {
	// MemoryFull is how long all of its tasks were stalled on memory at
	// once (PSI memory "full": reclaim, refaults, waiting for the OOM
	// killer).
	MemoryFull time.Duration
	// CPUSome is how long at least one of its tasks was runnable but
	// waiting for a CPU (PSI cpu "some").
	CPUSome time.Duration
	// MemoryBytes is its memory use now, and LimitBytes its limit (0:
	// unknown).
	MemoryBytes, LimitBytes int64
}

// The memory stall bound, after systemd-oomd (which ends a cgroup whose
// memory pressure stays over a limit for a while), scaled to runs of
// seconds: a sandbox at its memory limit whose tasks were all stalled on
// memory for at least stallShare of the last stallWindow thrashes (its
// own file pages, an interpreter's or a mapped file's, reclaimed and read
// back), and the kernel's OOM killer does not act while reclaim makes
// progress, so it would run until its timeout. The runner ends it and
// reports oom_killed. Measured under a 256 MiB limit on a loaded 2-core
// host: a program holding 216 MiB and reading a mapped 96 MiB file over
// and over stalled 50% of its time, "full"; a healthy one near its limit
// stalls a few percent.
const (
	stallEvery  = 250 * time.Millisecond
	stallWindow = 2 * time.Second
	stallShare  = 0.3
	// nearLimit: the sandbox's memory use is within this share of its
	// limit (reclaim keeps it a little under).
	nearLimit = 0.9
)

// stallSample is a reading and when it was taken.
type stallSample struct {
	at time.Time
	Stall
}

// stallWatch follows a StallMeter during a run: it samples it every
// stallEvery and closes thrashing once the memory stall bound is passed.
// Its owner (the run loop) stops it; every method is for the loop's
// goroutine but the sampler's own.
type stallWatch struct {
	m         StallMeter
	thrashing chan struct{} // closed once the bound is passed
	stop      chan struct{}
	done      chan struct{}
	first     stallSample // the reading as the run began (at zero: none)
	evidence  string      // why thrashing was closed; read after it is
}

// watchStall starts following inst if it is a StallMeter that can be
// read; nil otherwise.
func watchStall(inst Instance) *stallWatch {
	m, ok := inst.(StallMeter)
	if !ok {
		return nil
	}
	s, ok := m.Stall()
	if !ok {
		return nil
	}
	w := &stallWatch{m: m, thrashing: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		first: stallSample{at: time.Now(), Stall: s}}
	go w.run()
	return w
}

func (w *stallWatch) run() {
	defer close(w.done)
	t := time.NewTicker(stallEvery)
	defer t.Stop()
	window := []stallSample{w.first}
	for {
		select {
		case <-w.stop:
			return
		case now := <-t.C:
			s, ok := w.m.Stall()
			if !ok {
				return // the sandbox's cgroup is gone: it ended
			}
			window = append(window, stallSample{at: now, Stall: s})
			for len(window) > 2 && now.Sub(window[1].at) >= stallWindow {
				window = window[1:]
			}
			if why, ok := thrashes(window[0], window[len(window)-1]); ok {
				w.evidence = why
				close(w.thrashing)
				return
			}
		}
	}
}

// thrashes says whether the sandbox passed the memory stall bound between
// readings a and b, and the evidence.
func thrashes(a, b stallSample) (string, bool) {
	span := b.at.Sub(a.at)
	stalled := b.MemoryFull - a.MemoryFull
	if span < stallWindow || b.LimitBytes <= 0 || float64(b.MemoryBytes) < nearLimit*float64(b.LimitBytes) {
		return "", false
	}
	if float64(stalled) < stallShare*float64(span) {
		return "", false
	}
	return fmt.Sprintf("all its tasks stalled on memory for %s of the last %s, at %d of its %d bytes",
		stalled.Round(time.Millisecond), span.Round(time.Millisecond), b.MemoryBytes, b.LimitBytes), true
}

// thrashed is closed once the sandbox passed the bound; nil (never) for
// a sandbox not followed.
func (w *stallWatch) thrashed() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.thrashing
}

// close stops the sampler and waits for it.
func (w *stallWatch) close() {
	if w == nil {
		return
	}
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// stallReport is how a sandbox fared since its run began.
type stallReport struct {
	ok       bool // false: it could not be read
	cpuWait  time.Duration
	memStall time.Duration
	span     time.Duration
	last     Stall
}

// report reads how the sandbox fared since the run began: how long it
// waited for a CPU and was stalled on memory, and its memory now. Read
// it before the sandbox is killed: its cgroup goes with it.
func (w *stallWatch) report() stallReport {
	if w == nil {
		return stallReport{}
	}
	last, ok := w.m.Stall()
	if !ok {
		return stallReport{}
	}
	return stallReport{ok: true, cpuWait: last.CPUSome - w.first.CPUSome, memStall: last.MemoryFull - w.first.MemoryFull,
		span: time.Since(w.first.at), last: last}
}
