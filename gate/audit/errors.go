package audit

import (
	"errors"
	"fmt"
)

// Sentinel errors; the errors returned by this package wrap them so callers
// can classify failures with errors.Is.
var (
	// ErrBroken means the hash chain does not verify. Verify and Open return
	// a *BreakError that wraps it and names the line.
	ErrBroken = errors.New("audit chain broken")
	// ErrClosed means the Log was closed.
	ErrClosed = errors.New("audit log closed")
	// ErrLocked means another open Log, in this process or another, holds
	// the file.
	ErrLocked = errors.New("audit log in use")
	// ErrCutOff means the log does not agree with a checkpoint of its head
	// (Head): lines were cut off its end, or its end was rewritten.
	// VerifySet reports a *HeadError that wraps it.
	ErrCutOff = errors.New("audit log does not reach its recorded head")
	// ErrTorn means a failed write left a partial line that could not be
	// cut off yet. The Log refuses writes until a later Write manages the
	// cut; if the process ends first, Open refuses the file until the
	// partial last line is removed by hand.
	ErrTorn = errors.New("audit log has a torn line")
)

// Errors of masking, wrapped in Write's error.
var (
	errTooDeep      = errors.New("value nested too deep")
	errTrailingData = errors.New("decode json: data after the value")
)

// BreakError reports a line at which a log stops verifying: the first
// one for Verify and Open, each one for VerifySet.
type BreakError struct {
	// File is the path of the file, set by VerifySet only.
	File string
	// Line is the 1-based line number in the file.
	Line int
	// Seq is the seq the line carries, 0 when it has none or does not parse.
	Seq int64
	// Reason says what is wrong, e.g. "prev hash does not match line 3".
	Reason string
}

// Error implements error.
func (e *BreakError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s line %d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
}

// Unwrap returns ErrBroken.
func (e *BreakError) Unwrap() error { return ErrBroken }

// HeadError reports a checkpoint the log does not agree with.
type HeadError struct {
	// Head is the checkpoint.
	Head HeadAt
	// Reason says what is wrong, e.g. "seq 121-130 missing: cut off the end".
	Reason string
}

// Error implements error.
func (e *HeadError) Error() string {
	return fmt.Sprintf("%s line %d: %s", e.Head.Source, e.Head.Line, e.Reason)
}

// Unwrap returns ErrCutOff.
func (e *HeadError) Unwrap() error { return ErrCutOff }
