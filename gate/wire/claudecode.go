package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// HookPath is where the sidecar answers Claude Code CLI hooks: an HTTP hook
// POSTs its input here, and `gatekeeper hook` (a command hook) forwards its
// stdin here.
const HookPath = "/v1/claude-code/hook"

// Claude Code CLI hook events the sidecar's hook endpoint acts on
// (docs/CLAUDE-CODE.md). Any other event is answered with no opinion.
const (
	HookPreToolUse         = "PreToolUse"
	HookPermissionRequest  = "PermissionRequest"
	HookSessionEnd         = "SessionEnd"
	HookPostToolUse        = "PostToolUse"
	HookPostToolUseFailure = "PostToolUseFailure"
	HookElicitation        = "Elicitation"
	HookConfigChange       = "ConfigChange"
)

// What the hook endpoint does with an event of the CLI, in HookEvents.
const (
	// HandleDecide: a tool call, decided by the policy and audited.
	HandleDecide = "decide"
	// HandleRecord: a tool call's end, audited and tied to the decision
	// that let it run.
	HandleRecord = "record"
	// HandleClose: the session ends; its query is closed.
	HandleClose = "close"
	// HandleRefuse: refused whatever it asks (an MCP server's request for
	// input is declined, a settings change mid-session is blocked), and
	// audited.
	HandleRefuse = "refuse"
	// HandleNone: not hooked; the endpoint answers it with no opinion if
	// it arrives.
	HandleNone = "none"
)

// HookEvents returns every hook event of the pinned Claude Code CLI
// (2.1.330) and what gatekeeper does with it: one of the Handle values.
// `claude-code install` hooks each event that is not HandleNone.
// testdata/hook-events.json holds the same table, which the Go tests and
// the CLI test (against the events compiled into the pinned binary) read.
func HookEvents() map[string]string {
	return map[string]string{
		HookPreToolUse: HandleDecide, HookPermissionRequest: HandleDecide,
		HookPostToolUse: HandleRecord, HookPostToolUseFailure: HandleRecord,
		HookSessionEnd:  HandleClose,
		HookElicitation: HandleRefuse, HookConfigChange: HandleRefuse,
		"PostToolBatch": HandleNone, "Notification": HandleNone, "UserPromptSubmit": HandleNone,
		"UserPromptExpansion": HandleNone, "SessionStart": HandleNone, "Stop": HandleNone,
		"StopFailure": HandleNone, "SubagentStart": HandleNone, "SubagentStop": HandleNone,
		"PreCompact": HandleNone, "PostCompact": HandleNone, "PreModelSwitch": HandleNone,
		"PostModelSwitch": HandleNone, "PermissionDenied": HandleNone, "Setup": HandleNone,
		"TeammateIdle": HandleNone, "TaskCreated": HandleNone, "TaskCompleted": HandleNone,
		"ElicitationResult": HandleNone, "WorktreeCreate": HandleNone, "WorktreeRemove": HandleNone,
		"InstructionsLoaded": HandleNone, "CwdChanged": HandleNone, "FileChanged": HandleNone,
		"DirectoryAdded": HandleNone, "MessageDisplay": HandleNone,
	}
}

// HookInput is one call of a Claude Code hook, as the CLI writes it to a
// command hook's stdin and POSTs it to an HTTP hook. Only the fields
// gatekeeper reads are kept; the CLI adds fields between versions, and
// those are ignored.
type HookInput struct {
	// Event is hook_event_name, such as HookPreToolUse; never "" after a
	// successful decode.
	Event string
	// SessionID is the CLI's session id, 1 to MaxIDChars characters.
	SessionID string
	// Cwd is the CLI's working directory when it is an absolute path, ""
	// otherwise.
	Cwd string
	// ToolName, ToolInput (a JSON object, free of repeated keys) and
	// ToolUseID are set for PreToolUse and PermissionRequest. The CLI
	// sends no tool_use_id with PermissionRequest: ToolUseID is "" then.
	ToolName  string
	ToolInput json.RawMessage
	ToolUseID string
	// MCPServer is the CLI's mcp_server for an mcp__ tool: Name, and in
	// Source the scope the CLI loaded the server from ("enterprise" for
	// managed-mcp.json, "project" for .mcp.json, "user", "local", ...),
	// passed on unchecked. nil when absent.
	MCPServer *MCPServer
	// AgentID and AgentType name the subagent the event comes from
	// (agent_id only inside a subagent; agent_type also on the main
	// thread of a session started with --agent); "" when absent.
	AgentID, AgentType string
	// Error is a PostToolUseFailure's error, as the CLI reports it.
	Error string
	// ServerName is an Elicitation's mcp_server_name.
	ServerName string
	// ConfigSource and FilePath are a ConfigChange's source
	// ("user_settings", "project_settings", "local_settings",
	// "policy_settings", "skills") and file_path.
	ConfigSource, FilePath string
}

// hookToolEvent reports whether event carries a tool call to decide.
func hookToolEvent(event string) bool {
	return event == HookPreToolUse || event == HookPermissionRequest
}

// DecodeHook reads one hook input. It returns the input, or the error that
// makes it unusable together with whatever it could read (at least Event,
// when hook_event_name is a string), so that the caller can still answer a
// tool event with a deny. It checks what Decode checks of a frame (valid
// UTF-8, one JSON object, no repeated keys, nesting within MaxDepth; the
// top-level keys and those of mcp_server compared ignoring case), then:
// hook_event_name and session_id are required strings; for PreToolUse and
// PermissionRequest, tool_name (not empty) and tool_input (an object) are
// required, tool_use_id is required and not empty for PreToolUse, and
// mcp_server, when present, is an object with a non-empty string name and
// a string source. Keys it does not read are ignored, whatever their value.
func DecodeHook(data []byte) (*HookInput, *Error) {
	in := &HookInput{}
	if !utf8.Valid(data) {
		return in, &Error{Code: CodeMalformedFrame, Message: "hook input: not valid UTF-8"}
	}
	s := scanner{data: data, foldTop: true, foldChild: "mcp_server"}
	err := s.scan()
	r := reader{members: s.members, typ: "hook input"}
	if m := r.get("hook_event_name"); m != nil && m.kind == kindString && m.raw != nil {
		in.Event = r.str(m)
	}
	switch {
	case err != nil:
		return in, r.fail(CodeMalformedFrame, err.Error())
	case s.dup != nil:
		return in, r.fail(CodeDuplicateKey, dupMessage(s.dup))
	}
	in.Event = r.nonEmpty("hook_event_name")
	if m := r.field("session_id", true, kindString); m != nil {
		in.SessionID = r.str(m)
		if in.SessionID == "" || utf8.RuneCountInString(in.SessionID) > MaxIDChars {
			r.fail(CodeInvalidField, fmt.Sprintf(`field "session_id" must be 1 to %d characters`, MaxIDChars))
		}
	}
	if m := r.field("cwd", false, kindString); m != nil {
		if cwd := r.str(m); len(cwd) > 0 && cwd[0] == '/' {
			in.Cwd = cwd
		}
	}
	in.AgentID, in.AgentType = r.agent()
	switch in.Event {
	case HookPostToolUse, HookPostToolUseFailure:
		in.ToolName = r.nonEmpty("tool_name")
		in.ToolUseID = r.nonEmpty("tool_use_id")
		if m := r.field("error", in.Event == HookPostToolUseFailure, kindString); m != nil {
			in.Error = r.str(m)
		}
		return in, r.err
	case HookElicitation:
		if m := r.field("mcp_server_name", false, kindString); m != nil {
			in.ServerName = r.str(m)
		}
		return in, r.err
	case HookConfigChange:
		if m := r.field("source", false, kindString); m != nil {
			in.ConfigSource = r.str(m)
		}
		if m := r.field("file_path", false, kindString); m != nil {
			in.FilePath = r.str(m)
		}
		return in, r.err
	}
	if !hookToolEvent(in.Event) {
		return in, r.err
	}
	in.ToolName = r.nonEmpty("tool_name")
	if m := r.field("tool_input", true, kindObject); m != nil {
		in.ToolInput = bytes.Clone(m.raw)
	}
	if m := r.field("tool_use_id", in.Event == HookPreToolUse, kindString); m != nil {
		in.ToolUseID = r.str(m)
		if in.ToolUseID == "" && in.Event == HookPreToolUse {
			r.fail(CodeInvalidField, `field "tool_use_id" must not be empty for PreToolUse`)
		}
	}
	if m := r.field("mcp_server", false, kindObject); m != nil {
		in.MCPServer = r.hookMCPServer(m)
	}
	return in, r.err
}

// hookMCPServer decodes the CLI's mcp_server object; unlike a frame's, its
// source is the CLI's scope, any string, and other keys are ignored.
func (r *reader) hookMCPServer(m *member) *MCPServer {
	sub := r.object(m, "mcp_server")
	if sub == nil {
		return nil
	}
	srv := &MCPServer{Name: sub.nonEmpty("name")}
	if m := sub.field("source", true, kindString); m != nil {
		srv.Source = sub.str(m)
	}
	r.err = sub.err
	return srv
}

// HookAnswer is gatekeeper's decision on one hook call, to be encoded for
// the CLI by EncodeHookAnswer.
type HookAnswer struct {
	// Event is the hook input's Event.
	Event string
	// Decision is Allow, Deny or Ask.
	Decision string
	// Reason is the sentence the model reads for a deny or an ask; it
	// should name the rule.
	Reason string
}

// The JSON shapes Claude Code reads from a hook (its hooks reference,
// "JSON output"); field order is fixed so the bytes are stable.
type (
	hookOutput struct {
		HookSpecificOutput any `json:"hookSpecificOutput"`
	}
	preToolUseOutput struct {
		HookEventName            string `json:"hookEventName"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
	}
	permissionRequestOutput struct {
		HookEventName string             `json:"hookEventName"`
		Decision      permissionDecision `json:"decision"`
	}
	permissionDecision struct {
		Behavior string `json:"behavior"`
		Message  string `json:"message,omitempty"`
	}
	elicitationOutput struct {
		HookEventName string `json:"hookEventName"`
		Action        string `json:"action"`
	}
	blockOutput struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
)

// EncodeHookAnswer returns the JSON the CLI reads from a hook for a:
//
//   - PreToolUse: a deny or an ask is hookSpecificOutput.permissionDecision
//     with the reason; an allow is {}, no opinion, so the CLI's own
//     permission flow goes on (and asks again through PermissionRequest
//     where it would prompt), as the SDK client does.
//   - PermissionRequest: an allow or a deny is hookSpecificOutput.decision
//     with behavior "allow" or "deny" (and the reason as message); an ask
//     is {}, so the CLI asks the person, or denies when there is none.
//   - Elicitation: hookSpecificOutput.action "decline", whatever a.Decision.
//   - ConfigChange: {"decision": "block", "reason": a.Reason}, whatever
//     a.Decision.
//   - any other event: {}.
//
// Strings are written as encoding/json writes them, without HTML escaping.
func EncodeHookAnswer(a HookAnswer) []byte {
	var out any = struct{}{}
	switch {
	case a.Event == HookPreToolUse && (a.Decision == Deny || a.Decision == Ask):
		out = hookOutput{preToolUseOutput{HookEventName: HookPreToolUse, PermissionDecision: a.Decision, PermissionDecisionReason: a.Reason}}
	case a.Event == HookPermissionRequest && a.Decision == Allow:
		out = hookOutput{permissionRequestOutput{HookEventName: HookPermissionRequest, Decision: permissionDecision{Behavior: Allow}}}
	case a.Event == HookPermissionRequest && a.Decision == Deny:
		out = hookOutput{permissionRequestOutput{HookEventName: HookPermissionRequest, Decision: permissionDecision{Behavior: Deny, Message: a.Reason}}}
	case a.Event == HookElicitation:
		out = hookOutput{elicitationOutput{HookEventName: HookElicitation, Action: "decline"}}
	case a.Event == HookConfigChange:
		out = blockOutput{Decision: "block", Reason: a.Reason}
	}
	b, err := marshal(out)
	if err != nil {
		// Unreachable: the values are strings in fixed structs.
		return []byte("{}")
	}
	return b
}
