package policy_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
)

func TestMCPServersDecode(t *testing.T) {
	t.Parallel()
	p, err := decode(t, minimal+`mcp_servers:
  records:
    description: the customer records
    command: [/usr/local/bin/records-mcp, --stdio]
    env:
      LOG_LEVEL: info
      RECORDS_TOKEN: {from_env: RECORDS_TOKEN}
      DB_PASSWORD: {from_file: /run/secrets/db}
  search:
    command: npx
    args: ["-y", "@example/search-mcp"]
  github:
    url: https://mcp.example.com/mcp
    headers:
      Authorization: {from_file: /run/secrets/github}
      X-Tenant: acme
`)
	if err != nil {
		t.Fatal(err)
	}
	rec := p.MCPServers["records"]
	if !rec.Stdio() || !slices.Equal(rec.Argv(), []string{"/usr/local/bin/records-mcp", "--stdio"}) || rec.Description != "the customer records" {
		t.Errorf("records = %+v", rec)
	}
	if rec.Env["LOG_LEVEL"] != (policy.MCPValue{Literal: "info"}) || rec.Env["RECORDS_TOKEN"] != (policy.MCPValue{FromEnv: "RECORDS_TOKEN"}) || rec.Env["DB_PASSWORD"] != (policy.MCPValue{FromFile: "/run/secrets/db"}) {
		t.Errorf("records.env = %+v", rec.Env)
	}
	if s := p.MCPServers["search"]; !slices.Equal(s.Argv(), []string{"npx", "-y", "@example/search-mcp"}) {
		t.Errorf("search argv = %q", s.Argv())
	}
	gh := p.MCPServers["github"]
	if gh.Stdio() || gh.URL != "https://mcp.example.com/mcp" || gh.Headers["Authorization"] != (policy.MCPValue{FromFile: "/run/secrets/github"}) || gh.Headers["X-Tenant"].Literal != "acme" {
		t.Errorf("github = %+v", gh)
	}
	// The effective policy (Rego input, its hash) names where a secret
	// comes from, and round-trips.
	data, err := json.Marshal(p.MCPServers)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"Authorization":{"from_file":"/run/secrets/github"}`) || !strings.Contains(string(data), `"LOG_LEVEL":"info"`) {
		t.Errorf("JSON = %s", data)
	}
	var back map[string]policy.MCPServer
	if err := json.Unmarshal(data, &back); err != nil || back["github"].Headers["Authorization"] != gh.Headers["Authorization"] || back["records"].Env["LOG_LEVEL"] != rec.Env["LOG_LEVEL"] {
		t.Errorf("round trip = %+v, %v", back, err)
	}
}

func TestMCPServersAbsentByDefault(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"../../sandbox.policy.yaml"} {
		p, err := policy.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.MCPServers) != 0 {
			t.Errorf("%s configures MCP servers by default: %v", file, p.MCPServers)
		}
	}
	p, err := decode(t, minimal)
	if err != nil || len(p.MCPServers) != 0 {
		t.Errorf("minimal policy: servers %v, err %v", p.MCPServers, err)
	}
}

// TestMCPServersShippedExample: the commented example in the shipped
// policy, uncommented, is a valid section.
func TestMCPServersShippedExample(t *testing.T) {
	t.Parallel()
	p, err := decode(t, shippedExample(t, "mcp_servers", minimal+"mcp_servers:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.MCPServers) != 2 || !p.MCPServers["crm"].Stdio() || p.MCPServers["tickets"].Headers["Authorization"].FromFile == "" {
		t.Errorf("example servers = %+v", p.MCPServers)
	}
}

// shippedExample returns head followed by the commented example of key in
// the shipped policy, uncommented.
func shippedExample(t *testing.T, key, head string) string {
	t.Helper()
	data, err := os.ReadFile("../../sandbox.policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(data), "\n# "+key+":\n")
	if !ok {
		t.Fatalf("the shipped policy has no commented %s example", key)
	}
	var b strings.Builder
	b.WriteString(head)
	for line := range strings.Lines(example) {
		rest, ok := strings.CutPrefix(line, "# ")
		if !ok {
			break
		}
		b.WriteString(rest)
	}
	return b.String()
}

// TestMCPServersRefused: each bad section is refused with its location and
// a message naming what is wrong.
func TestMCPServersRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		want       []string // each a substring of one problem, in order
	}{
		{"an upper-case name", "  GitHub: {url: https://x.example/mcp}\n", []string{"p.yaml:4:11: mcp_servers.GitHub: server name \"GitHub\" must match"}},
		{"a name with a dash", "  my-server: {url: https://x.example/mcp}\n", []string{"mcp_servers.my-server: server name \"my-server\" must match"}},
		{"a name starting with a digit", "  1st: {url: https://x.example/mcp}\n", []string{"server name \"1st\" must match"}},
		{"a name of 33 characters", "  " + strings.Repeat("a", 33) + ": {url: https://x.example/mcp}\n", []string{"must match"}},
		{"a Python keyword", "  import: {url: https://x.example/mcp}\n", []string{"mcp_servers.import: server name \"import\" is a Python keyword"}},
		{"a name that is a number", "  123: {url: https://x.example/mcp}\n", []string{"p.yaml:4:8: mcp_servers.123: server name \"123\" must match"}},
		{"a name that is a mapping", "  {a: b}: {url: https://x.example/mcp}\n", []string{"mcp_servers: a key must be a single value"}},
		{"both transports", "  s:\n    command: [srv]\n    url: https://x.example/mcp\n", []string{"p.yaml:5:5: mcp_servers.s: set either command (a stdio server) or url"}},
		{"neither transport", "  s: {description: nothing}\n", []string{"mcp_servers.s: set command (a stdio server) or url"}},
		{"an empty command list", "  s: {command: []}\n", []string{"mcp_servers.s: set command"}},
		{"an empty program", "  s: {command: \"\"}\n", []string{"mcp_servers.s.command: the program name is empty"}},
		{"a command list and args", "  s: {command: [srv, -v], args: [-x]}\n", []string{"mcp_servers.s.args: the command is already a list"}},
		{"a command mapping", "  s: {command: {prog: srv}}\n", []string{"p.yaml:4:16: mcp_servers.s.command: expected a program name or a list"}},
		{"an unknown key", "  s: {command: srv, cwd: /tmp}\n", []string{"p.yaml:4:21: mcp_servers.s.cwd: unknown key \"cwd\""}},
		{"an unknown key in a reference", "  s:\n    command: srv\n    env: {T: {from_vault: x}}\n", []string{"mcp_servers.s.env.T.from_vault: unknown key \"from_vault\""}},
		{"a null server", "  s:\n", []string{"mcp_servers.s: null is not a value"}},
		{"a list of servers", "  - {command: srv}\n", []string{"p.yaml:4:3: mcp_servers: expected a mapping"}},
		{"a literal token by name in env", "  s:\n    command: srv\n    env: {GITHUB_TOKEN: abc123}\n", []string{"p.yaml:6:25: mcp_servers.s.env.GITHUB_TOKEN: GITHUB_TOKEN holds a secret by its name"}},
		{"a literal token by shape in env", "  s:\n    command: srv\n    env: {CONFIG: ghp_aaaaaaaaaaaaaaaaaaaaaaaa}\n", []string{"mcp_servers.s.env.CONFIG: looks like a credential"}},
		{"a literal Authorization header", "  s:\n    url: https://x.example/mcp\n    headers: {Authorization: Bearer abcdef}\n", []string{"mcp_servers.s.headers.Authorization: looks like a credential"}},
		{"a literal API key header", "  s:\n    url: https://x.example/mcp\n    headers: {X-Api-Key: abcdef}\n", []string{"mcp_servers.s.headers.X-Api-Key: X-Api-Key holds a secret by its name"}},
		{"a token in the args", "  s: {command: srv, args: [--token=hunter2]}\n", []string{"mcp_servers.s.args[0]: --token= carries a secret on the command line"}},
		{"a key-shaped arg", "  s: {command: [srv, sk-ant-aaaaaaaaaaaaaaaaaaaa]}\n", []string{"mcp_servers.s.command[1]: looks like a credential"}},
		{"credentials in the URL", "  s: {url: \"https://u:p@x.example/mcp\"}\n", []string{"mcp_servers.s.url: credentials in the URL are refused"}},
		{"a token in the query", "  s: {url: \"https://x.example/mcp?api_key=abc\"}\n", []string{"query parameter \"api_key\" carries a secret"}},
		{"a URL that is not http", "  s: {url: \"file:///etc/passwd\"}\n", []string{"is not an http:// or https:// URL"}},
		{"a reference over plain http to a remote host", "  s:\n    url: http://mcp.example.com/mcp\n    headers: {Authorization: {from_env: T}}\n", []string{"mcp_servers.s.url: credentials would travel in clear text to mcp.example.com"}},
		{"both references", "  s:\n    command: srv\n    env: {T: {from_env: T, from_file: /t}}\n", []string{"mcp_servers.s.env.T: set from_env or from_file, not both"}},
		{"a relative file", "  s:\n    command: srv\n    env: {T: {from_file: secrets/t}}\n", []string{"mcp_servers.s.env.T.from_file: \"secrets/t\" must be an absolute path"}},
		{"a bad variable name", "  s:\n    command: srv\n    env: {T: {from_env: \"A B\"}}\n", []string{"mcp_servers.s.env.T.from_env: \"A B\" is not an environment variable name"}},
		{"a bad env name", "  s:\n    command: srv\n    env: {\"A=B\": x}\n", []string{"mcp_servers.s.env.A=B: \"A=B\" is not an environment variable name"}},
		{"a transport header", "  s:\n    url: https://x.example/mcp\n    headers: {Mcp-Session-Id: x}\n", []string{"mcp_servers.s.headers.Mcp-Session-Id: Mcp-Session-Id is set by the MCP transport"}},
		{"a header value with a newline", "  s:\n    url: https://x.example/mcp\n    headers: {X-A: \"a\\r\\nHost: evil\"}\n", []string{"mcp_servers.s.headers.X-A: the value has characters a header may not carry"}},
		{"headers on a stdio server", "  s:\n    command: srv\n    headers: {X-A: b}\n", []string{"mcp_servers.s.headers: headers are for a url server"}},
		{"env on a url server", "  s:\n    url: https://x.example/mcp\n    env: {A: b}\n", []string{"mcp_servers.s.env: env is for a stdio server"}},
		{"a two-line description", "  s: {command: srv, description: \"a\\nb\"}\n", []string{"mcp_servers.s.description: must be one line"}},
		{"every problem at once", "  Bad: {command: srv, url: https://x.example/mcp}\n  ok:\n    command: srv\n    env: {API_KEY: plain}\n", []string{"mcp_servers.Bad: server name", "mcp_servers.Bad: set either command", "mcp_servers.ok.env.API_KEY: API_KEY holds a secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decode(t, minimal+"mcp_servers:\n"+tc.yaml)
			if err == nil {
				t.Fatal("accepted")
			}
			got := problems(t, err)
			if len(got) != len(tc.want) {
				t.Fatalf("problems = %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestMCPServersAccepted: values that are no secrets, and secrets by
// reference, pass, so the refusals above are not refusing everything.
func TestMCPServersAccepted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml string }{
		{"a literal non-secret env", "  s:\n    command: srv\n    env: {LOG_LEVEL: debug, PATH: /usr/bin, KEYCLOAK_REALM: main}\n"},
		{"a token by reference", "  s:\n    command: srv\n    env: {GITHUB_TOKEN: {from_env: GH_TOKEN}}\n"},
		{"an empty literal under a secret name", "  s:\n    command: srv\n    env: {API_KEY: \"\"}\n"},
		{"plain http to loopback with a reference", "  s:\n    url: http://127.0.0.1:8080/mcp\n    headers: {Authorization: {from_file: /run/t}}\n"},
		{"plain http to a remote host without credentials", "  s:\n    url: http://mcp.internal:8080/mcp\n    headers: {X-Tenant: acme}\n"},
		{"a flag that is no secret", "  s: {command: srv, args: [--port=8080, --read-only]}\n"},
		{"a name of 32 characters", "  a" + strings.Repeat("b", 31) + ": {command: srv}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := decode(t, minimal+"mcp_servers:\n"+tc.yaml); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMCPServersValidateInCode(t *testing.T) {
	t.Parallel()
	p, err := decode(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	p.MCPServers = map[string]policy.MCPServer{
		"b": {Command: policy.MCPCommand{"srv"}, Env: map[string]policy.MCPValue{"SECRET": {Literal: "x"}}},
		"a": {},
	}
	got := problems(t, p.Validate())
	want := []string{"mcp_servers.a: set command (a stdio server) or url (a streamable HTTP server)", "mcp_servers.b.env.SECRET: SECRET holds a secret by its name, which the policy never holds: write {from_env: NAME} or {from_file: PATH}"}
	if !slices.Equal(got, want) {
		t.Errorf("problems = %q, want %q", got, want)
	}
}

func TestSecretName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"GITHUB_TOKEN": true, "Authorization": true, "X-Api-Key": true, "DB_PASSWORD": true, "ANTHROPIC_API_KEY": true,
		"GITHUB_PAT": true, "Cookie": true, "client_secret": true,
		// Every word the audit log masks under (gate/audit/mask.go) is refused as a literal here.
		"password": true, "passwd": true, "token": true, "apikey": true, "api_key": true, "secret": true, "authorization": true,
		"credential": true, "privatekey": true, "private-key": true, "cookie": true, "sessionid": true, "session_id": true, "accesskey": true, "access_key": true,
		"PATH": false, "HOME": false, "LOG_LEVEL": false, "KEYCLOAK_REALM": false, "X-Tenant": false, "port": false,
	} {
		if got := policy.SecretName(name); got != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, got, want)
		}
	}
}
