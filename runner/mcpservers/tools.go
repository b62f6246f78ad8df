package mcpservers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// tools returns the server's tools, listing them if the session has not
// yet or they changed.
func (srv *server) tools(ctx context.Context) (runner.ServerTools, error) {
	sess, err := srv.session(ctx)
	if err != nil {
		return runner.ServerTools{}, err
	}
	st, err := sess.list(ctx, srv.cfg)
	if err != nil {
		err = srv.callFailed(sess, "tools/list", err)
	}
	return st, err
}

// list returns the session's tools, listing them when not cached.
func (sess *session) list(ctx context.Context, cfg Config) (runner.ServerTools, error) {
	sess.mu.Lock()
	cached := sess.tools
	sess.mu.Unlock()
	if cached != nil {
		return *cached, nil
	}
	var tools []runner.ToolInfo
	for t, err := range sess.cs.Tools(ctx, nil) {
		if err != nil {
			return runner.ServerTools{}, err
		}
		info, err := toolInfo(t)
		if err != nil {
			return runner.ServerTools{}, err
		}
		tools = append(tools, info)
	}
	st := runner.ServerTools{Name: cfg.Name, Description: cfg.Description, Tools: tools}.Listed("")
	sess.mu.Lock()
	sess.tools = &st
	sess.mu.Unlock()
	return st, nil
}

func toolInfo(t *mcp.Tool) (runner.ToolInfo, error) {
	info := runner.ToolInfo{Name: t.Name, Title: t.Title, Description: t.Description}
	var err error
	// The SDK holds a schema as decoded JSON (maps): marshalling it sorts
	// the keys, so the encoding is canonical.
	if info.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
		return runner.ToolInfo{}, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	if t.OutputSchema != nil {
		if info.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return runner.ToolInfo{}, fmt.Errorf("tool %q: output schema: %w", t.Name, err)
		}
	}
	if a := t.Annotations; a != nil {
		info.ReadOnly = &a.ReadOnlyHint
		info.Idempotent = &a.IdempotentHint
		info.Destructive = a.DestructiveHint
		info.OpenWorld = a.OpenWorldHint
		if info.Title == "" {
			info.Title = a.Title
		}
	}
	return info, nil
}

// call makes one tools/call on the live session.
func (srv *server) call(ctx context.Context, tool string, arguments json.RawMessage) (json.RawMessage, error) {
	sess, err := srv.session(ctx)
	if err != nil {
		return nil, err
	}
	res, err := sess.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
	if err != nil {
		return nil, srv.callFailed(sess, tool, err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, serverError(srv.cfg.Name, ErrRefused, fmt.Sprintf("its result for tool %q could not be encoded", tool), err)
	}
	return out, nil
}

// callFailed words err for the caller and drops the session when the
// error is its transport's (not the server's answer, nor the caller's
// deadline). what is the tool called, or "tools/list". A JSON-RPC error's
// message is the server's text: the caller gets its code.
func (srv *server) callFailed(sess *session, what string, err error) error {
	var rpc *jsonrpc.Error
	switch {
	case isTooLarge(err):
		return serverError(srv.cfg.Name, runner.ErrResultTooLarge, fmt.Sprintf("its answer to %s passed %d bytes, where reading stopped", what, srv.bound()), err)
	case errors.As(err, &rpc):
		return serverError(srv.cfg.Name, ErrRefused, fmt.Sprintf("it answered %s with JSON-RPC error %d", what, rpc.Code), err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return serverError(srv.cfg.Name, ErrNoAnswer, fmt.Sprintf("no answer to %s in time", what), err)
	}
	srv.drop(sess, err)
	return serverError(srv.cfg.Name, ErrUnavailable, fmt.Sprintf("its connection failed during %s; it is reconnected on its next use", what), err)
}
