package claudecode

import (
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
)

// FormatRunResult is the text the model reads for a finished run, exactly
// as @gatekeeper/client's formatRunResult writes it (a test pins the two
// with the files in testdata/run-results). A file's name is quoted
// (untrusted.Quote), so that no name can add a line of its own.
func FormatRunResult(r *wire.RunResult) string {
	lines := []string{"exit code " + strconv.Itoa(r.ExitCode) + " (" + r.Reason + ") after " + strconv.FormatInt(r.DurationMS, 10) + " ms"}
	var flags []string
	if r.Truncated {
		flags = append(flags, "output truncated")
	}
	if r.TimedOut {
		flags = append(flags, "timed out")
	}
	if r.OOMKilled {
		flags = append(flags, "killed: out of memory")
	}
	if len(flags) > 0 {
		lines = append(lines, "note: "+strings.Join(flags, ", "))
	}
	lines = append(lines, "truncated="+strconv.FormatBool(r.Truncated)+" timed_out="+strconv.FormatBool(r.TimedOut)+" oom_killed="+strconv.FormatBool(r.OOMKilled))
	lines = append(lines, stream("stdout", r.Stdout), stream("stderr", r.Stderr))
	rep := structured(r)
	for _, f := range rep.Files {
		line := "file " + untrusted.Quote(f.Path) + " (" + f.Change + ", " + strconv.FormatInt(f.Size, 10) + " bytes, " + f.MediaType + ")"
		if f.Note != "" {
			line += ": " + f.Note
		}
		if f.Text != nil {
			line += ":\n" + *f.Text
		}
		lines = append(lines, line)
	}
	if rep.FilesOmitted > 0 {
		lines = append(lines, strconv.Itoa(rep.FilesOmitted)+" more files not returned (the policy's sandbox.output.max_files)")
	}
	if rep.WorkspaceNote != "" {
		lines = append(lines, "workspace: "+rep.WorkspaceNote)
	}
	if rep.ToolCalls > 0 {
		lines = append(lines, "tool calls: "+strconv.Itoa(rep.ToolCalls)+" (each decided by gatekeeper's policy)")
	}
	return strings.Join(lines, "\n")
}

func stream(name, text string) string {
	if text == "" {
		return name + ": (empty)"
	}
	return name + ":\n" + text
}

// runOutcome is the run tool's structuredContent: the same object as
// @gatekeeper/client's runReport (SandboxRunReport), its keys in the same
// order (the CLI passes it to the model as JSON); the files in
// testdata/run-results pin the two.
type runOutcome struct {
	ExitCode      int          `json:"exit_code"`
	Reason        string       `json:"reason"`
	Stdout        string       `json:"stdout"`
	Stderr        string       `json:"stderr"`
	Truncated     bool         `json:"truncated"`
	TimedOut      bool         `json:"timed_out"`
	OOMKilled     bool         `json:"oom_killed"`
	DurationMS    int64        `json:"duration_ms"`
	Files         []reportFile `json:"files,omitempty"`
	FilesOmitted  int          `json:"files_omitted,omitempty"`
	Workspace     string       `json:"workspace,omitempty"`
	WorkspaceNote string       `json:"workspace_note,omitempty"`
	ToolCalls     int          `json:"tool_calls,omitempty"`
}

// reportFile is a returned file as the model reads it.
type reportFile struct {
	Path      string  `json:"path"`
	Size      int64   `json:"size"`
	Change    string  `json:"change"`
	MediaType string  `json:"media_type"`
	Text      *string `json:"text,omitempty"`
	Note      string  `json:"note,omitempty"`
}

// The images a model can be shown, and how much text it reads inline (in
// UTF-16 code units, as @gatekeeper/client counts them), as
// ts-client/src/sandboxed-code.ts has them.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

const (
	inlineFileChars  = 8000
	inlineTotalChars = 24000
)

func structured(r *wire.RunResult) runOutcome {
	out := runOutcome{ExitCode: r.ExitCode, Reason: r.Reason, Stdout: r.Stdout, Stderr: r.Stderr,
		Truncated: r.Truncated, TimedOut: r.TimedOut, OOMKilled: r.OOMKilled, DurationMS: r.DurationMS,
		FilesOmitted: r.FilesOmitted, Workspace: r.Workspace, WorkspaceNote: r.WorkspaceNote, ToolCalls: r.ToolCalls}
	room := inlineTotalChars
	for _, f := range r.Files {
		rf := reportFile{Path: f.Path, Size: f.Size, Change: f.Change, MediaType: f.MediaType}
		switch {
		case f.Omitted != "":
			rf.Note = "content not returned: " + f.Omitted
		case imageTypes[f.MediaType] && f.Base64 != nil:
			rf.Note = "shown to you as an image"
		case f.Text != nil:
			text, n, total := utf16Prefix(*f.Text, min(inlineFileChars, room))
			rf.Text = &text
			room -= n
			if n < total {
				rf.Note = "only its first " + strconv.Itoa(n) + " of " + strconv.Itoa(total) + " characters are shown; read the rest with a run"
			}
		default:
			rf.Note = "binary content, not shown"
		}
		out.Files = append(out.Files, rf)
	}
	return out
}

// utf16Prefix is the longest prefix of s of at most limit UTF-16 code
// units that cuts no character, its length in code units, and the length
// of s in code units.
func utf16Prefix(s string, limit int) (prefix string, n, total int) {
	end := -1
	for i, r := range s {
		w := utf16.RuneLen(r)
		if w < 0 {
			w = 1 // invalid UTF-8 decodes as U+FFFD
		}
		if end < 0 && total+w > limit {
			end, n = i, total
		}
		total += w
	}
	if end < 0 {
		return s, total, total
	}
	return s[:end], n, total
}

// imageBlocks are the images a run returned, as MCP image content.
func imageBlocks(r *wire.RunResult) []any {
	var out []any
	for _, f := range r.Files {
		if imageTypes[f.MediaType] && f.Base64 != nil {
			out = append(out, map[string]any{"type": "image", "data": *f.Base64, "mimeType": f.MediaType})
		}
	}
	return out
}
