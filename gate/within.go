package gate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gobwas/glob"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
)

// A recursive content search (Grep) of a directory reads every file below
// it, so judging its root alone would let a Grep of the workspace read a
// .env inside it. The sidecar walks the directory the way Claude Code's
// Grep (ripgrep) does and reports, as paths[i].deny_within, the files it
// would read that an fs.deny glob forbids. What ripgrep was seen to do:
// it reads hidden files, never follows a symbolic link below the root
// (file or directory), and skips .git directories unless the call has a
// glob of its own. It also skips git-ignored files, which the walk does
// not: a .env listed in .gitignore still counts, so such a Grep is refused
// rather than trusted to the ignore file.

const (
	// maxWithinEntries bounds the walk; past it the search is refused.
	maxWithinEntries = 100_000
	// maxWithinMatches is how many forbidden files the fact lists.
	maxWithinMatches = 3
)

// errSearchTooLarge: the directory holds more entries than the walk checks.
var errSearchTooLarge = errors.New("too large to check")

type withinMatch struct {
	Path string
	Glob string
}

// denyWithin walks dir (a resolved directory) and returns up to
// maxWithinMatches files below it that a deny glob of eff matches; past
// limit entries it fails with errSearchTooLarge. skipGit
// leaves out .git directories; files whose base name searched rejects are
// left out (nil: every file is searched). Unreadable directories are
// skipped: the search cannot read them either.
func denyWithin(eff *Effective, dir string, skipGit bool, searched *glob.Pattern, limit int) ([]withinMatch, error) {
	var globs []int // the deny globs that can match below dir
	for i, g := range eff.denyGlobs {
		if globCanMatchBelow(g, dir) {
			globs = append(globs, i)
		}
	}
	if len(globs) == 0 {
		return nil, nil
	}
	var out []withinMatch
	entries := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return fs.SkipDir // unreadable: not searched either
		}
		if p == dir {
			return nil
		}
		if entries++; entries > limit {
			return errSearchTooLarge
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil // not followed by the search
		}
		if d.IsDir() && skipGit && d.Name() == ".git" {
			return fs.SkipDir
		}
		if d.IsDir() || searched != nil && !searched.Match(d.Name()) {
			return nil
		}
		for _, i := range globs {
			if eff.denyMatchers[i].Match(p) {
				out = append(out, withinMatch{Path: p, Glob: eff.denyGlobs[i]})
				if len(out) == maxWithinMatches {
					return fs.SkipAll
				}
				break
			}
		}
		return nil
	})
	return out, err
}

// globCanMatchBelow reports whether glob g (home expanded) could match a
// path below dir: false only when its literal leading directories lead
// elsewhere, as "/home/a/.ssh/**" does for "/srv/app".
func globCanMatchBelow(g, dir string) bool {
	b := hostpath.GlobBase(g)
	return !filepath.IsAbs(b) || hostpath.Within(b, dir) || hostpath.Within(dir, b)
}

// simpleGrepGlob is a Grep glob the walk can apply itself: a pattern of
// file names (no "/", no negation, no braces, no classes), which ripgrep
// matches against each file's base name. ok is false for anything else,
// and the walk then assumes every file is searched.
func simpleGrepGlob(g string) (*glob.Pattern, bool) {
	if g == "" || strings.ContainsAny(g, "/!{}[]\\") {
		return nil, false
	}
	m, err := glob.Compile(g)
	if err != nil {
		return nil, false
	}
	return m, true
}

// withinFact computes deny_within for a Grep of dir: the forbidden files
// it would read, and a sentence when the walk could not finish.
func withinFact(eff *Effective, dir string, toolInput map[string]any) ([]withinMatch, string) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return nil, "" // a file, or nothing: judged as a path
	}
	g, _ := toolInput["glob"].(string)
	searched, _ := simpleGrepGlob(g)
	matches, err := denyWithin(eff, dir, g == "", searched, maxWithinEntries)
	switch {
	case errors.Is(err, errSearchTooLarge):
		return nil, fmt.Sprintf("%s holds more than %d entries, too many to check for files fs.deny forbids; search a narrower path", dir, maxWithinEntries)
	case err != nil:
		return nil, fmt.Sprintf("cannot check %s for files fs.deny forbids: %v", dir, err)
	}
	return matches, ""
}
