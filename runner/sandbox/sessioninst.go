package sandbox

import (
	"context"
	"io"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// sessionInstance is a session's sandbox as each of its runs sees it: the
// platform's Instance, whose streams it reads for the session's whole
// life and hands to one run at a time (Streams makes a run's, Detach ends
// them). Its standard input is never closed by a run: the next run's
// header follows on it. Kill, Done and Exit are the sandbox's; Remove is
// the session's (endSession), so a run's Remove does nothing.
type sessionInstance struct {
	inner  Instance
	stdin  io.WriteCloser
	memory int64 // the sandbox's memory limit

	mu       sync.Mutex
	out, err *io.PipeWriter // the current run's; nil between runs
	stray    int64          // bytes that came between runs
	meter    sync.Once
}

// newSessionInstance starts reading inner's streams for the session.
func newSessionInstance(inner Instance, memory int64) *sessionInstance {
	s := &sessionInstance{inner: inner, memory: memory}
	st := inner.Streams()
	s.stdin = st.Stdin
	go s.route(st.Stdout, func() *io.PipeWriter { return s.out })
	go s.route(st.Stderr, func() *io.PipeWriter { return s.err })
	return s
}

// route copies one of the sandbox's streams to the current run's pipe,
// until the stream ends (the sandbox ended, or was detached at the
// session's end). What comes between runs is counted and dropped: init
// writes nothing between runs, and nothing else can write there.
func (s *sessionInstance) route(r io.Reader, cur func() *io.PipeWriter) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.mu.Lock()
			w := cur()
			s.mu.Unlock()
			if w == nil {
				s.mu.Lock()
				s.stray += int64(n)
				s.mu.Unlock()
			} else if _, werr := w.Write(buf[:n]); werr != nil {
				s.mu.Lock()
				s.stray += int64(n)
				s.mu.Unlock()
			}
		}
		if err != nil {
			s.mu.Lock()
			if w := cur(); w != nil {
				w.CloseWithError(err)
			}
			s.mu.Unlock()
			return
		}
	}
}

// ID is the sandbox's.
func (s *sessionInstance) ID() string { return s.inner.ID() }

// Streams are a run's: pipes fed from the sandbox's streams until Detach,
// and its standard input, which the run cannot close.
func (s *sessionInstance) Streams() Streams {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	s.mu.Lock()
	s.out, s.err = outW, errW
	s.mu.Unlock()
	if isDone(s.inner.Done()) {
		// The sandbox is gone: the run sees its streams end at once.
		outW.Close()
		errW.Close()
	}
	return Streams{Stdin: keepOpen{s.stdin}, Stdout: outR, Stderr: errR}
}

// Done is the sandbox's.
func (s *sessionInstance) Done() <-chan struct{} { return s.inner.Done() }

// Kill kills the sandbox, and so the session.
func (s *sessionInstance) Kill() { s.inner.Kill() }

// Exit asks the sandbox how it ended; after a run that kept the session
// (ByItself), only its peak memory so far, without stopping its meter.
func (s *sessionInstance) Exit(ctx context.Context, e Ending) (Exit, error) {
	if e.ByItself {
		ex := Exit{}
		if m, ok := s.inner.(PeakMeter); ok {
			ex.PeakMemoryBytes = m.Peak()
		}
		return ex, nil
	}
	return s.inner.Exit(ctx, e)
}

// Detach ends the current run's streams; the sandbox stays attached.
func (s *sessionInstance) Detach() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out != nil {
		s.out.Close()
		s.err.Close()
		s.out, s.err = nil, nil
	}
}

// BindRun hands the sandbox's registration with the egress proxy to
// spec's run (RunBinder); a sandbox that cannot be bound has none.
func (s *sessionInstance) BindRun(spec runner.Spec) error {
	if b, ok := s.inner.(RunBinder); ok {
		return b.BindRun(spec)
	}
	return nil
}

// Remove does nothing: the session removes its sandbox (endSession).
func (s *sessionInstance) Remove() {}

// CheckLanguage is the sandbox's, when it can check.
func (s *sessionInstance) CheckLanguage(ctx context.Context, lang runner.Language) error {
	return checkLanguage(ctx, s.inner, lang)
}

// StartMeter starts the sandbox's meter once, at the session's first
// run: the peak is the session's.
func (s *sessionInstance) StartMeter() {
	if m, ok := s.inner.(PeakMeter); ok {
		s.meter.Do(m.StartMeter)
	}
}

// Peak is the sandbox's peak so far, 0 when it cannot tell.
func (s *sessionInstance) Peak() int64 {
	if m, ok := s.inner.(PeakMeter); ok {
		return m.Peak()
	}
	return 0
}

// Stall is the sandbox's, when it can tell.
func (s *sessionInstance) Stall() (Stall, bool) {
	if m, ok := s.inner.(StallMeter); ok {
		return m.Stall()
	}
	return Stall{}, false
}

// keepOpen is a run's standard input of a session: closing it leaves the
// sandbox's open.
type keepOpen struct{ w io.Writer }

func (k keepOpen) Write(p []byte) (int, error) { return k.w.Write(p) }
func (keepOpen) Close() error                  { return nil }
