package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestDefaultTag(t *testing.T) {
	t.Parallel()
	tagRE := regexp.MustCompile(`^gatekeeper-sandbox:[0-9a-f]{12}$`)
	tests := []struct {
		name     string
		a, b     Options
		wantSame bool
	}{
		{"the same options give the same tag", Options{}, Options{}, true},
		{"the mirror is not part of the recipe", Options{}, Options{Mirror: "http://example.invalid/debian"}, true},
		{"the state dir is not part of the recipe", Options{}, Options{StateDir: "/elsewhere"}, true},
		{"the default suite equals its explicit name", Options{}, Options{Suite: DefaultSuite}, true},
		{"adding node changes the tag", Options{}, Options{Node: true}, false},
		{"another suite changes the tag", Options{}, Options{Suite: "trixie"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := DefaultTag(tt.a), DefaultTag(tt.b)
			for _, tag := range []string{a, b} {
				if !tagRE.MatchString(tag) {
					t.Fatalf("tag %q does not match %s", tag, tagRE)
				}
			}
			if (a == b) != tt.wantSame {
				t.Fatalf("DefaultTag(%+v) = %s, DefaultTag(%+v) = %s; want same: %v", tt.a, a, tt.b, b, tt.wantSame)
			}
		})
	}
}

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
			if got := mirrorFrom(dir, "bookworm"); got != tt.want {
				t.Fatalf("mirrorFrom = %q, want %q", got, tt.want)
			}
		})
	}
}

// fakeEngine records imports and answers inspects from a set of tags.
type fakeEngine struct {
	mu       sync.Mutex
	tags     map[string]bool
	imported []string          // tags
	changes  [][]string        // per import
	entries  []map[string]bool // names in each imported tar
}

func (f *fakeEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (dimage.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tags[ref] {
		return dimage.InspectResponse{ID: "sha256:x"}, nil
	}
	return dimage.InspectResponse{}, cerrdefs.ErrNotFound.WithMessage("no such image: " + ref)
}

func (f *fakeEngine) ImageImport(_ context.Context, src dimage.ImportSource, ref string, opts dimage.ImportOptions) (io.ReadCloser, error) {
	names := map[string]bool{}
	tr := tar.NewReader(src.Source)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		names[strings.TrimPrefix(h.Name, "./")] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imported = append(f.imported, ref)
	f.changes = append(f.changes, opts.Changes)
	f.entries = append(f.entries, names)
	f.tags[ref] = true
	return io.NopCloser(strings.NewReader(`{"status":"sha256:abc"}` + "\n")), nil
}

// fakeBootstrap makes a tiny root file system with the things trim removes.
func fakeBootstrap(ctx context.Context, dir, cache, suite, mirror string, packages []string, log io.Writer) error {
	for _, f := range []string{"usr/bin/python3", "usr/share/doc/x/copyright", "var/lib/apt/lists/l", "usr/share/man/man1/a.1"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "fake bootstrap of %s from %s with %v\n", suite, mirror, packages)
	return nil
}

func TestBuild(t *testing.T) {
	t.Parallel()
	t.Run("an existing tag is not built again", func(t *testing.T) {
		t.Parallel()
		o := Options{StateDir: t.TempDir(), Mirror: "http://m.example/debian"}
		fe := &fakeEngine{tags: map[string]bool{DefaultTag(o): true}}
		called := false
		tag, err := build(t.Context(), fe, o, func(context.Context, string, string, string, string, []string, io.Writer) error {
			called = true
			return nil
		})
		if err != nil || tag != DefaultTag(o) {
			t.Fatalf("build = %q, %v; want %q, nil", tag, err, DefaultTag(o))
		}
		if called || len(fe.imported) != 0 {
			t.Fatalf("bootstrap called %v, imports %v; want neither", called, fe.imported)
		}
	})
	t.Run("a missing tag is bootstrapped, trimmed and imported with the config changes", func(t *testing.T) {
		t.Parallel()
		o := Options{StateDir: t.TempDir(), Mirror: "http://m.example/debian"}
		fe := &fakeEngine{tags: map[string]bool{}}
		tag, err := build(t.Context(), fe, o, fakeBootstrap)
		if err != nil {
			t.Fatal(err)
		}
		if len(fe.imported) != 1 || fe.imported[0] != tag {
			t.Fatalf("imported %v, want [%s]", fe.imported, tag)
		}
		got := strings.Join(fe.changes[0], "\n")
		for _, want := range []string{"USER 65534:65534", "WORKDIR /workspace", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"} {
			if !strings.Contains(got, want) {
				t.Errorf("changes %q lack %q", got, want)
			}
		}
		names := fe.entries[0]
		for _, want := range []string{"workspace/", "deps/", "usr/bin/python3"} {
			if !names[want] {
				t.Errorf("image lacks %s; has %v", want, names)
			}
		}
		for n := range names {
			if strings.HasPrefix(n, "usr/share/doc/") && n != "usr/share/doc/" || strings.HasPrefix(n, "var/lib/apt/lists/") && n != "var/lib/apt/lists/" || strings.HasPrefix(n, "usr/share/man/") && n != "usr/share/man/" {
				t.Errorf("image keeps trimmed %s", n)
			}
		}
		left, _ := filepath.Glob(filepath.Join(o.StateDir, "rootfs-*"))
		if len(left) != 0 {
			t.Errorf("temporary root file systems left: %v", left)
		}
	})
	t.Run("a failing bootstrap names the log, which holds its output", func(t *testing.T) {
		t.Parallel()
		o := Options{StateDir: t.TempDir(), Mirror: "http://m.example/debian"}
		fe := &fakeEngine{tags: map[string]bool{}}
		_, err := build(t.Context(), fe, o, func(_ context.Context, _, _, _, _ string, _ []string, log io.Writer) error {
			fmt.Fprintln(log, "E: Couldn't download packages")
			return errors.New("exit status 1")
		})
		if err == nil {
			t.Fatal("build succeeded, want an error")
		}
		logPath := filepath.Join(o.StateDir, "build-"+strings.ReplaceAll(DefaultTag(o), ":", "-")+".log")
		if !strings.Contains(err.Error(), logPath) {
			t.Fatalf("error %q does not name the log %s", err, logPath)
		}
		data, rerr := os.ReadFile(logPath)
		if rerr != nil || !strings.Contains(string(data), "Couldn't download packages") {
			t.Fatalf("log %s = %q, %v; want the bootstrap output", logPath, data, rerr)
		}
		if len(fe.imported) != 0 {
			t.Fatalf("imported %v after a failed bootstrap", fe.imported)
		}
	})
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
}
