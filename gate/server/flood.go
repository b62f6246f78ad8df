package server

import (
	"runtime/debug"
	"sync"
)

// floodBytes is how much output a run streams before it counts as a flood.
const floodBytes = 256 << 10

// floods lowers the garbage collector's target while any run floods its
// output: a capped stream still passes through the sidecar as short-lived
// copies (frames, the result, their JSON), and at the usual target the heap
// grows with that garbage. Decisions, which allocate little, keep the usual
// target the rest of the time.
type floods struct {
	normal, flooding int // GOGC values; flooding <= 0 disables the switch
	mu               sync.Mutex
	active           int
}

// floodWatch tracks one run's output.
func (s *Server) floodWatch() *floodRun { return &floodRun{f: &s.floods} }

type floodRun struct {
	f       *floods
	bytes   int
	counted bool
}

// add counts n more bytes of the run's output; it is safe for concurrent
// use by the run's two streams.
func (r *floodRun) add(n int) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	r.bytes += n
	if r.counted || r.bytes < floodBytes || r.f.flooding <= 0 {
		return
	}
	r.counted = true
	if r.f.active++; r.f.active == 1 {
		debug.SetGCPercent(r.f.flooding)
	}
}

// done ends the run's watch.
func (r *floodRun) done() {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if !r.counted {
		return
	}
	r.counted = false
	if r.f.active--; r.f.active == 0 {
		debug.SetGCPercent(r.f.normal)
	}
}
