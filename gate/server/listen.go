package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/internal/sockdir"
)

// Listen opens the listener named by addr: "unix:///path/to.sock" (created
// with mode 0600, replacing a stale socket) or "tcp://host:port". A TCP
// address must be loopback unless allowRemote is set.
func Listen(addr string, allowRemote bool) (net.Listener, error) {
	switch {
	case strings.HasPrefix(addr, "unix://"):
		return listenUnix(strings.TrimPrefix(addr, "unix://"))
	case strings.HasPrefix(addr, "tcp://"):
		hostport := strings.TrimPrefix(addr, "tcp://")
		host, _, err := net.SplitHostPort(hostport)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		if !allowRemote && !IsLoopback(host) {
			return nil, fmt.Errorf("listen %s: %q is not a loopback address; pass --allow-remote to listen beyond this machine", addr, host)
		}
		return net.Listen("tcp", hostport)
	}
	return nil, fmt.Errorf("listen %s: want unix:///path or tcp://host:port", addr)
}

// IsLoopback reports whether host (a name or an IP literal, without a
// port) is this machine (nethost.IsLoopback).
func IsLoopback(host string) bool { return nethost.IsLoopback(host) }

func listenUnix(path string) (net.Listener, error) {
	if path == "" || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("listen unix socket %q: want an absolute path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("listen unix socket %s: %w", path, err)
	}
	if err := sockdir.Check(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("listen unix socket %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen unix socket %s: a non-socket file is in the way", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen unix socket %s: another gatekeeper is serving it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen unix socket %s: remove stale socket: %w", path, err)
		}
	}
	// Create the socket with no permissions for group and others.
	ln, err := listenUnixPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("listen unix socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen unix socket %s: %w", path, err)
	}
	return ln, nil
}

// LoadOrCreateToken returns the token in path (surrounding white space
// trimmed). If the file does not exist it is created, mode 0600, with a new
// random 256-bit token. An existing file readable by others is refused.
func LoadOrCreateToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		fi, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("token file %s: %w", path, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("token file %s: mode %v lets others read it; chmod 600 it", path, fi.Mode().Perm())
		}
		tok := strings.TrimSpace(string(data))
		if tok == "" {
			return "", fmt.Errorf("token file %s is empty", path)
		}
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(buf)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return tok, f.Close()
}
