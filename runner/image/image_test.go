package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

func TestMirror(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{
			name:  "no sources falls back to deb.debian.org",
			files: map[string]string{},
			want:  DefaultMirror,
		},
		{
			name: "a one-line entry with options is read",
			files: map[string]string{
				"sources.list": "# comment\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main\n",
			},
			want: "http://mirror.example/debian",
		},
		{
			name: "a deb822 stanza for another suite is skipped",
			files: map[string]string{
				"sources.list.d/debian.sources": "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\nComponents: main\n\nTypes: deb\n# snapshot\nURIs: http://deb.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n",
			},
			want: "http://deb.example/debian",
		},
		{
			name: "a disabled deb822 stanza is skipped",
			files: map[string]string{
				"sources.list.d/a.sources": "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n",
				"sources.list.d/b.sources": "Types: deb\nURIs: http://on.example/debian\nSuites: bookworm\n",
			},
			want: "http://on.example/debian",
		},
		{
			name: "sources.list comes before sources.list.d",
			files: map[string]string{
				"sources.list":                  "deb http://first.example/debian bookworm main\n",
				"sources.list.d/debian.sources": "Types: deb\nURIs: http://second.example/debian\nSuites: bookworm\n",
			},
			want: "http://first.example/debian",
		},
		{
			name: "files not ending in .list or .sources are ignored",
			files: map[string]string{
				"sources.list.d/x.list.disabled": "deb http://disabled.example/debian bookworm main\n",
			},
			want: DefaultMirror,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := mirrorFrom(dir, "bookworm", DefaultMirror); got != tt.want {
				t.Fatalf("mirrorFrom = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSourcesList(t *testing.T) {
	t.Parallel()
	got := mirrors{main: "http://m.example/debian", security: "http://s.example/debian-security"}.sourcesList()
	want := "deb http://m.example/debian bookworm main\ndeb http://m.example/debian bookworm-updates main\ndeb http://s.example/debian-security bookworm-security main\n"
	if got != want {
		t.Fatalf("sources.list = %q, want %q", got, want)
	}
}

// requireRoot fails t unless it runs as root: these tests make the
// character devices and trusted.* attributes overlayfs writes, as an image
// build (which needs root) reads them.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (mknod, trusted.* xattrs), as gatekeeper image build does")
	}
}

type tarEntry struct {
	typ      byte
	mode     int64
	uid      int
	linkname string
	body     string
}

func readTar(t *testing.T, data []byte) map[string]tarEntry {
	t.Helper()
	entries, err := readTarBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// overlayLayer makes a directory in the form overlayfs leaves its upper
// directory: files, a symlink, a hard link, a whiteout and an opaque
// directory.
func overlayLayer(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"etc", "usr/bin", "var/lib/gone-dir"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(root, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/pip.conf", "[install]\nuser = true\n", 0o644)
	write("usr/bin/tool", "#!/bin/sh\n", 0o755)
	if err := unix.Chmod(filepath.Join(root, "usr/bin/tool"), 0o4755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "usr/bin/tool"), filepath.Join(root, "usr/bin/tool-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("tool", filepath.Join(root, "usr/bin/alias")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(root, "etc/pip.conf"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(root, "etc/removed.conf"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(root, "var/lib/gone-dir"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestWriteLayer(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	root := overlayLayer(t)
	var first, second bytes.Buffer
	if err := writeLayer(&first, root); err != nil {
		t.Fatal(err)
	}
	if err := writeLayer(&second, root); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("two tars of the same layer differ: the diff ID would not be stable")
	}
	entries := readTar(t, first.Bytes())
	want := map[string]tarEntry{
		"etc/":                          {typ: tar.TypeDir, mode: 0o755},
		"etc/pip.conf":                  {typ: tar.TypeReg, mode: 0o644, uid: 65534, body: "[install]\nuser = true\n"},
		"etc/.wh.removed.conf":          {typ: tar.TypeReg},
		"usr/bin/tool":                  {typ: tar.TypeReg, mode: 0o4755, body: "#!/bin/sh\n"},
		"usr/bin/tool-link":             {typ: tar.TypeLink, mode: 0o4755, linkname: "usr/bin/tool"},
		"usr/bin/alias":                 {typ: tar.TypeSymlink, mode: 0o777, linkname: "tool"},
		"var/lib/gone-dir/":             {typ: tar.TypeDir, mode: 0o755},
		"var/lib/gone-dir/.wh..wh..opq": {typ: tar.TypeReg},
	}
	for name, w := range want {
		got, ok := entries[name]
		if !ok {
			t.Errorf("tar lacks %s; has %v", name, entries)
			continue
		}
		if got != w {
			t.Errorf("%s = %+v, want %+v", name, got, w)
		}
	}
	if _, ok := entries["etc/removed.conf"]; ok {
		t.Error("the whiteout is in the tar as a device, not as .wh.removed.conf")
	}
	id, size, err := digestLayer(root)
	sum := sha256.Sum256(first.Bytes())
	if err != nil || id != "sha256:"+hex.EncodeToString(sum[:]) || size != int64(first.Len()) {
		t.Fatalf("digestLayer = %s, %d, %v; want the tar's sha256 and length %d", id, size, err, first.Len())
	}
}

// fakeEngine answers inspects from a set of tags and loads docker-save
// archives, checking each layer against the config's diff IDs as the
// engine does.
type fakeEngine struct {
	mu     sync.Mutex
	tags   map[string]bool
	loads  []loaded
	failAt string // a tag whose load the engine refuses
}

type loaded struct {
	tags    []string
	config  ocispec.Image
	layers  []string // diff IDs
	entries []map[string]tarEntry
}

func (f *fakeEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (dimage.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tags[ref] {
		return dimage.InspectResponse{ID: "sha256:x", Size: 1 << 20}, nil
	}
	return dimage.InspectResponse{}, cerrdefs.ErrNotFound.WithMessage("no such image: " + ref)
}

func (f *fakeEngine) ImageLoad(_ context.Context, input io.Reader, _ ...client.ImageLoadOption) (dimage.LoadResponse, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(input)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return dimage.LoadResponse{}, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return dimage.LoadResponse{}, err
		}
		files[h.Name] = data
	}
	var manifest []manifestEntry
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		return dimage.LoadResponse{}, fmt.Errorf("manifest.json: %v (%d entries)", err, len(manifest))
	}
	m := manifest[0]
	var cfg ocispec.Image
	if err := json.Unmarshal(files[m.Config], &cfg); err != nil {
		return dimage.LoadResponse{}, fmt.Errorf("config %s: %w", m.Config, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return dimage.LoadResponse{}, fmt.Errorf("%d diff IDs for %d layers", len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	l := loaded{tags: m.RepoTags, config: cfg}
	for i, p := range m.Layers {
		sum := sha256.Sum256(files[p])
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != string(cfg.RootFS.DiffIDs[i]) {
			return dimage.LoadResponse{}, fmt.Errorf("layer %s has diff ID %s, the config says %s", p, got, cfg.RootFS.DiffIDs[i])
		}
		l.layers = append(l.layers, string(cfg.RootFS.DiffIDs[i]))
		entries, _ := readTarBytes(files[p])
		l.entries = append(l.entries, entries)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Contains(m.RepoTags, f.failAt) {
		return dimage.LoadResponse{Body: io.NopCloser(strings.NewReader(`{"errorDetail":{"message":"no space left on device"},"error":"no space left on device"}` + "\n"))}, nil
	}
	f.loads = append(f.loads, l)
	for _, tag := range m.RepoTags {
		f.tags[tag] = true
	}
	return dimage.LoadResponse{Body: io.NopCloser(strings.NewReader(`{"stream":"Loaded image: ` + strings.Join(m.RepoTags, ",") + `\n"}` + "\n"))}, nil
}

func readTarBytes(data []byte) (map[string]tarEntry, error) {
	entries := map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(tr)
		entries[h.Name] = tarEntry{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, linkname: h.Linkname, body: string(body)}
	}
}

// fakeBuilder writes one file per layer (and a whiteout over its parent's
// file, as overlayfs would) and records the calls.
type fakeBuilder struct {
	mu    sync.Mutex
	calls []string                // profile names, in order
	lower map[string][]string     // per layer: its lowers
	fail  map[string]error        // per profile
	extra func(root, name string) // more files, if set
}

func (b *fakeBuilder) record(p profile.Profile) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, p.Name)
	return b.fail[p.Name]
}

func (b *fakeBuilder) Base(_ context.Context, dir string, p profile.Profile, log io.Writer) error {
	if err := b.record(p); err != nil {
		fmt.Fprintln(log, "E: Couldn't download packages")
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "etc", p.Name), []byte(p.Name), 0o644)
}

func (b *fakeBuilder) Layer(_ context.Context, lowers []string, upper, scratch string, p profile.Profile, log io.Writer) error {
	if err := b.record(p); err != nil {
		fmt.Fprintln(log, "E: Unable to locate package")
		return err
	}
	b.mu.Lock()
	if b.lower == nil {
		b.lower = map[string][]string{}
	}
	b.lower[p.Name] = lowers
	b.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(upper, "etc"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return err
	}
	if err := unix.Mknod(filepath.Join(upper, "etc", p.Parent), unix.S_IFCHR, 0); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(upper, "etc", p.Name), []byte(p.Name), 0o644)
}

func mustProfile(t *testing.T, name string) profile.Profile {
	t.Helper()
	p, ok := profile.Lookup(name)
	if !ok {
		t.Fatalf("no profile %s", name)
	}
	return p
}

func TestBuild(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	t.Run("an existing tag is not built again", func(t *testing.T) {
		t.Parallel()
		p := mustProfile(t, "python")
		fe := &fakeEngine{tags: map[string]bool{p.Tag(): true}}
		b := &fakeBuilder{}
		res, err := build(t.Context(), fe, Options{StateDir: t.TempDir()}, p, b)
		if err != nil || res.Tag != p.Tag() || !res.Existed || res.Size != 1<<20 {
			t.Fatalf("build = %+v, %v; want the existing %s with its size", res, err, p.Tag())
		}
		if len(b.calls) != 0 || len(fe.loads) != 0 {
			t.Fatalf("layers built %v, loads %d; want none", b.calls, len(fe.loads))
		}
	})
	t.Run("a profile is built layer by layer from the base and loaded with its config", func(t *testing.T) {
		t.Parallel()
		state := t.TempDir()
		p := mustProfile(t, "python-data")
		fe := &fakeEngine{tags: map[string]bool{}}
		b := &fakeBuilder{}
		res, err := build(t.Context(), fe, Options{StateDir: state}, p, b)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.calls, []string{"minimal", "python", "python-data"}) {
			t.Fatalf("built %v, want minimal, python, python-data", b.calls)
		}
		layersDir := filepath.Join(state, "layers")
		wantLowers := []string{filepath.Join(layersDir, "python-"+mustProfile(t, "python").Hash(), "root"), filepath.Join(layersDir, "minimal-"+mustProfile(t, "minimal").Hash(), "root")}
		if got := b.lower["python-data"]; !slices.Equal(got, wantLowers) {
			t.Errorf("python-data built over %v, want %v (nearest first)", got, wantLowers)
		}
		if len(fe.loads) != 1 {
			t.Fatalf("%d loads, want 1", len(fe.loads))
		}
		l := fe.loads[0]
		if !slices.Equal(l.tags, []string{p.Tag()}) || len(l.layers) != 3 {
			t.Fatalf("loaded %v with %d layers, want [%s] with 3", l.tags, len(l.layers), p.Tag())
		}
		c := l.config.Config
		if c.User != "65534:65534" || c.WorkingDir != "/workspace" || !slices.Equal(c.Env, profile.Env) ||
			c.Labels[LabelProfile] != "python-data" || c.Labels[LabelRecipe] != p.Hash() {
			t.Errorf("image config %+v", c)
		}
		if l.config.OS != "linux" || len(l.config.History) != 3 {
			t.Errorf("os %q, %d history entries; want linux and 3", l.config.OS, len(l.config.History))
		}
		top := l.entries[2]
		if top["etc/python-data"].body != "python-data" || top["etc/.wh.python"].typ != tar.TypeReg {
			t.Errorf("top layer %v: want its file and the whiteout of its parent's as .wh.python", top)
		}
		if res.Existed || len(res.Layers) != 3 || res.Layers[0].Cached || res.Log == "" {
			t.Errorf("result %+v: want three built layers and a log", res)
		}
		if left, _ := filepath.Glob(filepath.Join(layersDir, "*.partial")); len(left) != 0 {
			t.Errorf("partial layers left: %v", left)
		}
	})
	t.Run("a sibling profile reuses the cached layers it shares, with the same diff IDs", func(t *testing.T) {
		t.Parallel()
		state := t.TempDir()
		fe := &fakeEngine{tags: map[string]bool{}}
		b := &fakeBuilder{}
		if _, err := build(t.Context(), fe, Options{StateDir: state}, mustProfile(t, "python-data"), b); err != nil {
			t.Fatal(err)
		}
		b.calls = nil
		res, err := build(t.Context(), fe, Options{StateDir: state}, mustProfile(t, "node"), b)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.calls, []string{"node"}) {
			t.Fatalf("built %v, want only node", b.calls)
		}
		if !res.Layers[0].Cached || !res.Layers[1].Cached || res.Layers[2].Cached {
			t.Errorf("layers %+v: want minimal and python cached, node built", res.Layers)
		}
		data, node := fe.loads[0], fe.loads[1]
		if !slices.Equal(data.layers[:2], node.layers[:2]) || data.layers[2] == node.layers[2] {
			t.Errorf("diff IDs python-data %v, node %v: want the first two shared, the third not", data.layers, node.layers)
		}
	})
	t.Run("a failing layer names the log, which holds its output, and is built anew next time", func(t *testing.T) {
		t.Parallel()
		state := t.TempDir()
		p := mustProfile(t, "python")
		fe := &fakeEngine{tags: map[string]bool{}}
		b := &fakeBuilder{fail: map[string]error{"python": errors.New("exit status 100")}}
		_, err := build(t.Context(), fe, Options{StateDir: state}, p, b)
		if err == nil {
			t.Fatal("build succeeded, want an error")
		}
		logPath := filepath.Join(state, "build-"+strings.ReplaceAll(p.Tag(), ":", "-")+".log")
		if !strings.Contains(err.Error(), logPath) || !strings.Contains(err.Error(), "layer python") {
			t.Fatalf("error %q does not name the layer and the log %s", err, logPath)
		}
		data, rerr := os.ReadFile(logPath)
		if rerr != nil || !strings.Contains(string(data), "Unable to locate package") {
			t.Fatalf("log %s = %q, %v; want the layer's output", logPath, data, rerr)
		}
		if len(fe.loads) != 0 {
			t.Fatalf("loaded %d images after a failed layer", len(fe.loads))
		}
		b.fail, b.calls = nil, nil
		if _, err := build(t.Context(), fe, Options{StateDir: state}, p, b); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.calls, []string{"python"}) {
			t.Fatalf("second build built %v, want python only (minimal was cached)", b.calls)
		}
	})
	t.Run("a cached layer changed since its build is refused at the load", func(t *testing.T) {
		t.Parallel()
		state := t.TempDir()
		p := mustProfile(t, "minimal")
		fe := &fakeEngine{tags: map[string]bool{}}
		b := &fakeBuilder{}
		if _, err := build(t.Context(), fe, Options{StateDir: state}, p, b); err != nil {
			t.Fatal(err)
		}
		fe.tags = map[string]bool{} // the image was removed
		layer := filepath.Join(state, "layers", "minimal-"+p.Hash())
		if err := os.WriteFile(filepath.Join(layer, "root", "etc", "minimal"), []byte("tampered"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := build(t.Context(), fe, Options{StateDir: state}, p, b)
		if !errors.Is(err, errLayerChanged) || !strings.Contains(err.Error(), layer) {
			t.Fatalf("build = %v, want errLayerChanged naming %s", err, layer)
		}
	})
	t.Run("an engine that refuses the load fails the build", func(t *testing.T) {
		t.Parallel()
		p := mustProfile(t, "minimal")
		fe := &fakeEngine{tags: map[string]bool{}, failAt: p.Tag()}
		_, err := build(t.Context(), fe, Options{StateDir: t.TempDir()}, p, &fakeBuilder{})
		if err == nil || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("build = %v, want the engine's error", err)
		}
	})
}

func TestBuildUnknownProfile(t *testing.T) {
	t.Parallel()
	_, err := Build(t.Context(), Options{Profile: "pyhton", StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `unknown image profile "pyhton"`) || !strings.Contains(err.Error(), "python-data") {
		t.Fatalf("Build = %v, want an error naming the profiles", err)
	}
}

func TestBuildWithUnreachableEngine(t *testing.T) {
	t.Parallel()
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+filepath.Join(t.TempDir(), "no.sock")), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, err = Build(t.Context(), Options{Client: cli, StateDir: t.TempDir()})
	if !errors.Is(err, runner.ErrUnavailable) {
		t.Fatalf("Build = %v, want an error wrapping runner.ErrUnavailable", err)
	}
	if _, err := Missing(t.Context(), cli, []string{"x:1"}); !errors.Is(err, runner.ErrUnavailable) {
		t.Fatalf("Missing = %v, want an error wrapping runner.ErrUnavailable", err)
	}
}
