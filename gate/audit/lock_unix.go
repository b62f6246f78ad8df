//go:build unix

package audit

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking flock on f. It is released
// when f is closed.
func lockFile(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
	}); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if errors.Is(lerr, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	if lerr != nil {
		return fmt.Errorf("lock: %w", lerr)
	}
	return nil
}

// unlockFile releases f's flock and closes f. The explicit unlock matters:
// a child forked meanwhile (by any goroutine of the process, until it
// execs) shares the lock, which closing f alone would leave held.
func unlockFile(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = syscall.Flock(int(fd), syscall.LOCK_UN) })
	}
	f.Close()
}

// syncDir fsyncs the directory dir, so that the names created, renamed or
// removed in it survive a crash of the machine.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
