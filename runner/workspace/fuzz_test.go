package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
)

// FuzzCleanPath checks that every name the workspace accepts stays inside
// /workspace.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"main.py", "a/b/c.txt", "../x", "a/../../x", "/etc/passwd", "./y", "a//b", "..", ".", "", "a\x00b", `a\..\b`, "...", "..a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		clean, err := CleanPath(name)
		if err != nil {
			return
		}
		if clean == "" || strings.HasPrefix(clean, "/") || clean != path.Clean(clean) {
			t.Fatalf("CleanPath(%q) = %q: not a clean relative path", name, clean)
		}
		if full := path.Join(Dir, clean); !strings.HasPrefix(full, Dir+"/") {
			t.Fatalf("CleanPath(%q) = %q, which lands at %s outside %s", name, clean, full, Dir)
		}
	})
}

// FuzzReceive feeds Receive arbitrary streams: it must never panic, and a
// snapshot it accepts must hold only clean names of regular files,
// directories and links, within the workspace's size, that a later run's
// tar -x can create (PATH_MAX, NAME_MAX).
func FuzzReceive(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./d/", Mode: 0o755})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./d/f", Mode: 0o644, Size: 3})
	tw.Write([]byte("abc"))
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "../../etc"})
	tw.Close()
	f.Add(buf.Bytes())
	buf.Reset()
	tw = tar.NewWriter(&buf)
	long := ""
	for range 21 {
		long += strings.Repeat("d", 200) + "/"
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./" + long, Mode: 0o755})
	}
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./" + long + strings.Repeat("f", 256), Mode: 0o644})
	tw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		out, err := os.CreateTemp(t.TempDir(), "snap")
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		const size = 64 << 10
		rec, err := Receive(bytes.NewReader(stream), out, size, Want{MaxFiles: 5, MaxBytes: 1 << 10})
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Receive = %v, not a refusal", err)
			}
			return
		}
		if rec.Bytes > size {
			t.Fatalf("accepted %d bytes in a workspace of %d", rec.Bytes, size)
		}
		out.Seek(0, io.SeekStart)
		tr := tar.NewReader(out)
		dirs := map[string]bool{".": true}
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("the stored snapshot does not read back: %v", err)
			}
			name := strings.TrimSuffix(h.Name, "/")
			if c, err := CleanPath(name); err != nil || c != name {
				t.Fatalf("stored entry %q is not a clean relative path", h.Name)
			}
			if len(Dir+"/"+name) >= 4096 || slices.ContainsFunc(strings.Split(name, "/"), func(c string) bool { return len(c) > 255 }) {
				t.Fatalf("stored entry %q has a path over PATH_MAX or a name over NAME_MAX: no later run could unpack it", clipName(h.Name))
			}
			if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeSymlink {
				t.Fatalf("stored entry %q of type %q", h.Name, h.Typeflag)
			}
			if !dirs[path.Dir(name)] {
				t.Fatalf("stored entry %q is not below a directory stored before it", h.Name)
			}
			if h.Typeflag == tar.TypeDir {
				dirs[name] = true
			}
		}
	})
}
