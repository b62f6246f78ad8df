package workspace

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// entry is one tar entry of a test stream.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
	size             int64 // -1: len(body)
}

func file(name, body string) entry {
	return entry{name: name, body: body, typ: tar.TypeReg, mode: 0o644, size: -1}
}
func dir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }

// tarOf writes entries as a tar stream, the way GNU tar names them (./x).
func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		size := e.size
		if size < 0 {
			size = int64(len(e.body))
		}
		h := &tar.Header{Typeflag: e.typ, Name: e.name, Linkname: e.link, Mode: e.mode, Size: size, ModTime: time.Unix(1e9, 0), Format: tar.FormatGNU}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil && size == int64(len(e.body)) {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// headerOnly is a tar stream of one header whose content never comes.
func headerOnly(t *testing.T, h *tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tar.NewWriter(&buf).WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// contents reads a tar stream into name → body ("<dir>" for
// directories, "-> target" for links).
func contents(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[h.Name] = "<dir>"
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		default:
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "snap-*.tar")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestFiles(t *testing.T) {
	t.Parallel()
	files, need, err := Files("main.py", "print('main')", map[string]string{"a/b/c.txt": "deep", "x.py": "X = 1", "./y.txt": strings.Repeat("y", 5000)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a/b/c.txt": "deep", "main.py": "print('main')", "x.py": "X = 1", "y.txt": strings.Repeat("y", 5000)}
	if len(files) != len(want) {
		t.Errorf("files %v, want %v", files, want)
	}
	for k, v := range want {
		if files[k] != v {
			t.Errorf("files[%q] = %q, want %q", k, clipS(files[k]), clipS(v))
		}
	}
	if need != 5*pageSize {
		t.Errorf("need %d bytes, want %d (three one-page files and one of two pages)", need, 5*pageSize)
	}
	bad := []map[string]string{
		{"../x": "1"}, {"a/../../x": "1"}, {"/abs": "1"}, {"": "1"}, {".": "1"},
		{"main.py": "shadow"}, {"d": "file", "d/e": "nested"}, {"a\\b": "1"}, {"a\x00b": "1"},
	}
	for _, f := range bad {
		if _, _, err := Files("main.py", "", f); err == nil {
			t.Errorf("files %q accepted, want an error", f)
		}
	}
}

func clipS(s string) string { return s[:min(len(s), 20)] }

func TestWriteInputMergesTheSavedWorkspaceWithTheRunsFiles(t *testing.T) {
	t.Parallel()
	saved := tarOf(t,
		dir("d/"), dir("d/e/"), file("d/e/f.txt", "under d"),
		file("x", "a file where a directory goes"),
		file("keep.txt", "kept"),
		file("main.py", "old code"),
		entry{name: "link", link: "keep.txt", typ: tar.TypeSymlink, mode: 0o777},
	)
	files := map[string]string{"main.py": "new code", "d": "now a file", "x/y.txt": "below x"}
	var out bytes.Buffer
	man, err := WriteInput(&out, Input{Saved: bytes.NewReader(saved), Files: files, UID: 1000, GID: 1001})
	if err != nil {
		t.Fatal(err)
	}
	got := contents(t, bytes.NewReader(out.Bytes()))
	want := map[string]string{
		"keep.txt": "kept", "link": "-> keep.txt", "x/": "<dir>",
		"main.py": "new code", "d": "now a file", "x/y.txt": "below x",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("merged stream holds\n%v\nwant\n%v", got, want)
	}
	tr := tar.NewReader(bytes.NewReader(out.Bytes()))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Uid != 1000 || h.Gid != 1001 {
			t.Errorf("%s owned by %d:%d, want 1000:1001", h.Name, h.Uid, h.Gid)
		}
	}
	var names []string
	for n, sum := range man {
		names = append(names, n)
		if body := got[n]; sum != sha256.Sum256([]byte(body)) {
			t.Errorf("manifest digest of %s does not match its content", n)
		}
	}
	slices.Sort(names)
	if want := []string{"d", "keep.txt", "main.py", "x/y.txt"}; !slices.Equal(names, want) {
		t.Errorf("manifest holds %v, want the regular files %v", names, want)
	}

	merged, err := MergedBytes(bytes.NewReader(saved), 5*pageSize, files, 3*pageSize)
	if err != nil {
		t.Fatal(err)
	}
	if merged != 5*pageSize {
		t.Errorf("merged bytes %d, want %d: keep.txt, plus the three new files, less the three saved files they replace", merged, 5*pageSize)
	}
}

func TestReceiveNormalizesAndReturnsTheChangedFiles(t *testing.T) {
	t.Parallel()
	stream := tarOf(t,
		dir("./"), dir("./out/"), file("./out/new.txt", "new"),
		entry{name: "./locked", body: "0 mode", typ: tar.TypeReg, mode: 0o4000, size: -1},
		file("./same.txt", "same"), file("./changed.txt", "v2"),
		dir("./.local/"), file("./.local/dep.py", "# dependency"),
		dir("./node_modules/"), file("./node_modules/m.js", "//"),
		dir("./pkg/"), dir("./pkg/__pycache__/"), file("./pkg/__pycache__/m.pyc", "\x00"),
		entry{name: "./fifo", typ: tar.TypeFifo, mode: 0o644},
		entry{name: "./ln", link: "/etc/passwd", typ: tar.TypeSymlink, mode: 0o777},
	)
	before := Manifest{"same.txt": sha256.Sum256([]byte("same")), "changed.txt": sha256.Sum256([]byte("v1"))}
	out := tempFile(t)
	rec, err := Receive(bytes.NewReader(stream), out, 1<<20, Want{Before: func() Manifest { return before }, MaxFiles: 10, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rec.Files {
		got = append(got, fmt.Sprintf("%s %s %q", f.Path, f.Change, f.Content))
	}
	want := []string{`changed.txt modified "v2"`, `locked created "0 mode"`, `out/new.txt created "new"`}
	if !slices.Equal(got, want) || rec.Omitted != 0 {
		t.Errorf("files %q (%d omitted), want %q", got, rec.Omitted, want)
	}
	if rec.Entries != 13 || rec.Bytes != 7*pageSize {
		t.Errorf("%d entries taking %d bytes, want 13 (no fifo, no root) and 7 pages (a page per file)", rec.Entries, rec.Bytes)
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Name, "./") || h.Name == "fifo" || h.Uid != 0 || h.Uname != "" {
			t.Errorf("stored entry %q (uid %d %q): want clean names, no fifo, no owner", h.Name, h.Uid, h.Uname)
		}
		if h.Name == "locked" && h.Mode != 0o600 {
			t.Errorf("locked stored with mode %o, want 600: no set-id bit, readable and writable by its owner", h.Mode)
		}
	}
}

func TestReceiveStopsAtTheTarsEnd(t *testing.T) {
	t.Parallel()
	after := "\x00\x00\x00\x1egatekeeper-snap 0011 000\x1e"
	r := bytes.NewReader(append(tarOf(t, file("a", "x")), after...))
	if _, err := Receive(r, tempFile(t), 1<<20, Want{}); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != after {
		t.Errorf("left %q after the tar, want %q: what follows the archive is the caller's", rest, after)
	}
}

func TestReceiveCapsTheFilesItReturns(t *testing.T) {
	t.Parallel()
	stream := tarOf(t, file("e.txt", "eeeee"), file("a.txt", "aaa"), file("d.txt", "dd"), file("c.txt", "cccccccc"), file("b.txt", ""))
	tests := []struct {
		name     string
		want     Want
		files    []string // path and whether content came
		omitted  int
		entries  int
		contents int
	}{
		{name: "no files asked for returns none", want: Want{MaxFiles: 0, MaxBytes: 1 << 20}, omitted: 0},
		{name: "the first files by path, the rest counted", want: Want{MaxFiles: 2, MaxBytes: 1 << 20}, files: []string{"a.txt true", "b.txt true"}, omitted: 3},
		{name: "a file past the byte budget is listed without content", want: Want{MaxFiles: 4, MaxBytes: 6}, files: []string{"a.txt true", "b.txt true", "c.txt false", "d.txt true"}, omitted: 1},
		{name: "named paths return unchanged files too", want: Want{Paths: []string{"c.txt", "e.txt"}, Before: func() Manifest { return Manifest{"c.txt": sha256.Sum256([]byte("cccccccc"))} }, MaxFiles: 5, MaxBytes: 1 << 20}, files: []string{"c.txt true", "e.txt true"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec, err := Receive(bytes.NewReader(stream), tempFile(t), 1<<20, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range rec.Files {
				got = append(got, fmt.Sprintf("%s %v", f.Path, f.Content != nil))
			}
			if !slices.Equal(got, tc.files) || rec.Omitted != tc.omitted {
				t.Errorf("files %q, %d omitted; want %q, %d", got, rec.Omitted, tc.files, tc.omitted)
			}
		})
	}
}

// deepTree is a tree of directories with names of 200 bytes and a file
// below them, as a program makes it (mkdir and chdir one level at a time)
// and tar -c archives it, whose path in /workspace is full bytes long.
func deepTree(full int) []entry {
	rest := full - len(Dir+"/")
	var entries []entry
	p := ""
	for rest > 201+1 {
		p += strings.Repeat("d", 200) + "/"
		entries = append(entries, dir("./"+p))
		rest -= 201
	}
	return append(entries, file("./"+p+strings.Repeat("f", rest), "x"))
}

func TestReceiveTakesTheLongestNamesALaterRunCanUnpack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream []byte
	}{
		{name: "a path of 4095 bytes in /workspace (PATH_MAX less its NUL)", stream: tarOf(t, deepTree(4095)...)},
		{name: "a name of 255 bytes (NAME_MAX)", stream: tarOf(t, dir("./"+strings.Repeat("d", 255)+"/"), file(strings.Repeat("d", 255)+"/"+strings.Repeat("f", 255), "x"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Receive(bytes.NewReader(tc.stream), tempFile(t), 1<<20, Want{}); err != nil {
				t.Fatalf("Receive = %v; want it taken", err)
			}
		})
	}
}

func TestReceiveRefuses(t *testing.T) {
	t.Parallel()
	many := make([]entry, MaxEntries+1)
	for i := range many {
		many[i] = dir(fmt.Sprintf("d%d/", i))
	}
	tests := []struct {
		name   string
		stream []byte
		size   int64
		want   string
	}{
		{name: "files taking more than the workspace", stream: tarOf(t, file("a", strings.Repeat("x", 5000)), file("b", strings.Repeat("x", 5000))), size: 3 * pageSize, want: "more than the workspace's"},
		{name: "one file longer than the workspace, before its content is read", stream: headerOnly(t, &tar.Header{Typeflag: tar.TypeReg, Name: "sparse", Mode: 0o644, Size: 1 << 30}), size: 1 << 20, want: "more than the workspace's"},
		{name: "a name leaving the workspace", stream: tarOf(t, file("../escape", "x")), size: 1 << 20, want: "leaves /workspace"},
		{name: "an absolute name", stream: tarOf(t, file("/etc/cron.d/x", "x")), size: 1 << 20, want: "is absolute"},
		{name: "a hard link", stream: tarOf(t, file("a", "x"), entry{name: "b", link: "a", typ: tar.TypeLink}), size: 1 << 20, want: "hard link"},
		{name: "an entry below a file (a forged snapshot that no later run could unpack)", stream: tarOf(t, file("a", "x"), file("a/b", "y")), size: 1 << 20, want: `entry "a/b" is not below a directory`},
		{name: "an entry below a symbolic link", stream: tarOf(t, entry{name: "l", link: "/etc", typ: tar.TypeSymlink}, file("l/passwd", "y")), size: 1 << 20, want: `entry "l/passwd" is not below a directory`},
		{name: "an entry before its directory", stream: tarOf(t, file("d/f", "x"), dir("d/")), size: 1 << 20, want: `entry "d/f" is not below a directory`},
		{name: "an entry below a directory the stream never holds", stream: tarOf(t, dir("d/"), file("d/e/f", "x")), size: 1 << 20, want: `("d/e" is none)`},
		{name: "a tree 25 directories of 200 bytes deep (tar -x fails: File name too long)", stream: tarOf(t, append(deepTree(25*201 + len(Dir+"/") + 1)[:25], file("./"+strings.Repeat(strings.Repeat("d", 200)+"/", 25)+"f", "x"))...), size: 1 << 20, want: "over the 4095 a later run could unpack"},
		{name: "a path of 4096 bytes in /workspace (PATH_MAX)", stream: tarOf(t, deepTree(4096)...), size: 1 << 20, want: "is 4096 bytes, over the 4095"},
		{name: "a directory name of 256 bytes", stream: tarOf(t, dir("./"+strings.Repeat("d", 256)+"/")), size: 1 << 20, want: "256 bytes, over the 255"},
		{name: "a file name of 256 bytes below a directory", stream: tarOf(t, dir("./d/"), file("./d/"+strings.Repeat("f", 256), "x")), size: 1 << 20, want: "256 bytes, over the 255"},
		{name: "a link to a target of 4096 bytes (symlink(2) takes at most 4095)", stream: tarOf(t, entry{name: "l", link: strings.Repeat("t", 4096), typ: tar.TypeSymlink}), size: 1 << 20, want: "link to a bad target"},
		{name: "a name twice", stream: tarOf(t, file("a", "x"), file("./a", "y")), size: 1 << 20, want: "appears twice"},
		{name: "more entries than MaxEntries", stream: tarOf(t, many...), size: 1 << 30, want: "more than 50000 entries"},
		{name: "a stream cut short", stream: tarOf(t, file("a", strings.Repeat("x", 4000)))[:1000], size: 1 << 20, want: "reading"},
		{name: "something that is no tar", stream: []byte(strings.Repeat("not a tar ", 100)), size: 1 << 20, want: "reading it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Receive(bytes.NewReader(tc.stream), tempFile(t), tc.size, Want{MaxFiles: 10, MaxBytes: 1 << 20})
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Receive = %v; want an error wrapping ErrRefused that says %q", err, tc.want)
			}
		})
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store, err := OpenStore(filepath.Join(dir, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := store.Workspace("q_a")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := store.Workspace("q_a"); again != a {
		t.Error("a second Workspace of the same key is another workspace")
	}
	if r, n, err := a.Saved(); r != nil || n != 0 || err != nil {
		t.Fatalf("a new workspace's Saved = %v, %d, %v; want empty", r, n, err)
	}
	save := func(w *Workspace, body string) {
		t.Helper()
		f, err := os.CreateTemp(w.TempDir(), "snapshot-*.tar")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(body)
		f.Close()
		if err := w.Replace(f.Name(), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	save(a, "one")
	r, _, _ := a.Saved()
	save(a, "two") // a reader of the old snapshot keeps reading it
	old, _ := io.ReadAll(r)
	r.Close()
	r, n, _ := a.Saved()
	cur, _ := io.ReadAll(r)
	r.Close()
	if string(old) != "one" || string(cur) != "two" || n != 3 {
		t.Errorf("read %q while replaced, then %q (%d bytes); want one, then two (3)", old, cur, n)
	}
	if entries, _ := os.ReadDir(a.TempDir()); len(entries) != 1 {
		t.Errorf("%d files in the workspace's directory, want 1: the replaced snapshot is deleted", len(entries))
	}

	// A run may take the workspace only in turn.
	unlock, err := a.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := a.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second Lock = %v, want it to wait until its context ends", err)
	}
	unlock()

	b, _ := store.Workspace("q_b")
	save(b, "b")
	if err := store.Remove("q_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.TempDir()); !os.IsNotExist(err) {
		t.Errorf("the removed workspace's directory: %v, want it gone", err)
	}
	if _, _, err := a.Saved(); !errors.Is(err, ErrRemoved) {
		t.Errorf("Saved after Remove = %v, want ErrRemoved", err)
	}
	late := filepath.Join(dir, "late.tar")
	os.WriteFile(late, []byte("x"), 0o600)
	if err := a.Replace(late, 1); !errors.Is(err, ErrRemoved) {
		t.Errorf("Replace after Remove = %v, want ErrRemoved", err)
	}
	if _, err := os.Stat(late); !os.IsNotExist(err) {
		t.Error("a snapshot handed to a removed workspace is left on disk")
	}

	// A new Store on the same directory (a sidecar restarted after kill -9)
	// removes what the old one left.
	again, err := OpenStore(filepath.Join(dir, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := again.Cleanup(); n != 1 || err != nil {
		t.Errorf("Cleanup = %d, %v; want 1 (q_b's), nil", n, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "ws")); len(entries) != 0 {
		t.Errorf("%d entries left after Cleanup", len(entries))
	}
	if fi, _ := os.Stat(filepath.Join(dir, "ws")); fi.Mode().Perm() != 0o700 {
		t.Errorf("store directory mode %o, want 700", fi.Mode().Perm())
	}
}

func TestCleanOutputs(t *testing.T) {
	t.Parallel()
	got, err := CleanOutputs([]string{".", "./out/", "a/../b"})
	if err != nil || !slices.Equal(got, []string{".", "out", "b"}) {
		t.Errorf("CleanOutputs = %q, %v", got, err)
	}
	for _, bad := range []string{"../x", "/etc", "", "a\x00"} {
		if _, err := CleanOutputs([]string{bad}); err == nil {
			t.Errorf("CleanOutputs(%q) accepted", bad)
		}
	}
	if got, _ := CleanOutputs(nil); got != nil {
		t.Error("nil outputs became non-nil: a run naming none would return no changed files")
	}
}

func TestMediaType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, head, want string
	}{
		{"a PNG by its signature, whatever its name", "chart.dat", "\x89PNG\r\n\x1a\n\x00\x00", "image/png"},
		{"a JPEG", "photo.jpg", "\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"},
		{"a GIF", "a.gif", "GIF89a\x01\x00", "image/gif"},
		{"a WebP", "a.webp", "RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"},
		{"a PDF", "r.pdf", "%PDF-1.7\n", "application/pdf"},
		{"an SVG is text with its extension", "plot.svg", "<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml"},
		{"a .png that is text is text", "fake.png", "not an image", "text/plain; charset=utf-8"},
		{"CSV", "DATA.CSV", "a,b\n1,2\n", "text/csv; charset=utf-8"},
		{"JSON", "r.json", `{"a": 1}`, "application/json"},
		{"Markdown", "README.md", "# Title\n", "text/markdown; charset=utf-8"},
		{"UTF-8 text", "notes", "héllo ✓\tok\r\n", "text/plain; charset=utf-8"},
		{"a head cut inside a rune is still text", "cut.txt", "caf\xc3", "text/plain; charset=utf-8"},
		{"a NUL makes it binary", "x.txt", "a\x00b", "application/octet-stream"},
		{"an escape character makes it binary", "x.txt", "\x1b[31mred", "application/octet-stream"},
		{"invalid UTF-8 is binary", "x.txt", "\xff\xfe", "application/octet-stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := MediaType(tc.file, []byte(tc.head)); got != tc.want {
				t.Errorf("MediaType(%q, %q) = %q, want %q", tc.file, tc.head, got, tc.want)
			}
		})
	}
	if IsText([]byte("caf\xc3")) {
		t.Error("IsText of content ending inside a rune = true, want false: only a head may be cut")
	}
}
