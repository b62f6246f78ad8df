package runner

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
)

// ToolInfo is what an MCP server says about one of its tools in its
// tools/list: the one description of a tool that the MCP client
// (runner/mcpservers), the gate's decision on a nested call and the
// wrapper generator (runner/toolwrap) share. The hints are nil when the
// server did not state them (MCP's defaults then apply: not read-only,
// destructive, open world); ReadOnly is false, not nil, when the server
// sent annotations without readOnlyHint. The JSON is MCP's names, and it
// is part of what ServerTools.Listed hashes to name a server's tools.
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

// ServerTools is one MCP server and its tools: the one type for "a server
// and its tools" that the MCP client lists (runner/mcpservers), the gate
// narrows to what a run's code may call, and the wrapper generator and the
// tool description are made from (runner/toolwrap). Its JSON is what
// Listed hashes to name a server's tools.
type ServerTools struct {
	// Name is the server's name in the policy (for wrappers,
	// ^[a-z][a-z0-9_]{0,31}$: the bridge is called with it, and its module
	// is named after it).
	Name string `json:"name"`
	// Description says what the server is for; it may be empty.
	Description string `json:"description,omitempty"`
	// Tools are the server's tools as tools/list gave them, sorted by name
	// when listed; empty when Err is set.
	Tools []ToolInfo `json:"tools"`
	// Hash is the hex SHA-256 of the listing's JSON (see Listed): equal
	// hashes, equal wrappers. The wrapper generator does not read it.
	Hash string `json:"hash"`
	// Err is why the server's tools could not be listed: it is down, or
	// was not ready in time. A server with Err set gets no wrappers.
	Err error `json:"-"`
}

// Listed returns st as a listing: its tools sorted by name (an empty list,
// not nil, when it has none) and its Hash set to the SHA-256 of its JSON,
// with source in it when source is not empty, so that a server of the
// client's own process never shares a hash with an operator's server of
// the same tools. It is the one way a server's tools are hashed.
func (st ServerTools) Listed(source string) ServerTools {
	st.Tools = slices.Clone(st.Tools)
	if st.Tools == nil {
		st.Tools = []ToolInfo{}
	}
	slices.SortFunc(st.Tools, func(a, b ToolInfo) int { return cmp.Compare(a.Name, b.Name) })
	st.Hash = ""
	raw, _ := json.Marshal(struct { // the fields are strings, raw JSON and bools: it cannot fail
		Source string `json:"source,omitempty"`
		ServerTools
	}{source, st})
	st.Hash = digest.SHA256(raw)
	return st
}
