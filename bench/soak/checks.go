package soak

import (
	"fmt"
	"slices"
	"strings"
)

// Fault names of the checks that are no fault's window.
const (
	fLeak       = "leak check (same process, after the faults)"
	fEndLeak    = "end (the restarted sidecar, after the load)"
	fEnd        = "end"
	fAccounting = "accounting"
	fSDK        = "SDK sessions"
	fChecks     = "checks"
)

// windowChecks are the checks phases makes for each fault window but the
// kill: decisions flowed, and the p99 bound.
const windowChecks = 2

// expectedChecks is how many checks each fault makes in a run that goes
// to its end, pinned here by hand: a check dropped, merged or added
// changes a count that the run compares (checkCount), so that the report
// cannot read "N of N passed" with a check gone. A fault that fails early
// makes fewer; its failed check already says why.
func (s *soak) expectedChecks() map[string]int {
	want := map[string]int{
		// Held back networked runs, SIGTERM, started, the run in
		// flight, runs again, nothing left behind.
		wEngineRestart: 6 + windowChecks,
		// SIGSTOP, SIGCONT, the run in flight, runs again, nothing left.
		wEngineFrozen: 5 + windowChecks,
		// Filled, a whole last line, decided again once space returns.
		wDiskFull: 3 + windowChecks,
		// Broken refused, stricter, base again; judgeSwap.
		wPolicy: 4 + windowChecks,
		// Goroutines, fds, heap, connections, containers (compare).
		fLeak:    5,
		fEndLeak: 5,
		// Containers at the kill, fail closed, started again, removed,
		// two runs in flight cut, every session answered again.
		wKill: 7,
		// Stops on SIGTERM, nothing left in the engine.
		fEnd: 2,
		// Timeouts rare, verify, rotated, answered once, answers,
		// decisions' lines, runs' lines, orphans.
		fAccounting: 8,
	}
	for _, b := range s.badClients() {
		want["bad: "+b.name] = b.checks + 1 + windowChecks // + its memory bound
	}
	if s.cfg.SDKSessions > 0 {
		want[fSDK] = 2
	}
	return want
}

// checkCount compares the checks made with expectedChecks, as one more
// check that names every fault whose count differs.
func (s *soak) checkCount() {
	want := s.expectedChecks()
	s.mu.Lock()
	got := map[string]int{}
	for _, c := range s.checks {
		got[c.Fault]++
	}
	made := len(s.checks)
	s.mu.Unlock()
	faults := make([]string, 0, len(want)+len(got))
	for f := range want {
		faults = append(faults, f)
	}
	for f := range got {
		if _, ok := want[f]; !ok {
			faults = append(faults, f)
		}
	}
	slices.Sort(faults)
	total := 0
	var off []string
	for _, f := range faults {
		total += want[f]
		if got[f] != want[f] {
			off = append(off, fmt.Sprintf("%s: %d made, %d expected", f, got[f], want[f]))
		}
	}
	detail := fmt.Sprintf("%d checks made, %d expected", made, total)
	if len(off) > 0 {
		detail += ": " + strings.Join(off, "; ")
	}
	s.check(fChecks, "every expected check was made, none dropped, merged or added unpinned", len(off) == 0, "%s", detail)
}
