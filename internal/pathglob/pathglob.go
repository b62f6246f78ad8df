// Package pathglob is gatekeeper's one matcher of host path globs: the
// policy's sandbox.fs.deny and write-protect lists, judged by the gate for
// the agent's host file tools and by the Docker runner for the /deps mount.
// Both import it, so a glob means the same thing wherever it is enforced.
//
// Syntax is that of Rego's glob.match(g, ["/"], path) (the gobwas/glob
// library OPA uses): "*" matches a run of characters other than "/", "**" a
// run including "/", "?" one character other than "/", "[abc]", "[a-z]" and
// "[!a]" a class, "{a,b}" alternatives, and "\" escapes. On top of that:
//
//   - A glob that does not start with "/" matches at any depth: ".env" and
//     "secrets/*.pem" are read as "**/.env" and "**/secrets/*.pem". (Expand
//     "~" before compiling; see gate/hostpath.ExpandHome.)
//   - A glob is cleaned lexically: "/home//u/./.ssh/" is "/home/u/.ssh".
//   - Matching ignores case, and the spellings under which a
//     case-insensitive file system (macOS, Windows, ext4 casefold) opens
//     the same name: ".ENV", ".GIT/config" and ".gitconﬁg" match ".env",
//     ".git/config" and ".gitconfig", and a decomposed accent matches the
//     composed letter. See Fold and Spellings.
//
// A Set is immutable after Compile and safe for concurrent use.
package pathglob

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gobwas/glob"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Set is a compiled list of globs.
type Set struct {
	globs    []string // anchored and cleaned, as written otherwise
	matchers []*glob.Pattern
}

// Compile compiles globs, in order. An empty glob or one that does not
// compile is an error naming its index and text.
func Compile(globs []string) (*Set, error) {
	s := &Set{globs: make([]string, len(globs)), matchers: make([]*glob.Pattern, len(globs))}
	for i, g := range globs {
		if strings.TrimSpace(g) == "" {
			return nil, fmt.Errorf("glob %d is empty", i)
		}
		s.globs[i] = Anchor(g)
		m, err := glob.Compile(Fold(s.globs[i]), '/')
		if err != nil {
			return nil, fmt.Errorf("glob %d %q: %w", i, g, err)
		}
		s.matchers[i] = m
	}
	return s, nil
}

// Anchor returns g cleaned lexically and, when it does not start with "/",
// made to match at any depth: ".env" gives "**/.env", "./a//b/" gives
// "**/a/b", and "**/x" and "/etc/*" stay as they are.
func Anchor(g string) string {
	g = path.Clean(g)
	if strings.HasPrefix(g, "/") || strings.HasPrefix(g, "**") {
		return g
	}
	return "**/" + g
}

// Len is the number of globs in s.
func (s *Set) Len() int { return len(s.globs) }

// Glob returns glob i as it is matched: anchored and cleaned.
func (s *Set) Glob(i int) string { return s.globs[i] }

// Globs returns every glob as it is matched, in order.
func (s *Set) Globs() []string { return append([]string(nil), s.globs...) }

// MatchOne reports whether glob i matches path (an absolute, clean path)
// under any of its spellings.
func (s *Set) MatchOne(i int, p string) bool {
	for _, v := range Spellings(p) {
		if s.matchers[i].Match(v) {
			return true
		}
	}
	return false
}

// Matching returns the indices, in order, of the globs that match any of
// paths.
func (s *Set) Matching(paths ...string) []int {
	var spellings []string
	for _, p := range paths {
		spellings = append(spellings, Spellings(p)...)
	}
	var out []int
	for i, m := range s.matchers {
		for _, v := range spellings {
			if m.Match(v) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// Fold maps s to the form globs and paths are compared in: the key under
// which a case-insensitive file system looks a name up. U+0131 dotless i
// and U+0130 dotted capital I become "i", as upper-casing file systems
// (NTFS) and Claude Code's own path checks treat them; then the canonical
// decomposition (NFD) is full-case-folded, as ext4's casefold does it, so
// that "ß" is "ss" and the ligature "ﬁ" is "fi" (".gitconﬁg" is
// ".gitconfig" there); then each letter becomes the lower case of the
// smallest letter it simply case-folds with, so that ".GIT" and ".Git" are
// ".git", the Kelvin sign is "k", the long s "s", and Φ, φ and ϕ are one
// letter; and the result is composed again (NFC), so that a name and its
// decomposed spelling ("cafe\u0301" and "café"), which macOS opens as one
// file, are one. For ASCII, Fold is strings.ToLower.
func Fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	s = strings.Map(func(r rune) rune {
		if r == 'ı' || r == 'İ' {
			return 'i'
		}
		return r
	}, s)
	s = cases.Fold().String(norm.NFD.String(s))
	return norm.NFC.String(strings.Map(foldRune, s))
}

// foldRune is one letter of Fold's last step: the lower case of the
// smallest letter r simply case-folds with.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		return unicode.ToLower(r)
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return unicode.ToLower(least)
}

// Spellings returns the folded forms of p (an absolute, clean path) that a
// glob is matched against: Fold(p), and, when it differs, the same with
// each component stripped of what a case-insensitive file system ignores
// when it looks a name up: the code points HFS+ ignores (U+200C..U+200F,
// U+202A..U+202E, U+206A..U+206F, U+FEFF), an NTFS stream suffix (":x")
// and trailing dots and spaces. ".git\u200c", ".git." and ".git::$DATA"
// all name ".git" there. (Claude Code's own check of dangerous paths folds
// names the same way.) A component that would strip to nothing is kept.
func Spellings(p string) []string {
	f := Fold(p)
	parts := strings.Split(f, "/")
	changed := false
	for i, part := range parts {
		if s := strip(part); s != part {
			parts[i], changed = s, true
		}
	}
	if !changed {
		return []string{f}
	}
	return []string{f, strings.Join(parts, "/")}
}

// strip is one component of Spellings.
func strip(name string) string {
	s := strings.Map(func(r rune) rune {
		if ignorable(r) {
			return -1
		}
		return r
	}, name)
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, ". ")
	if s == "" {
		return name
	}
	return s
}

// ignorable reports the code points HFS+ leaves out of a name when it
// compares names (git's is_hfs_dotgit lists the same).
func ignorable(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
}
