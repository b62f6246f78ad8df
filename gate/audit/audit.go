// Package audit writes the sidecar's tamper-evident audit log: one JSON line
// per decision, sandbox run and egress request, each carrying its position
// (seq) and the SHA-256 of the line before it (prev), so that an edited,
// deleted, reordered or truncated line is found by Verify.
//
// The sidecar writes a line before it replies; when Write fails the caller
// denies. Values under secret-looking keys of Record.ToolInput are masked
// on the way to the file.
//
// A Log can rotate its file by size and age (Options.MaxBytes, MaxAge):
// the active file is renamed after the seq of its first line and a new one
// starts with a line of kind "rotate" that names its predecessor and
// chains onto its last line, so the chain runs on across files. Closed
// files can be compressed and the oldest removed (Options.Compress, Keep).
// VerifySet checks a rotated set, and checkpoints of the chain head written
// elsewhere (Options.Head) show when the newest lines were cut off.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// maxKeptBuffer is the largest line buffer a Log keeps between writes; a
// larger one (a record with a big tool_input) is dropped after use.
const maxKeptBuffer = 64 << 10

// Options configures a Log. The zero value is ready to use: one file that
// grows without end, no checkpoints.
type Options struct {
	// Now is the clock for Record.Time; nil means time.Now. Times are
	// written in UTC. A Log calls it under its lock only.
	Now func() time.Time
	// Sync makes every Write fsync the file before it returns, so that an
	// acknowledged line survives a power loss or kernel crash. It costs a
	// disk flush (typically 0.1–10 ms instead of a few µs) per batch of
	// lines: concurrent Writes share one (see Write). Without it a line
	// written by a successful Write survives a crash of the sidecar but may
	// be lost with the machine.
	Sync bool

	// MaxBytes rotates the active file before a line would take it past
	// this many bytes; 0 never rotates on size. A file always takes at
	// least one line after its rotate line, so one line larger than
	// MaxBytes makes a larger file.
	MaxBytes int64
	// MaxAge rotates the active file before a line is written once the
	// file's first line is this old (by Now); 0 never rotates on age. An
	// idle log is not rotated until its next line.
	MaxAge time.Duration
	// Keep is how many closed files to keep: a rotation that makes more
	// removes the oldest, and its rotate line names them (Record.Pruned)
	// so that VerifySet can tell retention from deletion. 0 keeps every
	// file.
	Keep int
	// Compress gzips each closed file, in the background, to NAME.gz.
	Compress bool

	// Head receives checkpoints of the chain head, one line per Write
	// call (see Head): at Open, after each rotation, every HeadInterval
	// while lines are written, and at Close. nil writes none. A failing
	// Head is logged; it does not fail Write.
	Head io.Writer
	// HeadInterval is how often a changed head is written to Head; 0
	// writes it only at Open, rotation and Close.
	HeadInterval time.Duration

	// Logger reports what goes wrong outside a Write's own result: a
	// failed rotation (Write goes on in the old file), compression,
	// removal or checkpoint. nil discards.
	Logger *slog.Logger
}

// Log appends chained records to a file, rotating it as Options say. A Log
// is safe for concurrent use: Write serializes callers, and lines appear in
// seq order. It must be the only writer of its files; Open takes an
// advisory lock (flock) on PATH.lock, which stays put across rotations, to
// keep other Logs out.
type Log struct {
	path, dir, base string
	opts            Options
	log             *slog.Logger
	lock            *os.File // holds the flock until Close

	mu    sync.Mutex
	f     *os.File
	w     io.Writer // f, or a failing writer in tests
	seq   int64     // seq of the last line in the log
	prev  [64]byte  // hex SHA-256 of the last line in the log
	size  int64     // file size after the last good line
	first int64     // seq of the active file's first line, 0 while it has none
	born  time.Time // time of the active file's first line
	// hasRecords is set once the active file has a line besides its
	// rotate line: an empty file is never rotated.
	hasRecords bool
	// dirty is set when a failed write may have left bytes after size
	// that could not be cut off; the next Write cuts them first.
	dirty bool
	// unsyncedDir is set when a rotation's directory fsync failed; the
	// next Write retries it before writing.
	unsyncedDir   bool
	rotateErr     error    // the last failed rotation, until one succeeds
	closedNames   []string // closed files, oldest first, by Name
	toPrune       []string // closed files to remove, for the tidy worker
	toCompress    []string // closed files to compress, for the tidy worker
	compressLater []string // closed files whose compression failed, for the next rotation
	buf           []byte
	lines         []pendingLine // the lines of the batch being written, kept for reuse
	err           error         // ErrClosed once the Log is closed
	closed        bool

	// The group commit (see Write): qmu guards queue, the lines waiting
	// to be written, and leading, set while a Write is writing them. Lock
	// order: qmu is never held while mu is taken.
	qmu     sync.Mutex
	queue   []*waiter
	spare   []*waiter // a batch slice, kept for reuse
	leading bool
	waiters sync.Pool // of *waiter

	head     headState
	stop     chan struct{} // closed by Close to stop the goroutines
	tidyWake chan struct{}
	headWake chan struct{}
	wg       sync.WaitGroup
}

// Open opens the audit log at path for appending, creating it with mode
// 0600 if needed (an existing file keeps its mode), and continues its
// chain.
//
// When the file has lines, Open reads its first and last lines and goes on
// after the last; it refuses a file whose last line is not a valid record
// or lacks its newline, returning an error that names the file and wraps a
// *BreakError with the line number. When the file is missing or empty but
// closed files of a rotation are next to it, Open starts it with a rotate
// line that continues the newest of them. Open also finishes what a
// rotation or compression cut short by a crash left behind, in one
// deterministic way: a closed file that is the active file under a second
// name (a rotation stopped between its two renames) is unlinked; a
// NAME.gz next to its NAME (a compression stopped before removing NAME) is
// removed, NAME being the complete one; PATH.next and NAME.gz.tmp are
// removed; files the active file's rotate line pruned are removed. Open
// does not verify earlier lines: use VerifySet.
//
// It returns an error wrapping ErrLocked when another Log holds the file.
func Open(path string, opts Options) (*Log, error) {
	l, err := open(path, opts)
	if err != nil {
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	l.start()
	return l, nil
}

func open(path string, opts Options) (l *Log, err error) {
	lock, err := os.OpenFile(path+lockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(lock); err != nil {
		lock.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			unlockFile(lock)
		}
	}()
	l = &Log{
		path: path, dir: filepath.Dir(path), base: filepath.Base(path), opts: opts, lock: lock,
		log: opts.Logger, stop: make(chan struct{}), tidyWake: make(chan struct{}, 1), headWake: make(chan struct{}, 1),
	}
	l.waiters.New = func() any { return &waiter{wake: make(chan struct{}, 1)} }
	if l.opts.Now == nil {
		l.opts.Now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	copy(l.prev[:], zeroHash)
	if err := l.resume(); err != nil {
		if l.f != nil {
			l.f.Close()
		}
		return nil, err
	}
	return l, nil
}

// resume opens the active file, or starts it after the newest closed file,
// and sets the Log's state from it.
func (l *Log) resume() error {
	closed, err := l.tidyLeftovers()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var size int64
	if f != nil {
		l.f = f
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
		}
		size = fi.Size()
	}
	switch {
	case size > 0:
		if closed, err = l.continueActive(size, closed); err != nil {
			return err
		}
	case len(closed) > 0:
		// Lines went missing with the active file (or it was never
		// renamed into place): start it again after the newest closed one.
		reason := "the active file was missing at start"
		if f != nil {
			reason = "the active file was empty at start"
		}
		if err := l.continueClosed(closed[len(closed)-1], reason); err != nil {
			return err
		}
	case f == nil:
		if l.f, err = os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
			return err
		}
	}
	l.w = l.f
	for _, c := range closed {
		l.closedNames = append(l.closedNames, c.Name())
		if l.opts.Compress && !c.Compressed {
			l.toCompress = append(l.toCompress, c.Name())
		}
	}
	return nil
}

// continueActive reads the first and last lines of the active file (size
// bytes, open in l.f) and continues after the last. It returns the closed
// files that are really older than the active file.
func (l *Log) continueActive(size int64, closed []File) ([]File, error) {
	last, start, err := lastLine(l.f, size)
	if err != nil {
		return nil, err
	}
	complete := last[len(last)-1] == '\n'
	content := bytes.TrimSuffix(last, []byte{'\n'})
	seq, reason := checkTail(content, complete)
	if reason != "" {
		lineNo, err := lineNumber(l.f, start)
		if err != nil {
			return nil, err
		}
		return nil, &BreakError{Line: lineNo, Seq: seq, Reason: reason}
	}
	head, err := firstLine(l.f)
	if err != nil {
		return nil, err
	}
	hf, reason := parseLine(head, true)
	if reason == "" && hf.Seq == nil {
		reason = "line has no seq"
	}
	if reason != "" {
		return nil, &BreakError{Line: 1, Reason: reason}
	}
	l.first = *hf.Seq
	l.born, _ = time.Parse(time.RFC3339Nano, hf.Time)
	l.seq, l.size = seq, size
	sum := sha256.Sum256(content)
	hex.Encode(l.prev[:], sum[:])
	l.hasRecords = start > 0 || hf.Kind != string(KindRotate)
	if hf.Kind == string(KindRotate) {
		l.toPrune = hf.Pruned
	}

	// A closed file that starts where the active file starts is the active
	// file under its closed name when a rotation stopped between linking
	// it and renaming the new file into place: unlink that name.
	if n := len(closed); n > 0 && closed[n-1].Seq == l.first {
		fi, err := l.f.Stat()
		if err != nil {
			return nil, err
		}
		ci, err := os.Stat(closed[n-1].Path)
		if err != nil {
			return nil, err
		}
		if !os.SameFile(fi, ci) {
			return nil, fmt.Errorf("closed file %s starts at seq %d like the active file; move one of them away", closed[n-1].Path, l.first)
		}
		if err := os.Remove(closed[n-1].Path); err != nil {
			return nil, fmt.Errorf("finish an interrupted rotation: %w", err)
		}
		if err := syncDir(l.dir); err != nil {
			return nil, err
		}
		closed = closed[:n-1]
	}
	if n := len(closed); n > 0 && closed[n-1].Seq > l.first {
		return nil, fmt.Errorf("closed file %s starts at seq %d, after the active file's first line (seq %d); move one of them away", closed[n-1].Path, closed[n-1].Seq, l.first)
	}
	return closed, nil
}

// firstLine returns the first line of f without its newline, or all of f
// when it has no newline.
func firstLine(f *os.File) ([]byte, error) {
	var line []byte
	chunk := make([]byte, 32<<10)
	for pos := int64(0); ; {
		n, err := f.ReadAt(chunk, pos)
		if i := bytes.IndexByte(chunk[:n], '\n'); i >= 0 {
			return append(line, chunk[:i]...), nil
		}
		line = append(line, chunk[:n]...)
		pos += int64(n)
		if errors.Is(err, io.EOF) {
			return line, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read first line: %w", err)
		}
	}
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
// Concurrent Writes are committed as a group: while one caller writes,
// the lines of the others queue up, and the next of them to write takes
// every line queued so far and writes them all with one write call (and
// one fsync, with Options.Sync), in the order they were queued. Each Write
// still returns only once its own line is written; lines appear in seq
// order, and a Write that started after another returned gets a later seq.
// A line is never split across two write calls, and a batch is written in
// as many calls as rotations within it require.
//
// When a rotation is due, Write first rotates the file. A rotation that
// fails leaves the log as it was: Write logs the failure, writes the line
// to the old file and tries again at the next Write.
//
// When Write returns an error the record counts as not written: the chain
// continues from the previous line, and whatever part of the line reached
// the file is cut off again (and the cut synced, with Options.Sync), so a
// full disk or an I/O error never leaves half a line. A failed write call
// fails every line of its batch. If that cut fails too,
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
	body, err := encodeBody(rec)
	if err != nil {
		return err
	}
	w := l.waiters.Get().(*waiter)
	w.body = body
	defer func() {
		w.body, w.err, w.lead = nil, nil, false
		l.waiters.Put(w)
	}()

	l.qmu.Lock()
	l.queue = append(l.queue, w)
	if l.leading {
		// Another caller is writing: it, or a later one, writes this line.
		l.qmu.Unlock()
		<-w.wake
		if !w.lead {
			return w.err
		}
	} else {
		l.leading = true
		l.qmu.Unlock()
	}
	l.commit()
	return w.err
}

// waiter is one Write's line on its way to the file. wake receives one
// value when the line is written or failed (err set), or when its Write
// is to write the queue itself (lead set).
type waiter struct {
	body []byte
	err  error
	lead bool
	wake chan struct{}
}

// commit is run by the one Write that leads: it writes every queued line,
// wakes their Writes, and hands the lead to the first line queued since,
// if any.
func (l *Log) commit() {
	l.qmu.Lock()
	batch := l.queue
	l.queue = l.spare[:0]
	l.qmu.Unlock()

	l.mu.Lock()
	l.writeBatch(batch)
	l.mu.Unlock()

	for i, w := range batch {
		if i > 0 { // batch[0] is the leader's own line
			w.wake <- struct{}{}
		}
		batch[i] = nil
	}
	l.qmu.Lock()
	l.spare = batch[:0]
	if len(l.queue) > 0 {
		next := l.queue[0]
		next.lead = true
		next.wake <- struct{}{}
	} else {
		l.leading = false
	}
	l.qmu.Unlock()
}

// pendingLine is a line of a batch written into l.buf, not yet committed.
type pendingLine struct {
	w   *waiter
	now time.Time
	sum [sha256.Size]byte
}

// writeBatch writes the lines of batch in order and sets each waiter's
// err. Lines go to the file in as few write calls as rotations allow. l.mu
// is held.
func (l *Log) writeBatch(batch []*waiter) {
	buf, lines := l.buf[:0], l.lines[:0]
	for _, w := range batch {
		if l.err != nil {
			w.err = l.err
			continue
		}
		if l.dirty && len(lines) == 0 {
			if err := l.cut(); err != nil {
				w.err = err
				continue
			}
		}
		now := l.opts.Now().UTC()
		start := len(buf)
		var sum [sha256.Size]byte
		buf, sum = l.appendNext(buf, lines, now, w.body)
		if reason := l.rotationDue(now, len(buf), lines); reason != "" {
			buf, lines = l.flush(buf[:start], lines)
			if l.dirty {
				if err := l.cut(); err != nil {
					w.err = err
					continue
				}
			}
			l.rotateOrLog(now, reason)
			buf, sum = l.appendNext(buf, lines, now, w.body)
		}
		lines = append(lines, pendingLine{w: w, now: now, sum: sum})
	}
	buf, lines = l.flush(buf, lines)
	if cap(buf) <= maxKeptBuffer {
		l.buf = buf
	}
	clear(lines[:cap(lines)])
	l.lines = lines
}

// appendNext appends to buf, which holds lines, the line of body that
// follows them.
func (l *Log) appendNext(buf []byte, lines []pendingLine, now time.Time, body []byte) ([]byte, [sha256.Size]byte) {
	seq, prev := l.seq+int64(len(lines))+1, l.prev
	if n := len(lines); n > 0 {
		hex.Encode(prev[:], lines[n-1].sum[:])
	}
	return appendLine(buf, seq, prev[:], now, body)
}

// flush writes buf, the lines not yet committed, with one write call (and
// one fsync, with Options.Sync), commits them to the chain and clears
// their waiters' errors; when that fails, every one of them gets the
// error and the chain is as it was. It returns buf and lines emptied.
func (l *Log) flush(buf []byte, lines []pendingLine) ([]byte, []pendingLine) {
	if len(lines) == 0 {
		return buf[:0], lines
	}
	fail := func(err error) ([]byte, []pendingLine) {
		for _, p := range lines {
			p.w.err = err
		}
		return buf[:0], lines[:0]
	}
	first, last := l.seq+1, l.seq+int64(len(lines))
	if l.unsyncedDir {
		if err := syncDir(l.dir); err != nil {
			return fail(fmt.Errorf("write audit record %s: sync directory %s after a rotation: %w", seqRange(first, last), l.dir, err))
		}
		l.unsyncedDir = false
	}
	n, err := l.w.Write(buf)
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err == nil && l.opts.Sync {
		if err = l.f.Sync(); err != nil {
			n = len(buf) // the lines may be in the file
		}
	}
	if err != nil {
		err = fmt.Errorf("write audit record %s to %s: %w", seqRange(first, last), l.path, err)
		if n > 0 {
			l.dirty = true
			if cerr := l.cut(); cerr != nil {
				return fail(fmt.Errorf("%w; %w", err, cerr))
			}
		}
		return fail(err)
	}
	for _, p := range lines {
		p.w.err = nil
	}
	l.seq = last
	hex.Encode(l.prev[:], lines[len(lines)-1].sum[:])
	l.size += int64(len(buf))
	if l.first == 0 {
		l.first, l.born = first, lines[0].now
	}
	l.hasRecords = true
	return buf[:0], lines[:0]
}

// seqRange names the seqs first to last: "7", or "7-9".
func seqRange(first, last int64) string {
	if first == last {
		return strconv.FormatInt(first, 10)
	}
	return strconv.FormatInt(first, 10) + "-" + strconv.FormatInt(last, 10)
}

// encodeBody masks rec's ToolInput and encodes rec without its chain
// fields as a one-line JSON object.
func encodeBody(rec Record) ([]byte, error) {
	rec.Seq, rec.Time, rec.Prev = 0, time.Time{}, ""
	if rec.ToolInput != nil {
		masked, err := mask(rec.ToolInput)
		if err != nil {
			return nil, fmt.Errorf("mask tool_input: %w", err)
		}
		rec.ToolInput = masked
	}
	var enc bytes.Buffer
	je := json.NewEncoder(&enc)
	je.SetEscapeHTML(false) // keep "&&", "<" and ">" of commands greppable
	if err := je.Encode(rec); err != nil {
		return nil, fmt.Errorf("marshal audit record: %w", err)
	}
	body := bytes.TrimSuffix(enc.Bytes(), []byte{'\n'})
	if len(body) < 2 || body[0] != '{' || bytes.IndexByte(body, '\n') >= 0 {
		return nil, errors.New("marshal audit record: not a one-line object")
	}
	return body, nil
}

// appendLine appends to buf the line of body (an encoded record) at seq
// after the line whose hash is prev, with its newline, and returns it with
// the SHA-256 of that line without its newline.
func appendLine(buf []byte, seq int64, prev []byte, t time.Time, body []byte) ([]byte, [sha256.Size]byte) {
	start := len(buf)
	buf = append(buf, `{"seq":`...)
	buf = strconv.AppendInt(buf, seq, 10)
	buf = append(buf, `,"time":"`...)
	buf = t.AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, `","prev":"`...)
	buf = append(buf, prev...)
	buf = append(buf, '"')
	if len(body) > 2 {
		buf = append(buf, ',')
	}
	buf = append(buf, body[1:]...)
	sum := sha256.Sum256(buf[start:])
	return append(buf, '\n'), sum
}

// cut truncates the file back to the end of its last good line (and syncs
// the cut, with Options.Sync) after a failed write. It clears l.dirty when
// it succeeds and returns an error wrapping ErrTorn when it does not.
func (l *Log) cut() error {
	err := l.f.Truncate(l.size)
	if err == nil && l.opts.Sync {
		err = l.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("audit log %s: %w after offset %d: %w", l.path, ErrTorn, l.size, err)
	}
	l.dirty = false
	return nil
}

// Head returns the seq and hex hash of the last line of the log (0 and 64
// zeros for an empty log). Saving it outside the log lets a later Verify
// detect an edit or truncation at the end, which the chain alone cannot;
// Options.Head does that.
func (l *Log) Head() (seq int64, hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq, string(l.prev[:])
}

// Close flushes the file to disk, finishes the background work (the
// compression of closed files waiting for it, which can take a second or
// two for a large file), writes a last checkpoint to Options.Head,
// releases the lock and closes the file. Later
// Writes fail with ErrClosed; a second Close returns an error wrapping
// ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return fmt.Errorf("close audit log %s: %w", l.path, ErrClosed)
	}
	l.closed = true
	l.err = fmt.Errorf("audit log %s: %w", l.path, ErrClosed)
	serr := l.f.Sync()
	cerr := l.f.Close()
	l.mu.Unlock()

	close(l.stop)
	l.wg.Wait()
	l.tidy() // what the last rotations left, had the worker stopped first
	l.writeHead(true)
	unlockFile(l.lock)
	if cerr != nil {
		return fmt.Errorf("close audit log %s: %w", l.path, cerr)
	}
	if serr != nil {
		return fmt.Errorf("sync audit log %s: %w", l.path, serr)
	}
	return nil
}
