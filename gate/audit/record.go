package audit

import "time"

// Kind says what a Record is about.
type Kind string

// The kinds of records the sidecar writes.
const (
	KindDecision Kind = "decision" // a tool call was decided
	KindRun      Kind = "run"      // a sandbox run ended
	KindEgress   Kind = "egress"   // a sandbox run made a network request
	KindQuery    Kind = "query"    // a query was opened or closed
	// KindToolResult: a tool call the CLI ran ended (its PostToolUse or
	// PostToolUseFailure hook); DecisionID names the decision that let it
	// run, or is empty when none did.
	KindToolResult Kind = "tool_result"
	// KindEvent: a Claude Code hook event that is no tool call, and what
	// gatekeeper answered (Elicitation, ConfigChange).
	KindEvent Kind = "event"
	// KindCodeCall: a sandboxed program's nested call to an MCP tool
	// (code mode), decided and, when allowed, made; RunID, QueryID and
	// ToolUseID name the run that made it.
	KindCodeCall Kind = "code_call"
	KindRotate   Kind = "rotate" // the first line of a file that continues the chain of an earlier file
	// KindSession: a query's session started or ended (Event is
	// SessionStart or SessionEnd).
	KindSession Kind = "session"
	// KindDecisionLog: the decision-log shipper (gate/decisionlog) could
	// not ship some lines and says which (Dropped), with its Rule and
	// Reason. The line is itself shipped.
	KindDecisionLog Kind = "decision_log"
)

// The events of a session line (Kind "session"): the values of
// runner.SessionEventKind.
const (
	SessionStart = "session_start"
	SessionEnd   = "session_end"
)

// Outcome says how a sandbox run ended.
type Outcome string

// Run outcomes; the first four match runner.ExitReason.
const (
	OutcomeExited    Outcome = "exited"
	OutcomeTimedOut  Outcome = "timed_out"
	OutcomeOOMKilled Outcome = "oom_killed"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeError     Outcome = "error" // the run could not be started or watched
)

// Record is one line of the audit log. It is a single flat struct for every
// Kind; fields that do not apply are left empty and are omitted from the
// line. The zero value of every field except Kind is valid.
//
// Seq, Time and Prev belong to the chain: Log.Write sets them and ignores
// whatever the caller put there. They are exported so that a line decodes
// back into a Record.
type Record struct {
	// Seq is the 1-based position of the line in the log; it goes on across
	// rotated files.
	Seq int64 `json:"seq,omitempty"`
	// Time is when the line was written, in UTC; it is written in RFC 3339
	// with nanoseconds.
	Time time.Time `json:"time,omitzero"`
	// Prev is the hex SHA-256 of the previous line's bytes without its
	// newline, or 64 zeros on the first line of the log. The first line of
	// a rotated file carries the hash of the last line of the file before.
	Prev string `json:"prev,omitempty"`

	// Kind is what the record is about.
	Kind Kind `json:"kind,omitempty"`

	// Identifiers tying the record to the rest of the system.
	DecisionID string `json:"decision_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	QueryID    string `json:"query_id,omitempty"`
	ToolUseID  string `json:"tool_use_id,omitempty"`

	// Tool is the tool name, e.g. "Bash" or "mcp__sandboxed_code__run".
	Tool string `json:"tool,omitempty"`
	// Event is the hook event, e.g. "PreToolUse".
	Event string `json:"event,omitempty"`
	// Decision is "allow", "deny" or "ask".
	Decision string `json:"decision,omitempty"`
	// Rule names the policy rule that decided.
	Rule string `json:"rule,omitempty"`
	// Reason is the sentence given to the model.
	Reason string `json:"reason,omitempty"`
	// PolicyRevision and PolicyHash identify the policy that decided.
	PolicyRevision string `json:"policy_revision,omitempty"`
	PolicyHash     string `json:"policy_hash,omitempty"`
	// Client is the name the client gave in hello ("claude-code" for the
	// Claude Code hook endpoint).
	Client string `json:"client,omitempty"`
	// Session is the Claude Code CLI session a query serves (Kind "query").
	Session string `json:"session,omitempty"`
	// AgentID and AgentType name the subagent that made a call (Kind
	// "decision" and "tool_result"), as Claude Code reports it: AgentID only
	// inside a subagent.
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`
	// ToolInput is the tool's input. Write masks values under secret-looking
	// keys (see Write) in a copy; the caller's value is never modified.
	ToolInput any `json:"tool_input,omitempty"`

	// Run fields (Kind "run").
	Outcome         Outcome `json:"outcome,omitempty"`
	ExitCode        *int    `json:"exit_code,omitempty"`
	DurationMS      int64   `json:"duration_ms,omitempty"`
	PeakMemoryBytes int64   `json:"peak_memory_bytes,omitempty"`
	StdoutBytes     int64   `json:"stdout_bytes,omitempty"`
	StderrBytes     int64   `json:"stderr_bytes,omitempty"`
	Truncated       bool    `json:"truncated,omitempty"`
	Image           string  `json:"image,omitempty"`
	Runtime         string  `json:"runtime,omitempty"`
	// Files is how many files of /workspace the run returned; Workspace
	// what became of the query's workspace ("saved", "not_saved").
	Files     int    `json:"files,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// ToolCalls is how many nested calls the run's program made through
	// the bridge, every outcome (each has its own code_call line).
	ToolCalls int `json:"tool_calls,omitempty"`
	// AgentFiles are the files the run returned to the agent's code only
	// (the run's to_agent): name, size and digest, never the content.
	AgentFiles []AgentFile `json:"agent_files,omitempty"`
	// SessionRun is the run's number in its session, from 1, and
	// StateLost says that it found its session's state gone, or lost it
	// (a run in a session).
	SessionRun int        `json:"session_run,omitempty"`
	StateLost  *StateLost `json:"state_lost,omitempty"`
	// Artifact names the run's artifact file (serve --artifacts-dir) and
	// ArtifactSHA256 is the SHA-256 of its content.
	Artifact       string `json:"artifact,omitempty"`
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
	Error          string `json:"error,omitempty"`

	// Code call fields (Kind "code_call", with Tool, Decision, Rule,
	// Reason, DurationMS and Error). Server is the MCP server; CallSeq the
	// call's 1-based number within its run. Arguments and result are
	// never written, only the hex SHA-256 and the size of their JSON (the
	// arguments as forwarded: their canonical JSON, once parsed);
	// ResultIsError is the result's own isError (the tool ran and failed).
	// ErrorKind is the bridge's error kind when the call got no result
	// (denied, limit, timeout, server, cancelled, bad_request). A call
	// the bridge refused itself (a bound, a malformed line) has its line
	// too: decision deny, with its rule.
	Server          string `json:"server,omitempty"`
	CallSeq         int    `json:"call_seq,omitempty"`
	ArgumentsSHA256 string `json:"arguments_sha256,omitempty"`
	ArgumentsBytes  int64  `json:"arguments_bytes,omitempty"`
	ResultSHA256    string `json:"result_sha256,omitempty"`
	ResultBytes     int64  `json:"result_bytes,omitempty"`
	ResultIsError   bool   `json:"result_is_error,omitempty"`
	ErrorKind       string `json:"error_kind,omitempty"`
	// ServerSource is where the server's calls go, as the policy's
	// input.mcp_server.source has it: "policy" (one of the policy's
	// mcp_servers) or "sdk" (an in-process server of the query's client).
	ServerSource string `json:"server_source,omitempty"`
	// Omitted is on the one line that closes a run's refusals past the
	// bridge's MaxRefusalLines (runner.RefusalRecorder): the refused calls
	// that got no line of their own, by rule (by error kind for one
	// without a rule). It has no call_seq.
	Omitted map[string]int `json:"omitted,omitempty"`
	// Approval is on the line of a call the policy asked about: who
	// answered the ask, how, and when. Decision is then the answer's.
	Approval *Approval `json:"approval,omitempty"`

	// Session fields (Kind "session", with Event, QueryID, and Reason on
	// a session_end; SessionID is on the runs of the session too).
	// Sandbox is the session's sandbox; Revision the policy revision it
	// started under; Runs how many runs it served (session_end); Started
	// when its sandbox started.
	SessionID string    `json:"session_id,omitempty"`
	Sandbox   string    `json:"sandbox,omitempty"`
	Revision  string    `json:"revision,omitempty"`
	Runs      int       `json:"runs,omitempty"`
	Started   time.Time `json:"started,omitzero"`

	// Egress fields (Kind "egress", with Decision, Rule, Reason,
	// DurationMS and Error). Method is the request's ("CONNECT" for a
	// tunnel). An intercepted request (Intercepted: the proxy terminated
	// its TLS and decided it on its own, event http_request) has its Path
	// (without the query), response Status (the proxy's own for a
	// refusal; 0 when none was sent), Proto, and Secrets: the names of the
	// secrets injected into it, never a value. OmittedRequests is on the
	// one line (rule egress.request_lines) that closes a run's
	// intercepted requests past the proxy's bound: those that got no
	// line of their own.
	Host            string   `json:"host,omitempty"`
	Port            int      `json:"port,omitempty"`
	BytesUp         int64    `json:"bytes_up,omitempty"`
	BytesDown       int64    `json:"bytes_down,omitempty"`
	Method          string   `json:"method,omitempty"`
	Intercepted     bool     `json:"intercepted,omitempty"`
	Path            string   `json:"path,omitempty"`
	Status          int      `json:"status,omitempty"`
	Proto           string   `json:"proto,omitempty"`
	Secrets         []string `json:"secrets,omitempty"`
	OmittedRequests int      `json:"omitted_requests,omitempty"`

	// Rotate fields (Kind "rotate", always the first line of a file, with
	// the rotation's cause in Reason).
	// PrevFile names the file before this one (its name without directory
	// and without ".gz"); seq-1 and prev are its last line's.
	PrevFile string `json:"prev_file,omitempty"`
	// Pruned names the oldest files this rotation removes to keep
	// Options.Keep; a verifier accepts their absence.
	Pruned []string `json:"pruned,omitempty"`

	// Dropped is on a decision_log line: the lines the shipper never
	// shipped, by seq.
	Dropped *Dropped `json:"dropped,omitempty"`
}

// Dropped is a decision_log line's record of lines the decision-log
// shipper gave up on: seqs From to To, Lines of them.
type Dropped struct {
	// From and To are the first and the last line dropped, Lines how
	// many; Ranges are the lines themselves, as sorted, disjoint
	// [first, last] pairs (one pair unless earlier announcements, dropped
	// in turn, were folded in while lines between them were shipped).
	From   int64      `json:"from"`
	To     int64      `json:"to"`
	Lines  int64      `json:"lines"`
	Ranges [][2]int64 `json:"ranges,omitempty"`
}

// Approval is a code_call line's answer to the policy's ask
// (docs/SANDBOX.md, "Asks from code").
type Approval struct {
	// ID is the approval_request frame's id; "" when none was sent.
	ID string `json:"id,omitempty"`
	// By is who answered: "client" (the query's client's handler),
	// "no_handler", "timeout", "connection_lost" or "cancelled".
	By string `json:"by"`
	// Decision is "allow" or "deny"; only "client" allows.
	Decision string `json:"decision"`
	// Message is the handler's message, or why no one answered.
	Message string `json:"message,omitempty"`
	// AskedAt and AnsweredAt bound the wait; WaitMS is its length.
	AskedAt    time.Time `json:"asked_at"`
	AnsweredAt time.Time `json:"answered_at"`
	WaitMS     int64     `json:"wait_ms"`
}

// AgentFile is a run line's record of a file returned to the agent's
// code only.
type AgentFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// StateLost is a run line's state_lost, as the run_result frame has it
// (docs/protocol.md): why the session ended, what is gone, and whether
// the run already ran in a fresh session.
type StateLost struct {
	Reason string `json:"reason"`
	Lost   string `json:"lost"`
	Fresh  bool   `json:"fresh"`
}
