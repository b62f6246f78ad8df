package gate

import (
	"fmt"
	"testing"

	oparego "github.com/open-policy-agent/opa/v1/rego"

	"github.com/gatekeeper-ai/gatekeeper/internal/pathglob"
)

// TestDenyMatchingAgreesWithRego pins the sidecar's deny_matches (and
// write_protect_matches) fact to what a rule author gets from Rego's own
// glob.match over input.deny_globs and a path's covered list: for ASCII
// names, glob.match(lower(g), ["/"], lower(path)).
func TestDenyMatchingAgreesWithRego(t *testing.T) {
	t.Parallel()
	globs := []string{"/root/.ssh/**", "**/.env", "**/.env.*", "/root/.*", "**/.git/hooks/**", "/srv/*/secret", "/srv/{a,b}/x", "/srv/[ab]?/y", ".env", "**/CLAUDE.md", "/Srv/Upper/*"}
	paths := []string{"/root/.ssh", "/root/.ssh/id_rsa", "/root/.ssh/a/b", "/srv/app/.env", "/.env", "/srv/app/.env.local", "/srv/app/env",
		"/root/.bashrc", "/root/.config/gh", "/root/x", "/w/.git/hooks/pre-commit", "/w/.git/config", "/srv/app/secret", "/srv/a/b/secret", "/srv/a/x", "/srv/c/x", "/srv/a1/y", "/srv/c1/y",
		"/srv/app/.ENV", "/ROOT/.SSH/id_rsa", "/w/.GIT/Hooks/x", "/w/claude.md", "/srv/upper/x", "/SRV/B/X"}
	pq, err := oparego.New(oparego.Query(`glob.match(lower(input.g), ["/"], lower(input.p))`)).PrepareForEval(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	set, err := pathglob.Compile(globs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range set.Len() {
		g := set.Glob(i) // as input.deny_globs shows it: anchored
		for _, p := range paths {
			rs, err := pq.Eval(t.Context(), oparego.EvalInput(map[string]any{"g": g, "p": p}))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := set.MatchOne(i, p), rs.Allowed(); got != want {
				t.Errorf("glob %q path %q: sidecar says %v, Rego says %v", g, p, got, want)
			}
		}
	}
}

// TestCachedMatchesAreTheMatches pins Effective.matches, which keeps the
// matches of directories, to matching every covered path afresh: for
// paths whose ancestors were seen before, for a directory first seen as a
// file's own path, and after the cache was emptied for being full.
func TestCachedMatchesAreTheMatches(t *testing.T) {
	t.Parallel()
	deny, err := pathglob.Compile([]string{"/root/.ssh/**", "**/.env", "/srv/app/secret/**", "/srv/*/.git", "**/NODE_MODULES/**"})
	if err != nil {
		t.Fatal(err)
	}
	wp, err := pathglob.Compile([]string{"**/.git/hooks/**", "/srv/app/.claude/**", "/srv/app/*.md"})
	if err != nil {
		t.Fatal(err)
	}
	eff := &Effective{deny: deny, writeProtect: wp}
	var facts []pathFact
	for _, p := range []string{
		"/srv/app/main.go", "/srv/app/secret/key", "/srv/app/secret", "/srv/app/.git/hooks/pre-commit", "/srv/app/.git",
		"/srv/app/.claude/settings.json", "/srv/app/README.md", "/srv/app/node_modules/x/index.js", "/root/.ssh/id_rsa", "/root/.ssh",
		"/srv/app/.ENV", "/srv/app/sub/.env",
	} {
		facts = append(facts, pathFact{Abs: p, Resolved: p})
	}
	// A link: its own path is allowed, where it leads is not.
	facts = append(facts, pathFact{Abs: "/srv/app/link", Resolved: "/root/.ssh/config"})
	var fill []pathFact // fills the cache past its bound
	for i := range maxMatchCache + 40 {
		fill = append(fill, pathFact{Abs: fmt.Sprintf("/srv/app/d%d/f", i), Resolved: fmt.Sprintf("/srv/app/d%d/f", i)})
	}
	// Fresh, from the cache, past the bound, and fresh again.
	for round, facts := range [][]pathFact{facts, facts, fill, facts} {
		for _, f := range facts {
			covered := f.covered()
			got := eff.matches(f, covered)
			want := pathMatches{deny: bitsOf(deny.Matching(covered...)), writeProtect: bitsOf(wp.Matching(covered...))}
			for _, c := range []struct {
				name      string
				got, want globBits
				n         int
			}{{"deny", got.deny, want.deny, deny.Len()}, {"write-protect", got.writeProtect, want.writeProtect, wp.Len()}} {
				for i := range c.n {
					if c.got.has(i) != c.want.has(i) {
						t.Fatalf("round %d, %s: %s glob %d matched %v, want %v", round, f.Abs, c.name, i, c.got.has(i), c.want.has(i))
					}
				}
			}
		}
	}
	if n := eff.matchCacheLen.Load(); n > maxMatchCache {
		t.Errorf("the cache holds %d directories, more than %d", n, maxMatchCache)
	}
}
