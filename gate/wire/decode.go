package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Decode reads one client frame. It returns the request, or nil and the
// error frame to send back; the connection stays usable either way. Decode
// does not retain data: strings and json.RawMessage fields are copies.
//
// A frame breaking several rules gets the code of the first rule it breaks,
// in this order:
//
//  1. malformed_frame: data is not valid UTF-8, or not exactly one JSON
//     object (RFC 8259) with nothing but white space after it.
//  2. duplicate_key: a key repeats in an object, at any depth up to
//     MaxDepth. Keys are compared after unescaping ("a" and "\u0061" are the
//     same key). Among the frame's own keys and the keys of mcp_server (the
//     objects that map onto Go structs) two keys differing only in letter
//     case count as repeated; in tool_input, files and sandbox_policy they
//     are distinct keys.
//  3. missing_field, invalid_field or unknown_type for "type".
//  4. unknown_field: the first key, in frame order, that the type does not
//     define. Keys are matched exactly.
//  5. missing_field, invalid_field or unsupported_version for the other
//     fields, in the order of docs/protocol.md. null is never a valid value;
//     nesting deeper than MaxDepth makes the field invalid.
//
// The error frame's ID is the frame's top-level "id" when that is a string,
// even one that is not a valid id (in a malformed frame: when it was scanned
// before the error), and "" otherwise, including when the frame has two "id"
// keys. Its message names the frame type, or "frame" before the type is
// known, and the field, as in `decide: unknown field "toolname"`.
//
// Strings are passed on exactly as decoded: NUL, zero-width and other
// invisible characters are kept for the policy to judge.
func Decode(data []byte) (Request, *Error) {
	r, s, werr := scanFrame(data, "frame")
	if werr != nil {
		return nil, werr
	}
	if s.dup != nil {
		// Name the frame type in the message when it can be read
		// unambiguously.
		if typ := r.get("type"); typ != nil && typ.kind == kindString &&
			(s.dup.under != "" || !strings.EqualFold(s.dup.key, "type")) {
			if t := r.str(typ); isRequestType(t) {
				r.typ = t
			}
		}
		return nil, r.fail(CodeDuplicateKey, dupMessage(s.dup))
	}
	typ := r.get("type")
	switch {
	case typ == nil:
		return nil, r.fail(CodeMissingField, `missing field "type"`)
	case typ.kind != kindString:
		return nil, r.fail(CodeInvalidField, fmt.Sprintf(`field "type" must be a string, not %s`, typ.kind))
	}
	t := r.str(typ)
	if !isRequestType(t) {
		return nil, r.fail(CodeUnknownType, fmt.Sprintf("unknown type %s", quote(t)))
	}
	r.typ = t
	var req Request
	switch t {
	case TypeHello:
		req = decodeHello(r)
	case TypeOpenQuery:
		req = decodeOpenQuery(r)
	case TypeDecide:
		req = decodeDecide(r)
	case TypeRun:
		req = decodeRun(r)
	case TypeCloseQuery:
		req = decodeCloseQuery(r)
	case TypeToolResult:
		req = decodeToolResult(r)
	case TypeApproval:
		req = decodeApproval(r)
	}
	if r.err != nil {
		return nil, r.err
	}
	return req, nil
}

// scanFrame checks that data is one JSON object in valid UTF-8 and scans
// it, refusing repeated keys as Decode does; typ names the frame in
// messages. It returns the reader over the top-level members and the scan
// (whose dup, when set, is a repeated key the caller reports).
func scanFrame(data []byte, typ string) (*reader, *scanner, *Error) {
	if !utf8.Valid(data) {
		return nil, nil, &Error{Code: CodeMalformedFrame, Message: typ + ": not valid UTF-8"}
	}
	s := &scanner{data: data, foldTop: true, foldChild: "mcp_server"}
	err := s.scan()
	r := &reader{members: s.members, typ: typ}
	r.id = r.echoID()
	if err != nil {
		return nil, nil, r.fail(CodeMalformedFrame, err.Error())
	}
	return r, s, nil
}

// DryRun is one call to decide outside any connection: what `gatekeeper
// decide` reads. It is a decide frame without "type", "id" and
// "query_id", with "event" optional, "tool_use_id" optional even for
// PreToolUse, and an optional "sandbox_policy" (an open_query's override).
type DryRun struct {
	// Decide is the call; its ID and QueryID are "".
	Decide Decide
	// SandboxPolicy is the override exactly as sent, or nil when absent.
	SandboxPolicy json.RawMessage
}

// dryRunKeys are the keys a DryRun defines.
var dryRunKeys = []string{"event", "tool_name", "tool_input", "tool_use_id", "mcp_server", "cwd", "agent_id", "agent_type", "http", "sandbox_policy"}

// DecodeDryRun reads a DryRun with exactly Decode's rules for a decide
// frame (one JSON object, no repeated or case-variant keys, keys matched
// exactly, no null, nesting at most MaxDepth, the same field checks in the
// same order), so that a dry run judges the very call a sidecar would.
// events are the accepted values of "event"; the first is the default when
// it is absent. Messages name the frame "decide".
func DecodeDryRun(data []byte, events ...string) (*DryRun, *Error) {
	r, s, werr := scanFrame(data, TypeDecide)
	if werr != nil {
		return nil, werr
	}
	if s.dup != nil {
		return nil, r.fail(CodeDuplicateKey, dupMessage(s.dup))
	}
	r.known(dryRunKeys)
	d := &DryRun{}
	if len(events) > 0 {
		d.Decide.Event = events[0]
	}
	if r.get("event") != nil {
		d.Decide.Event = r.enum("event", events...)
	}
	r.callOrHTTP(&d.Decide, false)
	if m := r.field("sandbox_policy", false, kindObject); m != nil {
		d.SandboxPolicy = bytes.Clone(m.raw)
	}
	if r.err != nil {
		return nil, r.err
	}
	return d, nil
}

func isRequestType(t string) bool {
	switch t {
	case TypeHello, TypeOpenQuery, TypeDecide, TypeRun, TypeCloseQuery, TypeToolResult, TypeApproval:
		return true
	}
	return false
}

// The keys each frame type defines; read-only lookup tables.
var (
	helloKeys      = []string{"type", "id", "v", "client"}
	openQueryKeys  = []string{"type", "id", "sandbox_policy", "claude_code_session", "sdk_servers", "approvals"}
	decideKeys     = []string{"type", "id", "query_id", "event", "tool_name", "tool_input", "tool_use_id", "mcp_server", "cwd", "agent_id", "agent_type", "http"}
	mcpServerKeys  = []string{"name", "source"}
	runKeys        = []string{"type", "id", "query_id", "tool_use_id", "language", "code", "files", "timeout_ms", "outputs", "to_agent"}
	closeQueryKeys = []string{"type", "id", "query_id"}
)

func decodeHello(r *reader) Request {
	r.known(helloKeys)
	h := &Hello{ID: r.requestID()}
	if m := r.field("v", true, kindInteger); m != nil {
		switch {
		case string(m.raw) != strconv.Itoa(Version):
			r.fail(CodeUnsupportedVersion, fmt.Sprintf("version %s is not supported, this server speaks %d", clip(string(m.raw)), Version))
		default:
			h.V = Version
		}
	}
	if m := r.field("client", false, kindString); m != nil {
		h.Client = r.str(m)
		if utf8.RuneCountInString(h.Client) > MaxClientChars {
			r.fail(CodeInvalidField, fmt.Sprintf(`field "client" must be at most %d characters`, MaxClientChars))
		}
	}
	return h
}

func decodeOpenQuery(r *reader) Request {
	r.known(openQueryKeys)
	q := &OpenQuery{ID: r.requestID()}
	if m := r.field("sandbox_policy", false, kindObject); m != nil {
		q.SandboxPolicy = bytes.Clone(m.raw)
	}
	if m := r.field("claude_code_session", false, kindString); m != nil {
		q.ClaudeCodeSession = r.str(m)
		switch {
		case q.ClaudeCodeSession == "" || utf8.RuneCountInString(q.ClaudeCodeSession) > MaxIDChars:
			r.fail(CodeInvalidField, fmt.Sprintf(`field "claude_code_session" must be 1 to %d characters`, MaxIDChars))
		case q.SandboxPolicy != nil:
			r.fail(CodeInvalidField, `field "claude_code_session" excludes "sandbox_policy": a Claude Code session's query has the operator's base policy`)
		}
	}
	if m := r.field("sdk_servers", false, kindArray); m != nil {
		q.SDKServers = r.sdkServers(m)
		if r.err == nil && q.ClaudeCodeSession != "" {
			r.fail(CodeInvalidField, `field "claude_code_session" excludes "sdk_servers": a Claude Code session has no in-process servers of this connection`)
		}
	}
	if m := r.field("approvals", false, kindBool); m != nil {
		q.Approvals = string(m.raw) == "true"
		if r.err == nil && q.Approvals && q.ClaudeCodeSession != "" {
			r.fail(CodeInvalidField, `field "claude_code_session" excludes "approvals": the Claude Code CLI has no handler for asks from code`)
		}
	}
	return q
}

func decodeDecide(r *reader) Request {
	r.known(decideKeys)
	d := &Decide{ID: r.requestID()}
	d.QueryID = r.nonEmpty("query_id")
	d.Event = r.enum("event", EventPreToolUse, EventCanUseTool, EventHTTPRequest)
	r.callOrHTTP(d, true)
	return d
}

// call reads the fields of a call that a decide frame and a DryRun share,
// in the order of docs/protocol.md, after the event. A connection's decide
// requires tool_use_id (non-empty for PreToolUse); a dry run may leave it
// out.
func (r *reader) call(d *Decide, onWire bool) {
	d.ToolName = r.nonEmpty("tool_name")
	if m := r.field("tool_input", true, kindObject); m != nil {
		d.ToolInput = bytes.Clone(m.raw)
	}
	if m := r.field("tool_use_id", onWire, kindString); m != nil {
		d.ToolUseID = r.str(m)
		if d.ToolUseID == "" && d.Event == EventPreToolUse && onWire {
			r.fail(CodeInvalidField, `field "tool_use_id" must not be empty for event "PreToolUse"`)
		}
	}
	if m := r.field("mcp_server", false, kindObject); m != nil {
		d.MCPServer = r.mcpServer(m)
	}
	if m := r.field("cwd", false, kindString); m != nil {
		d.Cwd = r.str(m)
		if !strings.HasPrefix(d.Cwd, "/") {
			r.fail(CodeInvalidField, `field "cwd" must be an absolute path`)
		}
	}
	d.AgentID, d.AgentType = r.agent()
}

// agent reads the optional agent_id and agent_type of a call made inside a
// subagent: strings of at most MaxIDChars characters, "" when absent.
func (r *reader) agent() (id, typ string) {
	read := func(key string) string {
		m := r.field(key, false, kindString)
		if m == nil {
			return ""
		}
		s := r.str(m)
		if utf8.RuneCountInString(s) > MaxIDChars {
			r.fail(CodeInvalidField, fmt.Sprintf(`field %q must be at most %d characters`, key, MaxIDChars))
		}
		return s
	}
	return read("agent_id"), read("agent_type")
}

// mcpServer decodes the mcp_server object, which Decode's scan already
// checked for repeated and case-variant keys.
func (r *reader) mcpServer(m *member) *MCPServer {
	sub := r.object(m, "mcp_server")
	if sub == nil {
		return nil
	}
	sub.known(mcpServerKeys)
	srv := &MCPServer{}
	srv.Name = sub.nonEmpty("name")
	srv.Source = sub.enum("source", SourceSDK, SourceStdio, SourceSSE, SourceHTTP, SourceUnknown)
	r.err = sub.err
	return srv
}

// object returns a reader of the members of m, an object member named
// field whose keys are compared ignoring case, or nil after a failure.
func (r *reader) object(m *member, field string) *reader {
	if r.err != nil {
		return nil
	}
	s := scanner{data: m.raw, foldTop: true}
	if err := s.scan(); err != nil {
		// Unreachable: m.raw is part of a frame that scanned.
		r.fail(CodeInvalidField, fmt.Sprintf(`field %q: %v`, field, err))
		return nil
	}
	return &reader{typ: r.typ, id: r.id, members: s.members, prefix: field + "."}
}

func decodeRun(r *reader) Request {
	r.known(runKeys)
	run := &Run{ID: r.requestID()}
	run.QueryID = r.nonEmpty("query_id")
	run.ToolUseID = r.nonEmpty("tool_use_id")
	run.Language = r.enum("language", Languages()...)
	if m := r.field("code", true, kindString); m != nil {
		run.Code = r.str(m)
	}
	if m := r.field("files", false, kindObject); m != nil {
		run.Files = r.files(m)
	}
	if m := r.field("timeout_ms", false, kindInteger); m != nil {
		n, err := strconv.ParseInt(string(m.raw), 10, 64)
		if err != nil || n <= 0 {
			r.fail(CodeInvalidField, `field "timeout_ms" must be a positive integer of milliseconds`)
		} else {
			run.TimeoutMS = &n
		}
	}
	if m := r.field("outputs", false, kindArray); m != nil {
		run.Outputs = r.paths("outputs", m)
	}
	if m := r.field("to_agent", false, kindArray); m != nil {
		run.ToAgent = r.paths("to_agent", m)
		for i, p := range run.ToAgent {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				r.fail(CodeInvalidField, fmt.Sprintf(`field "to_agent" item %d (%s) is not a path or a path.Match pattern relative to /workspace`, i, clip(strconv.Quote(p))))
				break
			}
		}
	}
	return run
}

// paths decodes the array of the field named field (outputs, to_agent):
// at most MaxOutputs strings.
func (r *reader) paths(field string, m *member) []string {
	var items []json.RawMessage
	if err := json.Unmarshal(m.raw, &items); err != nil {
		// Unreachable: m.raw is an array of a frame that scanned.
		r.fail(CodeInvalidField, fmt.Sprintf(`field %q: %v`, field, err))
		return nil
	}
	if len(items) > MaxOutputs {
		r.fail(CodeInvalidField, fmt.Sprintf(`field %q names %d paths, at most %d`, field, len(items), MaxOutputs))
		return nil
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		var p string
		if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &p) != nil {
			r.fail(CodeInvalidField, fmt.Sprintf(`field %q must be an array of strings, not of %s`, field, clip(string(it))))
			return nil
		}
		out = append(out, p)
	}
	return out
}

// files decodes the files object: every value is a string (the file's
// text) or an object holding exactly "base64", a string of standard
// base64 with padding (the file's bytes).
func (r *reader) files(m *member) map[string]FileContent {
	if r.err != nil {
		return nil
	}
	s := scanner{data: m.raw}
	if err := s.scan(); err != nil {
		// Unreachable: m.raw is part of a frame that scanned.
		r.fail(CodeInvalidField, fmt.Sprintf(`field "files": %v`, err))
		return nil
	}
	if len(s.members) == 0 {
		return nil
	}
	files := make(map[string]FileContent, len(s.members))
	for i := range s.members {
		f := &s.members[i]
		path := quote(string(f.key))
		switch f.kind {
		case kindString:
			files[string(f.key)] = FileContent{Data: r.str(f)}
		case kindObject:
			data, ok := r.base64File(f)
			if !ok {
				r.fail(CodeInvalidField, fmt.Sprintf(`field "files": the object for path %s must be {"base64": "<standard base64 with padding>"}`, path))
				return nil
			}
			files[string(f.key)] = FileContent{Data: data, Base64: true}
		default:
			r.fail(CodeInvalidField, fmt.Sprintf(`field "files" must map each path to a string or {"base64": "..."}, not %s (path %s)`, f.kind, path))
			return nil
		}
	}
	return files
}

// base64File decodes a file given as {"base64": "..."}.
func (r *reader) base64File(f *member) (string, bool) {
	s := scanner{data: f.raw}
	if s.scan() != nil || len(s.members) != 1 || string(s.members[0].key) != "base64" || s.members[0].kind != kindString {
		return "", false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(r.str(&s.members[0]))
	if err != nil {
		return "", false
	}
	return string(b), true
}

func decodeCloseQuery(r *reader) Request {
	r.known(closeQueryKeys)
	c := &CloseQuery{ID: r.requestID()}
	c.QueryID = r.nonEmpty("query_id")
	return c
}

// reader reads the top-level members of one scanned object, recording the
// first problem in err; every method does nothing once err is set.
type reader struct {
	// typ is the frame type, or "frame" while it is not known.
	typ string
	// id is the id to echo in an error frame.
	id string
	// prefix is put before field names in messages ("mcp_server.").
	prefix  string
	members []member
	err     *Error
}

// fail records the first problem and returns it.
func (r *reader) fail(code, msg string) *Error {
	if r.err == nil {
		r.err = &Error{ID: r.id, Code: code, Message: r.typ + ": " + msg}
	}
	return r.err
}

// get returns the member with exactly this key, or nil.
func (r *reader) get(key string) *member {
	for i := range r.members {
		if string(r.members[i].key) == key {
			return &r.members[i]
		}
	}
	return nil
}

// echoID returns the value of the only top-level key equal to "id" up to
// case, when that key is exactly "id" and its value a completely scanned
// string; "" otherwise.
func (r *reader) echoID() string {
	var id *member
	for i := range r.members {
		if m := &r.members[i]; bytes.EqualFold(m.key, []byte("id")) {
			if id != nil {
				return ""
			}
			id = m
		}
	}
	if id == nil || string(id.key) != "id" || id.kind != kindString || id.raw == nil {
		return ""
	}
	return r.str(id)
}

// known fails with unknown_field at the first member whose key is not in
// keys.
func (r *reader) known(keys []string) {
	for i := range r.members {
		k := r.members[i].key
		found := false
		for _, want := range keys {
			if string(k) == want {
				found = true
				break
			}
		}
		if !found {
			r.fail(CodeUnknownField, fmt.Sprintf("unknown field %s", quote(r.prefix+string(k))))
			return
		}
	}
}

// field returns the member key when it is present and of kind want, and
// nil otherwise, having recorded missing_field (when required) or
// invalid_field.
func (r *reader) field(key string, required bool, want kind) *member {
	if r.err != nil {
		return nil
	}
	m := r.get(key)
	switch {
	case m == nil && required:
		r.fail(CodeMissingField, fmt.Sprintf("missing field %s", quote(r.prefix+key)))
	case m == nil:
	case want == kindInteger && m.kind == kindNumber && !isInteger(m.raw):
		r.fail(CodeInvalidField, fmt.Sprintf("field %s must be %s, not %s", quote(r.prefix+key), want, clip(string(m.raw))))
	case m.kind != want && !(want == kindInteger && m.kind == kindNumber):
		r.fail(CodeInvalidField, fmt.Sprintf("field %s must be %s, not %s", quote(r.prefix+key), want, m.kind))
	case m.tooDeep:
		r.fail(CodeInvalidField, fmt.Sprintf("field %s nests deeper than %d levels", quote(r.prefix+key), MaxDepth))
	default:
		return m
	}
	return nil
}

// requestID reads the required "id": a string of 1 to MaxIDChars
// characters.
func (r *reader) requestID() string {
	m := r.field("id", true, kindString)
	if m == nil {
		return ""
	}
	id := r.str(m)
	if id == "" || utf8.RuneCountInString(id) > MaxIDChars {
		r.fail(CodeInvalidField, fmt.Sprintf(`field "id" must be 1 to %d characters`, MaxIDChars))
	}
	return id
}

// nonEmpty reads a required string that must not be "".
func (r *reader) nonEmpty(key string) string {
	m := r.field(key, true, kindString)
	if m == nil {
		return ""
	}
	v := r.str(m)
	if v == "" {
		r.fail(CodeInvalidField, fmt.Sprintf("field %s must not be empty", quote(r.prefix+key)))
	}
	return v
}

// enum reads a required string that must be one of values.
func (r *reader) enum(key string, values ...string) string {
	m := r.field(key, true, kindString)
	if m == nil {
		return ""
	}
	v := r.str(m)
	for _, want := range values {
		if v == want {
			return v
		}
	}
	quoted := make([]string, len(values))
	for i, want := range values {
		quoted[i] = strconv.Quote(want)
	}
	r.fail(CodeInvalidField, fmt.Sprintf("field %s is %s, want one of %s", quote(r.prefix+key), quote(v), strings.Join(quoted, ", ")))
	return ""
}

// str decodes a scanned string member.
func (r *reader) str(m *member) string {
	if m.escaped {
		return string(unescape(m.raw))
	}
	return string(m.raw[1 : len(m.raw)-1])
}

// isInteger reports whether a JSON number is written as an integer, with no
// fraction or exponent.
func isInteger(num []byte) bool {
	return bytes.IndexAny(num, ".eE") < 0
}

func dupMessage(d *dupKey) string {
	where := ""
	if d.under != "" {
		where = " in field " + quote(d.under)
	}
	if d.key == d.first {
		return fmt.Sprintf("duplicate key %s%s", quote(d.key), where)
	}
	return fmt.Sprintf("keys %s and %s%s differ only in case", quote(d.first), quote(d.key), where)
}

// maxQuoted is how many characters of a client's string a message repeats.
const maxQuoted = 64

// quote quotes s for a message, cutting it to maxQuoted characters.
func quote(s string) string {
	return strconv.Quote(clip(s))
}

// clip cuts s to maxQuoted characters, marking the cut with "…".
func clip(s string) string {
	n := 0
	for i := range s {
		if n == maxQuoted {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
