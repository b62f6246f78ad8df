// Package audit writes the sidecar's tamper-evident audit log: one JSON line
// per decision, sandbox run and egress request, each carrying its position
// (seq) and the SHA-256 of the line before it (prev), so that an edited,
// deleted, reordered or truncated line is found by Verify.
//
// The sidecar writes a line before it replies; when Write fails the caller
// denies. Values under secret-looking keys of Record.ToolInput are masked
// on the way to the file.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// maxKeptBuffer is the largest line buffer a Log keeps between writes; a
// larger one (a record with a big tool_input) is dropped after use.
const maxKeptBuffer = 64 << 10

// Options configures a Log. The zero value is ready to use.
type Options struct {
	// Now is the clock for Record.Time; nil means time.Now. Times are
	// written in UTC.
	Now func() time.Time
	// Sync makes every Write fsync the file before it returns, so that an
	// acknowledged line survives a power loss or kernel crash. It costs a
	// disk flush per line (typically 0.1–10 ms instead of a few µs) and
	// serializes all writers behind it. Without it a line written by a
	// successful Write survives a crash of the sidecar but may be lost with
	// the machine.
	Sync bool
}

// Log appends chained records to one file. A Log is safe for concurrent
// use: Write serializes callers, and lines appear in seq order. It must be
// the only writer of its file; Open takes an advisory lock (flock) to keep
// other Logs out.
type Log struct {
	path string
	now  func() time.Time
	sync bool

	mu     sync.Mutex
	f      *os.File
	w      io.Writer // f, or a failing writer in tests
	seq    int64     // seq of the last line in the file
	prev   [64]byte  // hex SHA-256 of the last line in the file
	size   int64     // file size after the last good line
	// dirty is set when a failed write may have left bytes after size
	// that could not be cut off; the next Write cuts them first.
	dirty  bool
	buf    []byte
	err    error // ErrClosed once the Log is closed
	closed bool
}

// Open opens the audit log at path for appending, creating it with mode
// 0600 if needed (an existing file keeps its mode). When the file already
// has lines, Open reads its last line and continues the chain after it; it
// refuses a file whose last line is not a valid record or lacks its
// newline, returning an error that names the file and wraps a *BreakError
// with the line number. Open does not verify earlier lines: use VerifyFile.
// It returns an error wrapping ErrLocked when another Log holds the file.
func Open(path string, opts Options) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	l, err := open(f, path, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	return l, nil
}

func open(f *os.File, path string, opts Options) (*Log, error) {
	if err := lockFile(f); err != nil {
		return nil, err
	}
	// Stat under the lock, so that the size is the one to continue from.
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	l := &Log{path: path, now: opts.Now, sync: opts.Sync, f: f, w: f}
	if l.now == nil {
		l.now = time.Now
	}
	copy(l.prev[:], zeroHash)
	size := fi.Size()
	if size == 0 {
		return l, nil
	}
	last, start, err := lastLine(f, size)
	if err != nil {
		return nil, err
	}
	complete := last[len(last)-1] == '\n'
	content := bytes.TrimSuffix(last, []byte{'\n'})
	seq, reason := checkTail(content, complete)
	if reason != "" {
		lineNo, err := lineNumber(f, start)
		if err != nil {
			return nil, err
		}
		return nil, &BreakError{Line: lineNo, Seq: seq, Reason: reason}
	}
	l.seq = seq
	sum := sha256.Sum256(content)
	hex.Encode(l.prev[:], sum[:])
	l.size = size
	return l, nil
}

// lastLine returns the last line of f (size bytes), with its newline if it
// has one, and the offset it starts at.
func lastLine(f *os.File, size int64) ([]byte, int64, error) {
	var b [1]byte
	if _, err := f.ReadAt(b[:], size-1); err != nil {
		return nil, 0, fmt.Errorf("read last line: %w", err)
	}
	end := size
	if b[0] == '\n' {
		end = size - 1 // search before the final newline
	}
	start := int64(0)
	chunk := make([]byte, 32<<10)
	for pos := end; pos > 0; {
		n := min(pos, int64(len(chunk)))
		if _, err := f.ReadAt(chunk[:n], pos-n); err != nil {
			return nil, 0, fmt.Errorf("read last line: %w", err)
		}
		if i := bytes.LastIndexByte(chunk[:n], '\n'); i >= 0 {
			start = pos - n + int64(i) + 1
			break
		}
		pos -= n
	}
	line := make([]byte, size-start)
	if _, err := f.ReadAt(line, start); err != nil {
		return nil, 0, fmt.Errorf("read last line: %w", err)
	}
	return line, start, nil
}

// lineNumber returns the 1-based number of the line starting at offset.
func lineNumber(f *os.File, offset int64) (int, error) {
	n := 1
	buf := make([]byte, 64<<10)
	for pos := int64(0); pos < offset; {
		m, err := f.ReadAt(buf[:min(int64(len(buf)), offset-pos)], pos)
		n += bytes.Count(buf[:m], []byte{'\n'})
		pos += int64(m)
		if err != nil && !(errors.Is(err, io.EOF) && pos >= offset) {
			return 0, fmt.Errorf("count lines: %w", err)
		}
	}
	return n, nil
}

// Write appends rec to the log as one line and returns once the line is
// written (and synced, with Options.Sync). It sets rec's Seq, Time and Prev,
// masks ToolInput in a copy, and writes the line with a single write call.
//
// When Write returns an error the record counts as not written: the chain
// continues from the previous line, and whatever part of the line reached
// the file is cut off again (and the cut synced, with Options.Sync), so a
// full disk or an I/O error never leaves half a line. If that cut fails too,
// Write returns an error wrapping ErrTorn and every later Write tries the
// cut again before writing, so the Log takes writes again as soon as the
// file can be cut (once space returns, say). After Close, Write returns an
// error wrapping ErrClosed.
//
// Write does not keep rec or anything it points to after it returns; the
// caller must not change ToolInput while Write runs.
//
// Masking replaces the value under every key, at any depth of maps and
// arrays, that contains (case-insensitively, ignoring '-' and '_') one of
// password, passwd, token, apikey, secret, authorization, credential,
// privatekey, cookie, sessionid or accesskey, with "***".
func (l *Log) Write(rec Record) error {
	rec.Seq, rec.Time, rec.Prev = 0, time.Time{}, ""
	if rec.ToolInput != nil {
		masked, err := mask(rec.ToolInput)
		if err != nil {
			return fmt.Errorf("mask tool_input: %w", err)
		}
		rec.ToolInput = masked
	}
	var enc bytes.Buffer
	je := json.NewEncoder(&enc)
	je.SetEscapeHTML(false) // keep "&&", "<" and ">" of commands greppable
	if err := je.Encode(rec); err != nil {
		return fmt.Errorf("marshal audit record: %w", err)
	}
	body := bytes.TrimSuffix(enc.Bytes(), []byte{'\n'})
	if len(body) < 2 || body[0] != '{' || bytes.IndexByte(body, '\n') >= 0 {
		return errors.New("marshal audit record: not a one-line object")
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if l.dirty {
		if err := l.cut(); err != nil {
			return err
		}
	}
	seq := l.seq + 1
	buf := append(l.buf[:0], `{"seq":`...)
	buf = strconv.AppendInt(buf, seq, 10)
	buf = append(buf, `,"time":"`...)
	buf = l.now().UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, `","prev":"`...)
	buf = append(buf, l.prev[:]...)
	buf = append(buf, '"')
	if len(body) > 2 {
		buf = append(buf, ',')
	}
	buf = append(buf, body[1:]...)
	sum := sha256.Sum256(buf)
	buf = append(buf, '\n')
	if cap(buf) <= maxKeptBuffer {
		l.buf = buf
	}

	n, err := l.w.Write(buf)
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err == nil && l.sync {
		if err = l.f.Sync(); err != nil {
			n = len(buf) // the line may be in the file
		}
	}
	if err != nil {
		err = fmt.Errorf("write audit record %d to %s: %w", seq, l.path, err)
		if n > 0 {
			l.dirty = true
			if cerr := l.cut(); cerr != nil {
				return fmt.Errorf("%w; %w", err, cerr)
			}
		}
		return err
	}
	l.seq = seq
	hex.Encode(l.prev[:], sum[:])
	l.size += int64(len(buf))
	return nil
}

// cut truncates the file back to the end of its last good line (and syncs
// the cut, with Options.Sync) after a failed write. It clears l.dirty when
// it succeeds and returns an error wrapping ErrTorn when it does not.
func (l *Log) cut() error {
	err := l.f.Truncate(l.size)
	if err == nil && l.sync {
		err = l.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("audit log %s: %w after offset %d: %w", l.path, ErrTorn, l.size, err)
	}
	l.dirty = false
	return nil
}

// Head returns the seq and hex hash of the last line in the file (0 and 64
// zeros for an empty file). Saving it outside the file lets a later Verify
// detect an edit or truncation at the end, which the chain alone cannot.
func (l *Log) Head() (seq int64, hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq, string(l.prev[:])
}

// Close flushes the file to disk, releases its lock and closes it. Later
// Writes fail with ErrClosed; a second Close returns an error wrapping
// ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("close audit log %s: %w", l.path, ErrClosed)
	}
	l.closed = true
	l.err = fmt.Errorf("audit log %s: %w", l.path, ErrClosed)
	serr := l.f.Sync()
	cerr := l.f.Close()
	if cerr != nil {
		return fmt.Errorf("close audit log %s: %w", l.path, cerr)
	}
	if serr != nil {
		return fmt.Errorf("sync audit log %s: %w", l.path, serr)
	}
	return nil
}
