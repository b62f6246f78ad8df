package mcpservers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Bounds of one message from a server.
const (
	// DefaultMaxResultBytes is Options.MaxResultBytes when unset: the
	// policy's hard bound of code_calls.max_result_bytes.
	DefaultMaxResultBytes = 64 << 20
	// minMessageBytes is the least a message may be, whatever
	// MaxResultBytes says, so that a small bound on results does not cut
	// a server's tools/list.
	minMessageBytes = 1 << 20
	// envelopeBytes is what a message may hold beyond its result: the
	// JSON-RPC envelope, and on HTTP the SSE framing and any notifications
	// before the answer.
	envelopeBytes = 64 << 10
	// codeTooLarge is the JSON-RPC error code of the answer that stands in
	// for one the client did not read to its end (a server's own error of
	// this code is read as the same: it too failed to send a result).
	codeTooLarge = -32050
)

// messageBound is how many bytes of one message the client reads.
func messageBound(maxResult int64) int {
	return int(max(maxResult, minMessageBytes) + envelopeBytes)
}

// tooLargeAnswer is the JSON-RPC error response, to the request whose id
// is id, that stands in for an answer past bound bytes.
func tooLargeAnswer(id json.RawMessage, bound int) []byte {
	msg, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   map[string]any{"code": codeTooLarge, "message": "the answer passed " + strconv.Itoa(bound) + " bytes, where the client stopped reading it"},
	})
	return msg
}

// isTooLarge reports whether err is the stand-in answer of tooLargeAnswer.
func isTooLarge(err error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc) && rpc.Code == codeTooLarge
}

// boundedLines reads a stdio server's output line by line for the SDK's
// stdio transport, and holds at most bound bytes of a line: a line past
// bound is read to its end without being kept, and an answer to one of
// the client's requests is replaced by tooLargeAnswer for the same id, so
// that only that call fails and the server stays up. A longer line that
// is not an answer (a notification, a request of the server's) is dropped.
// Used by one reader, the SDK's.
type boundedLines struct {
	r       *bufio.Reader
	bound   int
	line    []byte // the line being read
	out     []byte // what Read hands out next
	dropped func(what string, n int)
}

func newBoundedLines(r io.Reader, bound int, dropped func(what string, n int)) *boundedLines {
	return &boundedLines{r: bufio.NewReaderSize(r, 64<<10), bound: bound, dropped: dropped}
}

func (b *boundedLines) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if err := b.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// next reads the next line into b.out (with its newline).
func (b *boundedLines) next() error {
	if cap(b.line) > 64<<10 {
		b.line = nil // a long line's buffer is not kept between lines
	}
	b.line = b.line[:0]
	for {
		chunk, err := b.r.ReadSlice('\n')
		b.line = append(b.line, chunk...)
		switch {
		case len(b.line) > b.bound:
			return b.skip(err)
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && len(b.line) == 0:
			return err
		}
		// A whole line, or the last bytes before an error, which the SDK's
		// decoder then gets.
		b.out = b.line
		return nil
	}
}

// skip reads the rest of a line past the bound without keeping it, and
// puts the stand-in answer in b.out. err is the error of the last read.
func (b *boundedLines) skip(err error) error {
	var sc idScanner
	sc.feed(b.line)
	n := len(b.line)
	b.line = nil
	for errors.Is(err, bufio.ErrBufferFull) {
		var chunk []byte
		chunk, err = b.r.ReadSlice('\n')
		sc.feed(chunk)
		n += len(chunk)
	}
	if sc.id == nil || sc.method {
		b.dropped("a message that is not an answer", n)
		if err != nil {
			return err
		}
		return b.next()
	}
	b.dropped("an answer", n)
	b.out = append(tooLargeAnswer(sc.id, b.bound), '\n')
	return nil
}

// idScanner finds the top-level "id" of a JSON-RPC message fed to it in
// pieces, without holding the message, and whether it has a top-level
// "method" (a request or notification of the server's, not an answer).
type idScanner struct {
	depth         int
	inStr, esc    bool
	keyNext       bool // at depth 1, the next string is a key
	inKey, inVal  bool
	key, val      []byte
	lastKey       string
	id            json.RawMessage
	method, valOK bool
}

const maxIDBytes = 256

func (s *idScanner) feed(p []byte) {
	for _, c := range p {
		if s.inStr {
			switch {
			case s.inKey && !(c == '"' && !s.esc) && len(s.key) < 16:
				s.key = append(s.key, c)
			case s.inVal && len(s.val) <= maxIDBytes:
				s.val = append(s.val, c)
			}
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
				if s.inKey {
					s.inKey = false
					s.lastKey = string(s.key)
					if s.lastKey == "method" {
						s.method = true
					}
				}
			}
			continue
		}
		switch c {
		case '"':
			s.inStr = true
			if s.depth == 1 && s.keyNext {
				s.inKey, s.keyNext, s.key = true, false, s.key[:0]
			} else if s.inVal {
				s.val = append(s.val, c)
			}
		case '{', '[':
			s.depth++
			s.inVal = false // an id is a number or a string
			if s.depth == 1 && c == '{' {
				s.keyNext = true
			}
		case '}', ']':
			if s.depth == 1 {
				s.endVal()
			}
			s.depth--
		case ',':
			if s.depth == 1 {
				s.endVal()
				s.keyNext = true
			}
		case ':':
			if s.depth == 1 && s.lastKey == "id" {
				s.inVal, s.val, s.lastKey = true, s.val[:0], ""
			}
		case ' ', '\t', '\r', '\n':
		default:
			if s.inVal && len(s.val) <= maxIDBytes {
				s.val = append(s.val, c)
			}
		}
	}
}

func (s *idScanner) endVal() {
	if !s.inVal {
		return
	}
	s.inVal = false
	if v := bytes.TrimSpace(s.val); len(v) > 0 && len(v) <= maxIDBytes && json.Valid(v) && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		s.id = bytes.Clone(v)
	}
}

// boundedBody is the body of an HTTP server's answer to one request of
// the client's (id): it is read whole, up to bound bytes, before the SDK
// reads any of it; past bound, the rest is not read, the connection is
// closed, and the SDK reads tooLargeAnswer instead, as JSON or as one
// server-sent event, per the answer's content type, so that only that
// call fails and the session stays.
type boundedBody struct {
	body    io.ReadCloser
	id      json.RawMessage
	sse     bool
	bound   int
	dropped func(what string, n int)
	out     *bytes.Reader // nil until read
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.out == nil {
		buf, err := io.ReadAll(io.LimitReader(b.body, int64(b.bound)+1))
		switch {
		case len(buf) > b.bound:
			b.dropped("an answer", len(buf))
			msg := tooLargeAnswer(b.id, b.bound)
			if b.sse {
				msg = fmt.Appendf(nil, "event: message\ndata: %s\n\n", msg)
			}
			buf = msg
			b.body.Close()
		case err != nil:
			return 0, err
		}
		b.out = bytes.NewReader(buf)
	}
	return b.out.Read(p)
}

func (b *boundedBody) Close() error { return b.body.Close() }

// requestID returns the JSON-RPC id of a request body, nil for a
// notification, a response or a body that is not one message.
func requestID(body []byte) json.RawMessage {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method == "" || len(m.ID) == 0 || string(m.ID) == "null" {
		return nil
	}
	return m.ID
}
