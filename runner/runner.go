// Package runner holds the contract between the gate and a sandbox backend:
// a Spec describing one run of untrusted code and the Result it produced.
// Backends (runner/docker, runner/kube: runner/sandbox's runner over
// their platform) implement Run; callers define the small
// interface they need where they use it.
package runner

import (
	"io"
	"time"
)

// Language names the interpreter a run uses.
type Language string

// Languages a Spec may ask for. A backend whose image lacks the interpreter
// returns an error wrapping ErrLanguageUnavailable that names the image.
// This is gatekeeper's one declaration of its run languages: the wire
// codec, the policy's input (and so rego's run.bad_language), the CLI and
// the docs take them from Languages, and tests pin the TypeScript copies
// (ts-client) and each backend's interpreters to it.
const (
	Python Language = "python"
	Shell  Language = "sh"
	Node   Language = "node"
)

// Languages returns every Language, in the order messages list them.
func Languages() []Language { return []Language{Python, Shell, Node} }

// LanguageNames returns Languages as strings.
func LanguageNames() []string {
	ls := Languages()
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = string(l)
	}
	return out
}

// Stream names an output stream of a run.
type Stream string

// The two output streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Runtime names the OCI runtime a container runs under.
type Runtime string

// Runtimes gatekeeper knows. Asking for one the engine lacks is an error
// wrapping ErrRuntimeUnavailable, never a fallback.
const (
	Runc  Runtime = "runc"
	Runsc Runtime = "runsc"
)

// Sandbox is the fully resolved sandbox policy of one run: every limit is
// concrete. The zero value is not runnable; the gate builds a Sandbox from
// the query's effective policy.
type Sandbox struct {
	// Image is the container image reference (a local tag or ID).
	Image string
	// Runtime is the OCI runtime; empty means Runc.
	Runtime Runtime
	// UID and GID the code runs as; UID 0 is refused.
	UID, GID int
	// CPUs is the CPU quota in cores (0.5 = half a core).
	CPUs float64
	// MemoryBytes is the memory limit; swap is set equal to it (no swap).
	MemoryBytes int64
	// PIDs is the maximum number of processes and threads.
	PIDs int64
	// WorkspaceBytes is the size of the /workspace tmpfs.
	WorkspaceBytes int64
	// TmpBytes is the size of the /tmp tmpfs.
	TmpBytes int64
	// DepsDir is a host directory mounted read-only at /deps; empty means none.
	DepsDir string
	// DenyGlobs are host path globs (already ~-expanded) a DepsDir must not
	// match or contain.
	DenyGlobs []string
	// Network is the network policy; the zero value means no network at all.
	Network Network
	// MaxOutputBytes caps stdout and stderr each; output beyond it is
	// discarded while streaming and Result.Truncated is set.
	MaxOutputBytes int64
	// MaxFiles is the most files of /workspace a run returns
	// (Result.Files); 0 returns none.
	MaxFiles int
	// MaxFilesBytes is the most bytes of file content a run returns, all
	// files together; a file past it is listed without its content.
	MaxFilesBytes int64
	// Calls bounds the nested calls of a run with Spec.Caller; the zero
	// value allows none.
	Calls CallLimits
}

// Network is the network part of a Sandbox.
type Network struct {
	// Enabled false means the container has no network interface but loopback.
	Enabled bool
	// Allow and Deny are host patterns ("example.com", "*.example.com",
	// "host:443"); Deny always wins.
	Allow, Deny []string
	// Inspect are host patterns whose traffic the egress proxy terminates
	// (TLS with a certificate of the sidecar's CA) so that each request is
	// decided on its own (Spec.Requests). Secrets' hosts are intercepted
	// too. Every other allowed host is a plain tunnel.
	Inspect []string
	// Secrets are the credentials the run may use but never read.
	Secrets []Secret
	// BodyPreview is how many bytes of a request body the policy sees.
	BodyPreview int64
}

// Spec is one run: what to execute and under which sandbox.
type Spec struct {
	// RunID identifies the run in labels, audit lines and logs.
	RunID string
	// QueryID is the agent query the run belongs to (a label).
	QueryID string
	// Language selects the interpreter.
	Language Language
	// Code is the program text, written to /workspace as the main file.
	Code string
	// Files are extra files, keyed by a path relative to /workspace, their
	// content as bytes (text or binary); a path that would leave
	// /workspace is refused. They replace what the saved workspace holds
	// at their paths.
	Files map[string]string
	// Workspace, when set, is the saved /workspace the run starts from and,
	// when the program ended by itself, replaces with what it left there
	// (Result.Workspace says whether it did). nil starts from an empty
	// /workspace that is discarded with the container.
	Workspace Workspace
	// Outputs names files and directories of /workspace (paths relative to
	// it, "." for all) whose files the run returns in Result.Files, changed
	// or not. nil returns the files the run created or changed, except
	// those below a hidden directory, node_modules or __pycache__
	// (installed dependencies and caches).
	Outputs []string
	// Timeout is the wall-clock limit; the container is killed when it
	// passes and Result.Reason is TimedOut.
	Timeout time.Duration
	// Sandbox is the resolved policy the container enforces.
	Sandbox Sandbox
	// Labels are extra container labels. A backend that runs code in a
	// sandbox made before the run (runner/docker's warm pool) cannot label
	// it with the run: it logs RunID, QueryID and Labels with the
	// sandbox's id instead.
	Labels map[string]string
	// OnOutput, when set, receives output as it arrives, in order per
	// stream, after truncation to MaxOutputBytes. It is called from the
	// backend's goroutines and must not block for long. The slice is only
	// valid during the call: copy what you keep (the backend does not, so
	// an output flood is not copied once more than needed).
	OnOutput func(Stream, []byte)
	// Caller executes the program's nested calls through the bridge (see
	// runner/launch, Bridge); nil: the run has no bridge.
	Caller ToolCaller
	// ToolFiles are the wrapper files of a run with Tools, by a path
	// relative to the sandbox's tools directory (launch.ToolsDir), made
	// read-only there before the program starts; never in /workspace.
	ToolFiles map[string][]byte
	// Session, when set, runs the Spec in its query's session (see
	// Session); nil runs it in a sandbox of its own.
	Session *Session
	// Requests decides the run's requests to intercepted hosts
	// (Network.Inspect and Secrets' hosts); nil refuses every one.
	Requests RequestJudge
}

// Workspace is the saved /workspace of a sequence of runs (a query's). A
// backend reads the saved snapshot when a run starts and, when the program
// ended by itself, writes a new one into TempDir and hands it to Replace.
// Snapshots are tar streams in the form runner/workspace writes them. The
// caller serializes the runs of one Workspace: two runs at once would both
// start from the same snapshot.
type Workspace interface {
	// Saved opens the saved snapshot and returns the tmpfs space its files
	// take (whole pages); a nil reader means an empty workspace.
	Saved() (snapshot io.ReadCloser, bytes int64, err error)
	// Replace makes the snapshot in file path (in TempDir), whose files
	// take bytes, the saved one, taking the file over; on error the
	// previous snapshot stays and path is removed.
	Replace(path string, bytes int64) error
	// TempDir is where a backend writes a snapshot as it arrives.
	TempDir() string
}

// WorkspaceState says what became of a run's Workspace.
type WorkspaceState string

// Workspace states of a run with a Spec.Workspace; a run without one
// reports "".
const (
	// WorkspaceSaved: the run's /workspace replaced the saved one.
	WorkspaceSaved WorkspaceState = "saved"
	// WorkspaceNotSaved: the saved workspace is as it was before the run
	// (the run timed out, was cancelled, or its snapshot was refused;
	// Result.WorkspaceNote says why).
	WorkspaceNotSaved WorkspaceState = "not_saved"
)

// FileChange says how a run changed a file it returns.
type FileChange string

// File changes.
const (
	FileCreated   FileChange = "created"
	FileModified  FileChange = "modified"
	FileUnchanged FileChange = "unchanged" // returned because Spec.Outputs named it
)

// File is a file of /workspace a run returns.
type File struct {
	// Path is relative to /workspace.
	Path string
	// Size is its length in bytes.
	Size int64
	// SHA256 is the hex SHA-256 of its content.
	SHA256 string
	Change FileChange
	// MediaType is its type as its first bytes and name show it, such as
	// "image/png" or "text/plain; charset=utf-8".
	MediaType string
	// Content is the file's bytes; nil when Sandbox.MaxFilesBytes left no
	// room for it (an empty file has a non-nil, empty Content).
	Content []byte
}

// ExitReason says why a run ended.
type ExitReason string

// Exit reasons, from most to least specific.
const (
	Exited    ExitReason = "exited"     // the program ended by itself
	TimedOut  ExitReason = "timed_out"  // the wall-clock timeout killed it
	OOMKilled ExitReason = "oom_killed" // the memory limit killed it
	Cancelled ExitReason = "cancelled"  // the caller's context ended first
)

// ExitReasons returns every ExitReason, in the order above.
func ExitReasons() []ExitReason { return []ExitReason{Exited, TimedOut, OOMKilled, Cancelled} }

// Result is what a run produced. It is gatekeeper's one declaration of a
// run's outcome: the wire protocol's run_result (gate/wire.NewRunReport,
// which `gatekeeper serve` and `gatekeeper run` both use), the audit log's
// run line and the TypeScript client's copy are derived from it, and tests
// pin the copies. Why the run ended is Reason alone: the protocol's
// timed_out and oom_killed booleans are computed from it in one place
// (wire.NewRunReport), so they cannot disagree with it.
type Result struct {
	RunID string
	// Reason says why the run ended; ExitCode is meaningful for all reasons
	// (137 after a kill).
	Reason   ExitReason
	ExitCode int
	// Stdout and Stderr hold at most Sandbox.MaxOutputBytes each.
	Stdout, Stderr string
	// Truncated is true when either stream exceeded the cap.
	Truncated bool
	Duration  time.Duration
	// PeakMemoryBytes is the highest memory use observed (0 if unknown).
	PeakMemoryBytes int64
	// Image and Runtime say what actually ran the code.
	Image   string
	Runtime Runtime
	// Files are files of /workspace the run returns (see Spec.Outputs),
	// sorted by path, at most Sandbox.MaxFiles; none when the run did not
	// end by itself. FilesOmitted counts the files past MaxFiles.
	Files        []File
	FilesOmitted int
	// Workspace says what became of Spec.Workspace ("" without one), and
	// WorkspaceNote why it was not saved.
	Workspace     WorkspaceState
	WorkspaceNote string
	// ToolCalls counts the calls the program made through the bridge, all
	// outcomes.
	ToolCalls int
	// Session describes the run's session (nil for a run without one),
	// and StateLost, when set, says that the run found its session's
	// state gone, or lost it (see StateLost).
	Session   *SessionInfo
	StateLost *StateLost
}

// Labels every backend puts on what it makes for a run (a container or a
// Pod, and a network or NetworkPolicy): the sidecar instance that made it
// (Cleanup finds a crashed instance's leftovers by it), the run and the
// query. LabelPool marks a warm sandbox of the pool, with the key of the
// sandbox it was made for; such a sandbox has no run or query label. The
// keys are valid Docker labels and Kubernetes label keys alike.
const (
	LabelInstance = "gatekeeper.instance"
	LabelRunID    = "gatekeeper.run_id"
	LabelQueryID  = "gatekeeper.query_id"
	LabelPool     = "gatekeeper.pool"
)
