package swap

import (
	"bytes"
	"io"
)

// pattern is one string a stream looks for, and what it does on a match:
// it writes with, or it fails with err.
type pattern struct {
	find []byte
	with []byte
	err  func() error // when set, a match ends the stream with its error
}

// stream is an io.Reader that finds patterns in its source across reads:
// it holds back the last longest-1 bytes it has read until it knows that no
// pattern starts in them, so a pattern split between two reads is found as
// one (and it waits for twice that many before it scans at all). At each position the leftmost, then longest pattern wins; matches do
// not overlap. A source's error other than io.EOF ends the stream without
// the held-back bytes.
type stream struct {
	src   io.Reader
	pats  []pattern
	hold  int   // longest pattern - 1
	next  []int // per pattern: its next index in in at or after pos, -1 none, -2 unknown
	in    []byte
	out   []byte
	chunk []byte
	eof   bool
	err   error // returned once out is drained
}

// chunkSize is how much a stream reads from its source at a time.
const chunkSize = 32 << 10

// newStream returns a stream over src for pats (none of them empty).
func newStream(src io.Reader, pats []pattern) *stream {
	s := &stream{src: src, pats: pats, next: make([]int, len(pats))}
	for _, p := range pats {
		s.hold = max(s.hold, len(p.find)-1)
	}
	return s
}

// Read implements io.Reader.
func (s *stream) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		switch {
		case s.err != nil:
			return 0, s.err
		case s.eof:
			return 0, io.EOF
		}
		if s.chunk == nil {
			s.chunk = make([]byte, chunkSize)
		}
		n, err := s.src.Read(s.chunk)
		s.in = append(s.in, s.chunk[:n]...)
		switch {
		case err == io.EOF:
			s.eof = true
		case err != nil:
			s.process(false)
			s.in = nil
			if s.err == nil {
				s.err = err
			}
			continue
		}
		if s.eof || len(s.in) > 2*s.hold {
			// Scanning only once the new bytes outnumber the held ones
			// keeps a source that sends a byte at a time linear.
			s.process(s.eof)
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// process moves what is decided of in to out: every byte before the last
// hold bytes, or all of them at the end.
func (s *stream) process(final bool) {
	out, rest, err := s.scan(s.in, final, s.out[:0:0])
	s.out = append(s.out, out...)
	s.in = append(s.in[:0:0], rest...)
	if err != nil {
		s.err, s.in = err, nil
	}
}

// scan replaces the patterns in in, returning what is decided, what is not
// (to be scanned again with more input) and a pattern's error.
func (s *stream) scan(in []byte, final bool, out []byte) ([]byte, []byte, error) {
	safe := len(in)
	if !final {
		safe = max(0, len(in)-s.hold)
	}
	for i := range s.next {
		s.next[i] = -2
	}
	pos := 0
	for {
		at, k := s.leftmost(in, pos)
		if at < 0 || at >= safe {
			break
		}
		out = append(out, in[pos:at]...)
		p := s.pats[k]
		if p.err != nil {
			return out, nil, p.err()
		}
		out = append(out, p.with...)
		pos = at + len(p.find)
	}
	end := max(pos, safe)
	out = append(out, in[pos:end]...)
	return out, in[end:], nil
}

// leftmost returns the first position at or after pos where a pattern
// starts, and the longest pattern there; -1 when none does.
func (s *stream) leftmost(in []byte, pos int) (int, int) {
	at, best := -1, -1
	for i, p := range s.pats {
		if s.next[i] == -2 || s.next[i] != -1 && s.next[i] < pos {
			s.next[i] = -1
			if j := bytes.Index(in[pos:], p.find); j >= 0 {
				s.next[i] = pos + j
			}
		}
		n := s.next[i]
		if n < 0 {
			continue
		}
		if at < 0 || n < at || n == at && len(p.find) > len(s.pats[best].find) {
			at, best = n, i
		}
	}
	return at, best
}

// replaceAll runs pats over all of b at once, as a stream would.
func replaceAll(b []byte, pats []pattern) ([]byte, error) {
	s := newStream(nil, pats)
	out, _, err := s.scan(b, true, nil)
	return out, err
}
