package gate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gobwas/glob"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
	"github.com/gatekeeper-ai/gatekeeper/internal/pathglob"
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
func denyWithin(eff *Effective, dir string, skipGit bool, searched func(name string) bool, limit int) ([]withinMatch, error) {
	var globs []int // the deny globs that can match below dir
	for i := range eff.deny.Len() {
		if globCanMatchBelow(eff.deny.Glob(i), dir) {
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
		if d.IsDir() || searched != nil && !searched(d.Name()) {
			return nil
		}
		for _, i := range globs {
			if eff.deny.MatchOne(i, p) {
				out = append(out, withinMatch{Path: p, Glob: eff.deny.Glob(i)})
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

// globCanMatchBelow reports whether glob g (home expanded, anchored) could
// match a path below dir: false only when its literal leading directories
// lead elsewhere under every spelling the matcher compares (case and the
// rest, see internal/pathglob), as "/home/a/.ssh/**" does for "/srv/app".
func globCanMatchBelow(g, dir string) bool {
	b := hostpath.GlobBase(g)
	if !filepath.IsAbs(b) {
		return true
	}
	for _, bs := range pathglob.Spellings(b) {
		for _, ds := range pathglob.Spellings(dir) {
			if hostpath.Within(bs, ds) || hostpath.Within(ds, bs) {
				return true
			}
		}
	}
	return false
}

// splitGrepGlob splits Grep's glob input into the globs ripgrep gets,
// exactly as Claude Code does. Its Grep tool (the CLI bundled with Agent
// SDK 0.3.330, minified) builds ripgrep's arguments with:
//
//	if(r){let Mo=[],Qn=r.split(/\s+/);for(let mo of Qn)
//	  if(mo.includes("{")&&mo.includes("}"))Mo.push(mo);
//	  else Mo.push(...mo.split(",").filter(Boolean));
//	for(let mo of Mo.filter(Boolean))tt.push(Xe.length),it(mo)}
//
// where r is the glob input and it(mo) appends "--glob", mo: the input is
// split on runs of JavaScript white space (isJSSpace); a piece holding both
// "{" and "}" stays whole, any other is split on commas; empty pieces are
// dropped. So "*.py,.env" is two globs, and ".env" is searched.
func splitGrepGlob(s string) []string {
	var out []string
	for _, piece := range strings.FieldsFunc(s, isJSSpace) {
		if strings.Contains(piece, "{") && strings.Contains(piece, "}") {
			out = append(out, piece)
			continue
		}
		for _, g := range strings.Split(piece, ",") {
			if g != "" {
				out = append(out, g)
			}
		}
	}
	return out
}

// grepSearched returns a matcher of the base names of the files a Grep
// with this glob input searches, or nil when it cannot tell (every file
// is then assumed searched): each piece (splitGrepGlob) must be a pattern
// of file names (no "/", no negation, no braces, no classes), which
// ripgrep matches against each file's base name; a file is searched when
// any piece matches it. An empty input searches every file (nil).
func grepSearched(input string) func(name string) bool {
	pieces := splitGrepGlob(input)
	if len(pieces) == 0 {
		return nil
	}
	var ms []*glob.Pattern
	for _, g := range pieces {
		if strings.ContainsAny(g, "/!{}[]\\") {
			return nil
		}
		m, err := glob.Compile(g)
		if err != nil {
			return nil
		}
		ms = append(ms, m)
	}
	return func(name string) bool {
		for _, m := range ms {
			if m.Match(name) {
				return true
			}
		}
		return false
	}
}

// withinFact computes deny_within for a Grep of dir: the forbidden files
// it would read, and a sentence when the walk could not finish.
func withinFact(eff *Effective, dir string, toolInput ast.Object) ([]withinMatch, string) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return nil, "" // a file, or nothing: judged as a path
	}
	g, _, _ := inputString(toolInput, "glob")
	matches, err := denyWithin(eff, dir, len(splitGrepGlob(g)) == 0, grepSearched(g), maxWithinEntries)
	switch {
	case errors.Is(err, errSearchTooLarge):
		return nil, fmt.Sprintf("%s holds more than %d entries, too many to check for files fs.deny forbids; search a narrower path", dir, maxWithinEntries)
	case err != nil:
		return nil, fmt.Sprintf("cannot check %s for files fs.deny forbids: %v", dir, err)
	}
	return matches, ""
}
