package hostpath

import "errors"

// Sentinel errors Normalize wraps with the path it refused.
var (
	// ErrEmpty means the path is the empty string.
	ErrEmpty = errors.New("empty path")
	// ErrNUL means the path (or Options.Home or Options.Cwd) holds a NUL byte.
	ErrNUL = errors.New("path contains a NUL byte")
	// ErrTooLong means the path is longer than MaxPathBytes or has a
	// component longer than MaxNameBytes.
	ErrTooLong = errors.New("path too long")
	// ErrSymlinkLoop means resolving the path followed more than MaxLinks
	// symbolic links: a loop or an over-long chain (the kernel's ELOOP).
	ErrSymlinkLoop = errors.New("too many levels of symbolic links")
	// ErrNotAbsolute means Options.Home or Options.Cwd was needed and is
	// not an absolute path.
	ErrNotAbsolute = errors.New("not an absolute path")
	// ErrUnknownUser means a ~user path names a user the system does not
	// know, or one without an absolute home directory.
	ErrUnknownUser = errors.New("unknown user")
	// ErrProcessRelative means the path, or a symbolic link on its way,
	// leads through a name the kernel resolves relative to the process that
	// opens it (/proc/self, /proc/<pid>, /dev/fd, /dev/stdin, …): resolved
	// here it would describe the sidecar's process, not the agent's.
	ErrProcessRelative = errors.New("relative to the process that opens it: the sidecar would resolve it in its own process, not in the agent's")
)
