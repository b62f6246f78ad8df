package launch

import (
	"bytes"
	"io"
	"sync"
)

// The launcher ends both output streams with an end mark once the program
// has exited: "\x1egatekeeper-end <tag> <code>\x1e", where tag is the
// run's random tag (sent in the header on standard input, which the
// program never sees) and code the program's exit status in three digits.
// An engine reports a sandbox's exit tens of milliseconds after it
// happens (longer under runsc, seconds on Kubernetes), but the mark
// arrives as soon as the launcher writes it; and since each stream is a
// pipe, every byte the program wrote to a stream arrives before that
// stream's mark. So once both marks are in, the output is complete and
// the exit code known.
//
// In a session's sandbox (SessionCommand) the mark may carry the state of
// the session after the run: "\x1egatekeeper-end <tag> <code> <state>\x1e",
// state being i (the timeout interrupted the program; the session
// lives on), t (the timeout interrupted it and it did not stop: the session
// is lost) or l (an interpreter of the session ended: lost); a mark
// without one says the session lives on (see MarkState).
//
// A program that learns its tag (by reading the launcher's memory) can
// forge the marks, and so end its own run with an exit code of its
// choosing: which it can do anyway, by exiting. The marks only ever end a
// run early: limits, the timeout and the sandbox's removal do not depend
// on them.

const endMarkPrefix = "\x1egatekeeper-end "

// EndMarks watches the two output streams of one run for their end marks.
type EndMarks struct {
	lead  []byte // endMarkPrefix + tag + " "
	mu    sync.Mutex
	code  []int       // the code of each stream's mark, in arrival order
	state []MarkState // and its state
	// ended is closed once both streams ended with a mark.
	ended chan struct{}
}

// NewEndMarks returns the watcher of the marks with tag.
func NewEndMarks(tag string) *EndMarks {
	return &EndMarks{lead: []byte(endMarkPrefix + tag + " "), ended: make(chan struct{})}
}

// Ended is closed once both streams ended with their mark.
func (m *EndMarks) Ended() <-chan struct{} { return m.ended }

// ExitCode returns the exit code both marks agree on; ok is false when
// they disagree (a forged mark), which leaves the run to the engine.
func (m *EndMarks) ExitCode() (code int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.code) != 2 || m.code[0] != m.code[1] || m.state[0] != m.state[1] {
		return 0, false
	}
	return m.code[0], true
}

// MarkState is the session's state after a run, as its end marks say it.
type MarkState byte

// Mark states.
const (
	// MarkKept: the session lives on (and every mark outside a session).
	MarkKept MarkState = 'k'
	// MarkInterrupted: the timeout interrupted the program, which
	// stopped; the session lives on.
	MarkInterrupted MarkState = 'i'
	// MarkTimedOut: the timeout interrupted the program, which did not
	// stop: the session is lost.
	MarkTimedOut MarkState = 't'
	// MarkLost: an interpreter of the session ended: the session is lost.
	MarkLost MarkState = 'l'
)

// State returns the session state both marks agree on; ok is false when
// they disagree, or when they are not both in.
func (m *EndMarks) State() (st MarkState, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.state) != 2 || m.state[0] != m.state[1] {
		return 0, false
	}
	return m.state[0], true
}

func (m *EndMarks) mark(code int, st MarkState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.code = append(m.code, code)
	m.state = append(m.state, st)
	if len(m.code) == 2 {
		close(m.ended)
	}
}

// Stream returns the writer for one stream: it passes everything before
// the stream's mark on to out, drops the mark, and passes what follows it
// to tail (a Snapshot's sink), or drops it when tail is nil.
func (m *EndMarks) Stream(out io.Writer, tail *SnapshotSink) *MarkedStream {
	return &MarkedStream{m: m, out: out, tail: tail}
}

// MarkedStream is one stream's side of EndMarks. Writes come from one
// goroutine; Flush must follow the last write.
type MarkedStream struct {
	m    *EndMarks
	out  io.Writer
	tail *SnapshotSink
	held []byte // a tail that may be the start of the mark
	done bool
}

// Write never fails, so that the stream keeps draining.
func (s *MarkedStream) Write(p []byte) (int, error) {
	if s.done {
		s.toTail(p)
		return len(p), nil
	}
	data := p
	if len(s.held) > 0 {
		data = append(s.held, p...)
		s.held = nil
	}
	lead, whole := s.m.lead, len(s.m.lead)+4
	for {
		i := bytes.Index(data, lead)
		if i < 0 {
			break
		}
		if len(data)-i < whole {
			s.pass(data[:i])
			s.held = append([]byte(nil), data[i:]...)
			return len(p), nil
		}
		code, st, n := parseMark(data[i+len(lead):])
		if n < 0 {
			s.pass(data[:i])
			s.held = append([]byte(nil), data[i:]...)
			return len(p), nil
		}
		if n > 0 {
			s.pass(data[:i])
			s.done = true
			s.m.mark(code, st)
			s.toTail(data[i+len(lead)+n:])
			return len(p), nil
		}
		// The lead without a well-formed end: ordinary output.
		s.pass(data[:i+1])
		data = data[i+1:]
	}
	keep := partialLead(data, lead)
	s.pass(data[:len(data)-keep])
	if keep > 0 {
		s.held = append([]byte(nil), data[len(data)-keep:]...)
	}
	return len(p), nil
}

// Flush passes on a held tail once the stream ended without its mark, and
// ends the tail.
func (s *MarkedStream) Flush() {
	if !s.done && len(s.held) > 0 {
		s.pass(s.held)
	}
	s.held = nil
	if s.tail != nil {
		s.tail.finish()
	}
}

// toTail passes output after the mark to the tail, if there is one.
func (s *MarkedStream) toTail(b []byte) {
	if s.tail != nil && len(b) > 0 {
		_, _ = s.tail.Write(b)
	}
}

func (s *MarkedStream) pass(b []byte) {
	if len(b) > 0 {
		_, _ = s.out.Write(b)
	}
}

// parseMark reads the end of a mark at the start of b: "DDD\x1e", or
// "DDD S\x1e" with S a session state; n is its length, 0 when b does not
// start with one, -1 when b may be its start.
func parseMark(b []byte) (code int, st MarkState, n int) {
	if len(b) < 4 {
		return 0, 0, -1
	}
	if b[3] != ' ' {
		code, ok := parseCode(b[:4])
		if !ok {
			return 0, 0, 0
		}
		return code, MarkKept, 4
	}
	if len(b) < 6 {
		return 0, 0, -1
	}
	code, ok := parseCode(append(append([]byte(nil), b[:3]...), b[5]))
	switch st := MarkState(b[4]); {
	case !ok:
		return 0, 0, 0
	case st == MarkInterrupted || st == MarkTimedOut || st == MarkLost:
		return code, st, 6
	}
	return 0, 0, 0
}

// parseCode reads "DDD\x1e" as an exit code of 0 to 255.
func parseCode(b []byte) (int, bool) {
	if len(b) != 4 || b[3] != '\x1e' {
		return 0, false
	}
	n := 0
	for _, c := range b[:3] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 255
}

// partialLead is the length of the longest tail of data that is a proper
// prefix of lead: bytes that may be the start of a mark split across writes.
func partialLead(data, lead []byte) int {
	for n := min(len(data), len(lead)-1); n > 0; n-- {
		if bytes.Equal(data[len(data)-n:], lead[:n]) {
			return n
		}
	}
	return 0
}
