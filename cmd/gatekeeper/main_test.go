package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/goldenfile"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const cliPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [Read]
  deny: [Bash]
sandbox:
  fs: {deny: ["~/.ssh/**"]}
ceilings: {memory: 1g}
`

var (
	hashRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)
)

// golden compares got, with the temp dir and hashes replaced, to
// testdata/<name>.golden.
func golden(t *testing.T, name, dir, got string) {
	t.Helper()
	got = strings.ReplaceAll(got, dir, "$DIR")
	got = hashRE.ReplaceAllString(got, "sha256:…")
	path := filepath.Join("testdata", name+".golden")
	if *update {
		goldenfile.Write(t, path, []byte(got))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/gatekeeper -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s: output differs from %s\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

func cli(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), args, strings.NewReader(stdin), &out, &errb)
	return out.String() + errb.String(), err
}

func writePolicy(t *testing.T, text string) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func TestCLI(t *testing.T) {
	t.Setenv("HOME", "/home/nobody")
	tests := []struct {
		name     string
		policy   string
		stdin    string
		args     func(dir, file string) []string
		wantCode int
	}{
		{"policy_check_ok", cliPolicy, "", func(_, f string) []string { return []string{"policy", "check", f} }, 0},
		{"policy_check_every_problem", strings.Replace(cliPolicy, "  fs: {", "  proc: {user: 0, runtime: kata}\n  fs: {", 1), "", func(_, f string) []string { return []string{"policy", "check", f} }, 1},
		{"policy_check_unknown_key", strings.Replace(cliPolicy, "  fs: {", "  proc: {memroy: 1g}\n  fs: {", 1), "", func(_, f string) []string { return []string{"policy", "check", f} }, 1},
		{"policy_check_over_ceiling", strings.Replace(cliPolicy, "  fs: {", "  proc: {memory: 2g}\n  fs: {", 1), "", func(_, f string) []string { return []string{"policy", "check", f} }, 1},
		{"policy_check_public_suffix", strings.NewReplacer("  fs: {", "  net: {allow: [\"pypi.org\", \"*.co.uk\", \"*.nip.io\", \"203.0.113.7.nip.io\"], deny: [\"*.com\"]}\n  fs: {", "{memory: 1g}", "{memory: 1g, net_hosts: [\"*.github.io\", \"PyPI.org\", \"*.dev.sslip.io\"]}").Replace(cliPolicy), "", func(_, f string) []string { return []string{"policy", "check", f} }, 1},
		{"policy_check_callable_not_configured", cliPolicy + "mcp_servers:\n  crm: {url: \"http://127.0.0.1:9/mcp\"}\ncode_calls:\n  callable:\n    crm: [\"get_*\"]\n    notes: [read]\n", "", func(_, f string) []string { return []string{"policy", "check", f} }, 0},
		{"decide_allow", cliPolicy, `{"tool_name":"Read","tool_input":{"file_path":"a.txt"}}`, func(_, f string) []string { return []string{"decide", "--policy", f} }, 0},
		{"decide_deny_ssh", cliPolicy, `{"tool_name":"Read","tool_input":{"file_path":"~/.ssh/id_rsa"}}`, func(_, f string) []string { return []string{"decide", "--policy", f} }, 1},
		{"decide_override_rejected", cliPolicy, `{"tool_name":"Read","tool_input":{},"sandbox_policy":{"proc":{"memory":"8g"}}}`, func(_, f string) []string { return []string{"decide", "--policy", f} }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, file := writePolicy(t, tc.policy)
			out, err := cli(t, tc.stdin, tc.args(dir, file)...)
			code := 0
			if e, ok := err.(exitError); ok {
				code = int(e)
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.wantCode, out)
			}
			golden(t, tc.name, dir, out)
		})
	}
}

func TestEnvironmentSetsFlags(t *testing.T) {
	_, file := writePolicy(t, cliPolicy)
	t.Setenv("GATEKEEPER_POLICY", file)
	out, err := cli(t, `{"tool_name":"Bash","tool_input":{}}`, "decide")
	if code, ok := err.(exitError); !ok || code != 1 || !strings.Contains(out, `"rule": "tools.deny_list"`) {
		t.Fatalf("decide with GATEKEEPER_POLICY=%s: %v %s", file, err, out)
	}
}

// TestImageBuildArguments: bad arguments to image build are refused before
// anything is built, each with a message saying what to run instead.
func TestImageBuildArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"--node points at the node profile", []string{"image", "build", "--node"}, "--node is gone: Node.js and npm are the node profile now: gatekeeper image build node"},
		{"an unknown profile lists the profiles", []string{"image", "build", "python", "pyhton"}, `unknown profile "pyhton" (profiles: minimal, python, python-data, node)`},
		{"--all and names are exclusive", []string{"image", "build", "--all", "node"}, "give --all or profile names, not both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := cli(t, "", tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("image build %v = %v (output %q), want an error containing %q", tc.args[2:], err, out, tc.want)
			}
		})
	}
}
