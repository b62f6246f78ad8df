package policy

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a policy or an override, with where it is.
type Problem struct {
	// File is the policy file name, or "sandbox_policy" for an override.
	File string
	// Line and Col are 1-based; 0 when unknown.
	Line, Col int
	// Path is the dotted key path ("sandbox.proc.memory").
	Path string
	Msg  string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		if p.Col > 0 {
			fmt.Fprintf(&b, ":%d", p.Col)
		}
		b.WriteString(": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error is every problem found in one policy or override. It is returned by
// Load, Decode, Validate and Override.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Messages returns each problem as one line.
func (e *Error) Messages() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.String()
	}
	return out
}
