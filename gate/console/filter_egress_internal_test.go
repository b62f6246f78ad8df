package console

import (
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// TestSearchFindsAnInterceptedRequestByMethodPathAndSecret: the search
// box looks at an intercepted request's method, path and secret names.
func TestSearchFindsAnInterceptedRequestByMethodPathAndSecret(t *testing.T) {
	t.Parallel()
	rec := audit.Record{Kind: audit.KindEgress, Method: "DELETE", Host: "api.github.com", Path: "/repos/our-org/x", Secrets: []string{"github_token"}, Intercepted: true}
	e := &entry{rec: rec, hay: haystack(&rec)}
	for _, q := range []string{"delete", "/repos/our-org", "GITHUB_TOKEN"} {
		if !(Filter{Search: q}).match(e) {
			t.Errorf("search %q does not find %q", q, strings.ReplaceAll(e.hay, "\n", " | "))
		}
	}
	if (Filter{Search: "/repos/other"}).match(e) {
		t.Error("search /repos/other finds the request: the check could never fail")
	}
}
