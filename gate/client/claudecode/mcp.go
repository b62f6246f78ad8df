package claudecode

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/gatekeeper-ai/gatekeeper/gate/client"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
			"to_agent": map[string]any{
				"description": ToAgentDescription,
				"maxItems":    wire.MaxOutputs, "type": "array", "items": map[string]any{"type": "string"},
			},
		},
		"required": []string{"language", "code"},
		"$schema":  "http://json-schema.org/draft-07/schema#",
	},
}

// tool is the run tool with the session's description.
func (s *MCPServer) tool() *mcp.Tool {
	desc := s.Description
	if desc == "" {
		desc = wire.SandboxDescription
	}
	return &mcp.Tool{Name: runTool["name"].(string), Description: desc, InputSchema: runTool["inputSchema"]}
}

// protocolVersions are the MCP versions this server speaks, newest first:
// those of the initialize handshake, which Claude Code falls back to when
// the stateless server/discover of 2026-07-28 is refused (measured with
// Claude Code 2.1.330, whose tools/call then carries the tool use id in
// _meta); the SDK answers a request at a newer version with
// CodeUnsupportedProtocolVersion.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// MCPServer is `gatekeeper mcp`: a stdio MCP server (the official Go SDK's,
// newline-delimited JSON-RPC 2.0) named gatekeeper with one tool, run,
// that Claude Code starts from managed-mcp.json as sandboxed_code. Each call
// runs through Sandbox in the session's query on the sidecar, where a hook
// of the same session must have allowed its tool use id first.
type MCPServer struct {
	Sandbox Sandbox
	// Version is reported in serverInfo.
	Version string
	// Description is the run tool's description when the session's code
	// may call MCP tools (the sidecar's query_opened tool_description);
	// "" shows wire.SandboxDescription, as @gatekeeper/client does.
	Description string
}

// Serve reads requests from in and writes responses to out until in ends
// or ctx does, when it returns nil; any other end of the session is its
// error. Tool calls run concurrently; a notifications/cancelled cancels
// its call's context (and so its run).
func (s *MCPServer) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "gatekeeper", Version: s.Version}, &mcp.ServerOptions{
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		SupportedProtocolVersions: protocolVersions,
	})
	srv.AddTool(s.tool(), s.call)
	err := srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	if ctx.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// nopWriteCloser is out for the SDK's transport, which closes its writer:
// the caller's stdout stays open.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// call runs one tools/call of run (the SDK refuses any other tool with
// CodeInvalidParams). A failure is a tool result with isError, which the
// model reads; only a cancelled call is a JSON-RPC error, which its
// client does not wait for.
func (s *MCPServer) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := runArgs(req.Params.Arguments)
	if err != nil {
		return errorResult("invalid arguments for run: " + err.Error()), nil
	}
	toolUseID, _ := req.Params.Meta[ToolUseIDMeta].(string)
	if toolUseID == "" {
		return errorResult("gatekeeper cannot tell which allowed tool call this run belongs to, so the code did not run"), nil
	}
	res, err := s.Sandbox.Run(ctx, toolUseID, args)
	if ctx.Err() != nil {
		return nil, ctx.Err() // cancelled: the client expects no result
	}
	if err != nil {
		if re, ok := client.IsRefused(err); ok {
			return errorResult(refusalText(re)), nil
		}
		return errorResult(fmt.Sprintf("gatekeeper is unavailable (%v), so the code did not run", err)), nil
	}
	return &mcp.CallToolResult{
		Content:           append(imageBlocks(res), &mcp.TextContent{Text: FormatRunResult(res)}),
		StructuredContent: structured(res),
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
		ToAgent  *[]*string                 `json:"to_agent"`
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
	if a.ToAgent != nil {
		for _, p := range *a.ToAgent {
			if p == nil {
				return client.RunRequest{}, errors.New("to_agent must be a list of strings")
			}
			r.ToAgent = append(r.ToAgent, *p)
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

// ToAgentDescription describes the run tool's to_agent, as
// @gatekeeper/client's schema does. Claude Code has no agent code of the
// builder's, so here the model is told, on each such file, that none
// received it (ToAgentNote); the field is offered so that both clients
// show the model the same tool.
const ToAgentDescription = "Returned files (paths, directories or glob patterns under /workspace) to hand to the agent's own code instead of you: " +
	"you get each one's name, size, sha256 and type, never its content. Use it for results the agent passes on rather than reads."

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

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
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
