package bundle_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/compile"

	"github.com/gatekeeper-ai/gatekeeper/gate/bundle"
)

// TestOPABuildOutputIsAccepted builds a bundle with OPA's compile package,
// which is what `opa build -b DIR --revision R --signing-key K
// --signing-alg ES256 --verification-key-id ID` runs, from a directory
// holding the policy's data.json and an operator module: the sidecar
// reads and verifies it as it does its own.
func TestOPABuildOutputIsAccepted(t *testing.T) {
	t.Parallel()
	priv, pub := keyPair(t)
	v, err := bundle.LoadVerification(pub, "k1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data, _ := json.Marshal(map[string]any{"gatekeeper": map[string]any{"sandbox_policy": map[string]any{"file": "sandbox.policy.yaml", "yaml": goodPolicy}}})
	mod := "package gatekeeper\n\ndeny contains {\"rule\": \"team.no_notebooks\", \"reason\": \"no notebooks\"} if input.tool_name == \"NotebookEdit\"\n"
	for name, b := range map[string][]byte{"data.json": data, "team.rego": []byte(mod)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	md := map[string]any{"gatekeeper": map[string]any{"serial": 7}}
	var buf bytes.Buffer
	err = compile.New().WithAsBundle(true).WithPaths(dir).WithRevision("opa-7").WithMetadata(&md).
		WithBundleSigningConfig(opabundle.NewSigningConfig(string(priv), "ES256", "")).WithBundleVerificationKeyID("k1").
		WithOutput(&buf).Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c, err := bundle.Read(buf.Bytes(), v)
	if err != nil {
		t.Fatalf("Read of opa build's bundle: %v", err)
	}
	if c.Revision != "opa-7" || c.Serial != 7 || !c.Signed || string(c.Policy) != goodPolicy || len(c.Modules) != 1 {
		t.Fatalf("opa build's bundle read as %+v, want revision opa-7, serial 7, signed, the policy and one module", c)
	}
}
