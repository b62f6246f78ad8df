package bundle_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"

	"github.com/gatekeeper-ai/gatekeeper/gate/bundle"
)

// TestKeyIDOnlyInTheDeprecatedClaimIsRefused: OPA's verifier falls back to
// the payload's deprecated "keyid" claim when the JWT header has no
// "kid", so such a bundle verifies in OPA; gatekeeper still refuses it,
// since its signature names no key id where a JWT names it.
func TestKeyIDOnlyInTheDeprecatedClaimIsRefused(t *testing.T) {
	t.Parallel()
	priv, pub := keyPair(t)
	v, err := bundle.LoadVerification(pub, "k1")
	if err != nil {
		t.Fatal(err)
	}
	claims := filepath.Join(t.TempDir(), "claims.json")
	if err := os.WriteFile(claims, []byte(`{"keyid": "k1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := opabundle.Bundle{
		Manifest: opabundle.Manifest{Revision: "r1", Metadata: map[string]any{"gatekeeper": map[string]any{"serial": 1}}},
		Data:     map[string]any{"gatekeeper": map[string]any{"sandbox_policy": map[string]any{"file": "p.yaml", "yaml": goodPolicy}}},
	}
	b.Manifest.Init()
	if err := b.GenerateSignature(opabundle.NewSigningConfig(string(priv), "ES256", claims), "", true); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := opabundle.NewWriter(&buf).UseModulePath(true).Write(b); err != nil {
		t.Fatal(err)
	}
	_, err = bundle.Read(buf.Bytes(), v)
	if !errors.Is(err, bundle.ErrSignature) || !strings.Contains(err.Error(), "names no key id") {
		t.Fatalf("Read err = %v, want the signature refused for naming no key id", err)
	}
}
