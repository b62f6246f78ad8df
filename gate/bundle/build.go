package bundle

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"
)

// BuildOptions say what a bundle holds and how it is signed.
type BuildOptions struct {
	// File names the policy (its base name is kept in the bundle); Policy
	// is its text.
	File   string
	Policy []byte
	// Modules are the operator's Rego modules by base name; they are
	// written under operator/ in the bundle, unformatted, so that an
	// error's line is the line of the operator's file.
	Modules map[string][]byte
	// Revision is the manifest revision; Serial and Expires its
	// gatekeeper metadata (Expires zero for none).
	Revision string
	Serial   int64
	Expires  time.Time
	// SigningKey, when set, is a PEM private key (RSA or ECDSA) that
	// signs the bundle with OPA's signer; KeyID is the JWT's "kid".
	SigningKey []byte
	KeyID      string
}

// ModuleDir is where in a bundle Build writes the operator's modules.
const ModuleDir = "operator"

// ReadModules reads every .rego file of dir (not *_test.rego), by base
// name, for BuildOptions.Modules.
func ReadModules(dir string) (map[string][]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.rego"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("rego dir: %w", err)
	}
	mods := map[string][]byte{}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.rego") {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		mods[filepath.Base(n)] = b
	}
	return mods, nil
}

// Build writes a gatekeeper policy bundle (.tar.gz) to w with OPA's
// bundle writer, signed with OPA's signer when o.SigningKey is set. It
// checks the layout (revision, serial, module syntax), not the policy:
// gatekeeper bundle build loads the result as the sidecar would.
func Build(w io.Writer, o BuildOptions) error {
	if err := checkRevision(o.Revision); err != nil {
		return fmt.Errorf("revision: %w", err)
	}
	if o.Serial < 1 {
		return errors.New("serial: must be 1 or more")
	}
	md := map[string]any{"serial": o.Serial}
	if !o.Expires.IsZero() {
		md["expires"] = o.Expires.UTC().Format(time.RFC3339)
	}
	b := opabundle.Bundle{
		Manifest: opabundle.Manifest{Revision: o.Revision, Metadata: map[string]any{"gatekeeper": md}},
		Data: map[string]any{DataPath[0]: map[string]any{DataPath[1]: map[string]any{
			"file": filepath.Base(o.File), "yaml": string(o.Policy),
		}}},
	}
	names := make([]string, 0, len(o.Modules))
	for n := range o.Modules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := "/" + ModuleDir + "/" + filepath.Base(n)
		m, err := ast.ParseModuleWithOpts(p, string(o.Modules[n]), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		b.Modules = append(b.Modules, opabundle.ModuleFile{URL: p, Path: p, Raw: o.Modules[n], Parsed: m})
	}
	b.Manifest.Init()
	if len(o.SigningKey) > 0 {
		alg, err := signingAlgorithm(o.SigningKey)
		if err != nil {
			return err
		}
		sc := opabundle.NewSigningConfig(string(o.SigningKey), alg, "")
		if err := b.GenerateSignature(sc, o.KeyID, true); err != nil {
			return fmt.Errorf("sign: %w", err)
		}
	}
	return opabundle.NewWriter(w).UseModulePath(true).DisableFormat(true).Write(b)
}

// signingAlgorithm is the JWS algorithm for a PEM private key.
func signingAlgorithm(pemBytes []byte) (string, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return "", errors.New("signing key: no PEM block")
	}
	var k any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return "", fmt.Errorf("signing key: a %s, want a private key", block.Type)
	}
	if err != nil {
		return "", fmt.Errorf("signing key: %w", err)
	}
	return algorithm(k)
}
