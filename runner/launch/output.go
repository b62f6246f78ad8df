package launch

import (
	"bytes"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Capped is one output stream: it keeps at most max bytes, hands each kept
// chunk to onOutput, and accepts and drops everything past the cap so the
// sandbox is never blocked on a full pipe. Writes come from one goroutine;
// Result may be read after that goroutine ended.
type Capped struct {
	stream    runner.Stream
	max       int64
	onOutput  func(runner.Stream, []byte)
	mu        sync.Mutex
	buf       bytes.Buffer
	truncated bool
}

// NewCapped returns the cap of stream at max bytes; onOutput may be nil.
func NewCapped(stream runner.Stream, max int64, onOutput func(runner.Stream, []byte)) *Capped {
	return &Capped{stream: stream, max: max, onOutput: onOutput}
}

// Write never fails, so that the stream keeps draining.
func (c *Capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	room := c.max - int64(c.buf.Len())
	keep := p
	if int64(len(keep)) > room {
		keep = keep[:max(room, 0)]
		c.truncated = true
	}
	c.buf.Write(keep)
	c.mu.Unlock()
	if len(keep) > 0 && c.onOutput != nil {
		c.onOutput(c.stream, keep) // valid during the call only (runner.Spec.OnOutput)
	}
	return len(p), nil
}

// Result returns what was kept and whether more was dropped.
func (c *Capped) Result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String(), c.truncated
}
