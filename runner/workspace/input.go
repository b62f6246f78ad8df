package workspace

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"time"
)

// Files checks the names of a run's files and returns them with the main
// file (the code, named main) as one map of clean paths, and the tmpfs
// space they take. Every problem is returned, joined.
func Files(main, code string, files map[string]string) (map[string]string, int64, error) {
	out := map[string]string{main: code}
	dirs := map[string]bool{}
	var problems []error
	for name, content := range files {
		clean, err := CleanPath(name)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if _, dup := out[clean]; dup {
			problems = append(problems, fmt.Errorf("file %q collides with another file or the main file", name))
			continue
		}
		out[clean] = content
		ancestors(clean, func(d string) bool { dirs[d] = true; return false })
	}
	for d := range dirs {
		if _, clash := out[d]; clash {
			problems = append(problems, fmt.Errorf("file %q is also a directory", d))
		}
	}
	if len(problems) > 0 {
		return nil, 0, errors.Join(problems...)
	}
	need := int64(0)
	for _, content := range out {
		need += Pages(int64(len(content)))
	}
	return out, need, nil
}

// MergedBytes is the tmpfs space /workspace takes once a run's files
// (as Files returns them, taking need) are unpacked over the saved
// snapshot, whose files take savedBytes: the saved files the run's files
// replace do not count. It reads the snapshot's headers (skipping the
// content, with Seek when saved can).
func MergedBytes(saved io.Reader, savedBytes int64, files map[string]string, need int64) (int64, error) {
	dirs := map[string]bool{}
	for name := range files {
		ancestors(name, func(d string) bool { dirs[d] = true; return false })
	}
	tr := tar.NewReader(saved)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return savedBytes + need, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read the saved workspace: %w", err)
		}
		if hdr.Typeflag == tar.TypeReg && replaced(hdr, files, dirs) {
			savedBytes -= Pages(hdr.Size)
		}
	}
}

// Input is what a run's /workspace starts from.
type Input struct {
	// Saved is the saved snapshot (a tar stream as Receive writes it), or
	// nil for an empty workspace.
	Saved io.Reader
	// Files are the run's files (its code among them), keyed by clean
	// paths, as Files returns them.
	Files map[string]string
	// UID and GID own everything in the stream.
	UID, GID int
	// SavedInPlace: the sandbox already holds Saved in /workspace (a
	// session's sandbox after its first run), so its entries are only
	// read for the Manifest, not written.
	SavedInPlace bool
}

// WriteInput writes the tar stream a run unpacks into /workspace: the
// saved snapshot's entries, except those a file of in.Files replaces or
// that stand where one of them or its directories goes, then the
// directories in.Files need and in.Files themselves. It returns the
// regular files of the stream with their digests. An error reading the
// saved snapshot or writing w is returned; the stream is then incomplete.
func WriteInput(w io.Writer, in Input) (Manifest, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := tar.NewWriter(bw)
	man := Manifest{}
	dirs := map[string]bool{}
	for name := range in.Files {
		ancestors(name, func(d string) bool { dirs[d] = true; return false })
	}
	now := time.Now()

	if in.Saved != nil {
		tr := tar.NewReader(in.Saved)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read the saved workspace: %w", err)
			}
			if replaced(hdr, in.Files, dirs) {
				continue
			}
			if in.SavedInPlace {
				if hdr.Typeflag == tar.TypeReg {
					h := sha256.New()
					if _, err := io.Copy(h, tr); err != nil {
						return nil, fmt.Errorf("read the saved workspace's %s: %w", hdr.Name, err)
					}
					man[hdr.Name] = [sha256.Size]byte(h.Sum(nil))
				}
				continue
			}
			out := ownedHeader(hdr, in.UID, in.GID)
			if err := tw.WriteHeader(out); err != nil {
				return nil, fmt.Errorf("workspace tar: %w", err)
			}
			if hdr.Typeflag != tar.TypeReg {
				continue
			}
			h := sha256.New()
			if _, err := io.Copy(io.MultiWriter(tw, h), tr); err != nil {
				return nil, fmt.Errorf("copy the saved workspace's %s: %w", hdr.Name, err)
			}
			man[hdr.Name] = [sha256.Size]byte(h.Sum(nil))
		}
	}

	dirNames := make([]string, 0, len(dirs))
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames) // parents before children
	for _, d := range dirNames {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, Uid: in.UID, Gid: in.GID, ModTime: now, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("workspace tar: %w", err)
		}
	}
	names := make([]string, 0, len(in.Files))
	for n := range in.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		content := in.Files[n]
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(content)), Uid: in.UID, Gid: in.GID, ModTime: now, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("workspace tar: %w", err)
		}
		if _, err := io.WriteString(tw, content); err != nil {
			return nil, fmt.Errorf("workspace tar: %w", err)
		}
		man[n] = sha256.Sum256([]byte(content))
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("workspace tar: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("workspace tar: %w", err)
	}
	return man, nil
}

// replaced reports whether a saved entry gives way to the run's files: it
// is one of them, lies below one of them (a directory that becomes a
// file), or is not a directory where their directories go.
func replaced(hdr *tar.Header, files map[string]string, dirs map[string]bool) bool {
	name := path.Clean(hdr.Name)
	if _, ok := files[name]; ok {
		return true
	}
	if dirs[name] && hdr.Typeflag != tar.TypeDir {
		return true
	}
	below := false
	ancestors(name, func(d string) bool {
		_, below = files[d]
		return below
	})
	return below
}

// ownedHeader is a copy of a saved entry's header, owned by uid and gid,
// with no user or group names and no extended records.
func ownedHeader(hdr *tar.Header, uid, gid int) *tar.Header {
	return &tar.Header{
		Typeflag: hdr.Typeflag, Name: hdr.Name, Linkname: hdr.Linkname, Size: hdr.Size,
		Mode: hdr.Mode, Uid: uid, Gid: gid, ModTime: hdr.ModTime, Format: tar.FormatPAX,
	}
}
