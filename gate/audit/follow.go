package audit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Mask returns v with every value under a secret-looking key, at any depth,
// replaced by Masked: the masking Write applies to Record.ToolInput, for
// readers that show other values the way the log would have written them.
// It never modifies v.
func Mask(v any) (any, error) { return mask(v) }

// Chain checks the lines of an audit log in order, as Verify does, one
// line at a time: for readers that follow a log as it grows, across its
// rotated files (a rotate line carries the next seq and the hash of the
// line before it, like any other line). The zero value expects line 1
// (seq 1, prev 64 zeros). A Chain is not safe for concurrent use.
type Chain struct {
	// Partial lets the chain start inside a log, for a reader of its newest
	// lines only: a first line with a seq above 1 is taken as it comes
	// (its prev cannot be checked; it must still be a whole record with a
	// hex prev and an RFC 3339 time). A first line with seq 1 must carry
	// 64 zeros as prev all the same.
	Partial bool

	rep    Report
	first  int64 // the seq of the first line that verified
	broken *BreakError
}

// Next checks content, the next line without its newline (complete tells
// whether it had one). It returns nil when the line continues the chain,
// and otherwise a *BreakError naming the line by its number in the chain;
// after a break every later call returns the same error, since nothing
// after it can verify.
func (c *Chain) Next(content []byte, complete bool) error {
	return c.next(content, complete, "", c.rep.Lines+1)
}

// NextLine is Next for a whole line of a file (as Lines and Follower
// return them): a break names the line's file and its number there.
func (c *Chain) NextLine(l Line) error { return c.next(l.Text, true, l.File.Path, l.Number) }

func (c *Chain) next(content []byte, complete bool, file string, lineNo int) error {
	if c.broken != nil {
		return c.broken
	}
	if c.rep.LastHash == "" {
		c.rep.LastHash = zeroHash
	}
	first := c.rep.Lines == 0
	if first && c.Partial {
		if f, reason := parseLine(content, complete); reason == "" && f.seq() > 1 {
			if seq, reason := checkTail(content, complete); reason != "" {
				c.broken = &BreakError{File: file, Line: lineNo, Seq: seq, Reason: reason}
				return c.broken
			}
			c.rep.LastSeq, c.rep.LastHash = f.seq()-1, f.Prev
		}
	}
	seq, reason := checkLine(content, complete, c.rep.LastSeq+1, c.rep.LastHash, lineNo, first)
	if reason != "" {
		c.broken = &BreakError{File: file, Line: lineNo, Seq: seq, Reason: reason}
		return c.broken
	}
	if first {
		c.first = seq
	}
	c.rep.Lines++
	c.rep.LastSeq, c.rep.LastHash = seq, hashLine(content)
	return nil
}

// FirstSeq returns the seq of the first line that verified, 0 if none did:
// 1 for a whole log, more for a Partial chain that started inside one.
func (c *Chain) FirstSeq() int64 { return c.first }

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

// maxFollowRead is about the most a Follower returns from one Next call;
// it reads the active file 64 KiB at first, more while reads fill that.
const maxFollowRead = 4 << 20

// FollowOptions says what a Follower returns before the lines written
// after it started.
type FollowOptions struct {
	// Backlog is how many of the lines already in the log at the first
	// Next are returned first, oldest first: the newest Backlog lines,
	// read from the rotated files as far back as they go, and no further.
	// 0 returns only the lines written later.
	Backlog int
	// BacklogBytes, when above 0, bounds the backlog to the newest lines
	// that fit in about this many bytes (at least one line). The size of a
	// rotated file is taken from its length (a compressed file's from its
	// gzip trailer), so files beyond the bound are never opened.
	BacklogBytes int64
}

// Follower reads a rotated audit log (see Files) as it grows, for readers
// such as a live console: each Next returns the whole lines appended since
// the last call, across rotations, each once and in order.
//
// It holds the active file open. When another file takes the path (a
// rotation), it first reads the old file to its end: every line of the old
// file was written before the new one took its name, so nothing is lost
// between its last read and the rotation. When the new file's first line
// shows that more rotations happened meanwhile (its seq is past the next
// one), it reads the lines in between from the closed files named after
// them before going on. A file that shrinks below what was read is read
// again from its start; lines of a closed file that is gone by then
// (removed by Options.Keep) are skipped. A line still being written (no
// newline yet) is held back until it is complete.
//
// A Follower only reads; it is not safe for concurrent use.
type Follower struct {
	path, dir, base string
	opts            FollowOptions
	started         bool

	f       *os.File    // the file being followed, nil until it exists
	fi      os.FileInfo // its identity, to see it replaced
	file    File        // how its lines are named
	first   int64       // the seq of its first line, 0 while unknown
	off     int64       // bytes of f consumed into returned lines and partial
	number  int         // lines of f consumed
	partial []byte      // the start of a line with no newline yet
	buf     []byte      // the read buffer, grown up to maxFollowRead

	last int64 // the seq of the last line consumed, 0 if unknown

	// Closed files to read before f: the backlog's oldest lines, or the
	// lines of rotations that happened between two reads. Lines with a
	// seq below skipBelow are not returned.
	pending   []File
	skipBelow int64
	pull      func() (Line, error, bool)
	stopPull  func()
}

// NewFollower returns a Follower of the log whose active file is path.
// Nothing is opened until the first Next; a log that does not exist yet is
// not an error, and its lines are all new when it comes.
func NewFollower(path string, opts FollowOptions) *Follower {
	return &Follower{path: path, dir: filepath.Dir(path), base: filepath.Base(path), opts: opts}
}

// Close closes the file being followed.
func (fl *Follower) Close() error {
	fl.endPull()
	fl.pending = nil
	if fl.f == nil {
		return nil
	}
	err := fl.f.Close()
	fl.f = nil
	return err
}

// Next returns the complete lines appended since the last call (at the
// first call, the backlog), at most about 4 MiB of them: call it again
// while it returns lines. Each Line names its file and its number there
// (the active file's lines keep the active name, and the name of the
// closed file once the Follower has seen the rotation) and is the
// caller's to keep. An error reading a closed file skips the rest of that
// file; lines returned with an error are still good.
func (fl *Follower) Next() ([]Line, error) {
	if !fl.started {
		fl.started = true
		if err := fl.start(); err != nil {
			return nil, err
		}
	}
	if fl.f == nil {
		if err := fl.open(); err != nil || fl.f == nil {
			return nil, err
		}
	}
	if len(fl.pending) > 0 {
		if lines, err := fl.readClosed(); len(lines) > 0 || err != nil {
			return lines, err
		}
	}
	lines, err := fl.read()
	if err != nil || len(lines) > 0 {
		return lines, err
	}
	// Nothing new: has the file been replaced or truncated meanwhile?
	cur, err := os.Stat(fl.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil // removed; a rotation replaces it in one rename
	case err != nil:
		return nil, fmt.Errorf("follow audit log: %w", err)
	case !os.SameFile(cur, fl.fi):
		// Rotated: the old file is complete now. Read what came since the
		// read above, under the file's closed name; then go on.
		if fl.first > 0 {
			closed := File{Path: filepath.Join(fl.dir, closedName(fl.base, fl.first)), Seq: fl.first}
			if ci, err := os.Stat(closed.Path); err == nil && os.SameFile(ci, fl.fi) {
				fl.file = closed
			}
		}
		if lines, err = fl.read(); err != nil || len(lines) > 0 {
			return lines, err
		}
		fl.f.Close()
		fl.f = nil
		return fl.Next()
	case cur.Size() < fl.off:
		fl.off, fl.number, fl.partial = 0, 0, nil
		return fl.read()
	}
	return nil, nil
}

// start opens the active file and sets up the backlog: the newest lines of
// the active file, and before them the newest lines of the closed files
// when the active file holds fewer than the backlog.
func (fl *Follower) start() error {
	if err := fl.openFile(); err != nil || fl.f == nil {
		return err
	}
	start, end, lines, err := tailStart(fl.f, fl.fi.Size(), fl.opts.Backlog, fl.opts.BacklogBytes)
	if err != nil {
		return fmt.Errorf("follow audit log %s: %w", fl.path, err)
	}
	if start > 0 {
		// Skip the lines before the backlog, knowing the seq and number of
		// the last one: from the seqs, which count the lines of a file
		// Write wrote, so as not to read a long file for it.
		before, _, err := lastLine(fl.f, start)
		if err != nil {
			return fmt.Errorf("follow audit log %s: %w", fl.path, err)
		}
		fl.off, fl.last = start, lineSeq(bytes.TrimSuffix(before, []byte{'\n'}))
		if fl.first > 0 && fl.last >= fl.first {
			fl.number = int(fl.last - fl.first + 1)
		} else {
			n, err := lineNumber(fl.f, start)
			if err != nil {
				return fmt.Errorf("follow audit log %s: %w", fl.path, err)
			}
			fl.number = n - 1
		}
		return nil
	}
	need := fl.opts.Backlog - lines
	budget := fl.opts.BacklogBytes - end
	if need <= 0 || fl.first <= 1 || fl.opts.BacklogBytes > 0 && budget <= 0 {
		return nil
	}
	closed, err := closedFiles(fl.dir, fl.base)
	if err != nil {
		return fmt.Errorf("follow audit log: %w", err)
	}
	next := fl.first // the seq after the newest closed file's last line
	var pick []File
	for i := len(closed) - 1; i >= 0 && need > 0; i-- {
		c := closed[i]
		if c.Seq >= next {
			continue // newer than the active file, or a second copy (NAME and NAME.gz)
		}
		count := next - c.Seq // the lines the file holds
		take := min(int64(need), count)
		if fl.opts.BacklogBytes > 0 {
			if budget <= 0 {
				break
			}
			if size := uncompressedSize(c); size > budget {
				take = min(take, max(1, count*budget/size))
				budget = 0
			} else {
				budget -= size
			}
		}
		pick = append(pick, c)
		fl.skipBelow = next - take
		need -= int(take)
		next = c.Seq
	}
	slices.Reverse(pick)
	fl.pending = pick
	return nil
}

// open opens the file now at the path, after a rotation or when it first
// appears. When its first line shows that rotations happened since the
// last line read, the closed files in between are read first.
func (fl *Follower) open() error {
	if err := fl.openFile(); err != nil || fl.f == nil {
		return err
	}
	if fl.last > 0 && fl.first > fl.last+1 {
		closed, err := closedFiles(fl.dir, fl.base)
		if err != nil {
			return fmt.Errorf("follow audit log: %w", err)
		}
		var gap []File
		for _, c := range closed {
			if c.Seq > fl.last && c.Seq < fl.first && (len(gap) == 0 || gap[len(gap)-1].Seq != c.Seq) {
				gap = append(gap, c)
			}
		}
		fl.pending, fl.skipBelow = gap, fl.last+1
	}
	return nil
}

// openFile opens the path, if there is a file, and reads the seq of its
// first line.
func (fl *Follower) openFile() error {
	f, err := os.Open(fl.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("follow audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("follow audit log: %w", err)
	}
	first, err := firstLine(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("follow audit log %s: %w", fl.path, err)
	}
	fl.f, fl.fi, fl.file = f, fi, File{Path: fl.path}
	fl.first, fl.off, fl.number, fl.partial = lineSeq(first), 0, 0, nil
	return nil
}

// readClosed returns the next lines of the pending closed files.
func (fl *Follower) readClosed() ([]Line, error) {
	var out []Line
	size := 0
	for len(fl.pending) > 0 && size < maxFollowRead {
		if fl.pull == nil {
			fl.pull, fl.stopPull = iter.Pull2(Lines(fl.pending[:1]))
		}
		l, err, ok := fl.pull()
		if !ok || err != nil {
			fl.endPull()
			fl.pending = fl.pending[1:]
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return out, fmt.Errorf("follow audit log: %w", err)
			}
			continue
		}
		seq := lineSeq(l.Text)
		if seq > 0 && seq < fl.skipBelow {
			continue
		}
		if seq > 0 {
			fl.last = seq
		}
		out = append(out, l)
		size += len(l.Text)
	}
	return out, nil
}

func (fl *Follower) endPull() {
	if fl.stopPull != nil {
		fl.stopPull()
	}
	fl.pull, fl.stopPull = nil, nil
}

// read reads what was appended to f since off and splits it into lines.
func (fl *Follower) read() ([]Line, error) {
	if fl.buf == nil {
		fl.buf = make([]byte, 64<<10)
	}
	buf := fl.buf
	n, err := fl.f.ReadAt(buf, fl.off)
	if n == len(buf) && len(buf) < maxFollowRead {
		fl.buf = make([]byte, min(2*len(buf), maxFollowRead)) // much to read: read more at once
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("follow audit log %s: %w", fl.file.Path, err)
	}
	if n == 0 {
		return nil, nil
	}
	fl.off += int64(n)
	data := buf[:n]
	var lines []Line
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		text := data[:i]
		if len(fl.partial) > 0 {
			text = append(fl.partial, text...)
			fl.partial = nil
		} else {
			text = bytes.Clone(text)
		}
		fl.number++
		if seq := lineSeq(text); seq > 0 {
			fl.last = seq
			if fl.number == 1 {
				fl.first = seq
			}
		}
		lines = append(lines, Line{File: fl.file, Number: fl.number, Text: text})
		data = data[i+1:]
	}
	if len(data) > 0 {
		fl.partial = append(fl.partial, data...)
	}
	return lines, nil
}

// lineSeq returns the seq of an audit line, 0 if it has none.
func lineSeq(line []byte) int64 {
	if rest, ok := bytes.CutPrefix(line, []byte(`{"seq":`)); ok { // as Write writes it
		i := 0
		for i < len(rest) && '0' <= rest[i] && rest[i] <= '9' {
			i++
		}
		if i > 0 && i < len(rest) && rest[i] == ',' {
			if n, err := strconv.ParseInt(string(rest[:i]), 10, 64); err == nil {
				return n
			}
		}
	}
	var f struct {
		Seq int64 `json:"seq"`
	}
	if json.Unmarshal(line, &f) != nil {
		return 0
	}
	return f.Seq
}

// tailStart finds the newest complete lines of f (size bytes): at most n
// of them and, with maxBytes above 0, no more than maxBytes bytes of them
// but at least one. It returns the offset of the first, the end of the
// last (after its newline) and how many there are. It reads f backwards
// from its end, no further than the lines it returns.
func tailStart(f *os.File, size int64, n int, maxBytes int64) (start, end int64, lines int, err error) {
	if size == 0 {
		return 0, 0, 0, nil
	}
	// The end of the last complete line.
	end = size
	chunk := make([]byte, 32<<10)
	for {
		k := min(end, int64(len(chunk)))
		if _, err := f.ReadAt(chunk[:k], end-k); err != nil {
			return 0, 0, 0, fmt.Errorf("read back: %w", err)
		}
		if i := bytes.LastIndexByte(chunk[:k], '\n'); i >= 0 {
			end = end - k + int64(i) + 1
			break
		}
		end -= k
		if end == 0 {
			return 0, 0, 0, nil
		}
	}
	// Going back from end, each newline found ends the line before the
	// newest one counted so far.
	start = end
	for pos := end - 1; lines < n; {
		k := min(pos, int64(len(chunk)))
		if _, err := f.ReadAt(chunk[:k], pos-k); err != nil {
			return 0, 0, 0, fmt.Errorf("read back: %w", err)
		}
		data := chunk[:k]
		for lines < n {
			i := bytes.LastIndexByte(data, '\n')
			if i < 0 {
				break
			}
			lineStart := pos - k + int64(i) + 1
			if maxBytes > 0 && lines > 0 && end-lineStart > maxBytes {
				return start, end, lines, nil
			}
			start, lines, data = lineStart, lines+1, data[:i]
		}
		pos -= k
		if pos == 0 { // the file's first line, unless it is counted already
			if lines < n && (maxBytes <= 0 || lines == 0 || end <= maxBytes) {
				start, lines = 0, lines+1
			}
			break
		}
	}
	return start, end, lines, nil
}

// uncompressedSize is the size of f's content: its length, or for a gzip
// file the size its trailer records (modulo 4 GiB, as gzip keeps it).
func uncompressedSize(f File) int64 {
	file, err := os.Open(f.Path)
	if errors.Is(err, fs.ErrNotExist) && !f.Compressed {
		f.Compressed = true
		file, err = os.Open(f.Path + gzSuffix)
	}
	if err != nil {
		return 0
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return 0
	}
	if !f.Compressed || fi.Size() < 4 {
		return fi.Size()
	}
	var trailer [4]byte
	if _, err := file.ReadAt(trailer[:], fi.Size()-4); err != nil {
		return fi.Size()
	}
	return int64(binary.LittleEndian.Uint32(trailer[:]))
}
