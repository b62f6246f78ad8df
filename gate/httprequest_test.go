package gate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

const httpPolicy = `version: 1
workspace_root: ./ws
secrets:
  github:
    from_env: TEST_GITHUB_TOKEN
    hosts: [api.github.com]
    inject: {header: Authorization}
    sentinel: {env: GITHUB_TOKEN}
    require: true
  pypi:
    from_file: PYPI_FILE
    hosts: [pypi.example.com]
    inject: {basic: password}
    sentinel: {file: /tmp/pypi-token}
  other:
    from_env: TEST_OTHER
    hosts: [example.org]
    inject: {query: key}
    sentinel: {env: OTHER_KEY}
sandbox:
  net:
    enabled: true
    allow: [api.github.com, pypi.example.com, example.org]
    inspect: [example.org]
    secrets: [github]
    body_preview: 16
ceilings:
  net_hosts: [example.org]
  secrets: [pypi]
`

// newHTTPEnv is newEnv with httpPolicy (and extra), whose pypi secret is
// read from the file pypi-token of the env's directory.
func newHTTPEnv(t *testing.T, extra string) *env {
	t.Helper()
	e := newEnv(t, "")
	text := strings.Replace(httpPolicy+extra, "PYPI_FILE", filepath.Join(e.dir, "pypi-token"), 1)
	must(t, os.WriteFile(e.policyFile, []byte(text), 0o644))
	return e
}

// exampleModule copies the shipped example operator module into e's
// --rego-dir.
func exampleModule(t *testing.T, e *env) {
	t.Helper()
	src, err := os.ReadFile("../rego/examples/http_github_readonly.rego")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(e.regoDir, "http_github_readonly.rego"), src, 0o644))
}

func githubGET(method, path string) runner.HTTPRequest {
	return runner.HTTPRequest{Method: method, Scheme: "https", Host: "api.github.com", Port: 443, Path: path, Proto: "HTTP/2.0",
		Headers: []string{"Accept", "Authorization"}, BodyBytes: 0, Secrets: []string{"github"}}
}

// TestHTTPJudgeWithTheExampleModule decides requests as the egress proxy
// asks for them, under the built-in rule and the shipped example module,
// compiled by the engine with real OPA.
func TestHTTPJudgeWithTheExampleModule(t *testing.T) {
	t.Parallel()
	e := newHTTPEnv(t, "")
	exampleModule(t, e)
	eng := e.engine(t)
	q, err := eng.OpenQuery(t.Context(), "q1", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	judge := eff.HTTPJudge("run_1", "q1")
	for _, tc := range []struct {
		name  string
		req   runner.HTTPRequest
		allow bool
		rule  string
	}{
		{"GET of our repository", githubGET("GET", "/repos/our-org/x"), true, gate.RuleHTTPAllowed},
		{"HEAD of a file of it", githubGET("HEAD", "/repos/our-org/x/contents/README.md"), true, gate.RuleHTTPAllowed},
		{"DELETE of it", githubGET("DELETE", "/repos/our-org/x"), false, "github.read_only"},
		{"POST of an issue", githubGET("POST", "/repos/our-org/x/issues"), false, "github.read_only"},
		{"GET of another org's repository", githubGET("GET", "/repos/other-org/x"), false, "github.our_org_only"},
		{"GET of a prefix that is not the org", githubGET("GET", "/repos/our-org-evil/x"), false, "github.our_org_only"},
		{"GET through a dot segment", githubGET("GET", "/repos/our-org/../other-org/x"), false, "github.our_org_only"},
		{"GET through an escaped slash", githubGET("GET", "/repos/our-org%2F..%2Fother-org/x"), false, "github.our_org_only"},
		{"GET of the user's own data", githubGET("GET", "/user"), false, "github.our_org_only"},
		{"a request to another inspected host", runner.HTTPRequest{Method: "DELETE", Scheme: "https", Host: "example.org", Port: 443, Path: "/x", Proto: "HTTP/1.1"}, true, gate.RuleHTTPAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := judge.JudgeRequest(t.Context(), tc.req)
			if v.Allow != tc.allow || v.Rule != tc.rule || v.Reason == "" {
				t.Errorf("verdict = %+v, want allow %v by %s", v, tc.allow, tc.rule)
			}
		})
	}
}

// TestHTTPJudgeSeesTheRequest pins the input's fields to the request: an
// operator rule over each refuses exactly the request that has it.
func TestHTTPJudgeSeesTheRequest(t *testing.T) {
	t.Parallel()
	e := newHTTPEnv(t, "")
	must(t, os.WriteFile(filepath.Join(e.regoDir, "fields.rego"), []byte(`package gatekeeper

deny contains {"rule": "t.body", "reason": "body"} if input.http.body == "abc\ufffddef"
deny contains {"rule": "t.query", "reason": "query"} if input.http.query == "a=1"
deny contains {"rule": "t.header", "reason": "header"} if "X-Debug" in input.http.headers
deny contains {"rule": "t.secret", "reason": "secret"} if "pypi" in input.http.secrets
deny contains {"rule": "t.size", "reason": "size"} if input.http.body_bytes > 1000
deny contains {"rule": "t.port", "reason": "port"} if input.http.port == 8443
deny contains {"rule": "t.run", "reason": "run"} if input.run_id == "run_evil"
deny contains {"rule": "t.plain", "reason": "plain"} if input.http.scheme == "http"
`), 0o644))
	eff := mustBase(t, e.engine(t))
	base := runner.HTTPRequest{Method: "GET", Scheme: "https", Host: "example.org", Port: 443, Path: "/", Proto: "HTTP/1.1", Headers: []string{"Accept"}}
	judge := eff.HTTPJudge("run_1", "q1")
	if v := judge.JudgeRequest(t.Context(), base); !v.Allow {
		t.Fatalf("the plain request was refused: %+v", v)
	}
	for rule, mutate := range map[string]func(*runner.HTTPRequest){
		"t.body":   func(r *runner.HTTPRequest) { r.Body = []byte("abc\xffdef") },
		"t.query":  func(r *runner.HTTPRequest) { r.Query = "a=1" },
		"t.header": func(r *runner.HTTPRequest) { r.Headers = []string{"Accept", "X-Debug"} },
		"t.secret": func(r *runner.HTTPRequest) { r.Secrets = []string{"pypi"} },
		"t.size":   func(r *runner.HTTPRequest) { r.BodyBytes = 1001 },
		"t.port":   func(r *runner.HTTPRequest) { r.Port = 8443 },
		"t.plain":  func(r *runner.HTTPRequest) { r.Scheme = "http" },
	} {
		r := base
		mutate(&r)
		if v := judge.JudgeRequest(t.Context(), r); v.Allow || v.Rule != rule {
			t.Errorf("%s: verdict = %+v", rule, v)
		}
	}
	if v := eff.HTTPJudge("run_evil", "q1").JudgeRequest(t.Context(), base); v.Allow || v.Rule != "t.run" {
		t.Errorf("run_id: verdict = %+v", v)
	}
}

// TestHTTPJudgeFailsClosed: an evaluation error, an ask, and an ended
// context each refuse the request with a reason.
func TestHTTPJudgeFailsClosed(t *testing.T) {
	t.Parallel()
	e := newHTTPEnv(t, "")
	must(t, os.WriteFile(filepath.Join(e.regoDir, "bad.rego"), []byte(`package gatekeeper

deny contains {"rule": "t.err", "reason": sprintf("%d", [to_number(input.http.query)])} if input.http.path == "/err"
ask contains {"rule": "t.ask", "reason": "ask someone"} if input.http.path == "/ask"
`), 0o644))
	eff := mustBase(t, e.engine(t))
	judge := eff.HTTPJudge("run_1", "q1")
	req := func(path string) runner.HTTPRequest {
		return runner.HTTPRequest{Method: "GET", Scheme: "https", Host: "example.org", Port: 443, Path: path, Query: "x", Proto: "HTTP/1.1"}
	}
	if v := judge.JudgeRequest(t.Context(), req("/err")); v.Allow || v.Rule != gate.RuleError || !strings.Contains(v.Reason, "could not decide this request") {
		t.Errorf("an evaluation error: %+v", v)
	}
	if v := judge.JudgeRequest(t.Context(), req("/ask")); v.Allow || v.Rule != "t.ask" || !strings.Contains(v.Reason, "cannot wait for a human") {
		t.Errorf("an ask: %+v", v)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if v := judge.JudgeRequest(ctx, req("/")); v.Allow || v.Rule != gate.RuleError {
		t.Errorf("an ended context: %+v", v)
	}
	var nilEff *gate.Effective
	if v := nilEff.HTTPJudge("r", "q").JudgeRequest(t.Context(), req("/")); v.Allow || v.Rule != gate.RuleError {
		t.Errorf("no policy: %+v", v)
	}
}

// TestRunSpecSecrets: a networked run's Spec carries the effective
// secrets with their values read at the start, its inspect hosts, body
// preview and judge; a secret that cannot be read stops the run with a
// message naming it and its source.
func TestRunSpecSecrets(t *testing.T) {
	t.Parallel()
	e := newHTTPEnv(t, "")
	must(t, os.WriteFile(filepath.Join(e.dir, "pypi-token"), []byte("pypi-value\n"), 0o600))
	eng := e.engine(t)
	env := func(vals map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	}
	q, err := eng.OpenQuery(t.Context(), "q", []byte(`{"net": {"secrets": ["github", "pypi"]}}`))
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	spec, err := eff.RunSpec(t.Context(), gate.RunRequest{RunID: "r1", QueryID: "q", Language: "python", LookupEnv: env(map[string]string{"TEST_GITHUB_TOKEN": "gh-value"})})
	must(t, err)
	n := spec.Sandbox.Network
	if len(n.Secrets) != 2 || n.Secrets[0].Name != "github" || n.Secrets[0].Value.Reveal() != "gh-value" || n.Secrets[1].Value.Reveal() != "pypi-value" ||
		n.Secrets[0].Inject.Header != "Authorization" || n.Secrets[1].Sentinel.File != "/tmp/pypi-token" || !n.Secrets[0].Require {
		t.Errorf("secrets = %+v", n.Secrets)
	}
	if len(n.Inspect) != 1 || n.Inspect[0] != "example.org" || n.BodyPreview != 16 || spec.Requests == nil {
		t.Errorf("network = %+v, requests %v", n, spec.Requests)
	}
	// The pool's sandbox reads no secret.
	sb, err := eff.RunnerSandbox()
	must(t, err)
	if sb.Network.Secrets[0].Value.Reveal() != "" {
		t.Errorf("RunnerSandbox read a secret")
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unset", nil, `secret "github" (environment variable TEST_GITHUB_TOKEN) cannot be read, so the run does not start: environment variable TEST_GITHUB_TOKEN is not set`},
		{"empty", map[string]string{"TEST_GITHUB_TOKEN": ""}, `secret "github" (environment variable TEST_GITHUB_TOKEN) is empty, so the run does not start`},
		{"a line break in a header's value", map[string]string{"TEST_GITHUB_TOKEN": "gh\r\nX-Evil: 1"}, `secret "github" (environment variable TEST_GITHUB_TOKEN) has a line break or NUL`},
	} {
		_, err := eff.RunSpec(t.Context(), gate.RunRequest{Language: "python", LookupEnv: env(tc.env)})
		var rre *gate.RunRequestError
		if err == nil || errors.As(err, &rre) || err.Error() != tc.want && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "gh\r\n") {
			t.Errorf("%s: the error holds the value: %v", tc.name, err)
		}
	}
	// A query without network gets no secret, and reads none.
	off, err := eng.OpenQuery(t.Context(), "off", []byte(`{"net": {"enabled": false}}`))
	must(t, err)
	offEff, err := off.Effective(t.Context())
	must(t, err)
	spec, err = offEff.RunSpec(t.Context(), gate.RunRequest{Language: "python", LookupEnv: env(nil)})
	if err != nil || len(spec.Sandbox.Network.Secrets) != 0 || spec.Requests != nil {
		t.Errorf("a run without network: %v, secrets %+v, requests %v", err, spec.Sandbox.Network.Secrets, spec.Requests)
	}
	must(t, os.Remove(filepath.Join(e.dir, "pypi-token")))
	_, err = eff.RunSpec(t.Context(), gate.RunRequest{Language: "python", LookupEnv: env(map[string]string{"TEST_GITHUB_TOKEN": "gh-value"})})
	if err == nil || !strings.Contains(err.Error(), `secret "pypi" (file `) || !strings.Contains(err.Error(), "pypi-token") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestOverrideSecretsWithinCeilings: an override may add a secret
// ceilings.secrets names, and no other.
func TestOverrideSecretsWithinCeilings(t *testing.T) {
	t.Parallel()
	eng := newHTTPEnv(t, "").engine(t)
	if _, err := eng.OpenQuery(t.Context(), "ok", []byte(`{"net": {"secrets": ["pypi"]}}`)); err != nil {
		t.Errorf("a secret within the ceilings: %v", err)
	}
	_, err := eng.OpenQuery(t.Context(), "no", []byte(`{"net": {"secrets": ["github", "other"]}}`))
	var oe *gate.OverrideError
	if !errors.As(err, &oe) || !strings.Contains(strings.Join(oe.Violations, "\n"), `sandbox.net.secrets cannot add "other": it is not in ceilings.secrets`) {
		t.Errorf("a secret outside the ceilings: %v", err)
	}
	_, err = eng.OpenQuery(t.Context(), "no", []byte(`{"net": {"inspect": []}}`))
	if !errors.As(err, &oe) || !strings.Contains(strings.Join(oe.Violations, "\n"), `sandbox.net.inspect cannot drop "example.org"`) {
		t.Errorf("dropping an inspected host: %v", err)
	}
}

// BenchmarkHTTPJudge measures one request's decision, which the egress
// proxy adds to every intercepted request, under the built-in rule alone
// and with the shipped example module.
func BenchmarkHTTPJudge(b *testing.B) {
	for _, example := range []bool{false, true} {
		name := "builtin"
		if example {
			name = "with the example module"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, "")
			text := strings.Replace(httpPolicy, "PYPI_FILE", filepath.Join(e.dir, "pypi-token"), 1)
			must(b, os.WriteFile(e.policyFile, []byte(text), 0o644))
			if example {
				src, err := os.ReadFile("../rego/examples/http_github_readonly.rego")
				must(b, err)
				must(b, os.WriteFile(filepath.Join(e.regoDir, "example.rego"), src, 0o644))
			}
			eng, err := gate.New(b.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home})
			must(b, err)
			q, err := eng.OpenQuery(b.Context(), "q", nil)
			must(b, err)
			eff, err := q.Effective(b.Context())
			must(b, err)
			judge, req := eff.HTTPJudge("r", "q"), githubGET("GET", "/repos/our-org/x")
			for b.Loop() {
				if v := judge.JudgeRequest(b.Context(), req); !v.Allow {
					b.Fatal(v)
				}
			}
		})
	}
}
