package policy

import (
	"fmt"
	"maps"
	"slices"
)

// Warnings returns what `gatekeeper policy check` points out in a valid
// policy without refusing it, each with its location ("file:line:col:
// text"): a code_calls.callable server that is not one of mcp_servers,
// which may be an in-process server a client brings to its query
// (open_query's sdk_servers), or a misspelt name whose tools no program
// can call.
func (p *Policy) Warnings() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(p.CodeCalls.Callable)) {
		if _, ok := p.MCPServers[name]; ok {
			continue
		}
		out = append(out, fmt.Sprintf("%s: warning: code_calls.callable names %q, which is not one of mcp_servers: "+
			"fine if a client brings an in-process SDK server of that name to its queries (sdk_servers); "+
			"otherwise no program can call its tools (a misspelt name?)", p.Where("code_calls.callable."+name), name))
	}
	return out
}
