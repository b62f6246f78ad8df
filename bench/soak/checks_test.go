package soak

import (
	"strings"
	"testing"
)

// TestTheExpectedChecksArePinned pins the total, so that changing a
// fault's count is a visible edit here too.
func TestTheExpectedChecksArePinned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sdk  int
		want int
	}{{2, 83}, {0, 81}} {
		s := judged()
		s.cfg.SDKSessions = tc.sdk
		s.cfg.defaults()
		total := 0
		for _, n := range s.expectedChecks() {
			total += n
		}
		if total != tc.want {
			t.Errorf("with %d SDK sessions: %d checks expected, pinned %d", tc.sdk, total, tc.want)
		}
	}
}

// TestCheckCountFailsADroppedOrMergedCheck feeds the count check the
// checks of a whole run, then one short, then two merged into one (of
// one fault, and of two faults under either's), then one unpinned.
func TestCheckCountFailsADroppedOrMergedCheck(t *testing.T) {
	t.Parallel()
	full := func(s *soak) []Check {
		var cs []Check
		for f, n := range s.expectedChecks() {
			for i := range n {
				cs = append(cs, Check{Fault: f, What: string(rune('a' + i)), OK: true})
			}
		}
		return cs
	}
	tests := []struct {
		name   string
		change func([]Check) []Check
		ok     bool
		says   string
	}{
		{"every expected check passes", func(cs []Check) []Check { return cs }, true, "83 checks made, 83 expected"},
		{"a dropped check fails", func(cs []Check) []Check {
			i := indexOfFault(cs, wPolicy)
			return append(cs[:i], cs[i+1:]...)
		}, false, "policy swap: 5 made, 6 expected"},
		{"two checks of one fault merged into one fails", func(cs []Check) []Check {
			i := indexOfFault(cs, fAccounting)
			return merge(cs, i, i+1, i)
		}, false, "accounting: 7 made, 8 expected"},
		{"two checks of two faults merged into the first's fails", func(cs []Check) []Check {
			return merge(cs, indexOfFault(cs, fAccounting), indexOfFault(cs, fEnd), indexOfFault(cs, fAccounting))
		}, false, "end: 1 made, 2 expected"},
		{"two checks of two faults merged into the second's fails", func(cs []Check) []Check {
			return merge(cs, indexOfFault(cs, fAccounting), indexOfFault(cs, fEnd), indexOfFault(cs, fEnd))
		}, false, "accounting: 7 made, 8 expected"},
		{"a check of a fault nobody expects fails", func(cs []Check) []Check {
			return append(cs, Check{Fault: "new fault", What: "x", OK: true})
		}, false, "new fault: 1 made, 0 expected"},
	}
	for _, tc := range tests {
		s := judged()
		s.cfg.SDKSessions = 2
		s.cfg.defaults()
		s.checks = tc.change(full(s))
		s.checkCount()
		c := s.checks[len(s.checks)-1]
		if c.Fault != fChecks || c.OK != tc.ok || !strings.Contains(c.Detail, tc.says) {
			t.Errorf("%s: %+v, want ok %v saying %q", tc.name, c, tc.ok, tc.says)
		}
		res := &Results{Checks: s.checks}
		if md := res.Markdown(); !strings.Contains(md, tc.says) {
			t.Errorf("%s: the report's count does not say %q", tc.name, tc.says)
		}
	}
}

// merge replaces checks i and j with one check that says both, under
// the fault of check keep (i or j).
func merge(cs []Check, i, j, keep int) []Check {
	m := cs[keep]
	m.What, m.OK = cs[i].What+" and "+cs[j].What, cs[i].OK && cs[j].OK
	var out []Check
	for k, c := range cs {
		switch k {
		case keep:
			out = append(out, m)
		case i, j:
		default:
			out = append(out, c)
		}
	}
	return out
}

func indexOfFault(cs []Check, fault string) int {
	for i, c := range cs {
		if c.Fault == fault {
			return i
		}
	}
	return -1
}
