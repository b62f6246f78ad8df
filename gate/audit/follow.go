package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Mask returns v with every value under a secret-looking key, at any depth,
// replaced by Masked: the masking Write applies to Record.ToolInput, for
// readers that show other values the way the log would have written them.
// It never modifies v.
func Mask(v any) (any, error) { return mask(v) }

// Chain checks the lines of one audit log in order, as Verify does, one
// line at a time: for readers that follow a log as it grows. The zero value
// expects line 1 (seq 1, prev 64 zeros). A Chain is not safe for
// concurrent use.
type Chain struct {
	rep    Report
	broken *BreakError
}

// Next checks content, the next line without its newline (complete tells
// whether it had one). It returns nil when the line continues the chain,
// and otherwise a *BreakError naming the line; after a break every later
// call returns the same error, since nothing after it can verify.
func (c *Chain) Next(content []byte, complete bool) error {
	if c.broken != nil {
		return c.broken
	}
	if c.rep.LastHash == "" {
		c.rep.LastHash = zeroHash
	}
	lineNo := c.rep.Lines + 1
	seq, reason := checkLine(content, complete, c.rep.LastSeq+1, c.rep.LastHash, lineNo)
	if reason != "" {
		c.broken = &BreakError{Line: lineNo, Seq: seq, Reason: reason}
		return c.broken
	}
	c.rep.Lines, c.rep.LastSeq, c.rep.LastHash = lineNo, seq, hashLine(content)
	return nil
}

// Report returns what verified so far and the break, if any.
func (c *Chain) Report() (Report, error) {
	rep := c.rep
	if rep.LastHash == "" {
		rep.LastHash = zeroHash
	}
	if c.broken != nil {
		return rep, c.broken
	}
	return rep, nil
}

// maxFollowRead is the most a Follower reads in one Next call; it starts
// with 64 KiB and grows while reads fill the buffer.
const maxFollowRead = 4 << 20

// Follower reads an audit log file as it grows, for readers such as a live
// console: each Next returns the whole lines appended since the last call.
// A line still being written (no newline yet) is held back until it is
// complete. When the file at the path is replaced (a rotation: another
// file is now at the path) Follower first reads the old file to its end,
// then starts at the beginning of the new one; when the file shrinks
// below what was read, it starts over at its beginning. A Follower only
// reads; it is not safe for concurrent use.
type Follower struct {
	path    string
	f       *os.File
	fi      os.FileInfo
	off     int64  // bytes of f consumed into returned lines and partial
	partial []byte // the start of a line with no newline yet
	buf     []byte // the read buffer, grown up to maxFollowRead
}

// NewFollower returns a Follower of the file at path. Nothing is opened
// until the first Next; a file that does not exist yet is not an error.
func NewFollower(path string) *Follower { return &Follower{path: path} }

// Close closes the file being followed.
func (fl *Follower) Close() error {
	if fl.f == nil {
		return nil
	}
	err := fl.f.Close()
	fl.f = nil
	return err
}

// Next returns the complete lines (without their newlines) appended since
// the last call, at most about 4 MiB of them: call it again while it
// returns lines. restarted is true when the lines come from the start of a
// new or truncated file, so a chain check must start over. Each returned
// line is a fresh slice the caller may keep.
func (fl *Follower) Next() (lines [][]byte, restarted bool, err error) {
	if fl.f == nil {
		if restarted, err = fl.open(); err != nil || fl.f == nil {
			return nil, false, err
		}
	}
	lines, err = fl.read()
	if err != nil || len(lines) > 0 {
		return lines, restarted, err
	}
	// Nothing new: has the file been replaced or truncated meanwhile?
	cur, err := os.Stat(fl.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, restarted, nil // rotated away, the new one not there yet
		}
		return nil, restarted, fmt.Errorf("follow audit log: %w", err)
	}
	if !os.SameFile(cur, fl.fi) {
		fl.Close()
		fl.off, fl.partial = 0, nil
		if _, err := fl.open(); err != nil || fl.f == nil {
			return nil, false, err
		}
		lines, err = fl.read()
		return lines, true, err
	}
	if cur.Size() < fl.off {
		fl.off, fl.partial = 0, nil
		lines, err = fl.read()
		return lines, true, err
	}
	return nil, restarted, nil
}

// open opens the path; restarted is true when it opened a file.
func (fl *Follower) open() (bool, error) {
	f, err := os.Open(fl.path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("follow audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return false, fmt.Errorf("follow audit log: %w", err)
	}
	fl.f, fl.fi = f, fi
	return true, nil
}

// read reads what was appended to f since off and splits it into lines.
func (fl *Follower) read() ([][]byte, error) {
	if fl.buf == nil {
		fl.buf = make([]byte, 64<<10)
	}
	buf := fl.buf
	n, err := fl.f.ReadAt(buf, fl.off)
	if n == len(buf) && len(buf) < maxFollowRead {
		fl.buf = make([]byte, min(2*len(buf), maxFollowRead)) // much to read: read more at once
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("follow audit log %s: %w", fl.path, err)
	}
	if n == 0 {
		return nil, nil
	}
	fl.off += int64(n)
	data := buf[:n]
	var lines [][]byte
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i]
		if len(fl.partial) > 0 {
			line = append(fl.partial, line...)
			fl.partial = nil
		} else {
			line = bytes.Clone(line)
		}
		lines = append(lines, line)
		data = data[i+1:]
	}
	if len(data) > 0 {
		fl.partial = append(fl.partial, data...)
	}
	return lines, nil
}
