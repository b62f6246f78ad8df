package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// httpCLIPolicy inspects api.github.com, so that the shipped example's
// rules about it may stand.
const httpCLIPolicy = `version: 1
workspace_root: ws
tools:
  allow: [mcp__sandboxed_code__run]
sandbox:
  net:
    enabled: true
    allow: [api.github.com]
    inspect: [api.github.com]
`

// TestDecideDecidesAnHTTPRequestAsTheProxysJudgeDoes: decide given event
// http_request answers with the shipped example module's rules, as a
// run's request to an intercepted host is decided.
func TestDecideDecidesAnHTTPRequestAsTheProxysJudgeDoes(t *testing.T) {
	t.Parallel()
	dir, file := writePolicy(t, httpCLIPolicy)
	regoDir := filepath.Join(dir, "rego")
	must(t, os.MkdirAll(regoDir, 0o755))
	example, err := os.ReadFile(filepath.Join("..", "..", "rego", "examples", "http_github_readonly.rego"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(regoDir, "github.rego"), example, 0o644))
	for _, tc := range []struct {
		name, call string
		wantCode   int
		wantRule   string
	}{
		{"a GET of our organization's repository", `{"event":"http_request","http":{"method":"GET","host":"api.github.com","path":"/repos/our-org/x"}}`, 0, "http.allowed"},
		{"a DELETE of it", `{"event":"http_request","http":{"method":"DELETE","host":"api.github.com","path":"/repos/our-org/x"}}`, 1, "github.read_only"},
		{"a GET of another organization's", `{"event":"http_request","http":{"method":"GET","host":"api.github.com","path":"/repos/their-org/x"}}`, 1, "github.our_org_only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := cli(t, tc.call, "decide", "--policy", file, "--rego-dir", regoDir, "--claude-code-dir", "")
			var ee exitError
			if code := 0; errors.As(err, &ee) {
				code = int(ee)
				if code != tc.wantCode {
					t.Fatalf("exit %d, want %d: %s", code, tc.wantCode, out)
				}
			} else if err != nil || tc.wantCode != 0 {
				t.Fatalf("decide: %v (want exit %d): %s", err, tc.wantCode, out)
			}
			var res decideResult
			must(t, json.Unmarshal([]byte(out), &res))
			if res.Rule != tc.wantRule {
				t.Errorf("decision %+v; want rule %s", res, tc.wantRule)
			}
		})
	}
}
