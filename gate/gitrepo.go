package gate

import (
	"os"
	"path/filepath"
	"strings"
)

// hostFSWriteTools are rego/gatekeeper.rego's host_fs_write_tools (a test
// pins the two): the host file tools that create, change or move a file,
// whose paths get the git_repository fact.
var hostFSWriteTools = map[string]bool{"Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true}

// gitRepositoryParts are what git's setup.c (is_git_directory) looks for
// to take a directory for a repository, bare or not: a HEAD, an objects
// directory and a refs directory. Git reads a repository's config, and
// runs the commands it names, when it is run inside such a directory.
var gitRepositoryParts = [3]string{"HEAD", "objects", "refs"}

// gitRepository returns the nearest directory above p that holds every
// gitRepositoryParts entry once p is written (each one exists, or p is it
// or lies below it), or "" when there is none. Names compare ignoring case,
// as a case-insensitive file system (macOS) opens HEAD for head; an entry
// counts whatever it is (a file, a dangling symlink), which errs towards a
// repository. p must be absolute and clean.
func gitRepository(p string) string {
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		rest := strings.TrimPrefix(p, strings.TrimSuffix(dir, "/")+"/")
		first, _, _ := strings.Cut(rest, "/")
		all := true
		for _, part := range gitRepositoryParts {
			if strings.EqualFold(first, part) {
				continue
			}
			if _, err := os.Lstat(filepath.Join(dir, part)); err != nil {
				all = false
				break
			}
		}
		if all {
			return dir
		}
		if dir == "/" || dir == "." {
			return ""
		}
	}
}
