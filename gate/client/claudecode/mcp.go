package claudecode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/gate/client"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// Sandbox runs code for an allowed tool use of the Claude Code session.
// *client.Session implements it.
type Sandbox interface {
	Run(ctx context.Context, toolUseID string, r client.RunRequest) (*wire.RunResult, error)
}

// ToolUseIDMeta is where Claude Code puts the tool use id in a tools/call
// request's _meta, as it does for the SDK's in-process servers.
const ToolUseIDMeta = "claudecode/toolUseId"

// runTool is the run tool, as the model sees it through Claude Code: the
// same name, description and input schema as @gatekeeper/client's
// in-process server (ts-client/src/sandboxed-code.ts); the CLI tests pin
// the two together.
var runTool = map[string]any{
	"name":        "run",
	"description": wire.SandboxDescription,
	"inputSchema": map[string]any{
		"type": "object",
		"properties": map[string]any{
			"language": map[string]any{"type": "string", "enum": wire.Languages(), "description": "The interpreter: python, sh or node."},
			"code":     map[string]any{"type": "string", "description": "The program text."},
			"files": map[string]any{
				"description": `Files to create first: path relative to /workspace → text, or {"base64": "..."} for binary content.`, "type": "object",
				"propertyNames": map[string]any{"type": "string"},
				"additionalProperties": map[string]any{"anyOf": []any{
					map[string]any{"type": "string"},
					map[string]any{"type": "object", "properties": map[string]any{"base64": map[string]any{"type": "string"}}, "required": []string{"base64"}, "additionalProperties": false},
				}},
			},
			"timeout_s": map[string]any{"description": "Wall-clock limit in seconds.", "type": "number", "exclusiveMinimum": 0},
			"outputs": map[string]any{
				"description": "Paths (files or directories) under /workspace whose files to return, changed or not.",
				"type":        "array", "items": map[string]any{"type": "string"},
			},
		},
		"required": []string{"language", "code"},
		"$schema":  "http://json-schema.org/draft-07/schema#",
	},
}

// runTool is the run tool with the session's description.
func (s *MCPServer) runTool() map[string]any {
	if s.Description == "" {
		return runTool
	}
	t := maps.Clone(runTool)
	t["description"] = s.Description
	return t
}

// protocolVersions are the MCP versions this server speaks, newest first.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// JSON-RPC error codes.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
)

// MCPServer is `gatekeeper mcp`: a stdio MCP server (newline-delimited
// JSON-RPC 2.0) named sandboxed_code with one tool, run, that Claude Code
// starts from managed-mcp.json. Each call runs through Sandbox in the
// session's query on the sidecar, where a hook of the same session must
// have allowed its tool use id first.
type MCPServer struct {
	Sandbox Sandbox
	// Version is reported in serverInfo.
	Version string
	// Description is the run tool's description when the session's code
	// may call MCP tools (the sidecar's query_opened tool_description);
	// "" shows wire.SandboxDescription, as @gatekeeper/client does.
	Description string
}

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Serve reads requests from in and writes responses to out until in ends
// or ctx does. Tool calls run concurrently; a notifications/cancelled
// cancels its call (and so its run). It returns nil at the end of in.
func (s *MCPServer) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wmu     sync.Mutex
		wg      sync.WaitGroup
		cmu     sync.Mutex
		running = map[string]context.CancelFunc{}
	)
	write := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = out.Write(append(b, '\n'))
	}
	reply := func(id json.RawMessage, result any) {
		write(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	}
	fail := func(id json.RawMessage, code int, msg string) {
		if id == nil {
			id = json.RawMessage("null")
		}
		write(map[string]any{"jsonrpc": "2.0", "id": id, "error": rpcError{Code: code, Message: msg}})
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var m rpcMessage
		if err := json.Unmarshal(line, &m); err != nil {
			fail(nil, rpcParseError, "parse error: "+err.Error())
			continue
		}
		if m.Method == "" {
			continue // a response to a request of ours: we send none
		}
		if m.JSONRPC != "2.0" {
			fail(m.ID, rpcInvalidRequest, `jsonrpc must be "2.0"`)
			continue
		}
		switch m.Method {
		case "initialize":
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(m.Params, &p)
			v := protocolVersions[0]
			for _, known := range protocolVersions {
				if known == p.ProtocolVersion {
					v = known
				}
			}
			reply(m.ID, map[string]any{
				"protocolVersion": v,
				"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
				"serverInfo":      map[string]any{"name": "gatekeeper", "version": s.Version},
			})
		case "ping":
			reply(m.ID, map[string]any{})
		case "tools/list":
			reply(m.ID, map[string]any{"tools": []any{s.runTool()}})
		case "tools/call":
			callCtx, stop := context.WithCancel(ctx)
			key := string(m.ID)
			cmu.Lock()
			running[key] = stop
			cmu.Unlock()
			wg.Add(1)
			go func(m rpcMessage) {
				defer wg.Done()
				defer func() {
					cmu.Lock()
					delete(running, key)
					cmu.Unlock()
					stop()
				}()
				result, rerr := s.call(callCtx, m.Params)
				if rerr != nil {
					fail(m.ID, rerr.Code, rerr.Message)
					return
				}
				if callCtx.Err() != nil && ctx.Err() == nil {
					return // cancelled by the client: no response is expected
				}
				reply(m.ID, result)
			}(m)
		case "notifications/cancelled":
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(m.Params, &p) == nil {
				cmu.Lock()
				if stop := running[string(p.RequestID)]; stop != nil {
					stop()
				}
				cmu.Unlock()
			}
		default:
			if m.ID != nil {
				fail(m.ID, rpcMethodNotFound, "method not found: "+m.Method)
			}
		}
	}
	cancel()
	wg.Wait()
	return sc.Err()
}

// call runs one tools/call. A failure of the run is a tool result with
// isError, which the model reads; only a request that is not a call of the
// run tool is a JSON-RPC error.
func (s *MCPServer) call(ctx context.Context, params json.RawMessage) (any, *rpcError) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      map[string]any  `json:"_meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: "tools/call: " + err.Error()}
	}
	if p.Name != "run" {
		return nil, &rpcError{Code: rpcInvalidParams, Message: fmt.Sprintf("unknown tool %q", p.Name)}
	}
	args, err := runArgs(p.Arguments)
	if err != nil {
		return errorResult("invalid arguments for run: " + err.Error()), nil
	}
	toolUseID, _ := p.Meta[ToolUseIDMeta].(string)
	if toolUseID == "" {
		return errorResult("gatekeeper cannot tell which allowed tool call this run belongs to, so the code did not run"), nil
	}
	res, err := s.Sandbox.Run(ctx, toolUseID, args)
	if err != nil {
		if re, ok := client.IsRefused(err); ok {
			return errorResult(refusalText(re)), nil
		}
		return errorResult(fmt.Sprintf("gatekeeper is unavailable (%v), so the code did not run", err)), nil
	}
	return map[string]any{
		"content":           append(imageBlocks(res), map[string]any{"type": "text", "text": FormatRunResult(res)}),
		"structuredContent": structured(res),
	}, nil
}

// runArgs checks the run tool's arguments against its input schema.
func runArgs(raw json.RawMessage) (client.RunRequest, error) {
	var a struct {
		Language *string                    `json:"language"`
		Code     *string                    `json:"code"`
		Files    map[string]json.RawMessage `json:"files"`
		TimeoutS *float64                   `json:"timeout_s"`
		Outputs  *[]*string                 `json:"outputs"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return client.RunRequest{}, err
	}
	switch {
	case a.Language == nil || !slices.Contains(wire.Languages(), *a.Language):
		return client.RunRequest{}, errors.New(`language must be "python", "sh" or "node"`)
	case a.Code == nil:
		return client.RunRequest{}, errors.New("code is required")
	case a.TimeoutS != nil && !(*a.TimeoutS > 0):
		return client.RunRequest{}, errors.New("timeout_s must be a positive number")
	}
	r := client.RunRequest{Language: *a.Language, Code: *a.Code}
	for path, content := range a.Files {
		f, err := fileContent(content)
		if err != nil {
			return client.RunRequest{}, fmt.Errorf("files[%q] must be a string or {\"base64\": \"...\"}: %w", path, err)
		}
		if r.Files == nil {
			r.Files = map[string]wire.FileContent{}
		}
		r.Files[path] = f
	}
	if a.Outputs != nil {
		r.Outputs = []string{}
		for _, p := range *a.Outputs {
			if p == nil {
				return client.RunRequest{}, errors.New("outputs must be a list of strings")
			}
			r.Outputs = append(r.Outputs, *p)
		}
	}
	if a.TimeoutS != nil {
		// As @gatekeeper/client: whole milliseconds, rounded up, at least 1.
		// Past 2^53 ms the number is still larger than any policy allows,
		// and the sidecar refuses it.
		ms := int64(math.Min(math.Max(1, math.Ceil(*a.TimeoutS*1000)), 1<<53))
		r.TimeoutMS = &ms
	}
	return r, nil
}

// fileContent reads one value of the files argument: a string, or an
// object holding exactly a string "base64" of standard base64.
func fileContent(raw json.RawMessage) (wire.FileContent, error) {
	var text *string
	if err := json.Unmarshal(raw, &text); err == nil {
		if text == nil {
			return wire.FileContent{}, errors.New("null")
		}
		return wire.FileContent{Data: *text}, nil
	}
	var b struct {
		Base64 *string `json:"base64"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil || b.Base64 == nil {
		return wire.FileContent{}, errors.New("neither")
	}
	data, err := base64.StdEncoding.Strict().DecodeString(*b.Base64)
	if err != nil {
		return wire.FileContent{}, err
	}
	return wire.FileContent{Data: string(data), Base64: true}, nil
}

func errorResult(text string) map[string]any {
	return map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": text}}}
}

// refusalText is what the model reads for a refused run, as
// @gatekeeper/client writes it.
func refusalText(e *client.RefusedError) string {
	what := fmt.Sprintf("gatekeeper could not run the code (%s)", e.Code)
	if e.Code == "run_denied" {
		what = "gatekeeper refused to run the code"
	}
	return wire.WithRule(what+": "+e.Message, e.Rule)
}
