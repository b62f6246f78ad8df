// Package untrusted writes text that a model controls (file names, tool
// names, a program's output, the code it ran) where a model or a person
// reads it, so that the text cannot pose as what gatekeeper itself wrote:
// Quote for a name in a line the model reads, Terminal and NewTerminalWriter
// for a person's terminal, JSON for JSON printed there. One rule decides
// which characters are unsafe (Unsafe); @gatekeeper/client has its copy of
// Quote in ts-client/src/untrusted.ts, pinned to this one by the files in
// testdata/quote.
package untrusted

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r moves the cursor, ends a line or reorders what
// a reader sees: the control characters (C0 with TAB, LF and CR, DEL, C1
// with NEL), the Unicode line and paragraph separators and the
// bidirectional controls.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r)
}

// Quote returns s in double quotes, as one line a model reads as one name:
// a double quote and a backslash are escaped with a backslash, LF, CR and
// TAB as \n, \r and \t, every other Unsafe character as \uXXXX (all of
// them are in the Basic Multilingual Plane); the rest is written as it is.
// For a name with no such character the result is what JSON would write.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Terminal returns s with every Unsafe character written as a \xXX (below
// U+0100) or \uXXXX escape, for one line on a person's terminal: escape
// sequences cannot retitle, clear or rewrite the screen, and the text
// cannot start a line of its own.
func Terminal(s string) string {
	return terminal(s, false)
}

// TerminalText is Terminal for text of several lines (a program's output,
// the code it ran): LF and TAB are kept, every other Unsafe character
// (CR included, which could write over a line) is escaped.
func TerminalText(s string) string {
	return terminal(s, true)
}

func terminal(s string, lines bool) string {
	unsafe := func(r rune) bool { return Unsafe(r) && !(lines && (r == '\n' || r == '\t')) }
	if !strings.ContainsFunc(s, unsafe) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s { // invalid UTF-8 comes out as U+FFFD
		switch {
		case !unsafe(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// JSON returns the JSON text data with every Unsafe character that is
// written raw (JSON encoders leave DEL, C1 and the bidirectional controls
// so) replaced by its \uXXXX escape: the same JSON value, harmless on a
// terminal. Such characters can stand only inside strings of valid JSON,
// where the escape means the same; LF, CR and TAB are left, as valid JSON
// has them only as white space between values. Data that is not valid
// UTF-8 has its invalid bytes replaced by U+FFFD.
func JSON(data []byte) []byte {
	s := string(data)
	unsafe := func(r rune) bool { return Unsafe(r) && r != '\n' && r != '\r' && r != '\t' }
	if !strings.ContainsFunc(s, unsafe) && utf8.ValidString(s) {
		return data
	}
	var b strings.Builder
	for _, r := range s {
		if unsafe(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return []byte(b.String())
}

// NewTerminalWriter returns a writer that writes what it is given to w
// through TerminalText, for output that arrives in pieces: a character cut
// in two by a write is held until its next write completes it (or Flush).
// Not safe for concurrent use.
func NewTerminalWriter(w io.Writer) *TerminalWriter {
	return &TerminalWriter{w: w}
}

// TerminalWriter is the writer NewTerminalWriter returns.
type TerminalWriter struct {
	w    io.Writer
	held []byte
}

// Write escapes p (with any character held from the last Write) and writes
// it; it reports len(p) written unless w fails.
func (t *TerminalWriter) Write(p []byte) (int, error) {
	buf := append(t.held, p...)
	// Hold back the start of a character that the next write may complete.
	cut := len(buf)
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	t.held = append([]byte(nil), buf[cut:]...)
	if _, err := io.WriteString(t.w, TerminalText(string(buf[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a character still held, escaped as it stands.
func (t *TerminalWriter) Flush() error {
	if len(t.held) == 0 {
		return nil
	}
	_, err := io.WriteString(t.w, TerminalText(string(t.held)))
	t.held = nil
	return err
}
