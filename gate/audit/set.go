package audit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The names of a rotated log. The active file is the path the Log was
// opened with, say audit.jsonl; a closed file is named after the seq of its
// first line, audit.jsonl.000000004097, and audit.jsonl.000000004097.gz
// once compressed. The other names are the Log's own and are never part of
// a set.
const (
	seqDigits  = 12      // zero-padded, so that ls sorts closed files by seq up to 10^12 lines
	gzSuffix   = ".gz"   // a compressed closed file
	tmpSuffix  = ".tmp"  // a compressed file being written: NAME.gz.tmp
	nextSuffix = ".next" // the next active file while a rotation writes its first line
	lockSuffix = ".lock" // the file whose flock keeps a second writer out
)

// File is one file of a rotated audit log.
type File struct {
	// Path is where the file is.
	Path string
	// Seq is the seq of the file's first line as its name gives it
	// (audit.jsonl.000000004097 starts at seq 4097), or 0 when the name
	// gives none: the active file, or a file named outside the scheme.
	Seq int64
	// Compressed is true for a gzip file; its name ends in ".gz".
	Compressed bool
}

// Name is the file's name without its directory and without ".gz": the
// name a rotate line gives its predecessor by.
func (f File) Name() string { return strings.TrimSuffix(filepath.Base(f.Path), gzSuffix) }

// Log is the name of the log the file belongs to: its active file's name
// (audit.jsonl for audit.jsonl.000000004097.gz).
func (f File) Log() string {
	if b, _, _, ok := parseClosedName(filepath.Base(f.Path)); ok {
		return b
	}
	return f.Name()
}

// FileAt describes the file at path by its name.
func FileAt(path string) File {
	if _, seq, gz, ok := parseClosedName(filepath.Base(path)); ok {
		return File{Path: path, Seq: seq, Compressed: gz}
	}
	return File{Path: path, Compressed: strings.HasSuffix(path, gzSuffix)}
}

// closedName is the name of base's closed file whose first line has seq.
func closedName(base string, seq int64) string {
	return base + "." + fmt.Sprintf("%0*d", seqDigits, seq)
}

// parseClosedName splits a closed file's name, BASE.<12 or more digits>
// with an optional ".gz", into its parts.
func parseClosedName(name string) (base string, seq int64, gz bool, ok bool) {
	name, gz = strings.CutSuffix(name, gzSuffix)
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return "", 0, false, false
	}
	digits := name[i+1:]
	if len(digits) < seqDigits || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false, false
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || seq < 1 {
		return "", 0, false, false
	}
	return name[:i], seq, gz, true
}

// closedFiles lists base's closed files in dir by seq, a plain file before
// a compressed one of the same seq.
func closedFiles(dir, base string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var files []File
	for _, e := range entries {
		b, seq, gz, ok := parseClosedName(e.Name())
		if ok && b == base && e.Type().IsRegular() {
			files = append(files, File{Path: filepath.Join(dir, e.Name()), Seq: seq, Compressed: gz})
		}
	}
	sortFiles(files)
	return files, nil
}

func sortFiles(files []File) {
	slices.SortFunc(files, func(a, b File) int {
		if a.Seq != b.Seq {
			return compareInt(a.Seq, b.Seq)
		}
		switch {
		case a.Compressed == b.Compressed:
			return 0
		case a.Compressed:
			return 1
		}
		return -1
	})
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Files lists the rotated log whose active file is path, oldest first: its
// closed files (compressed or not) by the seq in their names, then the
// active file if it exists. It returns an error wrapping fs.ErrNotExist
// when there is neither.
//
// Files only reads names. A Log may rotate, compress or remove files while
// a reader goes through the list: Lines follows a file that was compressed
// meanwhile, and an open active file keeps its lines when it is rotated
// (it is renamed, never copied).
func Files(path string) ([]File, error) {
	files, err := closedFiles(filepath.Dir(path), filepath.Base(path))
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.Mode().IsRegular():
		files = append(files, File{Path: path})
	case err == nil:
		return nil, fmt.Errorf("audit log %s: not a regular file (%s)", path, fi.Mode().Type())
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("audit log: %w", err)
	case len(files) == 0:
		return nil, fmt.Errorf("audit log %s: %w", path, fs.ErrNotExist)
	}
	return files, nil
}

// DirSets lists the rotated logs in dir, each as Files lists it, ordered by
// the active file's name. A log is found by its closed files or by its lock
// file (NAME.lock, which a Log leaves next to its active file); a lone file
// without either is not taken for a log.
func DirSets(dir string) ([][]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		if b, _, _, ok := parseClosedName(e.Name()); ok && e.Type().IsRegular() {
			names[b] = true
		}
		if b, ok := strings.CutSuffix(e.Name(), lockSuffix); ok {
			if fi, err := os.Stat(filepath.Join(dir, b)); err == nil && fi.Mode().IsRegular() {
				names[b] = true
			}
		}
	}
	var sets [][]File
	for _, b := range slices.Sorted(maps.Keys(names)) {
		files, err := Files(filepath.Join(dir, b))
		if err != nil {
			return nil, err
		}
		sets = append(sets, files)
	}
	return sets, nil
}

// openFile opens f for reading, through gzip when it is compressed. A
// closed file that was compressed since it was listed is read from its
// ".gz".
func openFile(f File) (io.ReadCloser, error) {
	file, err := os.Open(f.Path)
	if errors.Is(err, fs.ErrNotExist) && !f.Compressed && f.Seq > 0 {
		f.Compressed = true
		file, err = os.Open(f.Path + gzSuffix)
	}
	if err != nil {
		return nil, err
	}
	if !f.Compressed {
		return file, nil
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(file, 64<<10))
	if err != nil {
		file.Close()
		return nil, &corruptError{err: err}
	}
	return &gzipFile{Reader: zr, f: file}, nil
}

// gzipFile reads a compressed file; read errors of the compressed data
// come back as *corruptError.
type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g *gzipFile) Read(p []byte) (int, error) {
	n, err := g.Reader.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			err = &corruptError{err: err}
		}
	}
	return n, err
}

func (g *gzipFile) Close() error {
	g.Reader.Close()
	return g.f.Close()
}

// corruptError is a compressed file that does not decompress: its content
// was changed, or it was cut short.
type corruptError struct{ err error }

func (e *corruptError) Error() string { return "compressed data is corrupt: " + e.err.Error() }
func (e *corruptError) Unwrap() error { return e.err }

// eachLine calls fn with every line of r, without its newline; complete is
// false for a last line that has no newline. It stops at the first error
// of fn or of r (io.EOF excepted) and returns it.
func eachLine(r io.Reader, fn func(content []byte, complete bool) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte // a line longer than br's buffer
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		complete := line[len(line)-1] == '\n'
		if ferr := fn(bytes.TrimSuffix(line, []byte{'\n'}), complete); ferr != nil {
			return ferr
		}
		if err != nil {
			return nil
		}
	}
}

// Line is one line of a file of an audit log.
type Line struct {
	// File is the file the line is in.
	File File
	// Number is the line's 1-based number in its file.
	Number int
	// Text is the line without its newline; it belongs to the caller.
	Text []byte
}

// Lines returns an iterator over the lines of files in order, as they are
// in the files: it checks nothing (Verify does). A last line without its
// newline is yielded too. The iteration stops at the first error, which it
// yields with the Line it was reading (Number 0 when the file did not
// open); an error of a compressed file's data wraps the gzip error.
//
// Lines suits a backfill: list the set with Files, read it with Lines, and
// stop at the seq from which lines arrive another way.
func Lines(files []File) iter.Seq2[Line, error] {
	return func(yield func(Line, error) bool) {
		for _, f := range files {
			r, err := openFile(f)
			if err != nil {
				yield(Line{File: f}, fmt.Errorf("read audit log: %w", err))
				return
			}
			n := 0
			stopped := false
			err = eachLine(r, func(content []byte, _ bool) error {
				n++
				if !yield(Line{File: f, Number: n, Text: bytes.Clone(content)}, nil) {
					stopped = true
					return errStop
				}
				return nil
			})
			r.Close()
			if stopped {
				return
			}
			if err != nil {
				yield(Line{File: f, Number: n + 1}, fmt.Errorf("read audit log %s: %w", f.Path, err))
				return
			}
		}
	}
}

// errStop ends an iteration early.
var errStop = errors.New("stop")
