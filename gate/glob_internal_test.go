package gate

import (
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
