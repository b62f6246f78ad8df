package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// stalling is a scripted platform whose sandboxes report stall figures:
// all their tasks stalled on memory for share of their time, at use of
// their limit.
type stalling struct {
	*scripted
	share    float64
	use      float64
	readable bool
}

func (pf *stalling) Create(ctx context.Context, req CreateRequest) (Instance, error) {
	inst, err := pf.scripted.Create(ctx, req)
	if err != nil {
		return nil, err
	}
	return &stallingRun{scriptedRun: inst.(*scriptedRun), pf: pf, born: time.Now()}, nil
}

type stallingRun struct {
	*scriptedRun
	pf   *stalling
	born time.Time
}

func (s *stallingRun) Stall() (Stall, bool) {
	const limit = 256 << 20
	age := time.Since(s.born)
	return Stall{MemoryFull: time.Duration(s.pf.share * float64(age)), CPUSome: age / 10,
		MemoryBytes: int64(s.pf.use * limit), LimitBytes: limit}, s.pf.readable
}

// TestTheRunLoopEndsASandboxThrashingAtItsMemoryLimit runs sandboxes that
// never end by themselves under stall figures on either side of the
// bound: only one stalled on memory past the bound, at its limit, is
// killed as OOM-killed before its timeout; the others time out.
func TestTheRunLoopEndsASandboxThrashingAtItsMemoryLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		share    float64 // of its time stalled on memory
		use      float64 // of its limit
		readable bool
		timeout  time.Duration
		reason   runner.ExitReason
	}{
		{"a sandbox stalled on memory most of the time at its limit is OOM-killed", 0.9, 1, true, time.Minute, runner.OOMKilled},
		{"a sandbox stalled on memory far under its limit times out", 0.9, 0.5, true, 3 * time.Second, runner.TimedOut},
		{"a sandbox at its limit stalled on memory now and then times out", 0.1, 1, true, 3 * time.Second, runner.TimedOut},
		{"a sandbox whose figures cannot be read times out", 0.9, 1, false, 3 * time.Second, runner.TimedOut},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pf := &stalling{scripted: &scripted{script: script{hang: true}}, share: tc.share, use: tc.use, readable: tc.readable}
			r, err := New(pf, Config{Instance: "unit", DefaultImage: "img:test", MinMemoryBytes: 6 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			res, err := r.Run(t.Context(), scriptedSpec(tc.timeout))
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason != tc.reason || res.ExitCode != 137 {
				t.Errorf("ended %s with %d, want %s with 137", res.Reason, res.ExitCode, tc.reason)
			}
			select {
			case <-pf.last.Load().killed:
			default:
				t.Error("the sandbox was not killed")
			}
		})
	}
}

// TestThrashesNeedsTheWholeWindowStalledAtTheLimit feeds the bound pairs
// of readings on either side of each of its conditions.
func TestThrashesNeedsTheWholeWindowStalledAtTheLimit(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(sec float64, full time.Duration, use int64) stallSample {
		return stallSample{at: t0.Add(time.Duration(sec * float64(time.Second))), Stall: Stall{MemoryFull: full, MemoryBytes: use, LimitBytes: 100}}
	}
	cases := []struct {
		name string
		a, b stallSample
		want bool
	}{
		{"30% of the window stalled at the limit thrashes", at(0, 0, 100), at(2, 600*time.Millisecond, 100), true},
		{"just under 30% of the window stalled does not", at(0, 0, 100), at(2, 599*time.Millisecond, 100), false},
		{"a window shorter than stallWindow does not", at(0, 0, 100), at(1.9, 1900*time.Millisecond, 100), false},
		{"stalled at 89% of the limit does not", at(0, 0, 100), at(2, 2*time.Second, 89), false},
		{"stalled at 90% of the limit thrashes", at(0, 0, 100), at(2, 2*time.Second, 90), true},
		{"stalled with the limit unknown does not", at(0, 0, 100), stallSample{at: t0.Add(2 * time.Second), Stall: Stall{MemoryFull: 2 * time.Second, MemoryBytes: 100}}, false},
	}
	for _, tc := range cases {
		if _, got := thrashes(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
