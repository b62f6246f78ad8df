package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

// rootBuilder builds layers with debootstrap, overlayfs and chroot, as
// root. Every mount it makes is in a mount namespace of the build's own
// process, so whatever ends the build, no mount is left behind on the
// host, and cleaning up the state directory never reaches through one.
type rootBuilder struct {
	mirrors mirrors
	state   string
}

// chrootScript mounts what a recipe's script needs and runs it in the
// root file system: for a layer above the base, an overlayfs of the
// layers below with the new layer as its upper directory (no redirects or
// metadata-only copies: the upper directory must hold whole files); /proc,
// the host's /dev; the build's apt sources and the host's resolv.conf,
// read-only; apt's package lists and downloaded packages, kept in the
// state directory across builds.
const chrootScript = `set -eu
root=$1 lowers=$2 upper=$3 work=$4 sources=$5 lists=$6 cache=$7 script=$8
if [ -n "$lowers" ]; then
  mount -t overlay overlay -o "lowerdir=$lowers,upperdir=$upper,workdir=$work,redirect_dir=off,metacopy=off,index=off" "$root"
fi
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --bind "$sources" "$root/etc/apt/sources.list"
mount -o remount,bind,ro "$root/etc/apt/sources.list"
mount --bind /etc/resolv.conf "$root/etc/resolv.conf"
mount -o remount,bind,ro "$root/etc/resolv.conf"
mount --bind "$lists" "$root/var/lib/apt/lists"
mount --bind "$cache" "$root/var/cache/apt"
exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/sh -euc "$script"`

func (b rootBuilder) check() error {
	if os.Geteuid() != 0 {
		return errors.New("building a sandbox image needs root (debootstrap, overlayfs, chroot)")
	}
	return nil
}

// Base runs debootstrap --variant=minbase into dir, keeping the downloaded
// packages in the state directory, then the base's recipe in a chroot.
func (b rootBuilder) Base(ctx context.Context, dir string, p profile.Profile, log io.Writer) error {
	if err := b.check(); err != nil {
		return err
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("debootstrap not found (apt-get install debootstrap, or run scripts/ensure-docker): %w", err)
	}
	cache := filepath.Join(b.state, "debootstrap-cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return fmt.Errorf("debootstrap cache: %w", err)
	}
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--cache-dir="+cache,
		"--include="+strings.Join(p.Packages, ","), profile.Suite, dir, b.mirrors.main)
	if err := b.run(cmd, log); err != nil {
		return fmt.Errorf("debootstrap %s from %s: %w", profile.Suite, b.mirrors.main, err)
	}
	// The engine gives every container its own /dev, resolv.conf and
	// hostname; resolv.conf must be a plain file to be mounted over.
	devs, _ := filepath.Glob(filepath.Join(dir, "dev", "*"))
	for _, d := range devs {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	resolv := filepath.Join(dir, "etc", "resolv.conf")
	if err := os.Remove(resolv); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(resolv, nil, 0o644); err != nil {
		return err
	}
	if err := b.chroot(ctx, dir, nil, "", "", p.Setup+"\n"+profile.Finish, log); err != nil {
		return err
	}
	// debootstrap's own package lists and cache, hidden under the mounts
	// while the recipe ran.
	for _, pattern := range []string{"var/cache/apt/*", "var/lib/apt/lists/*"} {
		left, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, l := range left {
			if err := os.RemoveAll(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// Layer runs p's recipe in an overlayfs of lowers with upper as its upper
// directory; scratch holds overlayfs's work directory and the mount point.
func (b rootBuilder) Layer(ctx context.Context, lowers []string, upper, scratch string, p profile.Profile, log io.Writer) error {
	if err := b.check(); err != nil {
		return err
	}
	mnt, work := filepath.Join(scratch, "mnt"), filepath.Join(scratch, "work")
	for _, d := range append([]string{upper, mnt, work}, lowers...) {
		if err := checkPathForOverlay(d); err != nil {
			return err
		}
	}
	for _, d := range []string{upper, mnt, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return b.chroot(ctx, mnt, lowers, upper, work, p.Script(), log)
}

// chroot runs script in root (after mounting the overlay of lowers and
// upper on it, when lowers is not empty) in a mount namespace of its own.
func (b rootBuilder) chroot(ctx context.Context, root string, lowers []string, upper, work, script string, log io.Writer) error {
	apt := filepath.Join(b.state, "apt")
	lists, cache := filepath.Join(apt, "lists"), filepath.Join(apt, "cache")
	for _, d := range []string{filepath.Join(lists, "partial"), filepath.Join(cache, "archives", "partial")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	sources := filepath.Join(apt, "sources.list")
	if err := os.WriteFile(sources, []byte(b.mirrors.sourcesList()), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", chrootScript, "gatekeeper-image-build",
		root, strings.Join(lowers, ":"), upper, work, sources, lists, cache, script)
	if err := b.run(cmd, log); err != nil {
		return fmt.Errorf("recipe script: %w", err)
	}
	return nil
}

// run runs cmd in a mount namespace and process group of its own, with
// its output in log; a cancelled ctx kills the whole group.
func (b rootBuilder) run(cmd *exec.Cmd, log io.Writer) error {
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd.Run()
}
