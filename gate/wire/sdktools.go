package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

// Bounds of an open_query's sdk_servers: what one query may declare of the
// client's in-process MCP servers (docs/protocol.md, "Tools of the
// client's own process").
const (
	// MaxSDKServers is the most servers one open_query may declare.
	MaxSDKServers = 16
	// MaxSDKTools is the most tools one declared server may have.
	MaxSDKTools = 256
)

// SDKServer is one in-process MCP server of the client (an Agent SDK
// createSdkMcpServer) whose tools sandboxed code may call, if the policy's
// code_calls.callable names them: the sidecar relays such a call to the
// client as a ToolCall frame, and the client runs the tool's own handler.
type SDKServer struct {
	// Name is the server's name: toolwrap.ValidServerName, and not
	// SandboxServer.
	Name string `json:"name"`
	// Description says what the server is for; "" when absent.
	Description string `json:"description,omitempty"`
	// Tools are the server's tools as its tools/list gives them, at most
	// MaxSDKTools, of distinct names.
	Tools []SDKTool `json:"tools"`
}

// SDKTool is one tool of an SDKServer, in MCP's names (a tools/list entry
// without title, icons and _meta).
type SDKTool struct {
	// Name is 1 to 128 of A-Z a-z 0-9 _ - . (MCP's tool names).
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is a JSON Schema object; OutputSchema one or nil.
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Annotations are MCP's hints; nil when absent.
	Annotations *SDKAnnotations `json:"annotations,omitempty"`
}

// SDKAnnotations are the MCP hints of an SDKTool; a nil hint was not
// given.
type SDKAnnotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// Info returns the tool as the gate and the wrapper generator describe a
// tool (runner.ToolInfo).
func (t SDKTool) Info() runner.ToolInfo {
	info := runner.ToolInfo{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema}
	if a := t.Annotations; a != nil {
		info.ReadOnly, info.Destructive, info.Idempotent, info.OpenWorld = a.ReadOnlyHint, a.DestructiveHint, a.IdempotentHint, a.OpenWorldHint
	}
	return info
}

// ToolResult answers a ToolCall: the client ran the tool of its own
// process and sends its MCP CallToolResult, or says why it could not.
// Exactly one of Result and Error is set. The sidecar drops an answer to a
// call it no longer waits for (answered, timed out, cancelled), and sends
// nothing back for it.
type ToolResult struct {
	// ID is the ToolCall's id.
	ID string `json:"id"`
	// Result is the MCP CallToolResult, a JSON object, exactly as sent;
	// nil when Error is set. A tool that ran and failed is a Result with
	// isError true, as MCP has it.
	Result json.RawMessage `json:"result,omitempty"`
	// Error says why the tool could not be run (no such tool, the handler
	// threw, the client's bound); "" when Result is set.
	Error string `json:"error,omitempty"`
}

// ToolCall asks the client to run one tool of an SDKServer it declared
// for the query, for a nested call of sandboxed code that the gate
// allowed. The client answers with a ToolResult of the same id.
type ToolCall struct {
	// ID is the sidecar's id of the call ("t_…"), unique on the
	// connection.
	ID      string `json:"id"`
	QueryID string `json:"query_id"`
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	// Arguments are the call's arguments, a JSON object, as the policy
	// saw them.
	Arguments json.RawMessage `json:"arguments"`
	// TimeoutMS is how long the sidecar waits for the answer; after it,
	// or when the run ends, it sends ToolCancel and drops a late answer.
	TimeoutMS int64 `json:"timeout_ms"`
}

// ToolCancel tells the client that the sidecar no longer waits for the
// answer to a ToolCall (its run ended, or its timeout passed): the client
// may stop the tool, and any answer is dropped.
type ToolCancel struct {
	// ID is the ToolCall's id.
	ID      string `json:"id"`
	QueryID string `json:"query_id"`
}

// RequestID returns t.ID.
func (t *ToolResult) RequestID() string { return t.ID }

// Type returns TypeToolResult.
func (*ToolResult) Type() string { return TypeToolResult }
func (*ToolResult) isRequest()   {}

// MarshalJSON writes the frame as a client sends it, "type" first.
func (t ToolResult) MarshalJSON() ([]byte, error) {
	type fields ToolResult
	return marshalFrame(TypeToolResult, fields(t))
}

// Type returns TypeToolCall.
func (ToolCall) Type() string { return TypeToolCall }
func (ToolCall) isReply()     {}

// MarshalJSON writes the frame, "type" first.
func (t ToolCall) MarshalJSON() ([]byte, error) {
	type fields ToolCall
	return marshalFrame(TypeToolCall, fields(t))
}

// Type returns TypeToolCancel.
func (ToolCancel) Type() string { return TypeToolCancel }
func (ToolCancel) isReply()     {}

// MarshalJSON writes the frame, "type" first.
func (t ToolCancel) MarshalJSON() ([]byte, error) {
	type fields ToolCancel
	return marshalFrame(TypeToolCancel, fields(t))
}

// The keys of the objects of sdk_servers and of a tool_result.
var (
	toolResultKeys = []string{"type", "id", "result", "error"}
	sdkServerKeys  = []string{"name", "description", "tools"}
	sdkToolKeys    = []string{"name", "description", "inputSchema", "outputSchema", "annotations"}
	sdkHintKeys    = []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
	sdkToolNameRE  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

func decodeToolResult(r *reader) Request {
	r.known(toolResultKeys)
	t := &ToolResult{ID: r.requestID()}
	if m := r.field("result", false, kindObject); m != nil {
		t.Result = bytes.Clone(m.raw)
	}
	if m := r.field("error", false, kindString); m != nil {
		t.Error = r.str(m)
		if t.Error == "" {
			r.fail(CodeInvalidField, `field "error" must not be empty`)
		}
	}
	if r.err == nil && (t.Result == nil) == (t.Error == "") {
		r.fail(CodeInvalidField, `exactly one of "result" and "error" must be present`)
	}
	return t
}

// sdkServers decodes open_query's sdk_servers: an array of at most
// MaxSDKServers server objects, of distinct names.
func (r *reader) sdkServers(m *member) []SDKServer {
	items := r.array(m, "sdk_servers", MaxSDKServers, "servers")
	out := make([]SDKServer, 0, len(items))
	for i, raw := range items {
		at := fmt.Sprintf("sdk_servers[%d]", i)
		sub := r.element(raw, at)
		if sub == nil {
			return nil
		}
		sub.known(sdkServerKeys)
		srv := SDKServer{Name: sub.nonEmpty("name")}
		switch {
		case sub.err != nil:
		case !toolwrap.ValidServerName(srv.Name):
			sub.fail(CodeInvalidField, fmt.Sprintf("field %s must be a lower-case name of at most 32 letters, digits and _ starting with a letter, not %s", quote(at+".name"), quote(srv.Name)))
		case srv.Name == SandboxServer:
			sub.fail(CodeInvalidField, fmt.Sprintf("field %s: %q is gatekeeper's own server", quote(at+".name"), SandboxServer))
		}
		for _, prev := range out {
			if prev.Name == srv.Name {
				sub.fail(CodeInvalidField, fmt.Sprintf("field %s: server %q is declared twice", quote(at+".name"), srv.Name))
			}
		}
		if d := sub.field("description", false, kindString); d != nil {
			srv.Description = sub.str(d)
		}
		if t := sub.field("tools", true, kindArray); t != nil {
			srv.Tools = sub.sdkTools(t, at+".tools")
		}
		if sub.err != nil {
			r.err = sub.err
			return nil
		}
		out = append(out, srv)
	}
	return out
}

func (r *reader) sdkTools(m *member, at string) []SDKTool {
	items := r.array(m, at, MaxSDKTools, "tools")
	out := make([]SDKTool, 0, len(items))
	seen := map[string]bool{}
	for i, raw := range items {
		at := fmt.Sprintf("%s[%d]", at, i)
		sub := r.element(raw, at)
		if sub == nil {
			return nil
		}
		sub.known(sdkToolKeys)
		t := SDKTool{Name: sub.nonEmpty("name")}
		switch {
		case sub.err != nil:
		case !sdkToolNameRE.MatchString(t.Name):
			sub.fail(CodeInvalidField, fmt.Sprintf("field %s must be 1 to 128 of A-Z a-z 0-9 _ - ., not %s", quote(at+".name"), quote(t.Name)))
		case seen[t.Name]:
			sub.fail(CodeInvalidField, fmt.Sprintf("field %s: tool %q is declared twice", quote(at+".name"), t.Name))
		}
		seen[t.Name] = true
		if d := sub.field("description", false, kindString); d != nil {
			t.Description = sub.str(d)
		}
		if s := sub.field("inputSchema", true, kindObject); s != nil {
			t.InputSchema = bytes.Clone(s.raw)
		}
		if s := sub.field("outputSchema", false, kindObject); s != nil {
			t.OutputSchema = bytes.Clone(s.raw)
		}
		if a := sub.field("annotations", false, kindObject); a != nil {
			t.Annotations = sub.sdkHints(a, at+".annotations")
		}
		if sub.err != nil {
			r.err = sub.err
			return nil
		}
		out = append(out, t)
	}
	return out
}

func (r *reader) sdkHints(m *member, at string) *SDKAnnotations {
	sub := r.element(m.raw, at)
	if sub == nil {
		return nil
	}
	sub.known(sdkHintKeys)
	a := &SDKAnnotations{}
	for _, h := range []struct {
		key string
		to  **bool
	}{{"readOnlyHint", &a.ReadOnlyHint}, {"destructiveHint", &a.DestructiveHint}, {"idempotentHint", &a.IdempotentHint}, {"openWorldHint", &a.OpenWorldHint}} {
		if v := sub.field(h.key, false, kindBool); v != nil {
			b := string(v.raw) == "true"
			*h.to = &b
		}
	}
	r.err = sub.err
	return a
}

// array returns the elements of m, an array member named field of at most
// max elements (what names them in the message), or nil after a failure.
func (r *reader) array(m *member, field string, max int, what string) []json.RawMessage {
	if r.err != nil {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(m.raw, &items); err != nil {
		// Unreachable: m.raw is an array of a frame that scanned.
		r.fail(CodeInvalidField, fmt.Sprintf("field %s: %v", quote(field), err))
		return nil
	}
	if len(items) > max {
		r.fail(CodeInvalidField, fmt.Sprintf("field %s declares %d %s, at most %d", quote(field), len(items), what, max))
		return nil
	}
	return items
}

// element returns a reader of the members of raw, an element of an array
// that must be an object, whose keys are compared ignoring case as a
// frame's own are, or nil after a failure. at names it in messages.
func (r *reader) element(raw json.RawMessage, at string) *reader {
	if r.err != nil {
		return nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		r.fail(CodeInvalidField, fmt.Sprintf("field %s must be an object, not %s", quote(at), clip(string(raw))))
		return nil
	}
	s := scanner{data: raw, foldTop: true}
	if err := s.scan(); err != nil {
		r.fail(CodeInvalidField, fmt.Sprintf("field %s: %v", quote(at), err))
		return nil
	}
	if s.dup != nil {
		r.fail(CodeDuplicateKey, dupMessage(s.dup)+" in field "+quote(at))
		return nil
	}
	return &reader{typ: r.typ, id: r.id, members: s.members, prefix: at + "."}
}
