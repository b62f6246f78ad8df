package workspace

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// ErrRefused wraps every reason a snapshot is not accepted.
var ErrRefused = errors.New("workspace snapshot refused")

// MaxStreamBytes is the most bytes a snapshot's tar stream may take for a
// workspace of size bytes: its files, plus room for a header of every
// entry a workspace of that size could reasonably hold. A backend stops
// reading (and ends the sandbox) past it.
func MaxStreamBytes(size int64) int64 { return 2*size + 1<<20 }

// Want says which files of a snapshot a run returns.
type Want struct {
	// Paths are clean paths (CleanOutputs) whose files are returned,
	// changed or not; nil returns the files created or changed since
	// Before, except below a hidden directory, node_modules or
	// __pycache__.
	Paths []string
	// Before returns the files the run started with; Receive calls it
	// once, when the first file needs it, and it may block until the run's
	// input is written. Nil means the run started empty.
	Before func() Manifest
	// MaxFiles and MaxBytes are runner.Sandbox's MaxFiles and
	// MaxFilesBytes.
	MaxFiles int
	MaxBytes int64
}

// Received is what Receive accepted.
type Received struct {
	// Bytes is the tmpfs space the snapshot's files take (whole pages).
	Bytes int64
	// Entries counts its files, directories and links.
	Entries int
	// Files are the files the run returns, sorted by path; Omitted counts
	// those past Want.MaxFiles.
	Files   []runner.File
	Omitted int
}

// Receive reads a snapshot of /workspace from r (a tar stream, as GNU tar
// makes it of the directory) and writes it, normalized, to out (an empty
// file, at offset 0): clean
// relative names, regular files, directories and symbolic links only
// (other entries, which a program can make but no tool needs, are left
// out), modes without set-id bits and with the owner's read and write
// (and search) bits, no owner. It refuses, with an error wrapping
// ErrRefused, a stream that is not such a tar, whose files take more than
// size bytes of tmpfs space (sparse files count at their length, and
// every name of a hard link counts), or that holds more than MaxEntries
// entries, a name leaving the workspace, a name a later run's tar -x could
// not create (a path of PATH_MAX bytes or more in /workspace, a component
// over NAME_MAX), an entry whose parent is not a
// directory earlier in the stream (it would break every later unpack of
// the workspace), or a hard link entry. It then
// picks the files want asks for, reading their content back from out.
// Receive reads r up to the tar's end (its two zero blocks): what follows
// is the caller's to read; when it refuses, it stops where it refused.
// out is left at an unspecified offset.
func Receive(r io.Reader, out *os.File, size int64, want Want) (Received, error) {
	rec, cands, err := receive(r, out, size, want)
	if err != nil {
		return Received{}, err
	}
	if err := rec.pick(out, cands, want); err != nil {
		return Received{}, err
	}
	return rec, nil
}

// candidate is a file Receive may return.
type candidate struct {
	path   string
	size   int64
	sum    [sha256.Size]byte
	change runner.FileChange
	offset int64 // of its content in out
}

func receive(r io.Reader, out *os.File, size int64, want Want) (Received, []candidate, error) {
	refuse := func(format string, args ...any) (Received, []candidate, error) {
		return Received{}, nil, fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
	}
	cw := &countingWriter{w: bufio.NewWriterSize(out, 64<<10)}
	tw := tar.NewWriter(cw)
	tr := tar.NewReader(r)
	var rec Received
	var cands []candidate
	var before Manifest
	beforeRead := false
	lookup := func() Manifest {
		if !beforeRead && want.Before != nil {
			before = want.Before()
		}
		beforeRead = true
		return before
	}
	seen := map[string]bool{}
	dirs := map[string]bool{".": true} // the workspace itself, and every directory accepted so far
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return refuse("reading it: %v", err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if name == "" || name == "." || name == "./" {
			continue // the workspace itself
		}
		clean, err := CleanPath(name)
		if err != nil {
			return refuse("entry %q: %v", hdr.Name, err)
		}
		if err := unpackable(clean); err != nil {
			return refuse("entry %q: %v", clipName(clean), err)
		}
		if seen[clean] {
			return refuse("entry %q appears twice", clean)
		}
		// tar -c writes a directory before what it holds; an entry below
		// anything else (a file, a link, nothing) would stop every later
		// unpack of the workspace ("Cannot open: Not a directory").
		if parent := path.Dir(clean); !dirs[parent] {
			return refuse("entry %q is not below a directory earlier in the stream (%q is none)", clean, parent)
		}
		var typ byte
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
			typ = hdr.Typeflag
		case tar.TypeLink:
			return refuse("entry %q is a hard link", clean)
		default:
			continue // a fifo, socket or device: no tool keeps one in a workspace
		}
		seen[clean] = true
		if typ == tar.TypeDir {
			dirs[clean] = true
		}
		if rec.Entries++; rec.Entries > MaxEntries {
			return refuse("more than %d entries", MaxEntries)
		}
		mode := hdr.Mode & 0o777
		switch typ {
		case tar.TypeDir:
			mode |= 0o700
		case tar.TypeReg:
			mode |= 0o600
			if hdr.Size < 0 || hdr.Size > size || rec.Bytes+Pages(hdr.Size) > size {
				return refuse("its files take more than the workspace's %d bytes (at %q, %d bytes)", size, clean, hdr.Size)
			}
			rec.Bytes += Pages(hdr.Size)
		case tar.TypeSymlink:
			if hdr.Linkname == "" || len(hdr.Linkname) >= pathMax || strings.ContainsRune(hdr.Linkname, 0) {
				return refuse("entry %q is a link to a bad target", clean)
			}
		}
		outName := clean
		if typ == tar.TypeDir {
			outName += "/"
		}
		oh := &tar.Header{Typeflag: typ, Name: outName, Mode: mode, ModTime: hdr.ModTime.Truncate(time.Second), Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			oh.Size = hdr.Size
		}
		if typ == tar.TypeSymlink {
			oh.Linkname = hdr.Linkname
		}
		if err := tw.WriteHeader(oh); err != nil {
			return Received{}, nil, fmt.Errorf("store the workspace snapshot: %w", err)
		}
		if typ != tar.TypeReg {
			continue
		}
		offset := cw.n
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(tw, h), tr); err != nil {
			if cw.err != nil {
				return Received{}, nil, fmt.Errorf("store the workspace snapshot: %w", err)
			}
			return refuse("reading %q: %v", clean, err)
		}
		if want.MaxFiles == 0 {
			continue
		}
		sum := [sha256.Size]byte(h.Sum(nil))
		if change, ok := fileChange(clean, sum, want, lookup); ok {
			cands = append(cands, candidate{path: clean, size: hdr.Size, sum: sum, change: change, offset: offset})
		}
	}
	if err := tw.Close(); err != nil {
		return Received{}, nil, fmt.Errorf("store the workspace snapshot: %w", err)
	}
	if err := cw.w.(*bufio.Writer).Flush(); err != nil {
		return Received{}, nil, fmt.Errorf("store the workspace snapshot: %w", err)
	}
	return rec, cands, nil
}

// Linux's PATH_MAX and NAME_MAX: tar -x opens each entry by its full
// name, which the kernel refuses ("File name too long") at either bound.
const (
	pathMax = 4096
	nameMax = 255
)

// unpackable says why the next run's tar -x could not create the entry
// clean under Dir: its full name, with its NUL, is over PATH_MAX, or one
// of its components is over NAME_MAX. A program can make such a tree (a
// path is only bounded where it is opened whole), and tar -c archives it,
// so a genuine snapshot can hold one; stored, it would stop every later
// run of the query from starting.
func unpackable(clean string) error {
	if n := len(Dir) + 1 + len(clean); n >= pathMax {
		return fmt.Errorf("its path in %s is %d bytes, over the %d a later run could unpack", Dir, n, pathMax-1)
	}
	for c := range strings.SplitSeq(clean, "/") {
		if len(c) > nameMax {
			return fmt.Errorf("a name in its path is %d bytes, over the %d a later run could unpack", len(c), nameMax)
		}
	}
	return nil
}

// clipName shortens a long entry name for a message.
func clipName(s string) string {
	if len(s) <= 200 {
		return s
	}
	return s[:100] + "..." + s[len(s)-100:]
}

// pick keeps the first want.MaxFiles candidates by path, with the content
// of those that fit want.MaxBytes, read back from out.
func (rec *Received) pick(out *os.File, cands []candidate, want Want) error {
	slices.SortFunc(cands, func(a, b candidate) int { return strings.Compare(a.path, b.path) })
	if len(cands) > want.MaxFiles {
		rec.Omitted = len(cands) - want.MaxFiles
		cands = cands[:want.MaxFiles]
	}
	budget := want.MaxBytes
	head := make([]byte, sniffLen)
	for _, c := range cands {
		f := runner.File{Path: c.path, Size: c.size, SHA256: hex.EncodeToString(c.sum[:]), Change: c.change}
		n := min(c.size, sniffLen)
		if _, err := out.ReadAt(head[:n], c.offset); err != nil {
			return fmt.Errorf("read %s back from the workspace snapshot: %w", c.path, err)
		}
		f.MediaType = MediaType(c.path, head[:n])
		if c.size <= budget {
			f.Content = make([]byte, c.size)
			if _, err := out.ReadAt(f.Content, c.offset); err != nil {
				return fmt.Errorf("read %s back from the workspace snapshot: %w", c.path, err)
			}
			budget -= c.size
		}
		rec.Files = append(rec.Files, f)
	}
	return nil
}

// fileChange says whether the file at p with content digest sum is one
// want returns, and how the run changed it (before gives the files the run
// started with).
func fileChange(p string, sum [sha256.Size]byte, want Want, before func() Manifest) (runner.FileChange, bool) {
	if want.Paths != nil && !named(p, want.Paths) || want.Paths == nil && underDependencyDir(p) {
		return "", false
	}
	prev, existed := before()[p]
	switch {
	case !existed:
		return runner.FileCreated, true
	case prev != sum:
		return runner.FileModified, true
	}
	return runner.FileUnchanged, want.Paths != nil
}

// named reports whether the file at p is one of paths or lies below one.
func named(p string, paths []string) bool {
	for _, q := range paths {
		if q == "." || p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// countingWriter counts the bytes written through it and keeps the first
// error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}
