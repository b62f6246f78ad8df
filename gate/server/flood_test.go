package server

import (
	"runtime/debug"
	"testing"
)

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestFloodSwitchesTheCollectorTarget is not parallel: it reads the
// process-wide collector target.
func TestFloodSwitchesTheCollectorTarget(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	f := &floods{normal: 100, flooding: 25}
	small, big1, big2 := &floodRun{f: f}, &floodRun{f: f}, &floodRun{f: f}
	small.add(floodBytes - 1)
	if got := gcPercent(); got != 100 {
		t.Fatalf("below the flood threshold GOGC = %d, want 100", got)
	}
	big1.add(floodBytes)
	big2.add(floodBytes / 2)
	big2.add(floodBytes / 2)
	if got := gcPercent(); got != 25 {
		t.Fatalf("during a flood GOGC = %d, want 25", got)
	}
	big1.done()
	if got := gcPercent(); got != 25 {
		t.Fatalf("with one flood still running GOGC = %d, want 25", got)
	}
	big2.done()
	small.done()
	if got := gcPercent(); got != 100 {
		t.Fatalf("after the floods GOGC = %d, want 100", got)
	}
}
