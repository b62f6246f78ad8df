package launch

import (
	"fmt"
	"io"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// Input is what one run sends its sandbox on standard input: the header
// and a tar of its workspace (the saved snapshot, the code and the files).
type Input struct {
	// Program starts the run's language.
	Program Program
	// Files are the code and files, by clean path (workspace.Files), and
	// Need the tmpfs space they take.
	Files map[string]string
	Need  int64
	// Tag is the run's tag for its end marks (see EndMarks).
	Tag string
	// Saved is the saved workspace the run starts from; nil: empty
	// (OpenSaved).
	Saved io.ReadCloser
	// InPlace: the sandbox is a session's that already holds Saved in
	// /workspace; only the run's code and files are sent.
	InPlace bool
}

// Check validates the parts of spec every backend enforces alike (the
// language, the timeout, the uid and gid, the limits, the files and
// outputs) and returns the run's Input, without its saved workspace. Each
// problem is a phrase; a backend adds its own (image, runtime, network)
// and refuses the Spec with all of them, wrapped in runner.ErrInvalidSpec.
// minMemory is the smallest memory limit the backend's engine accepts.
// The Input is nil when the language is unknown.
func Check(spec runner.Spec, minMemory int64) (*Input, []string) {
	sb := spec.Sandbox
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	prog, ok := ProgramFor(spec.Language)
	if !ok {
		bad("unknown language %q", spec.Language)
	}
	if spec.Timeout <= 0 {
		bad("timeout %v is not positive", spec.Timeout)
	}
	if sb.UID == 0 {
		bad("uid 0 (root) is refused")
	} else if sb.UID < 0 {
		bad("uid %d is negative", sb.UID)
	}
	if sb.GID == 0 {
		bad("gid 0 (root) is refused")
	} else if sb.GID < 0 {
		bad("gid %d is negative", sb.GID)
	}
	if !(sb.CPUs > 0) || sb.CPUs > 1024 {
		bad("cpus %v is out of range", sb.CPUs)
	}
	if sb.MemoryBytes < minMemory {
		bad("memory %d bytes is below the minimum of %d", sb.MemoryBytes, minMemory)
	}
	if sb.PIDs <= 0 {
		bad("pids %d is not positive", sb.PIDs)
	}
	if sb.WorkspaceBytes <= 0 {
		bad("workspace size %d is not positive", sb.WorkspaceBytes)
	}
	if sb.TmpBytes <= 0 {
		bad("tmp size %d is not positive", sb.TmpBytes)
	}
	if sb.MaxOutputBytes <= 0 {
		bad("max output %d is not positive", sb.MaxOutputBytes)
	}
	if sb.MaxFiles < 0 || sb.MaxFilesBytes < 0 {
		bad("max files %d, max files bytes %d: neither may be negative", sb.MaxFiles, sb.MaxFilesBytes)
	}
	if _, err := workspace.CleanOutputs(spec.Outputs); err != nil {
		bad("%v", err)
	}
	if !ok {
		return nil, problems
	}
	in := &Input{Program: prog}
	files, need, err := workspace.Files(prog.Main, spec.Code, spec.Files)
	if err != nil {
		bad("%v", err)
	} else if sb.WorkspaceBytes > 0 && need > sb.WorkspaceBytes {
		bad("code and files need %d bytes, the workspace holds %d", need, sb.WorkspaceBytes)
	}
	in.Files, in.Need, in.Tag = files, need, NewTag()
	if spec.Caller != nil {
		problems = append(problems, checkToolFiles(spec.ToolFiles, sb.TmpBytes)...)
	} else if len(spec.ToolFiles) > 0 {
		bad("tool files without tools")
	}
	return in, problems
}

// OpenSaved opens the saved snapshot of spec's Workspace into in, and
// refuses the run (runner.ErrInvalidSpec) when the workspace would hold
// more than its size once the run's code and files are unpacked over it.
// CloseSaved closes it.
func (in *Input) OpenSaved(spec runner.Spec) error {
	if spec.Workspace == nil {
		return nil
	}
	saved, bytes, err := spec.Workspace.Saved()
	if err != nil {
		return fmt.Errorf("open the saved workspace: %w", err)
	}
	if saved == nil {
		return nil
	}
	total := bytes + in.Need
	if rs, ok := saved.(io.ReadSeeker); ok {
		total, err = workspace.MergedBytes(rs, bytes, in.Files, in.Need)
		if err == nil {
			_, err = rs.Seek(0, io.SeekStart)
		}
		if err != nil {
			_ = saved.Close()
			return err
		}
	}
	if size := spec.Sandbox.WorkspaceBytes; total > size {
		_ = saved.Close()
		return fmt.Errorf("%w: the saved %s takes %d bytes, with this run's code and files %d: more than the workspace's %d (remove files in a run, or ask for a larger sandbox.fs.workspace.size)",
			runner.ErrInvalidSpec, WorkspaceDir, bytes, total, size)
	}
	in.Saved = saved
	return nil
}

// CloseSaved closes the saved snapshot, if one was opened.
func (in *Input) CloseSaved() {
	if in.Saved != nil {
		_ = in.Saved.Close()
	}
}

// Write writes the header and the tar of the workspace (the saved
// snapshot, the code and the files) to w, a sandbox's standard input, and
// returns the files the tar holds. Without spec.Tools the caller closes w
// afterwards, also after an error, so that the launcher's tar sees the
// stream end. With spec.Tools the header names the bridge's line limit,
// and the wrapper files and the workspace follow in frames init reads
// (see initBridge), the workspace's ended by a frame of its own: the
// caller keeps w open for the Bridge's answers, and closes it when the
// run ended (or after an error).
func (in *Input) Write(w io.Writer, spec runner.Spec) (workspace.Manifest, error) {
	header := Header(spec.Timeout, spec.Language, in.Tag, WantsSnapshot(spec))
	if spec.Caller != nil {
		header = append(header[:len(header)-1], fmt.Sprintf(" %d\n", lineMax(spec.Sandbox.Calls))...)
	}
	if _, err := w.Write(header); err != nil {
		return nil, err
	}
	var saved io.Reader
	if in.Saved != nil {
		saved = in.Saved
	}
	input := workspace.Input{Saved: saved, Files: in.Files, UID: spec.Sandbox.UID, GID: spec.Sandbox.GID, SavedInPlace: in.InPlace}
	if spec.Caller == nil && spec.Session == nil {
		return workspace.WriteInput(w, input)
	}
	if spec.Caller == nil {
		// A session's init reads its input in frames, as with tools, so
		// that its standard input stays open for the next run's header.
		man, err := workspace.WriteInput(workspaceFrames{w}, input)
		if err != nil {
			return nil, err
		}
		_, err = io.WriteString(w, "w 0\n")
		return man, err
	}
	tools, err := toolsPack(spec.ToolFiles)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(w, "f %d\n%s", len(tools), tools); err != nil {
		return nil, err
	}
	man, err := workspace.WriteInput(workspaceFrames{w}, input)
	if err != nil {
		return nil, err
	}
	_, err = io.WriteString(w, "w 0\n")
	return man, err
}

// workspaceFrames writes each piece of the workspace tar as a "w" frame.
type workspaceFrames struct{ w io.Writer }

func (f workspaceFrames) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // "w 0" ends the workspace
	}
	if _, err := fmt.Fprintf(f.w, "w %d\n", len(p)); err != nil {
		return 0, err
	}
	return f.w.Write(p)
}
