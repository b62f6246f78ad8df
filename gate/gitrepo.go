package gate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hostFSWriteTools are rego/gatekeeper.rego's host_fs_write_tools (a test
// pins the two): the host file tools that create, change or move a file,
// whose paths get the git_repository fact.
var hostFSWriteTools = map[string]bool{"Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true}

// gitRepositoryShapes are what git's setup.c (is_git_directory) looks for
// to take a directory for a repository, bare or not: a HEAD, and an
// objects and a refs directory, either beside it or in the common
// directory a commondir file names (a linked worktree's git directory
// keeps only HEAD and commondir; git then reads the config of the common
// directory). Git reads a repository's config, and runs the commands it
// names, when it is run inside such a directory.
var gitRepositoryShapes = [][]string{{"HEAD", "objects", "refs"}, {"HEAD", "commondir"}}

// gitDirNames are the names git reads in a git directory that a checkout
// could be rooted at, so that a checkout named so does not stop
// gitRepository's walk: a worktree at repo.git/hooks holds repo.git's
// hooks.
var gitDirNames = []string{"hooks", "objects", "refs", "info", "logs", "worktrees", "modules", "config", "config.worktree", "commondir", "head"}

// gitRepository returns the nearest directory above p that has one of the
// gitRepositoryShapes once p is written (each entry exists, or p is it or
// lies below it), or "" when there is none. Names compare ignoring case,
// as a case-insensitive file system (macOS) opens HEAD for head; an entry
// counts whatever it is (a file, a dangling symlink, a commondir naming
// nothing), which errs towards a repository. The walk stops at a directory
// holding a .git entry, a checkout's root (git run below it finds that
// .git first, and what lies in .git the .git globs guard), after checking
// the directory itself, unless the directory is named as something git
// reads in a git directory (gitDirNames): a worktree inside a bare
// repository is not that repository. p must be absolute and clean.
func gitRepository(p string) string {
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		rest := strings.TrimPrefix(p, strings.TrimSuffix(dir, "/")+"/")
		first, _, _ := strings.Cut(rest, "/")
		has := func(part string) bool {
			if strings.EqualFold(first, part) {
				return true
			}
			_, err := os.Lstat(filepath.Join(dir, part))
			return err == nil
		}
		for _, shape := range gitRepositoryShapes {
			if !slices.ContainsFunc(shape, func(part string) bool { return !has(part) }) {
				return dir
			}
		}
		if dir == "/" || dir == "." {
			return ""
		}
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil && !slices.Contains(gitDirNames, strings.ToLower(filepath.Base(dir))) {
			return ""
		}
	}
}
