package wire

import (
	"encoding/base64"
	"path"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// Welcome answers Hello.
type Welcome struct {
	ID string `json:"id"`
	V  int    `json:"v"`
	// Server names the sidecar and its version, such as "gatekeeper/0.1.0".
	Server         string `json:"server"`
	PolicyRevision string `json:"policy_revision"`
}

// QueryOpened answers OpenQuery.
type QueryOpened struct {
	ID         string `json:"id"`
	QueryID    string `json:"query_id"`
	PolicyHash string `json:"policy_hash"`
	// EffectivePolicy is the merged policy, marshalled with encoding/json
	// (sizes in bytes, durations in milliseconds).
	EffectivePolicy any `json:"effective_policy"`
	// ToolDescription is the description of the sandboxed_code run tool
	// for this query when its code may call MCP tools: SandboxDescription
	// followed by the servers it may call and how to discover their tools
	// (toolwrap.Describe); "" (absent) when it may call none, and the
	// client then shows SandboxDescription.
	ToolDescription string `json:"tool_description,omitempty"`
}

// Decision answers Decide.
type Decision struct {
	ID string `json:"id"`
	// Decision is Allow, Deny or Ask.
	Decision string `json:"decision"`
	// Reason is a sentence written for the model to read.
	Reason string `json:"reason"`
	// Rule names the rule that decided.
	Rule           string `json:"rule"`
	DecisionID     string `json:"decision_id"`
	PolicyRevision string `json:"policy_revision"`
	ToolUseID      string `json:"tool_use_id"`
}

// Output carries output of a run as it is produced. ID is the run request's.
type Output struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	// Stream is "stdout" or "stderr".
	Stream string `json:"stream"`
	// Data is text; Encode replaces invalid UTF-8 with U+FFFD.
	Data string `json:"data"`
}

// RunResult ends a run that ran: the request's id and the run's report.
type RunResult struct {
	ID string `json:"id"`
	RunReport
}

// RunReport is what a run produced, as the protocol reports it: the body
// of a run_result frame, and what `gatekeeper run` prints. Build it with
// NewRunReport, the one mapping from runner.Result.
type RunReport struct {
	RunID    string `json:"run_id"`
	ExitCode int    `json:"exit_code"`
	// Reason is a runner.ExitReason: "exited", "timed_out", "oom_killed"
	// or "cancelled".
	Reason string `json:"reason"`
	// Stdout and Stderr are text; Encode replaces invalid UTF-8 with U+FFFD.
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated"`
	// TimedOut and OOMKilled are derived from Reason (Reason is
	// "timed_out", Reason is "oom_killed"), kept because version 1 of the
	// protocol promises them; they never disagree with it.
	TimedOut        bool   `json:"timed_out"`
	OOMKilled       bool   `json:"oom_killed"`
	DurationMS      int64  `json:"duration_ms"`
	PeakMemoryBytes int64  `json:"peak_memory_bytes"`
	Image           string `json:"image"`
	Runtime         string `json:"runtime"`
	// Files are files of /workspace the run returns, sorted by path;
	// never nil. FilesOmitted counts those past sandbox.output.max_files.
	Files        []File `json:"files"`
	FilesOmitted int    `json:"files_omitted"`
	// Workspace is "saved" (the next run of the query starts from what
	// this one left in /workspace), "not_saved" (it starts from the
	// workspace as it was before this run; WorkspaceNote says why) or ""
	// (runs keep no workspace).
	Workspace     string `json:"workspace"`
	WorkspaceNote string `json:"workspace_note"`
	// ToolCalls counts the nested calls the program made through code
	// mode's bridge, each decided and written to the audit log as a
	// code_call line (refused ones too); 0 for a run that could call none.
	ToolCalls int `json:"tool_calls"`
	// Session describes the run's session, and StateLost says that the
	// run found its session's state gone, or lost it: both only for a
	// run in a session (the query's sandbox.session is on).
	Session   *RunSession `json:"session,omitempty"`
	StateLost *StateLost  `json:"state_lost,omitempty"`
}

// RunSession is a run_result's session: runner.SessionInfo.
type RunSession struct {
	// Run is this run's number in its session, from 1.
	Run int `json:"run"`
	// StartedAt is when the session's sandbox started (RFC 3339, UTC,
	// milliseconds); AgeMS and IdleMS how old it was, and how long it had
	// waited, when this run began.
	StartedAt string `json:"started_at"`
	AgeMS     int64  `json:"age_ms"`
	IdleMS    int64  `json:"idle_ms"`
	// Restarts counts the query's sessions before this one that ended
	// other than by closing it.
	Restarts int `json:"restarts"`
	// PeakMemoryBytes is the session's peak memory so far (0: unknown).
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
}

// StateLost is a run_result's state_lost: runner.StateLost.
type StateLost struct {
	// Reason is a runner.SessionEndReason other than "closed".
	Reason string `json:"reason"`
	// Lost names what is gone, in words a model reads.
	Lost string `json:"lost"`
	// Fresh: this run ran in a fresh session (the old one ended before
	// it); false: this run's own session ended in it, and the next run
	// starts afresh.
	Fresh bool `json:"fresh"`
}

// TimeLayout is how a frame writes a time: RFC 3339 in UTC with
// milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// File is one file a run returns. Exactly one of Text, Base64 and Omitted
// is set.
type File struct {
	// Path is relative to /workspace.
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Change is "created", "modified" or "unchanged" (returned because
	// the run named it in outputs).
	Change string `json:"change"`
	// MediaType is its type, from its first bytes and name.
	MediaType string `json:"media_type"`
	// Text is the content of a text file (valid UTF-8 without control
	// characters but tab, newline and carriage return).
	Text *string `json:"text,omitempty"`
	// Base64 is the content of any other file, in standard base64.
	Base64 *string `json:"base64,omitempty"`
	// Omitted says why the content is left out.
	Omitted string `json:"omitted,omitempty"`
	// ToAgent marks a file the run returned to the agent's code only
	// (the run's to_agent): its content, if any, is in Base64, never in
	// Text, and a client never shows it to the model, only its handle
	// (path, size, sha256, media type).
	ToAgent bool `json:"to_agent,omitempty"`
}

// KeepForAgent marks the files that toAgent names (Run.ToAgent) as
// returned to the agent's code only, and moves a marked text file's
// content to Base64, so that a client that does not know the mark still
// never reads it out to the model as text. It returns the marked files.
func (r *RunReport) KeepForAgent(toAgent []string) []File {
	var kept []File
	for i := range r.Files {
		f := &r.Files[i]
		if !MatchesToAgent(f.Path, toAgent) {
			continue
		}
		f.ToAgent = true
		if f.Text != nil {
			b := base64.StdEncoding.EncodeToString([]byte(*f.Text))
			f.Text, f.Base64 = nil, &b
		}
		kept = append(kept, *f)
	}
	return kept
}

// MatchesToAgent reports whether the returned file p (relative to
// /workspace) is named by one of toAgent's entries: the same path, a
// directory holding it, or a path.Match pattern matching it. A leading
// "./" or "/workspace/" of an entry is ignored.
func MatchesToAgent(p string, toAgent []string) bool {
	for _, e := range toAgent {
		e = strings.TrimPrefix(strings.TrimPrefix(e, "/workspace/"), "./")
		e = strings.TrimSuffix(e, "/")
		if e == "." || e == "" || e == p || strings.HasPrefix(p, e+"/") {
			return true
		}
		if ok, _ := path.Match(e, p); ok {
			return true
		}
	}
	return false
}

// OmittedOverBudget is File.Omitted for a file whose content did not fit
// what was left of the run's sandbox.output.max_files_bytes.
const OmittedOverBudget = "over the run's budget of file content (sandbox.output.max_files_bytes)"

// NewRunReport is the report of res: the one place a runner.Result becomes
// the protocol's shape, and the booleans are derived from the reason.
func NewRunReport(res runner.Result) RunReport {
	files := make([]File, len(res.Files))
	for i, f := range res.Files {
		files[i] = newFile(f)
	}
	return RunReport{
		RunID: res.RunID, ExitCode: res.ExitCode, Reason: string(res.Reason),
		Stdout: res.Stdout, Stderr: res.Stderr, Truncated: res.Truncated,
		TimedOut: res.Reason == runner.TimedOut, OOMKilled: res.Reason == runner.OOMKilled,
		DurationMS: res.Duration.Milliseconds(), PeakMemoryBytes: res.PeakMemoryBytes,
		Image: res.Image, Runtime: string(res.Runtime),
		Files: files, FilesOmitted: res.FilesOmitted,
		Workspace: string(res.Workspace), WorkspaceNote: res.WorkspaceNote,
		ToolCalls: res.ToolCalls,
		Session:   newRunSession(res.Session), StateLost: newStateLost(res.StateLost),
	}
}

func newRunSession(s *runner.SessionInfo) *RunSession {
	if s == nil {
		return nil
	}
	return &RunSession{Run: s.Run, StartedAt: s.Started.UTC().Format(TimeLayout), AgeMS: s.Age.Milliseconds(),
		IdleMS: s.Idle.Milliseconds(), Restarts: s.Restarts, PeakMemoryBytes: s.PeakMemoryBytes}
}

func newStateLost(s *runner.StateLost) *StateLost {
	if s == nil {
		return nil
	}
	return &StateLost{Reason: string(s.Reason), Lost: s.Lost, Fresh: s.Fresh}
}

func newFile(f runner.File) File {
	out := File{Path: f.Path, Size: f.Size, SHA256: f.SHA256, Change: string(f.Change), MediaType: f.MediaType}
	switch {
	case f.Content == nil:
		out.Omitted = OmittedOverBudget
	case workspace.IsText(f.Content):
		text := string(f.Content)
		out.Text = &text
	default:
		b := base64.StdEncoding.EncodeToString(f.Content)
		out.Base64 = &b
	}
	return out
}

// QueryClosed answers CloseQuery.
type QueryClosed struct {
	ID      string `json:"id"`
	QueryID string `json:"query_id"`
}

// Error codes of the error frame, as listed in docs/protocol.md.
const (
	CodeMalformedFrame         = "malformed_frame"
	CodeDuplicateKey           = "duplicate_key"
	CodeUnknownType            = "unknown_type"
	CodeUnknownField           = "unknown_field"
	CodeMissingField           = "missing_field"
	CodeInvalidField           = "invalid_field"
	CodeHelloRequired          = "hello_required"
	CodeHelloRepeated          = "hello_repeated"
	CodeUnsupportedVersion     = "unsupported_version"
	CodeUnknownQuery           = "unknown_query"
	CodePolicyOverrideRejected = "policy_override_rejected"
	CodeTooManyRequests        = "too_many_requests"
	CodeTooManyQueries         = "too_many_queries"
	CodeRunDenied              = "run_denied"
	CodeRunnerUnavailable      = "runner_unavailable"
	CodeInternal               = "internal"
	// CodeUnknownApproval answers an approval whose id no ask waits for.
	CodeUnknownApproval = "unknown_approval"
)

// Error is the error frame: the answer to a request that had no effect, or
// the end of a run that did not run. It also implements error, so that code
// between the server and the frame can return it.
type Error struct {
	// ID is the request's id, or "" when it could not be read.
	ID string `json:"id"`
	// Code is one of the Code constants.
	Code string `json:"code"`
	// Message is written for a person or the model to read.
	Message string `json:"message"`
	// Violations lists every violation, for CodePolicyOverrideRejected.
	Violations []string `json:"violations,omitempty"`
	// Rule names the rule that refused, for CodeRunDenied.
	Rule string `json:"rule,omitempty"`
}

// Error returns the code and the message.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Type returns TypeWelcome.
func (Welcome) Type() string { return TypeWelcome }

// Type returns TypeQueryOpened.
func (QueryOpened) Type() string { return TypeQueryOpened }

// Type returns TypeDecision.
func (Decision) Type() string { return TypeDecision }

// Type returns TypeOutput.
func (Output) Type() string { return TypeOutput }

// Type returns TypeRunResult.
func (RunResult) Type() string { return TypeRunResult }

// Type returns TypeQueryClosed.
func (QueryClosed) Type() string { return TypeQueryClosed }

// Type returns TypeError.
func (Error) Type() string { return TypeError }

func (Welcome) isReply()     {}
func (QueryOpened) isReply() {}
func (Decision) isReply()    {}
func (Output) isReply()      {}
func (RunResult) isReply()   {}
func (QueryClosed) isReply() {}
func (Error) isReply()       {}

// MarshalJSON writes the frame, "type" first.
func (w Welcome) MarshalJSON() ([]byte, error) {
	type fields Welcome
	return marshalFrame(TypeWelcome, fields(w))
}

// MarshalJSON writes the frame, "type" first.
func (q QueryOpened) MarshalJSON() ([]byte, error) {
	type fields QueryOpened
	return marshalFrame(TypeQueryOpened, fields(q))
}

// MarshalJSON writes the frame, "type" first.
func (d Decision) MarshalJSON() ([]byte, error) {
	type fields Decision
	return marshalFrame(TypeDecision, fields(d))
}

// MarshalJSON writes the frame, "type" first.
func (o Output) MarshalJSON() ([]byte, error) {
	type fields Output
	return marshalFrame(TypeOutput, fields(o))
}

// MarshalJSON writes the frame, "type" first.
func (r RunResult) MarshalJSON() ([]byte, error) {
	type fields RunResult
	return marshalFrame(TypeRunResult, fields(r))
}

// MarshalJSON writes the frame, "type" first.
func (q QueryClosed) MarshalJSON() ([]byte, error) {
	type fields QueryClosed
	return marshalFrame(TypeQueryClosed, fields(q))
}

// MarshalJSON writes the frame, "type" first.
func (e Error) MarshalJSON() ([]byte, error) {
	type fields Error
	return marshalFrame(TypeError, fields(e))
}
