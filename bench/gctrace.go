package bench

import (
	"regexp"
	"strconv"
)

// GCTrace summarizes the Go runtime's GODEBUG=gctrace=1 lines of a window:
// how large the heap got, how much of it was live, and the goal the
// collector set. Sizes in MB, as the runtime prints them.
type GCTrace struct {
	Cycles    int `json:"cycles"`
	MaxHeapMB int `json:"max_heap_at_gc_start_mb"`
	MaxLiveMB int `json:"max_live_after_gc_mb"`
	MaxGoalMB int `json:"max_goal_mb"`
	MaxStacks int `json:"max_stacks_mb"`
	// LastLiveMB is the live heap after the window's last collection.
	LastLiveMB int `json:"last_live_mb"`
}

// "gc 9 @0.080s 2%: … ms cpu, 21->32->19 MB, 25 MB goal, 0 MB stacks, …"
var gcLineRE = regexp.MustCompile(`(?m)^gc \d+ @.*?, (\d+)->(\d+)->(\d+) MB, (\d+) MB goal, (\d+) MB stacks`)

// ParseGCTrace reads the gctrace lines in log.
func ParseGCTrace(log string) GCTrace {
	var t GCTrace
	for _, m := range gcLineRE.FindAllStringSubmatch(log, -1) {
		n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
		t.Cycles++
		t.MaxHeapMB = max(t.MaxHeapMB, n(1), n(2))
		t.MaxLiveMB = max(t.MaxLiveMB, n(3))
		t.MaxGoalMB = max(t.MaxGoalMB, n(4))
		t.MaxStacks = max(t.MaxStacks, n(5))
		t.LastLiveMB = n(3)
	}
	return t
}
