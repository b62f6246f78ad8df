package pathglob_test

import (
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/pathglob"
)

// FuzzMatch checks that the matcher never panics, that a glob without
// metacharacters matches the path it names (in any case), and that a
// relative one matches that name below any directory.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"**/.env", "/a/b/.env"}, {"/home/*/.ssh/**", "/home/u/.ssh/id"}, {"[", "/x"}, {"/A/B", "/a/b"}, {".git", "/w/.GIT"}, {"{a,b", "/a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, g, p string) {
		if len(g) > 256 || len(p) > 1024 {
			return
		}
		s, err := pathglob.Compile([]string{g})
		if err != nil {
			return
		}
		s.MatchOne(0, p)
		lit := pathglob.Anchor(g)
		if strings.ContainsAny(lit, `*?[]{}\`) || strings.Contains(lit, "..") || !strings.HasPrefix(lit, "/") || strings.TrimSpace(lit[1:]) == "" {
			return
		}
		for _, path := range []string{lit, strings.ToUpper(lit)} {
			if !s.MatchOne(0, path) {
				t.Fatalf("literal glob %q does not match %q", g, path)
			}
		}
		rel, err := pathglob.Compile([]string{strings.TrimPrefix(lit, "/")})
		if err != nil {
			t.Fatalf("the relative form of %q does not compile: %v", g, err)
		}
		if !rel.MatchOne(0, "/some/dir"+lit) {
			t.Fatalf("relative glob %q does not match %q", strings.TrimPrefix(lit, "/"), "/some/dir"+lit)
		}
	})
}

// FuzzFold checks that Fold is idempotent, so that a folded glob and a
// folded path compare in one form, and that it keeps every "/".
func FuzzFold(f *testing.F) {
	for _, s := range []string{".GIT", ".gitconﬁg", "/root/.ßh", "cafe\u0301", "İı", "\u13a0\uab70", "ǅ", "\u0345\u0399"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1024 {
			return
		}
		once := pathglob.Fold(s)
		if twice := pathglob.Fold(once); twice != once {
			t.Fatalf("Fold(%+q) = %+q, but Fold of that is %+q", s, once, twice)
		}
		if strings.Count(once, "/") != strings.Count(s, "/") {
			t.Fatalf("Fold(%+q) = %+q changed the slashes", s, once)
		}
	})
}
