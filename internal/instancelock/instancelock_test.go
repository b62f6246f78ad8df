package instancelock_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
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
