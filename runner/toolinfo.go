package runner

import "encoding/json"

// ToolInfo is what an MCP server says about one of its tools in its
// tools/list: the one description of a tool that the MCP client
// (runner/mcpservers), the gate's decision on a nested call and the
// wrapper generator (runner/toolwrap) share. The hints are nil when the
// server did not state them (MCP's defaults then apply: not read-only,
// destructive, open world); ReadOnly is false, not nil, when the server
// sent annotations without readOnlyHint. The JSON is MCP's names, and it
// is what runner/mcpservers hashes to name a server's tools.
type ToolInfo struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema and OutputSchema are JSON Schemas (objects);
	// OutputSchema is nil when the tool declares none.
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	ReadOnly     *bool           `json:"readOnlyHint,omitempty"`
	Destructive  *bool           `json:"destructiveHint,omitempty"`
	Idempotent   *bool           `json:"idempotentHint,omitempty"`
	OpenWorld    *bool           `json:"openWorldHint,omitempty"`
}
