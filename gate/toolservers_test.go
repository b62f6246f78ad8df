package gate_test

import (
	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
)

// The sidecar's MCP client is the gate's ToolServers, and the wrapper
// generator's ToolLister, as it is: no adapter between them.
var (
	_ gate.ToolServers = (*mcpservers.Servers)(nil)
	_ gate.ToolLister  = (*mcpservers.Servers)(nil)
)
