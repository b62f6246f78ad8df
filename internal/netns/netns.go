//go:build linux

// Package netns opens listening sockets inside another network namespace:
// the test cluster of scripts/ensure-kube lives in one of its own, and the
// address its Pods reach the sidecar at (the Pod network's gateway)
// exists only there. A socket keeps the namespace it was made in, so the
// sidecar serves it from any goroutine.
package netns

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Listen listens on address (as net.Listen does) inside the network
// namespace at path (a /run/netns/NAME bind mount, or /proc/PID/ns/net).
// It needs CAP_SYS_ADMIN. The thread that enters the namespace is locked
// to a goroutine that ends without unlocking it, so the runtime discards
// the thread: no other goroutine ever runs in that namespace.
func Listen(path, network, address string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		f, err := os.Open(path)
		if err != nil {
			ch <- result{err: fmt.Errorf("network namespace: %w", err)}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter network namespace %s: %w", path, err)}
			return
		}
		ln, err := net.Listen(network, address)
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

// Path is the path of the named network namespace (ip netns add NAME).
func Path(name string) string { return "/run/netns/" + name }
