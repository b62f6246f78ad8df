package gate

import (
	"testing"

	"github.com/gobwas/glob"
	oparego "github.com/open-policy-agent/opa/v1/rego"
)

// TestDenyMatchingAgreesWithRego pins that the sidecar's deny_matches fact
// is what Rego's own glob.match(g, ["/"], path) would say.
func TestDenyMatchingAgreesWithRego(t *testing.T) {
	t.Parallel()
	globs := []string{"/root/.ssh/**", "**/.env", "**/.env.*", "/root/.*", "**/.git/hooks/**", "/srv/*/secret", "/srv/{a,b}/x", "/srv/[ab]?/y"}
	paths := []string{"/root/.ssh", "/root/.ssh/id_rsa", "/root/.ssh/a/b", "/srv/app/.env", "/.env", "/srv/app/.env.local", "/srv/app/env",
		"/root/.bashrc", "/root/.config/gh", "/root/x", "/w/.git/hooks/pre-commit", "/w/.git/config", "/srv/app/secret", "/srv/a/b/secret", "/srv/a/x", "/srv/c/x", "/srv/a1/y", "/srv/c1/y"}
	pq, err := oparego.New(oparego.Query("glob.match(input.g, [\"/\"], input.p)")).PrepareForEval(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range globs {
		m, err := glob.Compile(g, '/')
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			rs, err := pq.Eval(t.Context(), oparego.EvalInput(map[string]any{"g": g, "p": p}))
			if err != nil {
				t.Fatal(err)
			}
			if want := rs.Allowed(); m.Match(p) != want {
				t.Errorf("glob %q path %q: sidecar says %v, Rego says %v", g, p, m.Match(p), want)
			}
		}
	}
}
