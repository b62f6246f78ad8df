package gate_test

import (
	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
)

// The sidecar's MCP client is the gate's ToolServers as it is, and the
// wrapper generator's ToolLister: no adapter between them.
var (
	_ gate.ToolServers = (*mcpservers.Servers)(nil)
)
