// Package workspace keeps a sandbox's /workspace between the runs of one
// query, whatever the backend: the tar stream a run starts from
// (WriteInput: the saved snapshot merged with the run's code and files),
// the snapshot a run hands back (Receive: checked, normalized, and the
// files the run returns picked from it), and where snapshots live between
// runs (Store: one directory per sidecar instance on the sidecar's disk).
//
// A snapshot is a tar stream of regular files, directories and symbolic
// links, named by clean paths relative to /workspace, owned by nobody in
// particular (the backend unpacks it as the sandbox user). The sidecar
// never unpacks one on its own disk: it stores the stream as one file and
// reads entries only in memory, so a hostile snapshot can name any path
// without reaching the host. What it holds is bounded by the workspace's
// size, as the tmpfs counts it, and by MaxEntries.
package workspace

import (
	"crypto/sha256"
	"fmt"
	"path"
	"strings"
)

// MaxEntries is the most entries (files, directories and links) a
// snapshot may hold.
const MaxEntries = 50_000

// pageSize is the tmpfs allocation unit: a file of n bytes takes n rounded
// up to whole pages of the workspace's size.
const pageSize = 4096

// Pages is the tmpfs space n bytes of file content take.
func Pages(n int64) int64 { return (n + pageSize - 1) / pageSize * pageSize }

// Dir is the sandbox's workspace directory, for messages.
const Dir = "/workspace"

// Manifest maps the path of each regular file of a workspace to the
// SHA-256 of its content.
type Manifest map[string][sha256.Size]byte

// CleanPath returns name as a clean path relative to /workspace, or an
// error if it is empty, absolute, holds a NUL or a backslash, or would
// leave /workspace. "./a" is "a"; "." is refused.
func CleanPath(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || strings.Contains(name, "\\") {
		return "", fmt.Errorf("file name %q is not allowed", name)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("file %q is absolute; names are relative to %s", name, Dir)
	}
	clean := path.Clean(name)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("file %q leaves %s", name, Dir)
	}
	return clean, nil
}

// CleanOutputs cleans the paths a run names for its returned files:
// each as CleanPath, except that "." (the whole workspace) is allowed.
// nil stays nil (no paths named: the changed files are returned).
func CleanOutputs(paths []string) ([]string, error) {
	if paths == nil {
		return nil, nil
	}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if path.Clean(p) == "." && p != "" && !strings.HasPrefix(p, "/") {
			out = append(out, ".")
			continue
		}
		c, err := CleanPath(p)
		if err != nil {
			return nil, fmt.Errorf("outputs: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// dependencyDir reports whether a path component names a directory whose
// files are not returned unless a run names them: hidden ones (.local,
// .cache, .npm), node_modules and __pycache__.
func dependencyDir(component string) bool {
	return strings.HasPrefix(component, ".") || component == "node_modules" || component == "__pycache__"
}

// underDependencyDir reports whether a file path lies below (or is) a
// hidden file or a directory dependencyDir names.
func underDependencyDir(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if dependencyDir(c) {
			return true
		}
	}
	return false
}

// ancestors calls f with each proper ancestor directory of the clean
// relative path p, nearest first; it stops when f returns true.
func ancestors(p string, f func(dir string) bool) {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if f(d) {
			return
		}
	}
}
