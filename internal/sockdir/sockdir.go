// Package sockdir holds the one check of a Unix socket's directory that
// the sidecar (before it listens) and the Go clients (before they send a
// token to the /tmp default) share. ts-client/src/config.ts
// (sharedDirProblem) has the TypeScript copy.
package sockdir

import (
	"fmt"
	"os"
	"syscall"
)

// Check refuses a socket directory that another user owns, or a symbolic
// link to one that another user made: its owner could swap the socket for
// its own, collect the clients' token and answer every call. The default
// directory, /tmp/gatekeeper-<uid>, is a name anyone can make first. A
// directory of root's is accepted, writable by others or not, as a Pod's
// emptyDir is: only root can make one.
func Check(dir string) error {
	for _, stat := range []func(string, *syscall.Stat_t) error{syscall.Lstat, syscall.Stat} {
		var st syscall.Stat_t
		if err := stat(dir, &st); err != nil {
			return err
		}
		if uid := int(st.Uid); uid != os.Geteuid() && uid != 0 {
			return fmt.Errorf("its directory %s belongs to uid %d, not to this user (uid %d) or root, so that user could replace the socket: remove it, or use a directory of your own (XDG_RUNTIME_DIR, --listen/--url)", dir, uid, os.Geteuid())
		}
	}
	return nil
}

// TmpDefault is the directory of the default socket when XDG_RUNTIME_DIR
// is unset: /tmp, whatever TMPDIR says, as docs/protocol.md and the
// TypeScript client have it.
func TmpDefault() string {
	return fmt.Sprintf("/tmp/gatekeeper-%d", os.Getuid())
}
