// Package hostpath turns the paths an agent's host file tools name (the
// file_path of Read, Write, Edit, MultiEdit and NotebookEdit; the path and
// pattern of Glob, Grep and LS) into the facts the Rego policy judges: the
// absolute, lexically clean path, and the same path with its symbolic links
// resolved. The policy, not this package, decides whether a path is allowed.
//
// Everything here is safe for concurrent use. Normalize reads the file
// system (lstat and readlink) and never writes it. The file system can
// change between the judgment and the tool's own access; the facts hold for
// the moment Normalize ran.
package hostpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Limits Normalize enforces, those of Linux.
const (
	// MaxPathBytes is the longest path accepted, before and after ~ and Cwd
	// are put in front of it.
	MaxPathBytes = 4096
	// MaxNameBytes is the longest path component accepted.
	MaxNameBytes = 255
	// MaxLinks is the most symbolic links followed in resolving one path.
	MaxLinks = 40
)

// Options says what a path is relative to. Both fields must be absolute
// when set; Normalize refuses a path that needs one that is not.
type Options struct {
	// Home is the directory "~" and "~/…" stand for.
	Home string
	// Cwd is the directory relative paths are resolved against.
	Cwd string
}

// Path is a normalized host path.
type Path struct {
	// Raw is the path as the tool gave it.
	Raw string `json:"raw"`
	// Abs is Raw made absolute (~ expanded, relative to Cwd) and cleaned
	// lexically: no ".", "..", "//" or trailing slash remains. Symbolic
	// links are not followed: Abs is what the path says.
	Abs string `json:"abs"`
	// Resolved is Abs with every symbolic link followed, as the kernel
	// would follow them to open the path. Components that do not exist yet
	// (a file Write will create) are kept as they are, after the links of
	// the part that exists. Resolved is absolute and clean.
	Resolved string `json:"resolved"`
}

// Normalize returns the facts about raw, a path a host file tool was given.
//
// Abs: "~" and "~/x" are expanded with o.Home, "~user/x" with the home
// directory of user (looked up on this system), a relative path is put
// under o.Cwd, and the result is cleaned lexically. Resolved: the longest
// existing prefix of Abs has its symbolic links resolved, through chains and
// relative targets, following at most MaxLinks links; the rest is appended
// as it is. A ".." reached through a link's target is resolved against the
// directory the link points into, as the kernel does, not lexically.
//
// Normalize returns an error wrapping ErrEmpty, ErrNUL, ErrTooLong (raw or
// Abs longer than MaxPathBytes, or a component longer than MaxNameBytes),
// ErrNotAbsolute (o.Home or o.Cwd set to a relative path, or needed and
// unset), ErrUnknownUser, ErrSymlinkLoop or ErrProcessRelative (Abs, a
// link's target or a link's own place is process-relative, see
// ProcessRelative); or the file system's error when a component cannot be
// examined (for example fs.ErrPermission). Callers deny on any error.
func Normalize(raw string, o Options) (Path, error) {
	abs, err := absolute(raw, o)
	if err != nil {
		return Path{}, fmt.Errorf("normalize %s: %w", quote(raw), err)
	}
	if where, ok := ProcessRelative(abs); ok {
		return Path{}, fmt.Errorf("normalize %s: %s is %w", quote(raw), where, ErrProcessRelative)
	}
	resolved, err := resolve(abs)
	if err != nil {
		return Path{}, fmt.Errorf("normalize %s: %w", quote(raw), err)
	}
	if where, ok := ProcessRelative(resolved); ok {
		return Path{}, fmt.Errorf("normalize %s: it resolves to %s, which is %w", quote(raw), where, ErrProcessRelative)
	}
	return Path{Raw: raw, Abs: abs, Resolved: resolved}, nil
}

// absolute returns raw made absolute and clean, checking its limits.
func absolute(raw string, o Options) (string, error) {
	if raw == "" {
		return "", ErrEmpty
	}
	if err := checkLimits(raw); err != nil {
		return "", err
	}
	home, err := optionDir("home", o.Home)
	if err != nil {
		return "", err
	}
	cwd, err := optionDir("cwd", o.Cwd)
	if err != nil {
		return "", err
	}
	var abs string
	switch {
	case raw == "~" || strings.HasPrefix(raw, "~/"):
		if home == "" {
			return "", fmt.Errorf("home is needed for ~: %w", ErrNotAbsolute)
		}
		abs = filepath.Join(home, raw[1:])
	case strings.HasPrefix(raw, "~"):
		name, rest, _ := strings.Cut(raw[1:], "/")
		dir, err := userHome(name)
		if err != nil {
			return "", err
		}
		abs = filepath.Join(dir, rest)
	case filepath.IsAbs(raw):
		abs = filepath.Clean(raw)
	default:
		if cwd == "" {
			return "", fmt.Errorf("cwd is needed for a relative path: %w", ErrNotAbsolute)
		}
		abs = filepath.Join(cwd, raw)
	}
	if err := checkLimits(abs); err != nil {
		return "", fmt.Errorf("as %s: %w", quote(abs), err)
	}
	return abs, nil
}

// checkLimits checks p for NUL bytes, its length and its components'.
func checkLimits(p string) error {
	if strings.IndexByte(p, 0) >= 0 {
		return ErrNUL
	}
	if len(p) > MaxPathBytes {
		return fmt.Errorf("%d bytes, more than %d: %w", len(p), MaxPathBytes, ErrTooLong)
	}
	for rest := p; rest != ""; {
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		if len(name) > MaxNameBytes {
			return fmt.Errorf("a component of %d bytes, more than %d: %w", len(name), MaxNameBytes, ErrTooLong)
		}
	}
	return nil
}

// optionDir checks an Options directory: empty, or absolute without NUL.
// It returns it cleaned.
func optionDir(field, dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return "", fmt.Errorf("%s: %w", field, ErrNUL)
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%s %s: %w", field, quote(dir), ErrNotAbsolute)
	}
	return filepath.Clean(dir), nil
}

// userHome returns the home directory of the user called name.
func userHome(name string) (string, error) {
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		return "", fmt.Errorf("~%s: %w", quote(name), ErrUnknownUser)
	}
	if err != nil {
		return "", fmt.Errorf("look up user %s: %w", quote(name), err)
	}
	if !filepath.IsAbs(u.HomeDir) || strings.IndexByte(u.HomeDir, 0) >= 0 {
		return "", fmt.Errorf("~%s has home %s: %w", quote(name), quote(u.HomeDir), ErrUnknownUser)
	}
	return u.HomeDir, nil
}

// resolve follows the symbolic links of abs, an absolute clean path, as
// the kernel would. Once a component does not exist (or its parent is not a
// directory) the components after it are taken as they are, until a ".."
// climbs back into the part that exists.
func resolve(abs string) (string, error) {
	resolved := "/"
	rest := abs
	links := 0
	missing := 0 // trailing components of resolved that do not exist
	for rest != "" {
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		switch name {
		case "", ".":
			continue
		case "..":
			// resolved holds no links, so its lexical parent is its real one.
			resolved = filepath.Dir(resolved)
			missing = max(missing-1, 0)
			continue
		}
		next := child(resolved, name)
		if missing > 0 {
			resolved = next
			missing++
			continue
		}
		isLink, err := isSymlink(next)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			resolved = next
			missing = 1
			continue
		}
		if err != nil {
			return "", fmt.Errorf("resolve: %w", err)
		}
		if !isLink {
			resolved = next
			continue
		}
		if Within(next, "/proc") {
			// procfs links (self, net, <pid>/cwd, <pid>/fd/N) are "magic":
			// what they lead to depends on who follows them.
			return "", fmt.Errorf("resolve: the link %s is %w", quote(next), ErrProcessRelative)
		}
		links++
		if links > MaxLinks {
			return "", fmt.Errorf("resolve %s: more than %d links: %w", quote(next), MaxLinks, ErrSymlinkLoop)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("resolve: %w", err)
		}
		if target == "" {
			return "", fmt.Errorf("resolve %s: empty link target: %w", quote(next), fs.ErrInvalid)
		}
		if filepath.IsAbs(target) {
			resolved = "/"
			if where, ok := ProcessRelative(filepath.Clean(target)); ok {
				return "", fmt.Errorf("resolve: the link %s leads to %s, which is %w", quote(next), where, ErrProcessRelative)
			}
		}
		if rest != "" {
			target += "/" + rest
		}
		rest = target
	}
	return resolved, nil
}

// child is filepath.Join(dir, name) for a clean absolute dir and a name
// that is one component (not "", "." or ".."), without Join's Clean: the
// result is clean already.
func child(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// isSymlink lstats p and reports whether it is a symbolic link; errors are
// os.Lstat's. It calls lstat(2) itself: os.Lstat also builds a FileInfo,
// which resolve, lstat-ing every component of every path decided, does
// not need.
func isSymlink(p string) (bool, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Lstat(p, &st)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return false, &fs.PathError{Op: "lstat", Path: p, Err: err}
		}
		return st.Mode&syscall.S_IFMT == syscall.S_IFLNK, nil
	}
}

// processRelativeDirs are the paths the kernel resolves relative to the
// process that opens them; below /proc, a number (a pid) counts too.
var processRelativeDirs = []string{
	"/proc/self", "/proc/thread-self", "/proc/net", "/proc/mounts",
	"/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr",
}

// ProcessRelative reports whether p, an absolute clean path, lies in (or
// is) a path the kernel resolves relative to the process that opens it:
// /proc/self, /proc/thread-self, /proc/<pid> (with its task/<tid>), the
// links /proc/net and /proc/mounts (to self), /dev/fd, /dev/stdin,
// /dev/stdout and /dev/stderr. It returns the part of p that is.
func ProcessRelative(p string) (string, bool) {
	for _, d := range processRelativeDirs {
		if Within(p, d) {
			return d, true
		}
	}
	if rest, ok := strings.CutPrefix(p, "/proc/"); ok {
		pid, _, _ := strings.Cut(rest, "/")
		if pid != "" && strings.Trim(pid, "0123456789") == "" {
			return "/proc/" + pid, true
		}
	}
	return "", false
}

// quote quotes p for an error message, shortened when long.
func quote(p string) string {
	const limit = 96
	if len(p) <= limit {
		return strconv.Quote(p)
	}
	return strconv.Quote(p[:limit]) + "… (" + strconv.Itoa(len(p)) + " bytes)"
}
