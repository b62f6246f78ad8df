package workspace

import (
	"bytes"
	"path"
	"strings"
	"unicode/utf8"
)

// sniffLen is how much of a file MediaType looks at.
const sniffLen = 512

// MediaType names the type of a file from its first bytes (head, up to
// 512) and its name: the image formats a model can look at by their
// signatures, SVG by its extension, text (valid UTF-8 with no control
// characters but tab, newline and carriage return) by a few extensions or
// as text/plain, anything else as application/octet-stream. The table is
// fixed, so the answer is the same on every machine.
func MediaType(name string, head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(head, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return "image/gif"
	case len(head) >= 12 && bytes.HasPrefix(head, []byte("RIFF")) && string(head[8:12]) == "WEBP":
		return "image/webp"
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return "application/pdf"
	}
	if !isText(head, true) {
		return "application/octet-stream"
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".svg":
		return "image/svg+xml"
	case ".json":
		return "application/json"
	case ".csv":
		return "text/csv; charset=utf-8"
	case ".html", ".htm":
		return "text/html; charset=utf-8"
	case ".md":
		return "text/markdown; charset=utf-8"
	}
	return "text/plain; charset=utf-8"
}

// IsText reports whether a file's content reads as text: valid UTF-8
// with no control characters but tab, newline and carriage return.
func IsText(content []byte) bool { return isText(content, false) }

// isText is IsText; with head, b is a file's first bytes, and a rune cut
// at its end does not count against it.
func isText(b []byte, head bool) bool {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return head && !utf8.FullRune(b[i:])
		}
		i += n
	}
	return true
}
