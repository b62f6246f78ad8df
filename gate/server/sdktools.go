package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// maxPendingToolCalls bounds the tool_call frames one connection waits on
// at once: its runs (--max-runs-per-conn) times their calls in flight
// (code_calls.max_in_flight) stay far below it; past it a call fails at
// once rather than holding more of the sidecar.
const maxPendingToolCalls = 256

// defaultToolCallTimeout is the tool_call frame's timeout_ms when the
// call's context has no deadline (the gate's CodeCaller always sets one:
// code_calls.timeout).
const defaultToolCallTimeout = 30 * time.Second

// toolResult takes a client's tool_result on the reader goroutine. A late
// or unknown answer is dropped without a reply: the call it answers has
// already been answered for the program (timeout, cancelled).
func (c *conn) toolResult(r *wire.ToolResult) {
	if !c.toolCalls.answer(r.ID, r) {
		c.s.log.Debug("dropped a tool_result no call waits for", "call_id", r.ID)
	}
}

// sdkTools are the in-process MCP servers a client declared for one of
// its queries (open_query's sdk_servers): a gate.ToolServers and
// gate.ToolLister whose CallTool relays the call to the client as a
// tool_call frame and waits for its tool_result. It never decides: the
// gate's CodeCaller has decided the call and audits it, as it does a call
// to an operator's server. Safe for concurrent use.
type sdkTools struct {
	c       *conn
	queryID string
	servers map[string]wire.SDKServer
	listed  []runner.ServerTools
}

func newSDKTools(c *conn, queryID string, servers []wire.SDKServer) *sdkTools {
	t := &sdkTools{c: c, queryID: queryID, servers: make(map[string]wire.SDKServer, len(servers))}
	for _, s := range servers {
		t.servers[s.Name] = s
		st := runner.ServerTools{Name: s.Name, Description: s.Description, Tools: make([]runner.ToolInfo, 0, len(s.Tools))}
		for _, tool := range s.Tools {
			st.Tools = append(st.Tools, tool.Info())
		}
		// The source keeps a declaration of the client's process apart
		// from an operator's server of the same tools.
		st = st.Listed(wire.SourceSDK)
		t.listed = append(t.listed, st)
	}
	return t
}

// Tool returns the declared tool.
func (t *sdkTools) Tool(_ context.Context, server, tool string) (runner.ToolInfo, bool, error) {
	s, ok := t.servers[server]
	if !ok {
		return runner.ToolInfo{}, false, nil
	}
	for _, d := range s.Tools {
		if d.Name == tool {
			return d.Info(), true, nil
		}
	}
	return runner.ToolInfo{}, false, nil
}

// List returns the declared servers with their tools.
func (t *sdkTools) List(context.Context) ([]runner.ServerTools, error) {
	return slices.Clone(t.listed), nil
}

// errConnLost is the error of a relayed call whose client went away: the
// call fails closed, whatever the client may have done.
var errConnLost = errors.New("the client's connection closed before it answered")

// CallTool sends a tool_call frame and waits for its tool_result, until
// ctx ends (then a tool_cancel frame follows, and a late answer is
// dropped) or the connection does.
func (t *sdkTools) CallTool(ctx context.Context, server, tool string, arguments json.RawMessage) (json.RawMessage, error) {
	if _, ok, _ := t.Tool(ctx, server, tool); !ok {
		return nil, fmt.Errorf("the client declared no tool %q of server %q for this query", tool, server)
	}
	id := newID("t_")
	ch, ok := t.c.toolCalls.add(id, maxPendingToolCalls)
	if !ok {
		return nil, fmt.Errorf("the client's connection already waits on %d calls of its own tools", maxPendingToolCalls)
	}
	timeout := defaultToolCallTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	t.c.send(wire.ToolCall{ID: id, QueryID: t.queryID, Server: server, Tool: tool, Arguments: arguments, TimeoutMS: max(1, timeout.Milliseconds())})
	select {
	case r := <-ch:
		if r.Error != "" {
			return nil, fmt.Errorf("the client could not run the tool: %s", r.Error)
		}
		return r.Result, nil
	case <-ctx.Done():
		if t.c.toolCalls.drop(id) {
			t.c.send(wire.ToolCancel{ID: id, QueryID: t.queryID})
		}
		return nil, ctx.Err()
	case <-t.c.ctx.Done():
		t.c.toolCalls.drop(id)
		return nil, errConnLost
	}
}

// queryTools are the servers a run of one query may reach: the operator's
// (the sidecar's Config.ToolServers, nil when none) and the client's
// in-process ones for this query. A name both have reaches neither: the
// open_query that declared it was refused, so only a policy reloaded
// since can bring that about, and then no call can be taken for a call to
// the other.
type queryTools struct {
	operator gate.ToolServers
	sdk      *sdkTools
	// clash names the servers both declare under the run's policy.
	clash map[string]bool
}

// newQueryTools joins operator and sdk for one run under eff.
func newQueryTools(operator gate.ToolServers, sdk *sdkTools, eff *gate.Effective) *queryTools {
	q := &queryTools{operator: operator, sdk: sdk, clash: map[string]bool{}}
	for name := range sdk.servers {
		if _, ok := eff.Policy.MCPServers[name]; ok {
			q.clash[name] = true
		}
	}
	return q
}

func (q *queryTools) clashErr(server string) error {
	return fmt.Errorf("MCP server %q is both one of the policy's mcp_servers and an in-process server of the client, so neither is called", server)
}

// Source answers wire.SourceSDK for a server of the client, and
// gate.SourcePolicy otherwise.
func (q *queryTools) Source(server string) string {
	if _, ok := q.sdk.servers[server]; ok && !q.clash[server] {
		return wire.SourceSDK
	}
	return gate.SourcePolicy
}

// Tool asks the server's owner.
func (q *queryTools) Tool(ctx context.Context, server, tool string) (runner.ToolInfo, bool, error) {
	switch {
	case q.clash[server]:
		return runner.ToolInfo{}, false, q.clashErr(server)
	case q.sdk.servers[server].Name != "":
		return q.sdk.Tool(ctx, server, tool)
	case q.operator != nil:
		return q.operator.Tool(ctx, server, tool)
	}
	return runner.ToolInfo{}, false, nil
}

// CallTool calls through the server's owner.
func (q *queryTools) CallTool(ctx context.Context, server, tool string, arguments json.RawMessage) (json.RawMessage, error) {
	switch {
	case q.clash[server]:
		return nil, q.clashErr(server)
	case q.sdk.servers[server].Name != "":
		return q.sdk.CallTool(ctx, server, tool, arguments)
	case q.operator != nil:
		return q.operator.CallTool(ctx, server, tool, arguments)
	}
	return nil, fmt.Errorf("MCP server %q is not configured", server)
}

// List lists the operator's servers (when they can list) and the
// client's, leaving out a server both have.
func (q *queryTools) List(ctx context.Context) ([]runner.ServerTools, error) {
	var out []runner.ServerTools
	if l, ok := q.operator.(gate.ToolLister); ok {
		op, err := l.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, st := range op {
			if !q.clash[st.Name] {
				out = append(out, st)
			}
		}
	}
	for _, st := range q.sdk.listed {
		if !q.clash[st.Name] {
			out = append(out, st)
		}
	}
	return out, nil
}
