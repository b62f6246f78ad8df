package policy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
)

func TestWarningsNameACallableServerNotConfigured(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{name: "every callable server is configured", want: nil, yaml: `version: 1
workspace_root: .
mcp_servers:
  crm: {url: "http://127.0.0.1:9/mcp"}
code_calls:
  callable:
    crm: ["*"]
`},
		{name: "a callable server not in mcp_servers", yaml: `version: 1
workspace_root: .
mcp_servers:
  crm: {url: "http://127.0.0.1:9/mcp"}
code_calls:
  callable:
    crm: ["*"]
    notes: [read]
`, want: []string{`policy.yaml:8:12: warning: code_calls.callable names "notes", which is not one of mcp_servers: fine if a client brings an in-process SDK server of that name to its queries (sdk_servers); otherwise no program can call its tools (a misspelt name?)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(file, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := policy.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Warnings()
			for i := range got {
				got[i] = trimDir(got[i], filepath.Dir(file))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Warnings() =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func trimDir(s, dir string) string {
	if len(s) > len(dir)+1 && s[:len(dir)+1] == dir+"/" {
		return s[len(dir)+1:]
	}
	return s
}
