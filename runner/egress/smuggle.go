package egress

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Go's HTTP/1.1 server accepts a request with both Content-Length and
// Transfer-Encoding: chunked, dropping Content-Length (RFC 9112 6.3). The
// proxy re-frames what it forwards, so the two cannot be read differently
// upstream; still, such a request is a smuggling attempt or a broken
// client, and it is refused (400, egress.bad_request). Since the server
// drops the header before a handler sees it, h1Framer watches the
// decrypted stream itself.

// h1Framer follows the framing of the HTTP/1.1 requests read through it
// and records, per request in order, whether its head has both
// Content-Length and Transfer-Encoding. It gives up (broken) on anything
// it cannot follow; the server then refuses that request on its own, and
// any further one the server reads is refused as conflicting.
type h1Framer struct {
	net.Conn

	mu        sync.Mutex
	state     framerState
	buf       []byte // the head or chunk-size line read so far
	lineStart int    // where in buf the line being read began
	left      int64  // body or chunk bytes still to skip
	conflicts []bool // per request head, in order
	served    int    // requests handed to the handler so far
}

type framerState int

const (
	inHead framerState = iota
	inBody
	inChunkSize
	inChunkData
	inTrailer
	broken
)

// maxFramerLine bounds a head or chunk-size line the framer buffers.
const maxFramerLine = maxHeaderBytes + 4096

func (f *h1Framer) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	if n > 0 {
		f.mu.Lock()
		f.feed(p[:n])
		f.mu.Unlock()
	}
	return n, err
}

// feed advances the framer over b.
func (f *h1Framer) feed(b []byte) {
	for len(b) > 0 && f.state != broken {
		switch f.state {
		case inBody, inChunkData:
			k := min(int64(len(b)), f.left)
			b, f.left = b[k:], f.left-k
			if f.left == 0 {
				f.state = map[framerState]framerState{inBody: inHead, inChunkData: inChunkSize}[f.state]
			}
		case inHead, inTrailer:
			var ok bool
			if b, ok = f.readLine(b); !ok {
				return
			}
			lineStart := f.lineStart
			f.lineStart = len(f.buf)
			empty := len(bytes.TrimRight(f.buf[lineStart:], "\r\n")) == 0
			switch {
			case f.state == inTrailer && empty:
				f.resetLine()
				f.state = inHead
			case f.state == inTrailer:
				f.resetLine() // a trailer field: skip it
			case empty && lineStart == 0:
				f.resetLine() // empty lines before a request line are ignored
			case empty:
				f.head()
			}
		case inChunkSize:
			var ok bool
			if b, ok = f.readLine(b); !ok {
				return
			}
			line, _, _ := strings.Cut(strings.TrimSpace(string(f.buf)), ";")
			f.resetLine()
			size, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
			switch {
			case err != nil || size < 0:
				f.state = broken
			case size == 0:
				f.state = inTrailer
			default:
				f.state, f.left = inChunkData, size+2 // data and its CRLF
			}
		}
	}
}

// readLine appends b up to its first newline to buf and returns the rest;
// ok is false when b held no newline (buf then holds all of it).
func (f *h1Framer) readLine(b []byte) (rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		f.appendLine(b)
		return nil, false
	}
	f.appendLine(b[:i+1])
	return b[i+1:], true
}

// resetLine empties buf.
func (f *h1Framer) resetLine() { f.buf, f.lineStart = f.buf[:0], 0 }

func (f *h1Framer) appendLine(b []byte) {
	f.buf = append(f.buf, b...)
	if len(f.buf) > maxFramerLine {
		f.state = broken
	}
}

// head reads the complete head in buf: the framing of its body, and
// whether it is conflicting.
func (f *h1Framer) head() {
	var cl, te []string
	lines := strings.Split(strings.TrimRight(string(f.buf), "\r\n"), "\n")
	f.resetLine()
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(strings.TrimRight(l, "\r"), ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "content-length":
			cl = append(cl, strings.TrimSpace(value))
		case "transfer-encoding":
			te = append(te, strings.TrimSpace(value))
		}
	}
	f.conflicts = append(f.conflicts, len(cl) > 0 && len(te) > 0)
	switch {
	case len(te) > 0:
		f.state = inChunkSize
	case len(cl) > 0:
		n, err := strconv.ParseInt(cl[0], 10, 64)
		switch {
		case err != nil || n < 0:
			f.state = broken
		case n == 0:
			f.state = inHead
		default:
			f.state, f.left = inBody, n
		}
	default:
		f.state = inHead
	}
}

// nextConflicts reports whether the next request the handler serves had
// both Content-Length and Transfer-Encoding, or came after the framer
// lost track of the stream (fail closed).
func (f *h1Framer) nextConflicts() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.served
	f.served++
	if i >= len(f.conflicts) {
		return true // a head the framer did not see: it lost the stream
	}
	return f.conflicts[i]
}

// framerKey is the context key of an intercepted HTTP/1.1 connection's
// *h1Framer.
type framerKey struct{}

// conflictingFraming reports whether r, a request on an intercepted
// HTTP/1.1 connection, had both Content-Length and Transfer-Encoding.
func conflictingFraming(r *http.Request) bool {
	f, ok := r.Context().Value(framerKey{}).(*h1Framer)
	return ok && f.nextConflicts()
}

// withFramer puts c's framer, if it has one, in ctx.
func withFramer(ctx context.Context, c net.Conn) context.Context {
	if f, ok := c.(*h1Framer); ok {
		return context.WithValue(ctx, framerKey{}, f)
	}
	return ctx
}
