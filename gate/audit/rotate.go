package audit

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// How a rotation keeps the set whole at every step (each step is one
// system call; a crash between two leaves a state Open finishes):
//
//  1. fsync the active file PATH, so the closed file is complete on disk;
//  2. write the rotate line to a new PATH.next and fsync it;
//  3. hard-link PATH to its closed name PATH.<first seq>;
//  4. rename PATH.next over PATH, which atomically makes the new file the
//     active one;
//  5. fsync the directory.
//
// PATH always names a complete file. A crash after 2 leaves PATH.next,
// which Open removes; after 3 the closed name is a second name of PATH,
// which Open unlinks (the rotation never happened). A failure of 2, 3 or 4
// is undone and the old file stays active.

// rotationDue says why the active file must be rotated before n more
// bytes are written at now, or "" when it need not be. Those bytes hold
// the lines pending, not yet committed, then one more.
func (l *Log) rotationDue(now time.Time, n int, pending []pendingLine) string {
	if !l.hasRecords && len(pending) == 0 {
		return ""
	}
	born := l.born
	if l.first == 0 && len(pending) > 0 {
		born = pending[0].now // the file's first line is pending
	}
	if m := l.opts.MaxBytes; m > 0 && l.size+int64(n) > m {
		return fmt.Sprintf("the file would pass %d bytes", m)
	}
	if a := l.opts.MaxAge; a > 0 && !now.Before(born.Add(a)) {
		return fmt.Sprintf("the file's first line is %s old", a)
	}
	return ""
}

// rotateOrLog rotates the active file and logs when rotating starts or
// stops failing.
func (l *Log) rotateOrLog(now time.Time, reason string) {
	err := l.rotate(now, reason)
	switch {
	case err != nil && l.rotateErr == nil:
		l.log.Warn("audit log rotation failed; writing on in the old file and retrying at each line", "audit_log", l.path, "err", err)
	case err == nil && l.rotateErr != nil:
		l.log.Info("audit log rotation works again", "audit_log", l.path)
	}
	l.rotateErr = err
}

// rotate closes the active file under its closed name and starts a new
// one with a rotate line. On failure nothing has changed.
func (l *Log) rotate(now time.Time, reason string) error {
	closed := closedName(l.base, l.first)
	closedPath := filepath.Join(l.dir, closed)
	if !l.opts.Sync {
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("rotate: sync %s: %w", l.path, err)
		}
	}
	all := append(slices.Clone(l.closedNames), closed)
	var pruned []string
	if k := l.opts.Keep; k > 0 && len(all) > k {
		pruned = all[:len(all)-k]
	}
	next, line, err := l.writeNext(now, Record{Kind: KindRotate, PrevFile: closed, Reason: reason, Pruned: pruned})
	if err != nil {
		return err
	}
	if err := os.Link(l.path, closedPath); err != nil {
		discardNext(next)
		return fmt.Errorf("rotate: %w", err)
	}
	if err := os.Rename(next.Name(), l.path); err != nil {
		os.Remove(closedPath)
		discardNext(next)
		return fmt.Errorf("rotate: %w", err)
	}
	l.switchTo(next, line, now)
	l.closedNames = all[len(pruned):]
	l.toPrune = append(l.toPrune, pruned...)
	if l.opts.Compress {
		l.toCompress = append(append(l.toCompress, l.compressLater...), closed)
		l.compressLater = nil
	}
	if err := syncDir(l.dir); err != nil {
		l.unsyncedDir = true // Write retries it before the next line
	}
	wake(l.tidyWake)
	wake(l.headWake)
	return nil
}

// writeNext writes rec as the first line of a new active file, PATH.next,
// synced, chained after the log's last line. On failure it leaves no
// PATH.next behind.
func (l *Log) writeNext(now time.Time, rec Record) (*os.File, []byte, error) {
	body, err := encodeBody(rec)
	if err != nil {
		return nil, nil, err
	}
	line, _ := appendLine(nil, l.seq+1, l.prev[:], now, body)
	f, err := os.OpenFile(l.path+nextSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("rotate: %w", err)
	}
	n, err := f.Write(line)
	if err == nil && n != len(line) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		discardNext(f)
		return nil, nil, fmt.Errorf("rotate: write %s: %w", f.Name(), err)
	}
	return f, line, nil
}

func discardNext(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// switchTo makes f, which holds line only, the active file.
func (l *Log) switchTo(f *os.File, line []byte, now time.Time) {
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.w = f, f
	l.seq++
	sum := sha256.Sum256(bytes.TrimSuffix(line, []byte{'\n'}))
	hex.Encode(l.prev[:], sum[:])
	l.size = int64(len(line))
	l.first, l.born, l.hasRecords = l.seq, now, false
	l.dirty = false
}

// continueClosed starts the active file, missing or empty, with a rotate
// line after the last line of newest, the newest closed file.
func (l *Log) continueClosed(newest File, reason string) error {
	seq, hash, err := lastRecord(newest)
	if err != nil {
		return err
	}
	l.seq = seq
	copy(l.prev[:], hash)
	now := l.opts.Now().UTC()
	next, line, err := l.writeNext(now, Record{Kind: KindRotate, PrevFile: newest.Name(), Reason: reason})
	if err != nil {
		return err
	}
	if err := os.Rename(next.Name(), l.path); err != nil {
		discardNext(next)
		return err
	}
	if err := syncDir(l.dir); err != nil {
		next.Close()
		return err
	}
	l.switchTo(next, line, now)
	return nil
}

// lastRecord returns the seq and hash of the last line of the closed file
// f, which must be a record the chain can continue from.
func lastRecord(f File) (int64, string, error) {
	r, err := openFile(f)
	if err != nil {
		return 0, "", err
	}
	defer r.Close()
	var last []byte
	var complete bool
	n := 0
	err = eachLine(r, func(content []byte, c bool) error {
		last, complete = append(last[:0], content...), c
		n++
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("read %s: %w", f.Path, err)
	}
	if n == 0 {
		return 0, "", fmt.Errorf("closed file %s is empty", f.Path)
	}
	seq, reason := checkTail(last, complete)
	if reason != "" {
		return 0, "", fmt.Errorf("closed file %s: %w", f.Path, &BreakError{Line: n, Seq: seq, Reason: reason})
	}
	return seq, hashLine(last), nil
}

// tidyLeftovers removes what an interrupted rotation or compression left
// (PATH.next, NAME.gz.tmp, and NAME.gz when NAME is there too) and returns
// the closed files.
func (l *Log) tidyLeftovers() ([]File, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var removed bool
	for _, e := range entries {
		name := e.Name()
		partial, isTmp := strings.CutSuffix(name, tmpSuffix)
		b, _, gz, ok := parseClosedName(partial)
		if name == l.base+nextSuffix || isTmp && ok && gz && b == l.base {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, err
			}
			removed = true
		}
	}
	closed, err := closedFiles(l.dir, l.base)
	if err != nil {
		return nil, err
	}
	kept := closed[:0]
	for i, f := range closed {
		if f.Compressed && i > 0 && closed[i-1].Seq == f.Seq && !closed[i-1].Compressed {
			if err := os.Remove(f.Path); err != nil {
				return nil, err
			}
			removed = true
			continue
		}
		kept = append(kept, f)
	}
	if removed {
		if err := syncDir(l.dir); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// start starts the goroutines Close stops: the tidy worker, which
// compresses and removes closed files, and the head writer.
func (l *Log) start() {
	l.wg.Go(l.tidyLoop)
	if l.opts.Head != nil {
		l.writeHead(true)
		l.wg.Go(l.headLoop)
	}
}

// wake sends on c without blocking.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (l *Log) tidyLoop() {
	for {
		l.tidy()
		select {
		case <-l.stop:
			return
		case <-l.tidyWake:
		}
	}
}

// tidy removes the closed files rotations pruned and compresses the
// closed files waiting for it. A compression that fails is tried again
// after the next rotation, or by the next Open.
func (l *Log) tidy() {
	l.mu.Lock()
	prune, compress := l.toPrune, l.toCompress
	l.toPrune, l.toCompress = nil, nil
	l.mu.Unlock()

	removed := false
	for _, name := range prune {
		for _, p := range []string{name, name + gzSuffix} {
			err := os.Remove(filepath.Join(l.dir, p))
			switch {
			case err == nil:
				removed = true
			case !errors.Is(err, fs.ErrNotExist):
				l.log.Warn("audit log: removing a pruned file failed", "file", p, "err", err)
			}
		}
	}
	if removed {
		if err := syncDir(l.dir); err != nil {
			l.log.Warn("audit log: sync directory", "dir", l.dir, "err", err)
		}
	}
	var retry []string
	for _, name := range compress {
		if slices.Contains(prune, name) {
			continue
		}
		err := compressFile(filepath.Join(l.dir, name))
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
		default:
			l.log.Warn("audit log: compressing a closed file failed; it stays uncompressed until the next rotation tries again", "file", name, "err", err)
			retry = append(retry, name)
		}
	}
	if len(retry) > 0 {
		l.mu.Lock()
		l.compressLater = append(l.compressLater, retry...)
		l.mu.Unlock()
	}
}

// compressFile writes path's content to path.gz through path.gz.tmp
// (synced, then renamed), then removes path. When anything fails it
// removes the temporary file and leaves path as it was.
func compressFile(path string) (err error) {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := path + gzSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	zw := gzip.NewWriter(out)
	zw.Name, zw.ModTime = filepath.Base(path), fi.ModTime()
	if _, err := io.Copy(zw, in); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path+gzSuffix); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return err
	}
	// From here the .gz is complete: a failure below leaves both names,
	// which Open settles by keeping the plain file.
	if err := os.Remove(path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}
