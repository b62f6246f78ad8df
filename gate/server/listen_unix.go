package server

import (
	"net"
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
