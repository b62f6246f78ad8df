package gate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
)

// TestRequestRulesThatNeverFireAreRefused: the engine (and so `policy
// check`, serve and reload) refuses an operator's request rule that can
// never do what it says, naming the file and line.
func TestRequestRulesThatNeverFireAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, rule string
		want       string // "" when the rule loads
	}{
		{"a lower-case method", `input.http.method == "delete"`, `rules.rego:3: input.http.method is compared with "delete", but a request's method arrives as sent, upper case for the standard methods ("DELETE")`},
		{"a lower-case method, written the other way round", `"get" != input.http.method`, `rules.rego:3: input.http.method is compared with "get"`},
		{"a lower-case method in a set", `not input.http.method in {"GET", "head"}`, `rules.rego:3: input.http.method is compared with "head"`},
		{"a host nothing inspects", `input.http.host == "gitlab.com"`, `rules.rego:3: input.http.host is compared with "gitlab.com", which neither sandbox.net.inspect nor a secret's hosts match`},
		{"a host not normalized", `input.http.host == "API.github.com"`, `input.http.host is compared with "API.github.com", but the host arrives normalized ("api.github.com")`},
		{"a path without its slash", `input.http.path == "repos/x"`, `rules.rego:3: input.http.path is compared with "repos/x", but every path starts with "/"`},
		{"a path prefix without its slash", `startswith(input.http.path, "repos/")`, `input.http.path is tested for the prefix "repos/"`},
		{"a secret's host and upper-case methods", `input.http.host == "pypi.example.com"; input.http.method in ["GET", "PROPFIND"]`, ""},
		{"an inspected host and a path", `input.http.host == "example.org"; startswith(input.http.path, "/v1/")`, ""},
		{"a custom method in upper case", `input.http.method == "PURGE"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newHTTPEnv(t, "")
			must(t, os.WriteFile(filepath.Join(e.regoDir, "rules.rego"), []byte("package gatekeeper\n\ndeny contains {\"rule\": \"t.r\", \"reason\": \"r\"} if { "+tc.rule+" }\n"), 0o644))
			_, err := gate.New(t.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestTheExampleNeedsItsHostInspected: the shipped example under a policy
// that does not intercept api.github.com is refused, since its rules
// would never run.
func TestTheExampleNeedsItsHostInspected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "version: 1\nworkspace_root: ./ws\nsandbox:\n  net: {enabled: true, allow: [api.github.com]}\n")
	exampleModule(t, e)
	_, err := gate.New(t.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home})
	if err == nil || !strings.Contains(err.Error(), `http_github_readonly.rego:22: input.http.host is compared with "api.github.com", which neither`) {
		t.Errorf("error = %v", err)
	}
}
