package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Docker's layer format marks deletions with these names.
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)

// writeLayer writes root, a layer in overlayfs's form, as a Docker layer
// tar: a whiteout (a character device 0:0) becomes a .wh.<name> file, and
// an opaque directory (xattr trusted.overlay.opaque=y) gets a .wh..wh..opq
// entry. Entries come in lexical order with numeric owners and whole
// seconds, so the same files always give the same bytes, and so the same
// diff ID. Extended attributes are not kept: the sandbox runs without
// capabilities, so file capabilities would be of no use. Sockets are
// skipped.
func writeLayer(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // device and inode of files with several links
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", p, err)
		}
		hdr := &tar.Header{
			Name:    name,
			Mode:    int64(st.Mode & 0o7777),
			Uid:     int(st.Uid),
			Gid:     int(st.Gid),
			ModTime: time.Unix(st.Mtim.Sec, 0),
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			opaque, err := isOpaque(p)
			if err != nil || !opaque {
				return err
			}
			return tw.WriteHeader(&tar.Header{Name: name + "/" + opaqueMarker, Typeflag: tar.TypeReg, ModTime: hdr.ModTime})
		case unix.S_IFCHR:
			if st.Rdev == 0 {
				return tw.WriteHeader(&tar.Header{Name: path.Join(path.Dir(name), whiteoutPrefix+path.Base(name)), Typeflag: tar.TypeReg, ModTime: hdr.ModTime})
			}
			hdr.Typeflag, hdr.Devmajor, hdr.Devminor = tar.TypeChar, int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		case unix.S_IFBLK:
			hdr.Typeflag, hdr.Devmajor, hdr.Devminor = tar.TypeBlock, int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		case unix.S_IFIFO:
			hdr.Typeflag = tar.TypeFifo
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case unix.S_IFREG:
			if st.Nlink > 1 {
				key := [2]uint64{st.Dev, st.Ino}
				if first, ok := links[key]; ok {
					hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
					return tw.WriteHeader(hdr)
				}
				links[key] = name
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			return copyFile(tw, p, st.Size)
		default: // a socket
			return nil
		}
		return tw.WriteHeader(hdr)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func copyFile(w io.Writer, p string, size int64) error {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if n != size {
		return fmt.Errorf("%s: %d bytes read, %d expected: %w", p, n, size, errLayerChanged)
	}
	return nil
}

// isOpaque reports whether overlayfs marked directory p opaque.
func isOpaque(p string) (bool, error) {
	buf := make([]byte, 4)
	n, err := unix.Lgetxattr(p, "trusted.overlay.opaque", buf)
	switch {
	case err == nil:
		return n == 1 && buf[0] == 'y', nil
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EOPNOTSUPP):
		return false, nil
	default:
		return false, fmt.Errorf("xattr of %s: %w", p, err)
	}
}
