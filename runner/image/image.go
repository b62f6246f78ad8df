// Package image builds gatekeeper's sandbox images (the profiles of
// runner/image/profile) without a registry: debootstrap makes the base
// from the machine's apt mirror, each further layer is the base (and the
// layers below it) with Debian packages added in a chroot over overlayfs,
// and the Docker API loads the layers as an image whose tag hashes its
// recipe.
//
// Layers are cached in the state directory (layers/<profile>-<hash>), so
// the base is made once and python-data and node both build on the one
// python layer; the engine shares the common layers between the images
// too. Build does nothing when the image of the recipe exists, and
// rebuilds only the layers whose recipe changed.
package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

// DefaultMirror is used when the machine's apt sources name no Debian mirror.
const DefaultMirror = "http://deb.debian.org/debian"

// DefaultSecurityMirror is used when they name no mirror of the security suite.
const DefaultSecurityMirror = "http://deb.debian.org/debian-security"

// DefaultStateDir holds build logs, the layer cache and apt's caches.
const DefaultStateDir = "/var/lib/gatekeeper"

// Options says what to build. The zero value builds the default profile.
type Options struct {
	// Profile names the profile to build; empty means profile.Default.
	Profile string
	// Mirror is the Debian mirror to use; empty means the first Debian URI
	// of the machine's apt sources (see Mirror), else DefaultMirror. The
	// security suite comes from the machine's source for it, else
	// DefaultSecurityMirror. Neither is part of the recipe: every mirror
	// serves the same packages.
	Mirror string
	// StateDir holds build-<tag>.log, the layer cache and apt's caches;
	// empty means $GATEKEEPER_STATE_DIR, else DefaultStateDir.
	StateDir string
	// Client is the engine client; nil means one from the environment with
	// API version negotiation.
	Client *client.Client
}

// Result says what Build did.
type Result struct {
	// Tag is the profile's image tag.
	Tag string
	// Existed is true when the image was there already and Build did nothing.
	Existed bool
	// Layers are the profile's layers from the base up, each built or
	// taken from the cache.
	Layers []Layer
	// Duration is the whole build, load included.
	Duration time.Duration
	// Size is the image's size as the engine reports it (the layers it
	// shares with other profiles included).
	Size int64
	// Log is the build log's path; empty when the image existed.
	Log string
}

// Layer is one layer of a Build.
type Layer struct {
	Profile string
	// Cached is true when the layer came from the state directory.
	Cached bool
	// Duration is the time its build took (zero when cached).
	Duration time.Duration
	// Bytes is the size of its tar.
	Bytes int64
}

// engine is the part of the Docker client Build uses.
type engine interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (dimage.InspectResponse, error)
	ImageLoad(ctx context.Context, input io.Reader, opts ...client.ImageLoadOption) (dimage.LoadResponse, error)
}

// builder makes the root file systems of layers. The real one
// (rootBuilder) uses debootstrap, overlayfs and chroot, and needs root.
type builder interface {
	// Base makes the base layer's root file system in dir.
	Base(ctx context.Context, dir string, p profile.Profile, log io.Writer) error
	// Layer makes p's layer in upper: the files p adds over lowers (the
	// layers below, the nearest first), in overlayfs's form.
	Layer(ctx context.Context, lowers []string, upper, scratch string, p profile.Profile, log io.Writer) error
}

func (o Options) stateDir() string {
	if o.StateDir != "" {
		return o.StateDir
	}
	if d := os.Getenv("GATEKEEPER_STATE_DIR"); d != "" {
		return d
	}
	return DefaultStateDir
}

// Build makes the image of o.Profile unless an image with its tag exists.
// It needs root, debootstrap and overlayfs: the base takes about half a
// minute, python-data a minute or two more (see docs/SANDBOX.md).
// Concurrent Builds on one machine are serialised by a lock file in the
// state directory. On failure the error names the build log.
func Build(ctx context.Context, o Options) (Result, error) {
	name := o.Profile
	if name == "" {
		name = profile.Default
	}
	p, ok := profile.Lookup(name)
	if !ok {
		return Result{}, fmt.Errorf("unknown image profile %q (profiles: %s)", name, strings.Join(profile.Names(), ", "))
	}
	b := rootBuilder{mirrors: o.mirrors(), state: o.stateDir()}
	if o.Client != nil {
		return build(ctx, o.Client, o, p, b)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return Result{}, fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	return build(ctx, cli, o, p, b)
}

func build(ctx context.Context, cli engine, o Options, p profile.Profile, b builder) (Result, error) {
	begin := time.Now()
	res := Result{Tag: p.Tag()}
	exists, err := imageExists(ctx, cli, res.Tag, &res.Size)
	if err != nil || exists {
		res.Existed = exists
		return res, err
	}

	state := o.stateDir()
	if err := os.MkdirAll(state, 0o755); err != nil {
		return res, fmt.Errorf("state dir: %w", err)
	}
	unlock, err := lock(filepath.Join(state, "image-build.lock"))
	if err != nil {
		return res, err
	}
	defer unlock()
	// Someone else may have built it while we waited for the lock.
	if exists, err := imageExists(ctx, cli, res.Tag, &res.Size); err != nil || exists {
		res.Existed = exists
		return res, err
	}

	res.Log = filepath.Join(state, "build-"+strings.ReplaceAll(res.Tag, ":", "-")+".log")
	logFile, err := os.Create(res.Log)
	if err != nil {
		return res, fmt.Errorf("build log: %w", err)
	}
	defer logFile.Close()
	fail := func(step string, err error) (Result, error) {
		fmt.Fprintf(logFile, "error: %s: %v\n", step, err)
		return res, fmt.Errorf("build image %s: %s: %w (log: %s)", res.Tag, step, err, res.Log)
	}
	fmt.Fprintf(logFile, "building %s\n%s", res.Tag, p.Recipe())

	var cached []cachedLayer
	for _, l := range p.Chain() {
		c, layer, err := ensureLayer(ctx, filepath.Join(state, "layers"), l, cached, b, logFile)
		if err != nil {
			return fail("layer "+l.Name, err)
		}
		cached = append(cached, c)
		res.Layers = append(res.Layers, layer)
		fmt.Fprintf(logFile, "layer %s: %s, %d bytes, cached %v, %s\n", l.Name, c.meta.DiffID, c.meta.Size, layer.Cached, layer.Duration.Round(time.Millisecond))
	}
	if err := load(ctx, cli, p, cached, logFile); err != nil {
		return fail("load", err)
	}
	if exists, err := imageExists(ctx, cli, res.Tag, &res.Size); err != nil || !exists {
		return fail("load", fmt.Errorf("the engine has no %s after the load (%v)", res.Tag, err))
	}
	res.Duration = time.Since(begin)
	fmt.Fprintf(logFile, "done: %s in %s\n", res.Tag, res.Duration.Round(time.Millisecond))
	return res, nil
}

// Missing returns those of refs (image references) the engine has no
// image of. A nil cli means a client from the environment. An engine that
// cannot be reached is an error wrapping runner.ErrUnavailable.
func Missing(ctx context.Context, cli *client.Client, refs []string) ([]string, error) {
	if cli == nil {
		c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("docker client: %w", err)
		}
		defer c.Close()
		cli = c
	}
	var missing []string
	for _, ref := range refs {
		var size int64
		ok, err := imageExists(ctx, cli, ref, &size)
		if err != nil {
			return nil, err
		}
		if !ok {
			missing = append(missing, ref)
		}
	}
	return missing, nil
}

// imageExists reports whether the engine has tag, and its size in size.
func imageExists(ctx context.Context, cli engine, tag string, size *int64) (bool, error) {
	img, err := cli.ImageInspect(ctx, tag)
	switch {
	case err == nil:
		*size = img.Size
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	case client.IsErrConnectionFailed(err) || cerrdefs.IsUnavailable(err):
		return false, fmt.Errorf("inspect image %s: %w: %w", tag, runner.ErrUnavailable, err)
	default:
		return false, fmt.Errorf("inspect image %s: %w", tag, err)
	}
}

// lock takes an exclusive flock on path, waiting for it.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("build lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("build lock %s: %w", path, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// mirrors are the Debian mirrors of a build.
type mirrors struct{ main, security string }

func (o Options) mirrors() mirrors {
	m := mirrors{main: o.Mirror, security: mirrorFrom("/etc/apt", profile.Suite+"-security", DefaultSecurityMirror)}
	if m.main == "" {
		m.main = Mirror(profile.Suite)
	}
	return m
}

// sourcesList is the apt sources of a build: the suite, its updates and
// its security suite.
func (m mirrors) sourcesList() string {
	s := profile.Suite
	return fmt.Sprintf("deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n", m.main, s, m.main, s, m.security, s)
}

// Mirror returns the first Debian mirror URI for suite in the machine's apt
// sources (/etc/apt/sources.list and /etc/apt/sources.list.d/*.list and
// *.sources), or DefaultMirror.
func Mirror(suite string) string {
	return mirrorFrom("/etc/apt", suite, DefaultMirror)
}

func mirrorFrom(aptDir, suite, fallback string) string {
	files := []string{filepath.Join(aptDir, "sources.list")}
	lists, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*.list"))
	sources, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*.sources"))
	files = append(files, lists...)
	files = append(files, sources...)
	for _, f := range files {
		var uri string
		if strings.HasSuffix(f, ".sources") {
			uri = fromDeb822(f, suite)
		} else {
			uri = fromOneLine(f, suite)
		}
		if uri != "" {
			return uri
		}
	}
	return fallback
}

// fromOneLine reads a one-line-style sources file:
// "deb [options] URI suite component...".
func fromOneLine(path, suite string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[0] != "deb" {
			continue
		}
		fields = fields[1:]
		if strings.HasPrefix(fields[0], "[") {
			for len(fields) > 0 && !strings.HasSuffix(fields[0], "]") {
				fields = fields[1:]
			}
			if len(fields) > 0 {
				fields = fields[1:]
			}
		}
		if len(fields) >= 2 && fields[1] == suite && isHTTP(fields[0]) {
			return strings.TrimSuffix(fields[0], "/")
		}
	}
	return ""
}

// fromDeb822 reads a deb822-style .sources file: stanzas of "Key: value"
// lines separated by blank lines.
func fromDeb822(path, suite string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, stanza := range strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				continue
			}
			fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
		if strings.EqualFold(fields["enabled"], "no") || !slices.Contains(strings.Fields(fields["types"]), "deb") {
			continue
		}
		if !slices.Contains(strings.Fields(fields["suites"]), suite) {
			continue
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			if isHTTP(uri) {
				return strings.TrimSuffix(uri, "/")
			}
		}
	}
	return ""
}

func isHTTP(uri string) bool {
	return strings.HasPrefix(uri, "http://") || strings.HasPrefix(uri, "https://")
}

// errLayerChanged means a cached layer's files no longer give the tar its
// metadata records.
var errLayerChanged = errors.New("cached layer changed since it was built")
