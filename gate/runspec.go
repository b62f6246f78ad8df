package gate

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// RunRequest is one sandboxed run as a client asks for it: the fields of
// a run frame (docs/protocol.md), or of gatekeeper run's flags.
type RunRequest struct {
	// RunID, QueryID and ToolUseID label the run; ToolUseID is empty for a
	// run no model asked for (gatekeeper run).
	RunID, QueryID, ToolUseID string
	// Language is one of runner.LanguageNames.
	Language string
	// Code is the program text; it may be empty.
	Code string
	// Files maps paths relative to /workspace to their content; the Spec
	// shares the map.
	Files map[string]string
	// TimeoutMS is the timeout asked for, in milliseconds; nil means the
	// policy's sandbox.proc.timeout.
	TimeoutMS *int64
	// Outputs names the files and directories of /workspace whose files
	// the run returns (runner.Spec.Outputs).
	Outputs []string
	// ToolServers and Auditor, when both are set and the policy's
	// code_calls.callable names a server, give the run a bridge: the Spec's
	// Tools decides, makes and audits its program's nested calls
	// (Effective.CodeCaller). Without them the run has none.
	ToolServers ToolServers
	Auditor     Auditor
	// Approver answers the policy's asks on the run's nested calls; nil
	// denies them.
	Approver Approver
	// Wrappers, when set and the run has a bridge, makes the Spec's
	// ToolFiles: the typed wrappers of the tools its code may call.
	Wrappers *Wrappers
	// SessionID, when set and the effective policy's sandbox.session is
	// on, runs the Spec in that session (runner.Spec.Session): the
	// sidecar makes one per query and never reuses it. SessionEvents
	// receives the session's starts and ends. Without an ID (gatekeeper
	// run) every run is single use.
	SessionID     string
	SessionEvents func(runner.SessionEvent)
	// LookupEnv reads the sidecar's environment for the run's secrets
	// ({from_env}); nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// RunRequestError is a run request its effective policy does not let
// start: Field names the policy field whose limit it passes (or the
// request field it gets wrong), and Error says by how much, in the words
// the sidecar's invalid_field error frame carries.
type RunRequestError struct {
	Field   string
	Message string
}

func (e *RunRequestError) Error() string { return e.Message }

// RunSpec checks r against the effective policy and builds the runner's
// Spec: the timeout asked for may not pass sandbox.proc.timeout (none
// asked is that timeout), the files may not pass sandbox.output.max_files
// or max_files_bytes, and the sandbox is RunnerSandbox's. A request past a
// limit is a *RunRequestError; any other error means the policy cannot
// become a sandbox and the run must not start. This is the one path from
// an effective policy to a run: the sidecar's run handler and gatekeeper
// run both take it, so that neither runs what the other would refuse.
//
// A networked run gets the effective sandbox.net.secrets, their values
// read now (an unreadable or empty one is an error naming it and its
// source: the run must not start), and Spec.Requests, the HTTPJudge that
// decides its requests to intercepted hosts.
//
// The Spec runs in the request's session when the policy turns sessions
// on and the request names one (RunRequest.SessionID).
//
// The Spec has no Workspace and no OnOutput: the sidecar attaches the
// query's saved workspace once the query's earlier runs are done with it,
// and a run without a query (gatekeeper run) starts from an empty one.
// ctx bounds listing the MCP servers' tools for the wrappers.
func (eff *Effective) RunSpec(ctx context.Context, r RunRequest) (runner.Spec, error) {
	if !slices.Contains(runner.LanguageNames(), r.Language) {
		return runner.Spec{}, &RunRequestError{Field: "language", Message: fmt.Sprintf("run: language %q is not one of %s", r.Language, strings.Join(runner.LanguageNames(), ", "))}
	}
	timeout := eff.Policy.Sandbox.Proc.Timeout.Std()
	if r.TimeoutMS != nil {
		asked := time.Duration(*r.TimeoutMS) * time.Millisecond
		if *r.TimeoutMS <= 0 {
			return runner.Spec{}, &RunRequestError{Field: "timeout_ms", Message: fmt.Sprintf("run: timeout_ms %d is not a positive number of milliseconds", *r.TimeoutMS)}
		}
		if asked > timeout {
			return runner.Spec{}, &RunRequestError{Field: "sandbox.proc.timeout", Message: fmt.Sprintf("run: timeout_ms %d exceeds the query's sandbox.proc.timeout of %s", *r.TimeoutMS, timeout)}
		}
		timeout = asked
	}
	out := eff.Policy.Sandbox.Output
	var filesBytes int64
	for _, data := range r.Files {
		filesBytes += int64(len(data))
	}
	if len(r.Files) > out.MaxFiles || filesBytes > int64(out.MaxFilesBytes) {
		field := "sandbox.output.max_files_bytes"
		if len(r.Files) > out.MaxFiles {
			field = "sandbox.output.max_files"
		}
		return runner.Spec{}, &RunRequestError{Field: field, Message: fmt.Sprintf("run: files holds %d files of %d bytes; the query's sandbox.output allows %d files of %s (max_files, max_files_bytes)", len(r.Files), filesBytes, out.MaxFiles, out.MaxFilesBytes)}
	}
	sb, err := eff.RunnerSandbox()
	if err != nil {
		return runner.Spec{}, err
	}
	lookup := r.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if err := eff.readSecrets(&sb.Network, lookup); err != nil {
		return runner.Spec{}, err
	}
	spec := runner.Spec{
		RunID: r.RunID, QueryID: r.QueryID, Language: runner.Language(r.Language), Code: r.Code,
		Files: r.Files, Timeout: timeout, Sandbox: sb, Outputs: r.Outputs,
	}
	if sess := eff.Policy.Sandbox.Session; sess.On() && r.SessionID != "" {
		spec.Session = &runner.Session{ID: r.SessionID, IdleTimeout: sess.IdleTimeout.Std(), MaxLifetime: sess.MaxLifetime.Std(),
			Revision: eff.Revision, Events: r.SessionEvents}
	}
	if r.ToolUseID != "" {
		spec.Labels = map[string]string{"gatekeeper.tool_use_id": r.ToolUseID}
	}
	if sb.Network.Enabled {
		// Its requests to intercepted hosts are decided under this
		// policy's revision, as its nested calls are.
		spec.Requests = eff.HTTPJudge(r.RunID, r.QueryID)
	}
	spec.Caller = eff.CodeCaller(r, r.ToolServers, r.Auditor)
	if spec.Caller != nil && r.Wrappers != nil {
		if spec.ToolFiles, err = r.Wrappers.Files(ctx, eff); err != nil {
			return runner.Spec{}, err
		}
	}
	return spec, nil
}
