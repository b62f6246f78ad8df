// Package image builds gatekeeper's default sandbox image without a
// registry: debootstrap makes a minimal Debian root file system from the
// machine's apt mirror, and the Docker API imports it as an image.
//
// The image's tag carries a hash of its recipe, so Build does nothing when
// an image of the same recipe exists and builds again only when the recipe
// changes.
package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Repository is the repository part of every tag Build makes.
const Repository = "gatekeeper-sandbox"

// DefaultSuite is the Debian release the image is made of.
const DefaultSuite = "bookworm"

// DefaultMirror is used when the machine's apt sources name no Debian mirror.
const DefaultMirror = "http://deb.debian.org/debian"

// DefaultStateDir holds build logs and the temporary root file system.
const DefaultStateDir = "/var/lib/gatekeeper"

// recipeVersion changes whenever the build steps below change in a way that
// changes the image; it is part of the hashed recipe.
const recipeVersion = "3"

// Options says what image to build. The zero value builds the default image.
type Options struct {
	// Node adds Debian's nodejs so that the node language is available.
	Node bool
	// Suite is the Debian release; empty means DefaultSuite.
	Suite string
	// Mirror is the Debian mirror to use; empty means the first Debian URI of
	// the machine's apt sources (see Mirror), else DefaultMirror. It is not
	// part of the recipe: every mirror serves the same packages.
	Mirror string
	// StateDir holds build-<tag>.log and the temporary root file system;
	// empty means $GATEKEEPER_STATE_DIR, else DefaultStateDir.
	StateDir string
	// Client is the engine client; nil means one from the environment with
	// API version negotiation.
	Client *client.Client
}

// engine is the part of the Docker client Build uses.
type engine interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (dimage.InspectResponse, error)
	ImageImport(ctx context.Context, source dimage.ImportSource, ref string, opts dimage.ImportOptions) (io.ReadCloser, error)
}

// changes are the image config changes applied on import.
var changes = []string{
	"USER 65534:65534",
	"WORKDIR /workspace",
	"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"ENV LANG=C.UTF-8",
}

// trimmed are the paths (relative to the root file system, globbed) that
// Build removes to keep the image small.
var trimmed = []string{
	"var/lib/apt/lists/*",
	"var/cache/apt/*",
	"var/cache/debconf/*-old",
	"var/log/*",
	"usr/share/doc/*",
	"usr/share/man/*",
	"usr/share/info/*",
	"usr/share/locale/*",
	"usr/share/lintian/*",
}

func (o Options) suite() string {
	if o.Suite != "" {
		return o.Suite
	}
	return DefaultSuite
}

func (o Options) packages() []string {
	p := []string{"python3-minimal"}
	if o.Node {
		p = append(p, "nodejs")
	}
	return p
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

// recipe is the text whose hash names the image.
func (o Options) recipe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version %s\nsuite %s\nvariant minbase\ninclude %s\n", recipeVersion, o.suite(), strings.Join(o.packages(), ","))
	fmt.Fprintf(&b, "trim %s\ndirs /workspace /deps\n", strings.Join(trimmed, " "))
	for _, c := range changes {
		fmt.Fprintf(&b, "change %s\n", c)
	}
	return b.String()
}

// DefaultTag returns the tag Build makes for o:
// gatekeeper-sandbox:<first 12 hex digits of the recipe's SHA-256>. The
// recipe names packages, not their versions: to pick up updated packages,
// remove the image and build again.
func DefaultTag(o Options) string {
	sum := sha256.Sum256([]byte(o.recipe()))
	return Repository + ":" + hex.EncodeToString(sum[:])[:12]
}

// Build makes the image of o unless an image with its tag exists, and
// returns the tag. It needs root and debootstrap, and takes about a minute.
// Concurrent Builds on one machine are serialised by a lock file in the
// state directory. On failure the error names the build log.
func Build(ctx context.Context, o Options) (tag string, err error) {
	if o.Client != nil {
		return build(ctx, o.Client, o, debootstrap)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	return build(ctx, cli, o, debootstrap)
}

// bootstrapFunc makes a root file system in dir, keeping downloaded
// packages in cache, logging to log.
type bootstrapFunc func(ctx context.Context, dir, cache, suite, mirror string, packages []string, log io.Writer) error

func build(ctx context.Context, cli engine, o Options, bootstrap bootstrapFunc) (string, error) {
	tag := DefaultTag(o)
	exists, err := imageExists(ctx, cli, tag)
	if err != nil || exists {
		return tag, err
	}

	state := o.stateDir()
	if err := os.MkdirAll(state, 0o755); err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	unlock, err := lock(filepath.Join(state, "image-build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	// Someone else may have built it while we waited for the lock.
	if exists, err := imageExists(ctx, cli, tag); err != nil || exists {
		return tag, err
	}

	logPath := filepath.Join(state, "build-"+strings.ReplaceAll(tag, ":", "-")+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", fmt.Errorf("build log: %w", err)
	}
	defer logFile.Close()
	fail := func(step string, err error) (string, error) {
		fmt.Fprintf(logFile, "error: %s: %v\n", step, err)
		return "", fmt.Errorf("build image %s: %s: %w (log: %s)", tag, step, err, logPath)
	}

	mirror := o.Mirror
	if mirror == "" {
		mirror = Mirror(o.suite())
	}
	fmt.Fprintf(logFile, "building %s from %s\n%s", tag, mirror, o.recipe())

	work, err := os.MkdirTemp(state, "rootfs-")
	if err != nil {
		return fail("temp dir", err)
	}
	defer os.RemoveAll(work)
	rootfs := filepath.Join(work, "rootfs")

	if err := bootstrap(ctx, rootfs, filepath.Join(state, "debootstrap-cache"), o.suite(), mirror, o.packages(), logFile); err != nil {
		return fail("debootstrap", err)
	}
	if err := trim(rootfs); err != nil {
		return fail("trim root file system", err)
	}
	if err := importRootfs(ctx, cli, rootfs, tag, logFile); err != nil {
		return fail("import", err)
	}
	fmt.Fprintf(logFile, "done: %s\n", tag)
	return tag, nil
}

func imageExists(ctx context.Context, cli engine, tag string) (bool, error) {
	_, err := cli.ImageInspect(ctx, tag)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	case client.IsErrConnectionFailed(err) || cerrdefs.IsUnavailable(err):
		return false, fmt.Errorf("inspect image %s: %w: %w", tag, runner.ErrUnavailable, err)
	default:
		return false, fmt.Errorf("inspect image %s: %w", tag, err)
	}
}

// debootstrap runs debootstrap --variant=minbase, keeping the downloaded
// packages in cache so that a rebuild downloads only what changed.
func debootstrap(ctx context.Context, dir, cache, suite, mirror string, packages []string, log io.Writer) error {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("debootstrap not found (apt-get install debootstrap, or run scripts/ensure-docker): %w", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("debootstrap needs root")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return fmt.Errorf("debootstrap cache: %w", err)
	}
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--cache-dir="+cache,
		"--include="+strings.Join(packages, ","), suite, dir, mirror)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LANG=C.UTF-8")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("debootstrap %s from %s: %w", suite, mirror, err)
	}
	return nil
}

// trim removes what the sandbox does not need and creates the mount points.
func trim(rootfs string) error {
	for _, pattern := range trimmed {
		matches, err := filepath.Glob(filepath.Join(rootfs, pattern))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{"workspace", "deps"} {
		p := filepath.Join(rootfs, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// importRootfs streams a tar of rootfs (made by the system's tar, which
// keeps owners, modes, links and devices exactly) into ImageImport.
func importRootfs(ctx context.Context, cli engine, rootfs, tag string, log io.Writer) error {
	cmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "--xattrs", "-C", rootfs, "-cf", "-", ".")
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	resp, err := cli.ImageImport(ctx, dimage.ImportSource{Source: out, SourceName: "-"}, tag, dimage.ImportOptions{
		Changes: append(append([]string{}, changes...), "LABEL gatekeeper.recipe="+strings.TrimPrefix(tag, Repository+":")),
		Message: "gatekeeper sandbox image",
	})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("image import: %w", err)
	}
	defer resp.Close()
	streamErr := jsonmessage.DisplayJSONMessagesStream(resp, log, 0, false, nil)
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	if streamErr != nil {
		return fmt.Errorf("image import: %w", streamErr)
	}
	return nil
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

// Mirror returns the first Debian mirror URI for suite in the machine's apt
// sources (/etc/apt/sources.list and /etc/apt/sources.list.d/*.list and
// *.sources), or DefaultMirror.
func Mirror(suite string) string {
	return mirrorFrom("/etc/apt", suite)
}

func mirrorFrom(aptDir, suite string) string {
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
	return DefaultMirror
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
