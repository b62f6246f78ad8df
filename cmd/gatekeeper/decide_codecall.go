package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// codeCallInput is decide's input for a nested call: what a program asks
// the bridge, and what the tool's server says of the tool.
type codeCallInput struct {
	Event     string          `json:"event"` // gate.EventCodeCall
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Annotations are the tool's MCP hints; a hint left out takes MCP's
	// default, as a server's silence does.
	Annotations struct {
		ReadOnly    *bool `json:"readOnlyHint"`
		Destructive *bool `json:"destructiveHint"`
		Idempotent  *bool `json:"idempotentHint"`
		OpenWorld   *bool `json:"openWorldHint"`
	} `json:"annotations"`
	// ToolKnown false: the server does not list the tool (default true).
	ToolKnown *bool `json:"tool_known"`
	// Source is "policy" (one of mcp_servers, the default) or "sdk" (an
	// in-process server of the client's).
	Source string `json:"source"`
	// Calls is the call's number in its run, from 1 (default 1).
	Calls         int             `json:"calls"`
	SandboxPolicy json.RawMessage `json:"sandbox_policy"`
}

// isCodeCall reports whether decide's input names event code_call.
func isCodeCall(data []byte) bool {
	var peek struct {
		Event string `json:"event"`
	}
	return json.Unmarshal(data, &peek) == nil && peek.Event == gate.EventCodeCall
}

// decodeCodeCall decodes decide's input for a nested call strictly.
func decodeCodeCall(data []byte) (codeCallInput, error) {
	var in codeCallInput
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf("code_call: %w", err)
	}
	switch {
	case in.Server == "" || in.Tool == "":
		return in, errors.New(`code_call: "server" and "tool" are required`)
	case in.Source != "" && in.Source != gate.SourcePolicy && in.Source != wire.SourceSDK:
		return in, fmt.Errorf(`code_call: "source" %q: want %q or %q`, in.Source, gate.SourcePolicy, wire.SourceSDK)
	case in.Calls < 0:
		return in, errors.New(`code_call: "calls" must be 1 or more`)
	}
	if len(in.Arguments) == 0 {
		in.Arguments = json.RawMessage(`{}`)
	}
	if in.Calls == 0 {
		in.Calls = 1
	}
	return in, nil
}

// decideCodeCall decides in as the gate decides a program's nested call:
// through the gate's own CodeCaller under eff, with a stand-in for the
// tool's server that describes the tool as in says and calls nothing.
func decideCodeCall(ctx context.Context, eff *gate.Effective, in codeCallInput) decideResult {
	srv := &describedTool{in: in}
	rec := &lastRecord{}
	c := gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "cli", QueryID: "cli", Servers: srv, Auditor: rec})
	c.CallTool(ctx, runner.NestedCall{Server: in.Server, Tool: in.Tool, Arguments: in.Arguments, Seq: in.Calls, InFlight: 1})
	r := rec.get()
	return decideResult{Decision: r.Decision, Reason: r.Reason, Rule: r.Rule, PolicyRevision: r.PolicyRevision, PolicyHash: r.PolicyHash}
}

// describedTool is the one tool of decide's input, as its server would
// describe it; a call to it returns an empty result.
type describedTool struct{ in codeCallInput }

func (d *describedTool) Tool(_ context.Context, server, tool string) (runner.ToolInfo, bool, error) {
	a := d.in.Annotations
	known := d.in.ToolKnown == nil || *d.in.ToolKnown
	if server != d.in.Server || tool != d.in.Tool || !known {
		return runner.ToolInfo{}, false, nil
	}
	return runner.ToolInfo{Name: tool, ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}, true, nil
}

func (d *describedTool) CallTool(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"content":[]}`), nil
}

func (d *describedTool) Source(string) string { return d.in.Source }

// lastRecord keeps the audit line of the call.
type lastRecord struct {
	mu  sync.Mutex
	rec audit.Record
}

func (l *lastRecord) Write(r audit.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = r
	return nil
}

func (l *lastRecord) get() audit.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}
