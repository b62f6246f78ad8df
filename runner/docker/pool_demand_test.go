package docker

import (
	"testing"
	"time"
)

func TestPoolTargetFollowsDemandWithinItsBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		rate   float64
		refill time.Duration
		lo, hi int
		want   int
	}{
		{"no demand keeps the floor", 0, time.Second, 2, 8, 2},
		{"no demand and a floor of one keeps one", 0, time.Second, 1, 8, 1},
		{"a run a second over a one-second refill keeps three (1 + 2√1)", 1, time.Second, 1, 8, 3},
		{"a trickle keeps one", 0.1, 500 * time.Millisecond, 1, 8, 1},
		{"a burst is capped at the ceiling", 5, time.Second, 1, 8, 8},
		{"demand between the bounds is rounded up", 2, time.Second, 1, 8, 5},
		{"a slow refill asks for more at the same rate", 1, 4 * time.Second, 1, 16, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := target(tc.rate, tc.refill, tc.lo, tc.hi); got != tc.want {
				t.Errorf("target(%v, %v, %d, %d) = %d, want %d", tc.rate, tc.refill, tc.lo, tc.hi, got, tc.want)
			}
		})
	}
}

func TestDemandRateTakesTheBusierWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		arrivals []time.Duration // before now
		want     float64
	}{
		{"no arrivals is no demand", nil, 0},
		{"a burst in the last ten seconds counts over ten seconds", []time.Duration{3 * time.Second, 2 * time.Second, time.Second, 0}, 0.4},
		{"a steady load counts over the minute when the last ten seconds were quiet", []time.Duration{50 * time.Second, 40 * time.Second, 30 * time.Second, 20 * time.Second, 15 * time.Second, 12 * time.Second}, 0.1},
		{"arrivals older than a minute are forgotten", []time.Duration{2 * time.Minute, 90 * time.Second, 61 * time.Second}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var d demand
			for _, ago := range tc.arrivals {
				d.add(now.Add(-ago))
			}
			if got := d.rate(now); got < tc.want-1e-9 || got > tc.want+1e-9 {
				t.Errorf("rate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEWMAStartsAtItsFirstSample(t *testing.T) {
	t.Parallel()
	var e ewma
	if got := e.get(time.Second); got != time.Second {
		t.Errorf("no samples: %v, want the default 1s", got)
	}
	e.add(400 * time.Millisecond)
	if got := e.get(time.Second); got != 400*time.Millisecond {
		t.Errorf("one sample: %v, want 400ms", got)
	}
	e.add(800 * time.Millisecond)
	if got := e.get(time.Second); got != 500*time.Millisecond {
		t.Errorf("two samples: %v, want 500ms (a quarter of the way)", got)
	}
}
