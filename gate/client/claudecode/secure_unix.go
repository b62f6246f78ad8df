//go:build unix

package claudecode

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// SecurePath returns why root should not run or trust the file at path,
// or nothing when it may: the check sudo makes of its secure path. The file
// (after following symlinks) and every directory above it, and every
// directory above path as given (where a link could be swapped), must be
// owned by root and not writable by group or others; the file must be a
// regular file. A name that cannot be resolved is a problem too.
func SecurePath(path string) []string { return securePath(path, true) }

// SecureDir is SecurePath for a directory: the place of a file to be
// written. A directory that does not exist yet is judged by the nearest
// one above it that does, and by who would create it (this process).
func SecureDir(dir string) []string {
	d := filepath.Clean(dir)
	for {
		if _, err := os.Lstat(d); err == nil || d == "/" {
			break
		}
		d = filepath.Dir(d)
	}
	problems := securePath(d, false)
	if d != filepath.Clean(dir) && os.Geteuid() != 0 {
		problems = append(problems, fmt.Sprintf("%s would be created by uid %d, not root", dir, os.Geteuid()))
	}
	return problems
}

func securePath(path string, wantFile bool) []string {
	if !filepath.IsAbs(path) {
		return []string{fmt.Sprintf("%s is not an absolute path", path)}
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return []string{fmt.Sprintf("%s cannot be resolved: %v", path, err)}
	}
	var problems []string
	seen := map[string]bool{}
	check := func(p string, file bool) {
		if seen[p] {
			return
		}
		seen[p] = true
		fi, err := os.Lstat(p)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", p, err))
			return
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return // a link cannot be changed, only replaced: its directory is checked
		}
		if file && !fi.Mode().IsRegular() {
			problems = append(problems, fmt.Sprintf("%s is not a regular file", p))
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 {
			owner := "unknown"
			if ok {
				owner = fmt.Sprintf("uid %d", st.Uid)
			}
			problems = append(problems, fmt.Sprintf("%s is owned by %s, not root: its owner can replace what root runs", p, owner))
		}
		if perm := fi.Mode().Perm(); perm&0o022 != 0 {
			who := "group"
			switch {
			case perm&0o022 == 0o022:
				who = "group and others"
			case perm&0o002 != 0:
				who = "others"
			}
			problems = append(problems, fmt.Sprintf("%s is writable by %s (mode %04o%s): they can replace what root runs", p, who, perm, sticky(fi.Mode())))
		}
	}
	check(resolved, wantFile)
	for _, start := range []string{resolved, filepath.Clean(path)} {
		for d := filepath.Dir(start); ; d = filepath.Dir(d) {
			check(d, false)
			if d == "/" {
				break
			}
		}
	}
	return problems
}

func sticky(m fs.FileMode) string {
	if m&fs.ModeSticky != 0 {
		return ", sticky"
	}
	return ""
}
