// Package instancelock keeps two sidecars from serving one instance at
// once. A sidecar removes every sandbox labelled with its instance when it
// starts (what a killed predecessor left): a second sidecar of the same
// instance would remove the first one's warm sandboxes and the runs in
// flight in them. Acquire takes an exclusive flock(2) on a lock file of
// the instance; the kernel releases it when the holder exits, however it
// exits, so a crashed (SIGKILLed) sidecar never blocks the next start and
// no heartbeat or lease expiry has to be tuned.
//
// The lock guards sidecars of one user on one host (the lock directory is
// the user's runtime directory). Sidecars on different hosts sharing one
// engine or cluster need a marker the engine holds, such as a
// coordination.k8s.io Lease; this package is the host-local half.
package instancelock

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrHeld is wrapped by Acquire's error when a live process holds the
// instance.
var ErrHeld = errors.New("instance held by a running sidecar")

// Lock is a held instance lock. Release it with Release; the kernel
// releases it when the process ends.
type Lock struct {
	f *os.File
}

// HeldError says which instance is held and by whom.
type HeldError struct {
	Instance string
	Path     string
	Holder   string // what the holder wrote: "pid N since RFC3339"; may be empty
}

func (e *HeldError) Error() string {
	who := "another sidecar"
	if e.Holder != "" {
		who += " (" + e.Holder + ")"
	}
	return fmt.Sprintf("instance %q is in use by %s, which would lose its sandboxes if this one removed the instance's leftovers at start; "+
		"give this sidecar another name with --instance NAME, or stop that one first (lock %s)", e.Instance, who, e.Path)
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// Path is the lock file of an instance of a backend under dir.
func Path(dir, backend, instance string) string {
	return filepath.Join(dir, url.PathEscape(backend)+"-"+url.PathEscape(instance)+".lock")
}

// Acquire takes the lock of instance of backend under dir (made 0700 if
// missing) without waiting. When a live process holds it, the error is a
// *HeldError (errors.Is ErrHeld) that tells how to pick another name.
// The file is opened close-on-exec, so a child process (an MCP server)
// never inherits the lock.
func Acquire(dir, backend, instance string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("instance lock: %w", err)
	}
	path := Path(dir, backend, instance)
	f, err := openInPrivateDir(dir, filepath.Base(path))
	if err != nil {
		return nil, fmt.Errorf("instance lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			holder = strings.TrimSpace(string(b))
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Instance: instance, Path: path, Holder: holder}
		}
		return nil, fmt.Errorf("instance lock %s: %w", path, err)
	}
	// Who holds it, for the next one's message; the lock is the flock,
	// not this text, so a failed write only loses the detail.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte("pid "+strconv.Itoa(os.Getpid())+" since "+time.Now().UTC().Format(time.RFC3339)+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up. It is safe to call on a nil Lock and more
// than once.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Close() // closing the descriptor drops the flock
	l.f = nil
}

// openInPrivateDir opens (creating it 0600) the file name in dir, which
// must be a directory of this user that no one else may write: the default
// lock directory may lie under the shared /tmp, where another user could
// have made it first and planted a symbolic link as the lock file, which
// a sidecar running as root would then create or truncate wherever it
// points. The directory is opened first and checked by its descriptor, and
// the file is opened relative to it without following a link, so no
// rename between the check and the open can swap either.
func openInPrivateDir(dir, name string) (*os.File, error) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open its directory: %w", err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return nil, fmt.Errorf("stat its directory: %w", err)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("its directory %s belongs to uid %d with mode %#o; it must be this user's (uid %d) and writable by no one else: remove it, or set XDG_RUNTIME_DIR to a private directory",
			dir, st.Uid, st.Mode&0o7777, os.Geteuid())
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, name)), nil
}
