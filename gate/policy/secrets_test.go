package policy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

const secretsPolicy = minimal + `secrets:
  github:
    from_env: GITHUB_TOKEN
    hosts: [api.github.com, github.com]
    inject: {header: Authorization}
    sentinel: {env: GITHUB_TOKEN}
    require: true
  pypi:
    from_file: /run/secrets/pypi
    hosts: [pypi.example.com]
    inject: {basic: password}
    sentinel: {file: /tmp/pypi-token}
sandbox:
  net:
    enabled: true
    allow: [api.github.com, github.com, pypi.example.com, example.org]
    inspect: [example.org]
    secrets: [github]
ceilings:
  secrets: [pypi]
`

func TestSecretsDecode(t *testing.T) {
	t.Parallel()
	p, err := decode(t, secretsPolicy)
	if err != nil {
		t.Fatal(err)
	}
	gh := p.Secrets["github"]
	want := runner.Secret{Name: "github", Hosts: []string{"api.github.com", "github.com"}, Inject: runner.SecretPlace{Header: "Authorization"},
		Sentinel: runner.SecretSentinel{Env: "GITHUB_TOKEN"}, Require: true}
	if got := gh.Runner("github"); got.Name != want.Name || !slices.Equal(got.Hosts, want.Hosts) || got.Inject != want.Inject || got.Sentinel != want.Sentinel || !got.Require {
		t.Errorf("github = %+v, want %+v", got, want)
	}
	if gh.Source() != "environment variable GITHUB_TOKEN" || p.Secrets["pypi"].Source() != "file /run/secrets/pypi" {
		t.Errorf("sources = %q, %q", gh.Source(), p.Secrets["pypi"].Source())
	}
	if n := p.Sandbox.Net; n.BodyPreview != policy.DefaultBodyPreview || !slices.Equal(n.Secrets, []string{"github"}) || !slices.Equal(n.Inspect, []string{"example.org"}) {
		t.Errorf("net = %+v", n)
	}
}

func TestSecretsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		want      string
	}{
		{"no source", "secrets:\n  s: {hosts: [a.example], inject: {body: true}, sentinel: {env: S}}\n", "p.yaml:4:6: secrets.s: set from_env or from_file"},
		{"two sources", "secrets:\n  s: {from_env: S, from_file: /s, hosts: [a.example], inject: {body: true}, sentinel: {env: S}}\n", "secrets.s: set from_env or from_file, not both"},
		{"a relative file", "secrets:\n  s: {from_file: s.txt, hosts: [a.example], inject: {body: true}, sentinel: {env: S}}\n", "secrets.s.from_file: \"s.txt\" must be an absolute path"},
		{"no hosts", "secrets:\n  s: {from_env: S, hosts: [], inject: {body: true}, sentinel: {env: S}}\n", "secrets.s.hosts: list at least one host"},
		{"a host too wide", "secrets:\n  s: {from_env: S, hosts: ['*.com'], inject: {body: true}, sentinel: {env: S}}\n", "secrets.s.hosts[0]:"},
		{"two places", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true, header: X-Key}, sentinel: {env: S}}\n", "secrets.s.inject: set exactly one of"},
		{"no place", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {}, sentinel: {env: S}}\n", "secrets.s.inject: set exactly one of"},
		{"a bad basic part", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {basic: both}, sentinel: {env: S}}\n", "secrets.s.inject.basic: \"both\" is not user, password or either"},
		{"a transport header", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {header: Host}, sentinel: {env: S}}\n", "secrets.s.inject.header: Host is a header of the transport"},
		{"no sentinel", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {}}\n", "secrets.s.sentinel: set exactly one of env"},
		{"the launcher's PATH", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {env: PATH}}\n", "secrets.s.sentinel.env: PATH is set by the sandbox's launcher"},
		{"a proxy variable", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {env: https_proxy}}\n", "https_proxy is set by the sandbox's launcher"},
		{"a CA variable", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {env: NODE_EXTRA_CA_CERTS}}\n", "NODE_EXTRA_CA_CERTS is set by the sandbox's launcher"},
		{"gatekeeper's own", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {env: GATEKEEPER_X}}\n", "GATEKEEPER_X is set by the sandbox's launcher"},
		{"a file outside /tmp", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {file: /etc/token}}\n", "secrets.s.sentinel.file: \"/etc/token\" must be an absolute, clean path below /tmp or /workspace"},
		{"a file with ..", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {file: /tmp/../etc/x}}\n", "below /tmp or /workspace"},
		{"/tmp itself", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {file: /tmp}}\n", "below /tmp or /workspace"},
		{"one sentinel env twice", "secrets:\n  a: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {env: TOKEN}}\n  b: {from_env: T, hosts: [a.example], inject: {body: true}, sentinel: {env: TOKEN}}\n", "p.yaml:5:78: secrets.b.sentinel.env: secret \"a\" already puts its sentinel in TOKEN"},
		{"one sentinel file twice", "secrets:\n  a: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {file: /tmp/t}}\n  b: {from_env: T, hosts: [a.example], inject: {body: true}, sentinel: {file: /tmp/t}}\n", "secrets.b.sentinel.file: secret \"a\" already puts its sentinel in /tmp/t"},
		{"a literal value", "secrets:\n  s: {value: abc, hosts: [a.example], inject: {body: true}, sentinel: {env: S}}\n", "unknown key \"value\""},
		{"an unknown secret", "sandbox:\n  net: {enabled: true, allow: [a.example], secrets: [nope]}\n", "p.yaml:4:53: sandbox.net.secrets[0]: \"nope\" is not a secret of the policy's secrets catalog"},
		{"a secret without network", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {body: true}, sentinel: {env: S}}\nsandbox:\n  net: {enabled: false, allow: [a.example], secrets: [s]}\n", "sandbox.net.secrets[0]: secret \"s\" is given to runs that have no network"},
		{"a secret no allow admits", "secrets:\n  s: {from_env: S, hosts: [b.example], inject: {body: true}, sentinel: {env: S}}\nsandbox:\n  net: {enabled: true, allow: [a.example], secrets: [s]}\n", "secret \"s\" would never be sent: its host b.example is admitted by no net.allow pattern"},
		{"an inspect host no allow admits", "sandbox:\n  net: {enabled: true, allow: [a.example], inspect: [b.example]}\n", "sandbox.net.inspect[0]: b.example would never be inspected"},
		{"a body preview too large", "sandbox:\n  net: {body_preview: 1m}\n", "sandbox.net.body_preview: 1m is out of range: 0 to 64k"},
		{"an unknown ceiling secret", "ceilings:\n  secrets: [nope]\n", "ceilings.secrets[0]: \"nope\" is not a secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decode(t, minimal+tc.src)
			if err == nil {
				t.Fatalf("accepted")
			}
			if msgs := problems(t, err); !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, tc.want) }) {
				t.Errorf("problems = %q, want one containing %q", msgs, tc.want)
			}
		})
	}
}

func TestSecretsAccepted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src string }{
		{"a wildcard host within the allow list", "secrets:\n  s: {from_env: S, hosts: ['*.example.org'], inject: {query: key}, sentinel: {file: /workspace/.key}}\nsandbox:\n  net: {enabled: true, allow: [api.example.org], secrets: [s]}\n"},
		{"an exact host within an allowed wildcard", "sandbox:\n  net: {enabled: true, allow: ['*.example.org'], inspect: [api.example.org]}\n"},
		{"basic either", "secrets:\n  s: {from_env: S, hosts: [a.example], inject: {basic: either}, sentinel: {env: GIT_TOKEN}}\n"},
		{"no body preview at all", "sandbox:\n  net: {body_preview: 0}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := decode(t, minimal+tc.src); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// TestSecretsOverride checks the sandbox keys an override's secrets and
// inspect hosts are validated with (the ceilings are rego's: see
// rego/constraints_test.rego and gate's engine tests).
func TestSecretsOverride(t *testing.T) {
	t.Parallel()
	p, err := decode(t, secretsPolicy)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Override([]byte(`{"net": {"secrets": ["github", "pypi"], "inspect": ["example.org", "github.com"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sb.Net.Secrets, []string{"github", "pypi"}) || !slices.Equal(p.Sandbox.Net.Secrets, []string{"github"}) {
		t.Errorf("override secrets = %v, base %v", sb.Net.Secrets, p.Sandbox.Net.Secrets)
	}
	// Less network is always allowed: a run without network gets no secret.
	if _, err := p.Override([]byte(`{"net": {"enabled": false}}`)); err != nil {
		t.Errorf("turning the network off: %v", err)
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"net": {"secrets": ["nope"]}}`, `sandbox_policy:1:19: sandbox.net.secrets[0]: "nope" is not a secret`},
		{`{"net": {"inspect": ["other.example"]}}`, `other.example would never be inspected`},
	} {
		_, err := p.Override([]byte(tc.raw))
		if err == nil {
			t.Errorf("%s: accepted", tc.raw)
			continue
		}
		if msgs := problems(t, err); !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, tc.want) }) {
			t.Errorf("%s: problems = %q, want one containing %q", tc.raw, msgs, tc.want)
		}
	}
}

func TestLauncherEnv(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"PATH": true, "HOME": true, "LANG": true, "HTTPS_PROXY": true, "no_proxy": true, "GATEKEEPER_RUN": true,
		"SSL_CERT_FILE": true, "REQUESTS_CA_BUNDLE": true, "CURL_CA_BUNDLE": true, "PIP_CERT": true, "GIT_SSL_CAINFO": true,
		"NODE_EXTRA_CA_CERTS": true, "npm_config_cafile": true,
		"GITHUB_TOKEN": false, "PIP_INDEX_URL": false, "PROXY_TOKEN": false,
	} {
		if got := policy.LauncherEnv(name); got != want {
			t.Errorf("LauncherEnv(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestSecretsShippedExample: the commented secrets example of the shipped
// policy is a valid catalog, given to runs that may reach its hosts.
func TestSecretsShippedExample(t *testing.T) {
	t.Parallel()
	p, err := decode(t, shippedExample(t, "secrets", minimal+"sandbox:\n  net: {enabled: true, allow: [api.github.com, github.com], secrets: [github]}\nsecrets:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if gh := p.Secrets["github"]; gh.FromEnv != "GITHUB_TOKEN" || gh.Inject.Header != "Authorization" || !gh.Require {
		t.Errorf("example secret = %+v", gh)
	}
}
