// Package hostdirs declares the host directories never mounted into a
// sandbox, and the one check of a /deps directory against them that the
// policy validator (lexically, when the policy loads) and the Docker runner
// (on the real, symlink-resolved directory, before each run) share.
package hostdirs

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Protected returns the host paths a /deps mount may neither be, lie
// inside, nor contain: the system's configuration, kernel and device
// interfaces, runtime state (sockets), every home directory, and the
// container engines' state. The caller owns the returned slice.
func Protected() []string {
	return []string{
		"/etc", "/proc", "/sys", "/dev", "/boot",
		"/run", "/var/run",
		"/root", "/home",
		"/var/lib/docker", "/var/lib/containerd",
	}
}

// Check returns nil when dir, an absolute path, is none of Protected and
// extra (further paths of this machine, such as the engine's socket), lies
// in none, and contains none; otherwise an error naming the protected path.
// The host root contains them all. Check is lexical: pass it the resolved
// directory too.
func Check(dir string, extra []string) error {
	d := filepath.Clean(dir)
	if d == "/" {
		return fmt.Errorf("deps dir %s is the host root", dir)
	}
	for _, q := range append(Protected(), extra...) {
		q = filepath.Clean(q)
		switch {
		case within(d, q):
			return fmt.Errorf("deps dir %s lies within protected path %s", dir, q)
		case within(q, d):
			return fmt.Errorf("deps dir %s contains protected path %s", dir, q)
		}
	}
	return nil
}

// within reports whether p is q or lies below q.
func within(p, q string) bool {
	return p == q || q == "/" || strings.HasPrefix(p, q+"/")
}
