package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// Client is one WebSocket connection to the sidecar speaking
// docs/protocol.md, one request at a time. It is not safe for concurrent
// use; the throughput phase gives each worker its own.
type Client struct {
	ws   *websocket.Conn
	next int
}

// Frame is the part of a reply frame the harness reads.
type Frame struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	QueryID   string          `json:"query_id"`
	Effective json.RawMessage `json:"effective_policy"`
	Decision  string          `json:"decision"`
	Reason    string          `json:"reason"`
	Rule      string          `json:"rule"`
	Stream    string          `json:"stream"`
	Data      string          `json:"data"`
	// Run is the report of a run_result frame, decoded into the
	// protocol's own type.
	Run *wire.RunReport `json:"-"`
}

// Dial connects to the sidecar's Unix socket with the bearer token and
// says hello.
func Dial(ctx context.Context, socket, token string) (*Client, error) {
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		HandshakeTimeout: 10 * time.Second,
	}
	ws, _, err := d.DialContext(ctx, "ws://gatekeeper/v1/ws", http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	c := &Client{ws: ws}
	f, err := c.Request(map[string]any{"type": "hello", "v": 1, "client": "gatekeeper-bench"})
	if err != nil {
		ws.Close()
		return nil, err
	}
	if f.Type != "welcome" {
		ws.Close()
		return nil, fmt.Errorf("hello answered with %s %s: %s", f.Type, f.Code, f.Message)
	}
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.ws.Close() }

// Request sends frame (an "id" is added) and returns the first reply.
func (c *Client) Request(frame map[string]any) (Frame, error) {
	c.next++
	frame["id"] = strconv.Itoa(c.next)
	b, err := json.Marshal(frame)
	if err != nil {
		return Frame{}, err
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		return Frame{}, fmt.Errorf("send %s: %w", frame["type"], err)
	}
	return c.read()
}

// RoundTrip sends a ready-made frame and returns the raw first reply.
func (c *Client) RoundTrip(frame []byte) ([]byte, error) {
	if err := c.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
		return nil, err
	}
	_, reply, err := c.ws.ReadMessage()
	return reply, err
}

func (c *Client) read() (Frame, error) {
	_ = c.ws.SetReadDeadline(time.Now().Add(2 * time.Minute))
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		return Frame{}, fmt.Errorf("read reply: %w", err)
	}
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		return Frame{}, fmt.Errorf("decode reply %.200s: %w", data, err)
	}
	if f.Type == "run_result" {
		var r wire.RunResult
		if err := json.Unmarshal(data, &r); err != nil {
			return Frame{}, fmt.Errorf("decode run_result %.200s: %w", data, err)
		}
		f.Run = &r.RunReport
	}
	return f, nil
}

// OpenQuery opens a query with an optional override and returns its id and
// effective policy.
func (c *Client) OpenQuery(override map[string]any) (string, json.RawMessage, error) {
	frame := map[string]any{"type": "open_query"}
	if override != nil {
		frame["sandbox_policy"] = override
	}
	f, err := c.Request(frame)
	if err != nil {
		return "", nil, err
	}
	if f.Type != "query_opened" {
		return "", nil, fmt.Errorf("open_query answered with %s %s: %s", f.Type, f.Code, f.Message)
	}
	return f.QueryID, f.Effective, nil
}

// Decide sends one decide frame and returns the decision frame.
func (c *Client) Decide(queryID, tool string, input any, toolUseID string, mcp map[string]string) (Frame, error) {
	frame := map[string]any{"type": "decide", "query_id": queryID, "event": "PreToolUse", "tool_name": tool, "tool_input": input, "tool_use_id": toolUseID}
	if mcp != nil {
		frame["mcp_server"] = mcp
	}
	f, err := c.Request(frame)
	if err != nil {
		return f, err
	}
	if f.Type != "decision" {
		return f, fmt.Errorf("decide answered with %s %s: %s", f.Type, f.Code, f.Message)
	}
	return f, nil
}

// RunOutcome is what one sandboxed run through the sidecar returned.
type RunOutcome struct {
	Result      wire.RunReport // the run_result's report
	OutputBytes int64          // data of the output frames
	Frames      int            // output frames
	// FirstOutput is the time from sending the run frame to the first
	// output frame (0 without one); Run, to the run_result.
	FirstOutput, Run time.Duration
}

// RunRequest is one mcp__sandboxed_code__run call: its query, tool_use_id,
// language and code, and optionally files put into /workspace before it
// runs (path → text) and the outputs it returns (nil: the default).
type RunRequest struct {
	Query, ToolUseID, Language, Code string
	Files                            map[string]string
	Outputs                          []string
}

// input is the call's tool_input, as the run frame carries it.
func (r RunRequest) input() map[string]any {
	in := map[string]any{"language": r.Language, "code": r.Code}
	if r.Files != nil {
		in["files"] = r.Files
	}
	if r.Outputs != nil {
		in["outputs"] = r.Outputs
	}
	return in
}

// DecideAndRun does what the TypeScript client does for one
// mcp__sandboxed_code__run call: a decide (as the PreToolUse hook) and, if
// allowed, a run with the same tool_use_id, reading output frames until
// the run_result.
func (c *Client) DecideAndRun(queryID, toolUseID, language, code string) (RunOutcome, error) {
	return c.DecideAndRunRequest(RunRequest{Query: queryID, ToolUseID: toolUseID, Language: language, Code: code})
}

// DecideAndRunRequest is DecideAndRun for a call with files or outputs.
func (c *Client) DecideAndRunRequest(r RunRequest) (RunOutcome, error) {
	var out RunOutcome
	d, err := c.Decide(r.Query, "mcp__sandboxed_code__run", r.input(), r.ToolUseID,
		map[string]string{"name": "sandboxed_code", "source": "sdk"})
	if err != nil {
		return out, err
	}
	if d.Decision != "allow" {
		return out, fmt.Errorf("the run was not allowed: %s (%s)", d.Decision, d.Rule)
	}
	frame := r.input()
	frame["type"], frame["query_id"], frame["tool_use_id"] = "run", r.Query, r.ToolUseID
	t0 := time.Now()
	f, err := c.Request(frame)
	for err == nil && f.Type == "output" {
		if out.Frames == 0 {
			out.FirstOutput = time.Since(t0)
		}
		out.OutputBytes += int64(len(f.Data))
		out.Frames++
		f, err = c.read()
	}
	out.Run = time.Since(t0)
	if err != nil {
		return out, err
	}
	if f.Type != "run_result" {
		return out, fmt.Errorf("run answered with %s %s: %s", f.Type, f.Code, f.Message)
	}
	out.Result = *f.Run
	return out, nil
}
