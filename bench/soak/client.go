package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Frame is the part of a reply frame the soak reads. Reason is a
// decision's sentence or a run_result's exit reason, by Type.
type Frame struct {
	Type           string   `json:"type"`
	ID             string   `json:"id"`
	Code           string   `json:"code"`
	Message        string   `json:"message"`
	Violations     []string `json:"violations"`
	QueryID        string   `json:"query_id"`
	Decision       string   `json:"decision"`
	Reason         string   `json:"reason"`
	Rule           string   `json:"rule"`
	DecisionID     string   `json:"decision_id"`
	PolicyRevision string   `json:"policy_revision"`
	ToolUseID      string   `json:"tool_use_id"`
	RunID          string   `json:"run_id"`
	Data           string   `json:"data"`
	ExitCode       int      `json:"exit_code"`
	Stdout         string   `json:"stdout"`
	Truncated      bool     `json:"truncated"`
	TimedOut       bool     `json:"timed_out"`
	OOMKilled      bool     `json:"oom_killed"`
}

// terminal reports whether a frame of type t ends its request.
func terminal(t string) bool { return t != "output" }

// Errors of Conn.Do.
var (
	// ErrCut: the connection ended before the reply came.
	ErrCut = errors.New("connection lost before the reply")
	// ErrHang: no reply within the request's bound; the connection is
	// closed.
	ErrHang = errors.New("no reply within the bound")
)

// Conn is one WebSocket connection to the sidecar speaking
// docs/protocol.md, with requests matched to replies by id. Its reader
// goroutine routes each reply to its request and records a reply that
// answers no request waiting for one (a second reply, or one never asked
// for) in Unsolicited. It is safe for concurrent use.
type Conn struct {
	ws     *websocket.Conn
	wmu    sync.Mutex // one writer at a time
	mu     sync.Mutex
	calls  map[string]*call
	next   int
	done   chan struct{} // closed when the reader ended
	err    error         // why, once done is closed
	unsol  []string      // unsolicited replies, at most a few kept
	nUnsol int
	nLate  int // replies to requests abandoned when the load stopped
}

type call struct {
	reply chan Frame // one terminal reply, buffered
	done  bool       // the terminal reply came; another is unsolicited
	// abandoned: its waiter gave up because the load stopped; its reply
	// may still come, and is then late, not unsolicited.
	abandoned bool
	outputs   int
	bytes     int
}

// Dialer connects to the sidecar's Unix socket with its token.
type Dialer struct {
	Socket, Token string
}

// Dial connects and says hello as client.
func (d Dialer) Dial(ctx context.Context, client string) (*Conn, error) {
	ws, err := d.upgrade(ctx)
	if err != nil {
		return nil, err
	}
	c := newConn(ws)
	f, err := c.Do(ctx, map[string]any{"type": "hello", "v": 1, "client": client}, 10*time.Second)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	if f.Type != "welcome" {
		c.Close()
		return nil, fmt.Errorf("hello answered with %s %s: %s", f.Type, f.Code, f.Message)
	}
	return c, nil
}

// upgrade opens the WebSocket, with no hello.
func (d Dialer) upgrade(ctx context.Context) (*websocket.Conn, error) {
	dl := websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.Socket)
		},
		HandshakeTimeout: 10 * time.Second,
	}
	ws, resp, err := dl.DialContext(ctx, "ws://gatekeeper/v1/ws", http.Header{"Authorization": {"Bearer " + d.Token}})
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(resp.Body)
			return nil, &HTTPError{Status: resp.StatusCode, Body: string(body), Err: err}
		}
		return nil, err
	}
	return ws, nil
}

// HTTPError is an upgrade the sidecar refused with an HTTP status.
type HTTPError struct {
	Status int
	Body   string
	Err    error
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("upgrade refused with HTTP %d: %s", e.Status, strings.TrimSpace(e.Body))
}
func (e *HTTPError) Unwrap() error { return e.Err }

func newConn(ws *websocket.Conn) *Conn {
	c := &Conn{ws: ws, calls: map[string]*call{}, done: make(chan struct{})}
	go c.read()
	return c
}

func (c *Conn) read() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		var f Frame
		if err := json.Unmarshal(data, &f); err != nil {
			c.unsolicited(fmt.Sprintf("undecodable reply %.200s", data))
			continue
		}
		c.mu.Lock()
		cl := c.calls[f.ID]
		if cl != nil && cl.abandoned {
			if terminal(f.Type) {
				delete(c.calls, f.ID)
			}
			c.nLate++
			c.mu.Unlock()
			continue
		}
		if cl != nil && cl.done {
			cl = nil
		}
		if cl != nil && !terminal(f.Type) {
			cl.outputs++
			cl.bytes += len(f.Data)
		} else if cl != nil {
			cl.done = true // Wait forgets the call
		}
		c.mu.Unlock()
		switch {
		case cl == nil:
			c.unsolicited(fmt.Sprintf("%s %s for id %q, which no request is waiting for", f.Type, f.Code, f.ID))
		case terminal(f.Type):
			cl.reply <- f
		}
	}
}

func (c *Conn) unsolicited(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nUnsol++
	if len(c.unsol) < 5 {
		c.unsol = append(c.unsol, what)
	}
}

// Unsolicited returns how many replies answered no waiting request, with a
// few examples, and how many came late for a request abandoned when the
// load stopped.
func (c *Conn) Unsolicited() (n int, samples []string, late int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nUnsol, append([]string(nil), c.unsol...), c.nLate
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection ended, once Done is closed.
func (c *Conn) Err() error {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection.
func (c *Conn) Close() error { return c.ws.Close() }

// Send sends frame (an "id" is added) and returns the id, without waiting.
// Wait collects the reply.
func (c *Conn) Send(frame map[string]any) (string, error) {
	c.mu.Lock()
	c.next++
	id := strconv.Itoa(c.next)
	c.calls[id] = &call{reply: make(chan Frame, 1)}
	c.mu.Unlock()
	frame["id"] = id
	b, err := json.Marshal(frame)
	if err == nil {
		err = c.WriteRaw(b)
	}
	if err != nil {
		c.forget(id)
		return "", fmt.Errorf("send %s: %w", frame["type"], err)
	}
	return id, nil
}

// WriteRaw writes one text frame as it is.
func (c *Conn) WriteRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// WriteMessage writes one frame of the given WebSocket type.
func (c *Conn) WriteMessage(kind int, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(kind, b)
}

func (c *Conn) forget(id string) {
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
}

// Wait returns the terminal reply of request id, with the number and bytes
// of the output frames before it. It fails with ErrCut when the
// connection ends first, and with ErrHang (closing the connection) when
// no reply came within bound.
func (c *Conn) Wait(ctx context.Context, id string, bound time.Duration) (f Frame, outputs, bytes int, err error) {
	c.mu.Lock()
	cl := c.calls[id]
	c.mu.Unlock()
	if cl == nil {
		return f, 0, 0, fmt.Errorf("no request %s is waiting", id)
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case f = <-cl.reply:
	case <-c.done:
		select { // the reply may have come just before the end
		case f = <-cl.reply:
		default:
			c.forget(id)
			err = fmt.Errorf("%w: %v", ErrCut, c.Err())
		}
	case <-t.C:
		c.forget(id)
		c.Close()
		err = ErrHang
	case <-ctx.Done():
		// The reply may be on its way: keep the request's slot, so that
		// the reader knows it for a late reply (the session closes the
		// connection next).
		c.mu.Lock()
		defer c.mu.Unlock()
		cl.abandoned = true
		return f, cl.outputs, cl.bytes, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.calls, id)
	return f, cl.outputs, cl.bytes, err
}

// Do sends frame and waits for its terminal reply within bound.
func (c *Conn) Do(ctx context.Context, frame map[string]any, bound time.Duration) (Frame, error) {
	id, err := c.Send(frame)
	if err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrCut, err)
	}
	f, _, _, err := c.Wait(ctx, id, bound)
	return f, err
}
