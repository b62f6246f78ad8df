// Package wire is the codec between the WebSocket text frames of the
// gatekeeper protocol (docs/protocol.md, version 1) and Go values.
//
// Decode turns one client frame into a Request (*Hello, *OpenQuery, *Decide,
// *Run, *CloseQuery or *ToolResult) or into the *Error frame to send back; Encode turns a
// Reply into one frame. The package does no I/O and keeps no state: both
// functions are safe for concurrent use, and the server calls Decode in a
// connection's reader goroutine and Encode in its writer.
//
// Decoding is strict, because the policy judges exactly what the codec
// passes on. encoding/json alone would match keys case-insensitively and keep
// the last of two equal keys, so Decode first walks the whole frame with its
// own scanner, which refuses repeated keys and nesting deeper than MaxDepth,
// then reads each field by its exact name.
package wire

import (
	"slices"
	"strconv"
	"strings"
)

// Protocol limits.
const (
	// Version is the protocol version this package speaks (hello.v).
	Version = 1
	// MaxIDChars is the most characters (Unicode code points) an id may have.
	MaxIDChars = 128
	// MaxClientChars is the most characters hello.client may have.
	MaxClientChars = 256
	// MaxDepth is how deeply a frame may nest objects and arrays, counting
	// the frame's own object: tool_input's object is level 2.
	MaxDepth = 64
	// MaxOutputs is the most paths a run's outputs may name.
	MaxOutputs = 100
)

// Frame types of requests.
const (
	TypeHello      = "hello"
	TypeOpenQuery  = "open_query"
	TypeDecide     = "decide"
	TypeRun        = "run"
	TypeCloseQuery = "close_query"
	TypeToolResult = "tool_result"
	TypeApproval   = "approval"
)

// Frame types of replies.
const (
	TypeWelcome     = "welcome"
	TypeQueryOpened = "query_opened"
	TypeDecision    = "decision"
	TypeOutput      = "output"
	TypeRunResult   = "run_result"
	TypeQueryClosed = "query_closed"
	TypeError       = "error"
	TypeToolCall    = "tool_call"
	TypeToolCancel  = "tool_cancel"
	// TypeApprovalRequest and TypeApprovalCancel are sent unasked, as
	// TypeToolCall is.
	TypeApprovalRequest = "approval_request"
	TypeApprovalCancel  = "approval_cancel"
)

// Values of Decide.Event: which SDK callback asks.
const (
	EventPreToolUse = "PreToolUse"
	EventCanUseTool = "canUseTool"
)

// Values of MCPServer.Source: how the MCP server was configured.
const (
	SourceSDK     = "sdk"
	SourceStdio   = "stdio"
	SourceSSE     = "sse"
	SourceHTTP    = "http"
	SourceUnknown = "unknown"
)

// SourceCLIPrefix begins every MCPServer.Source the sidecar passes on from a
// Claude Code CLI hook input: the CLI's own scope ("enterprise", "project",
// "sdk", ...) after this prefix, so that no value a CLI reports can equal a
// value of the WebSocket's vocabulary above, which a frame's decoder
// accepts alone, nor the sidecar's own attestation.
const SourceCLIPrefix = "claude-code:"

// SandboxServer is the name of gatekeeper's own MCP server, whose one tool
// SandboxTool runs code in the sandbox: the SDK client's in-process server,
// or `gatekeeper mcp` in a Claude Code session. A run frame runs the code of
// an allowed SandboxTool call only.
const (
	SandboxServer = "sandboxed_code"
	SandboxTool   = "mcp__" + SandboxServer + "__run"
)

// SandboxDescription is the description of SandboxTool that the model
// reads when its code may call no MCP tool and its image has every
// language: the one text both clients show (gate/client/claudecode and
// @gatekeeper/client, which testdata/sandbox-tool.json pins to it). A
// query whose code may call tools, or whose image lacks a language, gets
// another in QueryOpened.ToolDescription (SandboxDescriptionFor).
const SandboxDescription = sandboxBefore + `language: "python", "sh" or "node". ` + sandboxAfter

const (
	sandboxBefore = "Run a short program in an isolated sandbox (a container with no access to the host, resource limits, and " +
		"usually no network) and get back its stdout, stderr, exit code and the files it wrote (images are shown to you). "
	sandboxAfter = "The working directory is /workspace; what a run leaves there is there for the next run of this conversation " +
		"(a run that times out keeps none of its changes). Install packages into it (pip install --user, npm install) when " +
		"the network policy allows their registry. files: optional files to create first, path relative to /workspace → " +
		`text, or {"base64": "..."} for binary content. outputs: optional paths under /workspace whose files to return; ` +
		"by default the files the run created or changed come back (except hidden directories, node_modules and __pycache__). " +
		"timeout_s: optional wall-clock limit in seconds, at most the policy's limit."
)

// SandboxDescriptionFor is SandboxTool's description naming only
// languages, the ones the query's image has (in Languages' order; none or
// unknown: all of them, which is SandboxDescription).
func SandboxDescriptionFor(languages []string) string {
	var names []string
	for _, l := range Languages() {
		if slices.Contains(languages, l) {
			names = append(names, strconv.Quote(l))
		}
	}
	if len(names) == 0 {
		return SandboxDescription
	}
	list := names[0]
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	}
	return sandboxBefore + "language: " + list + ". " + sandboxAfter
}

// SessionDescription follows the run tool's description (SandboxDescription,
// or the longer one of a query whose code may call tools) in
// QueryOpened.ToolDescription when the query's sandbox policy keeps a
// session (sandbox.session): the model is told that state persists, and
// what state_lost means.
const SessionDescription = "Runs in this conversation share one session, as cells of a notebook do: Python's globals, imports and open files, " +
	"Node's top-level bindings (var, let, const, functions; not those of code using top-level await) and the shell's working directory, " +
	"environment and background jobs persist from one run to the next, and a Python run shows the value of its last bare expression. " +
	"A session ends after it has been idle for a while, when a run's timeout passes and the program does not stop when interrupted, " +
	"or when the memory limit is hit: the result then says \"state lost\" and why, and the next run must rebuild what it needs " +
	"(files in /workspace are kept)."

// Values of Decision.Decision.
const (
	Allow = "allow"
	Deny  = "deny"
	Ask   = "ask"
)

// Request is a decoded client frame: one of *Hello, *OpenQuery, *Decide,
// *Run, *CloseQuery or *ToolResult. Only this package implements it, so a
// type switch over those six pointer types is exhaustive.
type Request interface {
	// RequestID is the frame's id, which every reply to it echoes.
	RequestID() string
	// Type is the frame's type, such as "decide".
	Type() string
	isRequest()
}

// Reply is a server frame: Welcome, QueryOpened, Decision, Output,
// RunResult, QueryClosed, Error, ToolCall or ToolCancel, each as a value
// or a pointer. Only this package implements it. ToolCall and ToolCancel
// answer no request: the sidecar sends them on its own, for a query's
// in-process tools (SDKServer).
type Reply interface {
	// Type is the frame's type, such as "decision".
	Type() string
	isReply()
}
