package sandbox

import (
	"math"
	"time"
)

// The pool sizes each sandbox's set of warm sandboxes from demand. A run
// that takes a sandbox starts its replacement, which is ready one refill
// time later (making the sandbox, starting its interpreter, plus the run
// itself when the replacement waits for it: see pool.take). For the next
// runs to find a sandbox, the set must hold as many as arrive during
// one refill time: with arrivals at rate λ and a refill time R, about
// λR, and, arrivals being bursty (Poisson, roughly), λR + 3√(λR) covers
// all but about one refill window in a thousand (λR + 2√(λR), 95%, left
// 15% of the runs of 8 sessions waiting in make bench: the refills of a
// burst also queue behind MaxMaking). The target is that, rounded up, at least 1,
// then bounded by PoolConfig.Min and Size. λ is the larger of the rates
// over the last 10 s (to follow a burst at once) and the last 60 s (to not
// shrink between the calls of a steady load). R is what the set's refills
// take, from a moving average and a moving mean deviation: the average
// plus four deviations, as TCP's retransmission timer covers the tail of
// its round trips (RFC 6298). With the average alone, the one refill in a
// few that ran slow (made while other runs and refills held the CPU) left a
// run of 8 sessions waiting for its sandbox in make bench. The pool
// never holds more than Size per sandbox, nor more than the memory budget
// across sandboxes.

// Rate windows.
const (
	shortWindow = 10 * time.Second
	longWindow  = 60 * time.Second
	// maxArrivals bounds the arrivals a set remembers (over longWindow).
	maxArrivals = 4096
)

// demand remembers when runs of one sandbox arrived. Not safe for
// concurrent use (the pool's lock guards it).
type demand struct {
	arrivals []time.Time // ascending, within longWindow of the last one
}

// add records an arrival at t (not before the previous one).
func (d *demand) add(t time.Time) {
	d.forget(t)
	if len(d.arrivals) == maxArrivals {
		d.arrivals = d.arrivals[1:]
	}
	d.arrivals = append(d.arrivals, t)
}

// forget drops arrivals older than longWindow before now.
func (d *demand) forget(now time.Time) {
	i := 0
	for i < len(d.arrivals) && now.Sub(d.arrivals[i]) > longWindow {
		i++
	}
	if i > 0 {
		d.arrivals = append(d.arrivals[:0], d.arrivals[i:]...)
	}
}

// rate is the arrival rate per second at now: the larger of the short
// and the long window's.
func (d *demand) rate(now time.Time) float64 {
	d.forget(now)
	short := 0
	for i := len(d.arrivals) - 1; i >= 0 && now.Sub(d.arrivals[i]) <= shortWindow; i-- {
		short++
	}
	return max(float64(short)/shortWindow.Seconds(), float64(len(d.arrivals))/longWindow.Seconds())
}

// target is how many warm sandboxes a set arriving at rate (per second)
// with refill time refill should hold, within [lo, hi].
func target(rate float64, refill time.Duration, lo, hi int) int {
	x := rate * refill.Seconds()
	n := max(1, int(math.Ceil(x+3*math.Sqrt(x))))
	return min(max(n, lo), hi)
}

// ewma is a moving average of durations and of their deviation from it;
// the zero value has no samples.
type ewma struct {
	v, dev time.Duration
	n      int
}

// add folds d in: the first sample is taken as is (with a deviation of
// half of it, as RFC 6298 starts), later ones weigh 1/4 in the average and
// in the deviation.
func (e *ewma) add(d time.Duration) {
	if e.n == 0 {
		e.v, e.dev = d, d/2
	} else {
		e.dev += ((d - e.v).Abs() - e.dev) / 4
		e.v += (d - e.v) / 4
	}
	e.n++
}

// get returns the average, or def before the first sample.
func (e *ewma) get(def time.Duration) time.Duration {
	if e.n == 0 {
		return def
	}
	return e.v
}

// high returns the average plus four deviations, or def before the first
// sample: a duration that few samples exceed.
func (e *ewma) high(def time.Duration) time.Duration {
	if e.n == 0 {
		return def
	}
	return e.v + 4*e.dev
}
