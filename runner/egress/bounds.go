package egress

import (
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// runStats counts one run's intercepted requests for MaxRequestLines and
// MaxRequestRefusals. A run's counts start at Register or Bind and end at
// the next Bind or Unregister (summarize).
type runStats struct {
	mu       sync.Mutex
	lines    int  // request Events written
	omitted  int  // request Events counted but not written
	refusals int  // requests refused
	closed   bool // summarized; late Events of requests in flight are written as they come
}

// overRefusals reports whether the run has had MaxRequestRefusals
// requests refused.
func (s *runStats) overRefusals() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusals >= MaxRequestRefusals
}

// auditRequest counts ev, an intercepted request's Event, against st and
// writes it if the run is under MaxRequestLines.
func (p *Proxy) auditRequest(st *runStats, ev Event) {
	st.mu.Lock()
	if ev.Decision == Deny {
		st.refusals++
	}
	write := st.closed || st.lines < MaxRequestLines
	if write {
		st.lines++
	} else {
		st.omitted++
	}
	st.mu.Unlock()
	if write {
		p.audit(ev)
	}
}

// summarize ends st, the counts of run id at addr, writing the summary
// Event when request Events were omitted.
func (p *Proxy) summarize(addr netip.Addr, id RunIdentity, st *runStats) {
	st.mu.Lock()
	n := st.omitted
	st.closed = true
	st.mu.Unlock()
	if n == 0 {
		return
	}
	p.audit(Event{
		Time: time.Now(), RunID: id.RunID, QueryID: id.QueryID, Source: addr,
		Rule:    RuleRequestLines,
		Reason:  fmt.Sprintf("%d further intercepted requests of this run were not written one by one (limit %d per run)", n, MaxRequestLines),
		Omitted: n,
	})
}
