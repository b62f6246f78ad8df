package server

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// listenUnixPrivate listens with umask 077 so the socket is never, even
// for an instant, connectable by other users. The umask is process-wide,
// so this briefly affects files other goroutines create.
func listenUnixPrivate(path string) (net.Listener, error) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	return net.Listen("unix", path)
}

// checkSocketDir refuses a socket directory that another user owns (or
// a symbolic link to one that another user made): its owner could swap
// the socket for its own and read every client's token. The default
// directory, /tmp/gatekeeper-<uid>, is a name anyone can make first. A
// directory of root's is accepted, writable by others or not, as a Pod's
// emptyDir is: only root can make one.
func checkSocketDir(dir string) error {
	for _, stat := range []func(string, *syscall.Stat_t) error{syscall.Lstat, syscall.Stat} {
		var st syscall.Stat_t
		if err := stat(dir, &st); err != nil {
			return err
		}
		if uid := int(st.Uid); uid != os.Geteuid() && uid != 0 {
			return fmt.Errorf("its directory %s belongs to uid %d, not to this user (uid %d) or root, so that user could replace the socket: remove it, or listen in a directory of your own (XDG_RUNTIME_DIR, --listen)", dir, uid, os.Geteuid())
		}
	}
	return nil
}
