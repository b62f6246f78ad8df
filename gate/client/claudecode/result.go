package claudecode

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FormatRunResult is the text the model reads for a finished run, exactly
// as @gatekeeper/client's formatRunResult writes it (a test pins the two
// with the files in testdata/run-results).
//
// Gatekeeper's fields come first, one line each, a file's name quoted
// (untrusted.Quote) so that no name can add a line of its own. The
// program's text (stdout, stderr, the text of returned files) follows, each
// part between a line "<<< F name" and a line ">>> F name", where the fence
// F is one that none of the program's text contains (outputFence): printed
// output cannot end its part early, and a line it prints that looks like a
// field is inside the fence, where the model reads it as the program's.
// A run whose session lost its state gets a line saying so after the exit
// fields, before the output's (stateLostLine). A later addition to the
// result adds a field line or a part here.
func FormatRunResult(r *wire.RunResult) string {
	rep := structured(r)
	fields := []string{"exit code " + strconv.Itoa(r.ExitCode) + " (" + r.Reason + ") after " + strconv.FormatInt(r.DurationMS, 10) + " ms"}
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
		fields = append(fields, "note: "+strings.Join(flags, ", "))
	}
	fields = append(fields, "truncated="+strconv.FormatBool(r.Truncated)+" timed_out="+strconv.FormatBool(r.TimedOut)+" oom_killed="+strconv.FormatBool(r.OOMKilled))
	if rep.StateLost != nil {
		fields = append(fields, stateLostLine(rep.StateLost))
	}
	var parts []outputPart
	for _, s := range []outputPart{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
		if s.text == "" {
			fields = append(fields, s.name+": (empty)")
			continue
		}
		fields = append(fields, s.name+": below")
		parts = append(parts, s)
	}
	for _, f := range rep.Files {
		name := "file " + untrusted.Quote(f.Path)
		line := name + " (" + f.Change + ", " + strconv.FormatInt(f.Size, 10) + " bytes, " + f.MediaType + ")"
		sep := ": "
		if f.Note != "" {
			line += sep + f.Note
			sep = "; "
		}
		if f.Text != nil && *f.Text != "" {
			line += sep + "text below"
			parts = append(parts, outputPart{name, *f.Text})
		}
		fields = append(fields, line)
	}
	if rep.FilesOmitted > 0 {
		fields = append(fields, strconv.Itoa(rep.FilesOmitted)+" more files not returned (the policy's sandbox.output.max_files)")
	}
	if rep.WorkspaceNote != "" {
		fields = append(fields, "workspace: "+rep.WorkspaceNote)
	}
	if rep.ToolCalls > 0 {
		fields = append(fields, "tool calls: "+strconv.Itoa(rep.ToolCalls)+" (each decided by gatekeeper's policy)")
	}
	if len(parts) == 0 {
		return strings.Join(fields, "\n")
	}
	fence := outputFence(parts)
	fields = append(fields, `the program's output follows, each part between a line "<<< `+fence+` <part>" and a line ">>> `+fence+` <part>"; no output contains `+fence)
	var b strings.Builder
	b.WriteString(strings.Join(fields, "\n"))
	for _, p := range parts {
		b.WriteString("\n<<< " + fence + " " + p.name + "\n" + p.text)
		if !strings.HasSuffix(p.text, "\n") {
			b.WriteString("\n")
		}
		b.WriteString(">>> " + fence + " " + p.name)
	}
	return b.String()
}

// stateLostLine is FormatRunResult's line for a run whose session lost
// its state: why, what is gone, and what the model should do about it.
func stateLostLine(l *wire.StateLost) string {
	next := "The next run starts in a fresh session."
	if l.Fresh {
		next = "This run started in a fresh session: rebuild what it needs."
	}
	return "state lost (" + l.Reason + "): " + l.Lost + ". " + next
}

// outputPart is one fenced part of the text: its name (a quoted file name
// for a file) and the program's text.
type outputPart struct{ name, text string }

// outputFence is the fence of a result whose program text is parts: the
// first 16 hex digits of SHA-256(seed + decimal n) for the first n = 0, 1,
// ... whose fence no part's name or text contains, where seed is the
// SHA-256 of each part as "<name's UTF-8 bytes>:<name><text's UTF-8
// bytes>:<text>". The check makes the fence absent by construction; the
// hash makes it depend on all of the output, so a program cannot know it
// while it writes (n past 0 takes a 64-bit collision with its own output).
// @gatekeeper/client's outputFence is the same function.
func outputFence(parts []outputPart) string {
	h := sha256.New()
	for _, p := range parts {
		for _, s := range []string{p.name, p.text} {
			io.WriteString(h, strconv.Itoa(len(s))+":"+s)
		}
	}
	seed := h.Sum(nil)
	return firstAbsent(parts, func(n int) string {
		return digest.SHA256(append(slices.Clip(seed), strconv.Itoa(n)...))[:16]
	})
}

// firstAbsent is candidate(n) for the least n that no part's name or
// text contains.
func firstAbsent(parts []outputPart, candidate func(n int) string) string {
	for n := 0; ; n++ {
		c := candidate(n)
		if !slices.ContainsFunc(parts, func(p outputPart) bool { return strings.Contains(p.name, c) || strings.Contains(p.text, c) }) {
			return c
		}
	}
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
	// StateLost is the run_result's, for a run whose session lost its
	// state.
	StateLost *wire.StateLost `json:"state_lost,omitempty"`
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
		FilesOmitted: r.FilesOmitted, Workspace: r.Workspace, WorkspaceNote: r.WorkspaceNote, ToolCalls: r.ToolCalls, StateLost: r.StateLost}
	room := inlineTotalChars
	for _, f := range r.Files {
		rf := reportFile{Path: f.Path, Size: f.Size, Change: f.Change, MediaType: f.MediaType}
		switch {
		case f.ToAgent:
			rf.Note = ToAgentNote(f.SHA256, false)
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

// ToAgentNote is the note the model reads, in place of the content, on a
// file the run returned to the agent's code only (wire.File.ToAgent):
// its digest, and whether agent code received it (delivered). Claude Code
// has no agent code of the builder's, so `gatekeeper mcp` says it did
// not; @gatekeeper/client's toAgentNote is the same text.
func ToAgentNote(sha256 string, delivered bool) string {
	note := "kept from you for the agent's code (sha256 " + sha256 + ")"
	if !delivered {
		note += ", but no agent code received it: this client passes files to none"
	}
	return note
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

// imageBlocks are the images a run returned, as MCP image content. An
// image whose base64 does not decode is left out (the sidecar encodes
// them; its listing still names the file).
func imageBlocks(r *wire.RunResult) []mcp.Content {
	var out []mcp.Content
	for _, f := range r.Files {
		if imageTypes[f.MediaType] && f.Base64 != nil && !f.ToAgent {
			data, err := base64.StdEncoding.DecodeString(*f.Base64)
			if err == nil {
				out = append(out, &mcp.ImageContent{Data: data, MIMEType: f.MediaType})
			}
		}
	}
	return out
}
