//go:build !unix

package claudecode

import "fmt"

// SecurePath cannot check ownership on this OS: it always reports that,
// so install needs --force here.
func SecurePath(path string) []string {
	return []string{fmt.Sprintf("%s: ownership and permissions cannot be checked on this OS", path)}
}

// SecureDir is SecurePath for a directory.
func SecureDir(dir string) []string { return SecurePath(dir) }
