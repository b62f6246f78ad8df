//go:build !unix

package audit

import "os"

// lockFile does nothing where flock is not available: keeping a second
// writer away is up to the operator.
func lockFile(*os.File) error { return nil }

// unlockFile closes f.
func unlockFile(f *os.File) { f.Close() }

// syncDir does nothing where a directory cannot be opened for fsync.
func syncDir(string) error { return nil }
