// Package tmpfs gives tests (and the soak, bench/soak) a small filesystem of
// their own that they can fill to the brim: a tmpfs mounted for the test and
// unmounted after it.
package tmpfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// pageSize is the unit tmpfs allocates in.
const pageSize = 4096

// Mount mounts a tmpfs of size bytes (a multiple of 4096) on a new
// directory and unmounts it when the test ends. Mounting needs root: where
// it fails the test is skipped, except under CI=true, where it fails.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := MountDir(dir, size); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs of %d bytes on %s (the test needs root): %v", size, dir, err)
		}
		t.Skipf("mount a tmpfs of %d bytes on %s (the test needs root; under CI=true this fails): %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := Unmount(dir); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// MountDir mounts a tmpfs of size bytes (a multiple of 4096) on the
// existing directory dir; Unmount undoes it. Mounting needs root.
func MountDir(dir string, size int64) error { return mount(dir, size) }

// Unmount unmounts the tmpfs MountDir mounted on dir. A busy filesystem
// is tried again for up to 5 s: a child that another goroutine of the
// process forks holds every open file of the process (close-on-exec ones
// too) until it execs, and so keeps the mount busy for that moment after
// its user closed the last file on it (a parallel test's exec.Command made
// one cleanup fail under load).
func Unmount(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unmount(dir)
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Filler holds the files that fill a filesystem.
type Filler struct {
	t     testing.TB // nil outside a test
	files []string
}

// Fill writes files of one page each into dir until the filesystem has no
// page left, and checks that a one-byte file then fails with ENOSPC.
func Fill(t testing.TB, dir string) *Filler {
	t.Helper()
	f, err := FillUp(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.t = t
	return f
}

// FillUp is Fill outside a test: it returns what failed instead.
func FillUp(dir string) (*Filler, error) {
	f := &Filler{}
	page := bytes.Repeat([]byte{'.'}, pageSize)
	for i := 0; ; i++ {
		name := filepath.Join(dir, fmt.Sprintf("filler-%06d", i))
		err := os.WriteFile(name, page, 0o600)
		if err == nil {
			f.files = append(f.files, name)
			continue
		}
		os.Remove(name)
		if !errors.Is(err, syscall.ENOSPC) {
			return f, fmt.Errorf("fill %s: %w", dir, err)
		}
		break
	}
	probe := filepath.Join(dir, "filler-probe")
	err := os.WriteFile(probe, []byte{'.'}, 0o600)
	os.Remove(probe)
	if !errors.Is(err, syscall.ENOSPC) {
		return f, fmt.Errorf("after filling %s with %d pages a one-byte file got %v, want ENOSPC", dir, len(f.files), err)
	}
	return f, nil
}

// Free removes n of the filler's pages (all with n < 0).
func (f *Filler) Free(n int) {
	f.t.Helper()
	if err := f.Release(n); err != nil {
		f.t.Fatal(err)
	}
}

// Release is Free outside a test: it returns what failed instead.
func (f *Filler) Release(n int) error {
	if n < 0 || n > len(f.files) {
		n = len(f.files)
	}
	for _, name := range f.files[len(f.files)-n:] {
		if err := os.Remove(name); err != nil {
			return err
		}
	}
	f.files = f.files[:len(f.files)-n]
	return nil
}
