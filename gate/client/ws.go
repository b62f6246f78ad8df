package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// RefusedError is an error frame of the sidecar ending a request, such as
// run_denied.
type RefusedError struct {
	Code, Rule, Message string
}

func (e *RefusedError) Error() string { return e.Code + ": " + e.Message }

// Session is the query of one Claude Code CLI session on the sidecar,
// reached over the WebSocket protocol: every connection opens it with
// open_query.claude_code_session, which attaches the connection to it and
// attests to the sidecar that this session's sandboxed_code server is
// gatekeeper's own. A Session is safe for concurrent use; it keeps no
// connection itself (see Hold and Run).
type Session struct {
	Endpoint Endpoint
	// Token returns the bearer token, read again for every connection.
	Token func() (string, error)
	// ID is the Claude Code session id.
	ID string
	// Client is the name given in hello, for the audit log.
	Client string
}

// wsConn is one connection with its query open.
type wsConn struct {
	ws      *websocket.Conn
	queryID string
	// toolDescription is query_opened's: the run tool's description when
	// the session's code may call MCP tools, "" otherwise.
	toolDescription string
}

// handshakeTimeout bounds dialing, hello and open_query together.
const handshakeTimeout = 10 * time.Second

// open dials the sidecar, says hello and attaches to the session's query.
func (s *Session) open(ctx context.Context) (*wsConn, error) {
	token, err := s.Token()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	d := websocket.Dialer{NetDialContext: s.Endpoint.dial, HandshakeTimeout: handshakeTimeout}
	ws, resp, err := d.DialContext(ctx, "ws://gatekeeper/v1/ws", http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("connect to the sidecar at %s: HTTP %d", s.Endpoint, resp.StatusCode)
		}
		return nil, fmt.Errorf("connect to the sidecar at %s: %w", s.Endpoint, err)
	}
	c := &wsConn{ws: ws}
	stop := context.AfterFunc(ctx, func() { _ = ws.Close() })
	defer stop()
	if _, err := c.request(&wire.Hello{ID: "hello", V: wire.Version, Client: s.Client}, wire.TypeWelcome, nil); err != nil {
		ws.Close()
		return nil, err
	}
	raw, err := c.request(&wire.OpenQuery{ID: "open", ClaudeCodeSession: s.ID}, wire.TypeQueryOpened, nil)
	if err != nil {
		ws.Close()
		return nil, err
	}
	var opened wire.QueryOpened
	if err := json.Unmarshal(raw, &opened); err != nil || opened.QueryID == "" {
		ws.Close()
		return nil, fmt.Errorf("the sidecar's query_opened is malformed: %s", clip(raw))
	}
	c.queryID, c.toolDescription = opened.QueryID, opened.ToolDescription
	return c, nil
}

// request sends req and reads frames until the reply of type want (or an
// error frame) to req's id, handing output frames to onOutput. It returns
// the reply's bytes.
func (c *wsConn) request(req wire.Request, want string, onOutput func(wire.Output)) ([]byte, error) {
	frame, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
		return nil, fmt.Errorf("send %s: %w", req.Type(), err)
	}
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return nil, fmt.Errorf("the sidecar connection ended during %s: %w", req.Type(), err)
		}
		var head struct {
			Type, ID, Code, Rule, Message string
		}
		if err := json.Unmarshal(data, &head); err != nil {
			return nil, fmt.Errorf("the sidecar sent a frame that is not JSON: %q", clip(data))
		}
		if head.ID != req.RequestID() {
			continue // not ours: nothing else is in flight on this connection
		}
		switch head.Type {
		case want:
			return data, nil
		case wire.TypeError:
			return nil, &RefusedError{Code: head.Code, Rule: head.Rule, Message: head.Message}
		case wire.TypeOutput:
			if onOutput != nil {
				var o wire.Output
				if json.Unmarshal(data, &o) == nil {
					onOutput(o)
				}
			}
		default:
			return nil, fmt.Errorf("the sidecar answered %s with a %s frame", req.Type(), head.Type)
		}
	}
}

// Hold keeps one connection attached to the session until ctx ends,
// connecting again (every retry) whenever it is lost, so the session stays
// attested and open while the CLI runs. It calls attached after each
// successful attach, with the run tool's description the sidecar gave
// (wire.QueryOpened.ToolDescription: "" when the session's code may call
// no MCP tool), and lost (with the reason) after each failure or loss.
func (s *Session) Hold(ctx context.Context, retry time.Duration, attached func(toolDescription string), lost func(error)) {
	for {
		c, err := s.open(ctx)
		if err == nil {
			attached(c.toolDescription)
			stop := context.AfterFunc(ctx, func() { _ = c.ws.Close() })
			for err == nil {
				_, _, err = c.ws.ReadMessage() // pings are answered inside
			}
			stop()
			c.ws.Close()
		}
		if ctx.Err() != nil {
			return
		}
		lost(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// RunRequest is the code to run for one allowed tool use.
type RunRequest struct {
	Language string
	Code     string
	// Files are the files to create first, text or binary.
	Files map[string]wire.FileContent
	// TimeoutMS is the asked timeout; nil for the policy's.
	TimeoutMS *int64
	// Outputs are the paths whose files to return; nil for the changed files.
	Outputs []string
	// ToAgent names returned files kept from the model (wire.Run.ToAgent).
	ToAgent []string
}

// Run runs r for toolUseID, which a hook call of this session must have
// had allowed, on a connection of its own, and returns its result. When
// ctx ends the connection closes, which cancels the run and removes its
// container. A refused run is a *RefusedError; any other error means the
// sidecar could not be asked or went away.
func (s *Session) Run(ctx context.Context, toolUseID string, r RunRequest) (*wire.RunResult, error) {
	c, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	defer c.ws.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.ws.Close() })
	defer stop()
	raw, err := c.request(&wire.Run{ID: "run", QueryID: c.queryID, ToolUseID: toolUseID, Language: r.Language, Code: r.Code, Files: r.Files, TimeoutMS: r.TimeoutMS, Outputs: r.Outputs, ToAgent: r.ToAgent},
		wire.TypeRunResult, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("the run was cancelled: %w", ctx.Err())
		}
		return nil, err
	}
	var res wire.RunResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("the sidecar's run_result is malformed: %w", err)
	}
	return &res, nil
}

// IsRefused reports whether err is the sidecar refusing a request.
func IsRefused(err error) (*RefusedError, bool) {
	var re *RefusedError
	ok := errors.As(err, &re)
	return re, ok
}
