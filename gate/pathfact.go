package gate

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
)

// This file reads the path facts of a host file tool's call: which input
// fields hold a path, what each path is once normalized and resolved, and
// which deny and write-protect globs match it or its ancestors.

// pathField is an input field of a host file tool that holds a path.
type pathField struct {
	field     string
	required  bool // the tool needs it
	glob      bool // a pattern, judged by the directory it starts from
	split     bool // a list of patterns, split as Claude Code splits Grep's glob
	recursive bool // a directory here is searched recursively, its files read
}

// pathFields names, per host file tool, the input fields holding a path.
var pathFields = map[string][]pathField{
	"Read":         {{field: "file_path", required: true}},
	"Write":        {{field: "file_path", required: true}},
	"Edit":         {{field: "file_path", required: true}},
	"MultiEdit":    {{field: "file_path", required: true}},
	"NotebookEdit": {{field: "notebook_path", required: true}},
	"LS":           {{field: "path", required: true}},
	"Glob":         {{field: "path"}, {field: "pattern", glob: true}},
	"Grep":         {{field: "path", recursive: true}, {field: "glob", glob: true, split: true}},
}

// Walks reports whether deciding a call of tool may walk a directory tree
// (a recursive search's deny_within, see within.go), which can take long:
// the server decides such calls off its connection's reader.
func Walks(tool string) bool {
	for _, f := range pathFields[tool] {
		if f.recursive {
			return true
		}
	}
	return false
}

type pathFact struct {
	Field    string `json:"field"`
	Raw      string `json:"raw"`
	Abs      string `json:"abs"`
	Resolved string `json:"resolved"`
	Error    string `json:"error"`
	// Within lists forbidden files a recursive search of this directory
	// would read (Grep only, see within.go); WithinError says why the
	// directory could not be checked.
	Within      []withinMatch
	WithinError string
}

// covered returns Abs, Resolved and every ancestor of both (not "/"), the
// paths a deny glob is matched against.
func (f pathFact) covered() []string {
	var out []string
	for _, p := range []string{f.Abs, f.Resolved} {
		for p != "" && p != "/" && !slices.Contains(out, p) {
			out = append(out, p)
			i := strings.LastIndexByte(p, '/')
			if i <= 0 {
				break
			}
			p = p[:i]
		}
	}
	return out
}

// globBits is a set of glob indices.
type globBits []uint64

func (b globBits) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

// union returns b with the indices of c added; b may be changed.
func (b globBits) union(c globBits) globBits {
	for len(b) < len(c) {
		b = append(b, 0)
	}
	for i, w := range c {
		b[i] |= w
	}
	return b
}

func bitsOf(indices []int) globBits {
	var b globBits
	for _, i := range indices {
		for len(b) <= i/64 {
			b = append(b, 0)
		}
		b[i/64] |= 1 << (i % 64)
	}
	return b
}

// pathMatches are the deny and write-protect globs that match a path.
type pathMatches struct {
	deny, writeProtect globBits
}

// maxMatchCache bounds the directories whose matches an Effective keeps.
const maxMatchCache = 1024

// matches returns the globs that match any path of f.covered(). Those of
// f's own paths (Abs and Resolved) are matched each time; those of their
// ancestors, which the calls of one workspace share, are kept in the
// Effective's cache (bounded: it is emptied when full). The result is the
// same either way: matching is a function of the path and the Effective.
func (eff *Effective) matches(f pathFact, covered []string) pathMatches {
	var m pathMatches
	for _, p := range covered {
		var pm pathMatches
		if p == f.Abs || p == f.Resolved {
			pm = eff.match(p)
		} else if c, ok := eff.matchCache.Load(p); ok {
			pm = c.(pathMatches)
		} else {
			pm = eff.match(p)
			if eff.matchCacheLen.Add(1) > maxMatchCache {
				eff.matchCache.Clear()
				eff.matchCacheLen.Store(1)
			}
			eff.matchCache.Store(p, pm)
		}
		m.deny = m.deny.union(pm.deny)
		m.writeProtect = m.writeProtect.union(pm.writeProtect)
	}
	return m
}

// match matches one path against the deny and write-protect globs.
func (eff *Effective) match(p string) pathMatches {
	return pathMatches{deny: bitsOf(eff.deny.Matching(p)), writeProtect: bitsOf(eff.writeProtect.Matching(p))}
}
func pathFacts(eff *Effective, in ast.Object, fields []pathField, cwd string) []pathFact {
	if cwd == "" {
		cwd = eff.Policy.WorkspaceRoot
	}
	opts := hostpath.Options{Home: eff.home, Cwd: cwd}
	var facts []pathFact
	base := cwd
	for _, f := range fields {
		s, isString, present := inputString(in, f.field)
		switch {
		case !present && !f.required:
			if f.glob {
				continue
			}
			s = base // Glob and Grep search the working directory by default
		case !isString:
			facts = append(facts, pathFact{Field: f.field, Error: fmt.Sprintf("tool_input.%s is missing or not a string", f.field)})
			continue
		case !f.split && strings.TrimFunc(s, isJSSpace) != s:
			// Tools trim their paths (JavaScript's trim) after the hook saw
			// them; judging the untrimmed path would judge another path.
			facts = append(facts, pathFact{Field: f.field, Raw: s, Error: fmt.Sprintf("tool_input.%s %q has leading or trailing white space", f.field, s)})
			continue
		}
		if f.glob {
			patterns := []string{s}
			if f.split {
				patterns = splitGrepGlob(s)
			}
			for _, pat := range patterns {
				if fact, ok := globFact(f.field, pat, base, opts); ok {
					facts = append(facts, fact)
				}
			}
			continue
		}
		if f.field == "path" && present {
			base = s // a Glob or Grep pattern is relative to its path
		}
		p, err := hostpath.Normalize(s, opts)
		fact := pathFact{Field: f.field, Raw: s, Abs: p.Abs, Resolved: p.Resolved}
		if err != nil {
			fact.Error = err.Error()
		} else if f.recursive && hostpath.Within(p.Resolved, eff.root) {
			// Outside the workspace the search is denied anyway: no walk.
			fact.Within, fact.WithinError = withinFact(eff, p.Resolved, in)
		}
		facts = append(facts, fact)
	}
	return facts
}

// globFact judges a pattern by the directory it starts from, and only when
// it could leave the search path (absolute, ~, or climbing with ".."); ok
// is false for a pattern that stays below base.
func globFact(field, pattern, base string, opts hostpath.Options) (pathFact, bool) {
	if !strings.HasPrefix(pattern, "/") && !strings.HasPrefix(pattern, "~") && !containsDotDot(pattern) {
		return pathFact{}, false
	}
	s := hostpath.GlobBase(pattern)
	if !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "~") {
		s = strings.TrimSuffix(base, "/") + "/" + s
	}
	p, err := hostpath.Normalize(s, opts)
	fact := pathFact{Field: field, Raw: s, Abs: p.Abs, Resolved: p.Resolved}
	if err != nil {
		fact.Error = err.Error()
	}
	return fact, true
}

// isJSSpace reports the characters of JavaScript's \s, which
// String.prototype.trim removes and split(/\s+/) splits on: WhiteSpace
// (tab, vertical tab, form feed, space, U+FEFF and every Zs space,
// no-break ones included) and LineTerminator (LF, CR, U+2028, U+2029).
// U+0085 (NEL), white space to Go, is not among them.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\v', '\f', ' ', '\n', '\r', '\u2028', '\u2029', '\uFEFF':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

func containsDotDot(s string) bool {
	for _, part := range strings.Split(s, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
