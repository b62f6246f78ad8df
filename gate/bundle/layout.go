// Package bundle takes gatekeeper's policy from an OPA bundle: it builds
// and signs bundles with OPA's bundle writer and signer, verifies and reads
// them with OPA's bundle reader, downloads them with OPA's downloader, and
// keeps the last good one on disk. The engine compiles what a bundle holds
// as it compiles the policy file and --rego-dir (gate.Source).
//
// A gatekeeper bundle holds:
//
//   - the sandbox policy as data: data.gatekeeper.sandbox_policy is
//     {"file": "sandbox.policy.yaml", "yaml": "<the file's text>"}, so the
//     text the sidecar decodes is the very string the signature covers and
//     an error names the line in the operator's own file;
//   - the operator's Rego modules (*.rego; *_test.rego are not loaded),
//     checked and compiled as --rego-dir modules are;
//   - a .manifest with a revision and the metadata
//     {"gatekeeper": {"serial": N, "expires": "RFC 3339"}}: serial orders
//     bundles for anti-rollback, expires (optional) ends a bundle's life.
package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
	"unicode"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"

	"github.com/gatekeeper-ai/gatekeeper/gate"
)

// DataPath is where a bundle's data holds the sandbox policy.
var DataPath = []string{"gatekeeper", "sandbox_policy"}

// ErrLayout marks a bundle that is not a gatekeeper policy bundle.
var ErrLayout = errors.New("not a gatekeeper policy bundle")

// Contents is what the sidecar takes from a verified bundle.
type Contents struct {
	// Revision is the manifest's revision; Serial and Expires its
	// gatekeeper metadata (Expires zero when the bundle never expires).
	Revision string
	Serial   int64
	Expires  time.Time
	// File is the policy file's name as the builder gave it, and Policy
	// its text.
	File   string
	Policy []byte
	// Modules are the bundle's Rego modules by their path in the bundle.
	Modules map[string][]byte
	// Signed says the bundle carried a signature that verified.
	Signed bool
}

// PolicyName is how errors name the policy inside the bundle: the data
// path and the builder's file name, so that a line number reads against
// the operator's own file.
func (c *Contents) PolicyName() string {
	return fmt.Sprintf("bundle %s: data.%s (%s)", c.Revision, strings.Join(DataPath, "."), c.File)
}

// PolicyDocument makes Contents a gate.Source of itself. A relative
// workspace_root in the policy resolves against the sidecar's working
// directory.
func (c *Contents) PolicyDocument() (gate.Document, error) {
	dir, err := os.Getwd()
	if err != nil {
		return gate.Document{}, err
	}
	return gate.Document{Name: c.PolicyName(), Policy: c.Policy, Modules: c.Modules, Revision: c.Revision, Dir: dir}, nil
}

// contents extracts Contents from a bundle OPA's reader has read and
// verified. Every problem is named with where in the bundle it is.
func contents(b *opabundle.Bundle, signed bool) (*Contents, error) {
	c := &Contents{Revision: b.Manifest.Revision, Modules: map[string][]byte{}, Signed: signed}
	var probs []string
	if b.Type() != opabundle.SnapshotBundleType {
		return nil, fmt.Errorf("%w: a %s bundle (gatekeeper takes snapshot bundles only)", ErrLayout, b.Type())
	}
	if err := checkRevision(c.Revision); err != nil {
		probs = append(probs, ".manifest: revision: "+err.Error())
	}
	serial, expires, err := metadata(b.Manifest.Metadata)
	if err != nil {
		probs = append(probs, ".manifest: metadata.gatekeeper: "+err.Error())
	}
	c.Serial, c.Expires = serial, expires
	v, ok := lookup(b.Data, DataPath)
	if !ok {
		probs = append(probs, fmt.Sprintf("data.json: no data.%s (gatekeeper bundle build writes it)", strings.Join(DataPath, ".")))
	} else if obj, ok := v.(map[string]any); !ok {
		probs = append(probs, fmt.Sprintf("data.json: data.%s: want an object {\"file\", \"yaml\"}", strings.Join(DataPath, ".")))
	} else {
		text, ok := obj["yaml"].(string)
		if !ok {
			probs = append(probs, fmt.Sprintf("data.json: data.%s.yaml: want the policy file's text as a string", strings.Join(DataPath, ".")))
		}
		file, _ := obj["file"].(string)
		if file == "" {
			file = "sandbox.policy.yaml"
		}
		c.File, c.Policy = file, []byte(text)
		for k := range obj {
			if k != "yaml" && k != "file" {
				probs = append(probs, fmt.Sprintf("data.json: data.%s.%s: unknown field", strings.Join(DataPath, "."), k))
			}
		}
	}
	for _, m := range b.Modules {
		p := strings.TrimPrefix(m.Path, "/")
		if strings.HasSuffix(p, "_test.rego") {
			continue
		}
		c.Modules[p] = m.Raw
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%w:\n%s", ErrLayout, strings.Join(probs, "\n"))
	}
	return c, nil
}

// checkRevision accepts a manifest revision the sidecar can show in its
// revisions, logs and audit lines: 1 to 128 printable characters without
// spaces or "@" (which separates it from the content hash).
func checkRevision(r string) error {
	if r == "" {
		return errors.New("is empty; gatekeeper bundles need one")
	}
	if len(r) > 128 {
		return errors.New("is longer than 128 characters")
	}
	for _, ch := range r {
		if ch == '@' || unicode.IsSpace(ch) || !unicode.IsPrint(ch) {
			return fmt.Errorf("%q holds a space, a control character or '@'", r)
		}
	}
	return nil
}

// metadata reads {"gatekeeper": {"serial": N, "expires": "RFC 3339"}}
// from a manifest's metadata.
func metadata(md map[string]any) (serial int64, expires time.Time, err error) {
	g, ok := md["gatekeeper"].(map[string]any)
	if !ok {
		return 0, time.Time{}, errors.New("missing: want {\"serial\": N} (a positive integer that grows with every bundle)")
	}
	for k := range g {
		if k != "serial" && k != "expires" {
			return 0, time.Time{}, fmt.Errorf("%s: unknown field", k)
		}
	}
	switch n := g["serial"].(type) {
	case json.Number:
		serial, err = n.Int64()
	case float64:
		if n != math.Trunc(n) || n > math.MaxInt64 {
			err = errors.New("not an integer")
		}
		serial = int64(n)
	case int64:
		serial = n
	case int:
		serial = int64(n)
	default:
		err = errors.New("missing or not a number")
	}
	if err == nil && serial < 1 {
		err = errors.New("must be 1 or more")
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("serial: %w", err)
	}
	if e, ok := g["expires"]; ok {
		s, ok := e.(string)
		if !ok {
			return 0, time.Time{}, errors.New("expires: want an RFC 3339 time string")
		}
		if expires, err = time.Parse(time.RFC3339, s); err != nil {
			return 0, time.Time{}, fmt.Errorf("expires: %w", err)
		}
	}
	return serial, expires, nil
}

func lookup(data map[string]any, path []string) (any, bool) {
	var v any = data
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}
