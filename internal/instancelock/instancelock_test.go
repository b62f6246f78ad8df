package instancelock_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/instancelock"
)

func TestASecondHolderIsRefusedUntilTheFirstReleases(t *testing.T) {
	// Not parallel: a flock belongs to the open file, and a child that
	// another test forks shares this process's files until its exec
	// closes them (close-on-exec), so a lock released in that window is
	// still held for a moment and the Acquire after Release would fail.
	dir := t.TempDir()
	first, err := instancelock.Acquire(dir, "docker", "default")
	if err != nil {
		t.Fatal(err)
	}
	_, err = instancelock.Acquire(dir, "docker", "default")
	var held *instancelock.HeldError
	if !errors.As(err, &held) || !errors.Is(err, instancelock.ErrHeld) {
		t.Fatalf("second Acquire = %v; want a HeldError", err)
	}
	for _, want := range []string{`instance "default" is in use by another sidecar (pid `, "--instance NAME"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Another backend's or instance's lock is another file.
	for _, other := range [][2]string{{"kube", "default"}, {"docker", "other"}} {
		l, err := instancelock.Acquire(dir, other[0], other[1])
		if err != nil {
			t.Fatalf("Acquire(%s, %s) = %v; want its own lock", other[0], other[1], err)
		}
		l.Release()
	}
	first.Release()
	first.Release() // twice is harmless
	again, err := instancelock.Acquire(dir, "docker", "default")
	if err != nil {
		t.Fatalf("Acquire after Release = %v", err)
	}
	again.Release()
}

// TestAKilledHolderDoesNotBlock pins the reason for flock: a holder killed
// with SIGKILL, which runs no clean-up of its own, leaves no lock behind.
// The holder is this test binary run again as TestHoldTheLock.
func TestAKilledHolderDoesNotBlock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder := exec.Command(os.Args[0], "-test.run=^TestHoldTheLock$")
	holder.Env = append(os.Environ(), "INSTANCELOCK_HOLD="+dir)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("holder said %q (%v); want held", line, err)
	}
	if _, err := instancelock.Acquire(dir, "docker", "i"); !errors.Is(err, instancelock.ErrHeld) {
		t.Fatalf("Acquire while another process holds it = %v; want ErrHeld", err)
	}
	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	l, err := instancelock.Acquire(dir, "docker", "i")
	if err != nil {
		t.Fatalf("Acquire after the holder was killed = %v; want the lock", err)
	}
	l.Release()
}

// TestHoldTheLock is TestAKilledHolderDoesNotBlock's other process: it
// does nothing unless INSTANCELOCK_HOLD names a directory.
func TestHoldTheLock(t *testing.T) {
	dir := os.Getenv("INSTANCELOCK_HOLD")
	if dir == "" {
		return
	}
	if _, err := instancelock.Acquire(dir, "docker", "i"); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("held\n")
	time.Sleep(time.Minute)
}

// TestALockDirectoryOthersControlIsRefused: the default lock directory may
// lie under the shared /tmp. A directory others may write, a directory
// that is a symbolic link, and a symbolic link planted as the lock file are
// each refused, and the file the link names is left as it was (a sidecar
// running as root would otherwise create or truncate it).
func TestALockDirectoryOthersControlIsRefused(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, instancelock.Path(private, "docker", "default")); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(base, "linked")
	if err := os.Symlink(open, linked); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"a directory anyone may write", open, "mode 0777; it must be this user's"},
		{"a directory that is a symbolic link", linked, "open its directory: not a directory"},
		{"a symbolic link planted as the lock file", private, "too many levels of symbolic links"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := instancelock.Acquire(tc.dir, "docker", "default")
			if err == nil {
				l.Release()
				t.Fatalf("Acquire(%s) took the lock; want a refusal", tc.dir)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
	if entries, _ := os.ReadDir(open); len(entries) != 0 {
		t.Errorf("the refused directory holds %d files; want none", len(entries))
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Errorf("the link's target now holds %q", b)
	}
}
