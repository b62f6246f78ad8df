package wire

import (
	"encoding/base64"
	"encoding/json"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Hello opens a connection: it must be the first frame.
type Hello struct {
	ID string `json:"id"`
	// V is the protocol version; Decode accepts only Version.
	V int `json:"v"`
	// Client is a free-form name of the client for the audit log, at most
	// MaxClientChars characters; "" when absent.
	Client string `json:"client,omitempty"`
}

// OpenQuery opens a query, optionally overriding the sandbox policy.
type OpenQuery struct {
	ID string `json:"id"`
	// SandboxPolicy is the override exactly as sent: a JSON object, free of
	// repeated keys (see Decode) and not nested deeper than MaxDepth, or nil
	// when absent. The policy package decodes and checks it.
	SandboxPolicy json.RawMessage `json:"sandbox_policy,omitempty"`
	// ClaudeCodeSession attaches the connection to the query of a Claude
	// Code CLI session (its session_id, 1 to MaxIDChars characters), the
	// query the hook endpoint decides in; "" when absent. It excludes
	// SandboxPolicy: a session's query has the operator's base policy.
	ClaudeCodeSession string `json:"claude_code_session,omitempty"`
	// SDKServers are the client's in-process MCP servers whose tools the
	// query's sandboxed code may call (when the policy's
	// code_calls.callable names them), at most MaxSDKServers; nil when
	// absent. It excludes ClaudeCodeSession.
	SDKServers []SDKServer `json:"sdk_servers,omitzero"`
	// Approvals says that the client answers the policy's asks on the
	// nested calls of the query's runs (ApprovalRequest → Approval); when
	// false, such an ask is a deny at once. It excludes ClaudeCodeSession.
	Approvals bool `json:"approvals,omitempty"`
}

// Decide asks for a decision on one tool call.
type Decide struct {
	ID      string `json:"id"`
	QueryID string `json:"query_id"`
	// Event is EventPreToolUse, EventCanUseTool, or EventHTTPRequest: a
	// request of sandboxed code to test the policy's request rules with,
	// in HTTP, and no tool call (ToolName, ToolInput, ToolUseID "").
	Event string `json:"event"`
	// ToolName is exactly as the SDK reports it; never "" but for
	// EventHTTPRequest.
	ToolName string `json:"tool_name,omitempty"`
	// ToolInput is the tool's input exactly as sent: a JSON object, free of
	// repeated keys (case variants such as "path" and "Path" are distinct
	// keys) and not nested deeper than MaxDepth.
	ToolInput json.RawMessage `json:"tool_input"`
	// ToolUseID is the SDK's tool use id; "" only when Event is
	// EventCanUseTool.
	ToolUseID string `json:"tool_use_id"`
	// MCPServer describes the server of an mcp__<server>__<tool> tool; nil
	// when absent.
	MCPServer *MCPServer `json:"mcp_server,omitempty"`
	// Cwd is the agent's working directory, against which the tool resolves
	// relative paths; "" when absent (the workspace root is assumed).
	Cwd string `json:"cwd,omitempty"`
	// AgentID and AgentType name the subagent that makes the call, as the
	// SDK's hook input does: AgentID only inside a subagent, AgentType also
	// on the main thread of a session started with an agent; "" when
	// absent. At most MaxIDChars characters each.
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`
	// HTTP is the request of an EventHTTPRequest decide; nil otherwise.
	HTTP *HTTPRequest `json:"http,omitempty"`
}

// MCPServer is the MCP server a tool belongs to.
type MCPServer struct {
	// Name is the server's name; never "".
	Name string `json:"name"`
	// Source is one of SourceSDK, SourceStdio, SourceSSE, SourceHTTP or
	// SourceUnknown.
	Source string `json:"source"`
}

// Languages returns the values run.language may take: the runner's
// languages (runner.LanguageNames), which a client offers its model.
func Languages() []string { return runner.LanguageNames() }

// Run asks to run code in the sandbox for an allowed tool use.
type Run struct {
	ID        string `json:"id"`
	QueryID   string `json:"query_id"`
	ToolUseID string `json:"tool_use_id"`
	// Language is one of Languages ("python", "sh", "node").
	Language string `json:"language"`
	// Code is the program text; it may be "".
	Code string `json:"code"`
	// Files maps paths relative to /workspace to their content, text or
	// binary; nil when absent or empty. Paths are not checked here: the
	// runner refuses bad ones.
	Files map[string]FileContent `json:"files,omitempty"`
	// TimeoutMS is the requested timeout in milliseconds, positive; nil when
	// absent. The server checks it against the effective policy.
	TimeoutMS *int64 `json:"timeout_ms,omitempty"`
	// Outputs names files and directories of /workspace whose files the
	// run returns, changed or not ("." for all); nil when absent (the
	// files the run created or changed are returned), empty for none. At
	// most MaxOutputs paths; the runner checks them.
	Outputs []string `json:"outputs,omitzero"`
	// ToAgent names returned files that go to the agent's own code only
	// (the query() caller), never to the model: a path, a directory
	// (its files) or a path.Match pattern, relative to /workspace; nil
	// when absent. At most MaxOutputs, each a valid pattern. The model
	// reads a handle for each (RunReport.KeepForAgent).
	ToAgent []string `json:"to_agent,omitzero"`
}

// FileContent is the content of one file of a run: a JSON string (text)
// or {"base64": "..."} (any bytes) on the wire.
type FileContent struct {
	// Data is the file's bytes.
	Data string
	// Base64 says the client sent them in base64; they are marshalled the
	// same way.
	Base64 bool
}

// MarshalJSON writes the content as a client sends it.
func (f FileContent) MarshalJSON() ([]byte, error) {
	if f.Base64 {
		return marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString([]byte(f.Data))})
	}
	return marshal(f.Data)
}

// CloseQuery closes a query.
type CloseQuery struct {
	ID      string `json:"id"`
	QueryID string `json:"query_id"`
}

// RequestID returns h.ID.
func (h *Hello) RequestID() string { return h.ID }

// RequestID returns q.ID.
func (q *OpenQuery) RequestID() string { return q.ID }

// RequestID returns d.ID.
func (d *Decide) RequestID() string { return d.ID }

// RequestID returns r.ID.
func (r *Run) RequestID() string { return r.ID }

// RequestID returns c.ID.
func (c *CloseQuery) RequestID() string { return c.ID }

// Type returns TypeHello.
func (*Hello) Type() string { return TypeHello }

// Type returns TypeOpenQuery.
func (*OpenQuery) Type() string { return TypeOpenQuery }

// Type returns TypeDecide.
func (*Decide) Type() string { return TypeDecide }

// Type returns TypeRun.
func (*Run) Type() string { return TypeRun }

// Type returns TypeCloseQuery.
func (*CloseQuery) Type() string { return TypeCloseQuery }

func (*Hello) isRequest()      {}
func (*OpenQuery) isRequest()  {}
func (*Decide) isRequest()     {}
func (*Run) isRequest()        {}
func (*CloseQuery) isRequest() {}

// MarshalJSON writes the frame as a client sends it, "type" first.
func (h Hello) MarshalJSON() ([]byte, error) {
	type fields Hello
	return marshalFrame(TypeHello, fields(h))
}

// MarshalJSON writes the frame as a client sends it, "type" first.
func (q OpenQuery) MarshalJSON() ([]byte, error) {
	type fields OpenQuery
	return marshalFrame(TypeOpenQuery, fields(q))
}

// MarshalJSON writes the frame as a client sends it, "type" first.
func (d Decide) MarshalJSON() ([]byte, error) {
	type fields Decide
	return marshalFrame(TypeDecide, fields(d))
}

// MarshalJSON writes the frame as a client sends it, "type" first.
func (r Run) MarshalJSON() ([]byte, error) {
	type fields Run
	return marshalFrame(TypeRun, fields(r))
}

// MarshalJSON writes the frame as a client sends it, "type" first.
func (c CloseQuery) MarshalJSON() ([]byte, error) {
	type fields CloseQuery
	return marshalFrame(TypeCloseQuery, fields(c))
}
