package bundle_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/bundle"
)

const goodPolicy = `version: 1
workspace_root: /tmp/gatekeeper-bundle-test
tools:
  allow: [Read]
`

// keyPair writes an ECDSA P-256 key pair and returns the private key PEM
// and the public key's file.
func keyPair(t *testing.T) (priv []byte, pubFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubFile = filepath.Join(t.TempDir(), "pub.pem")
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), pubFile
}

func build(t *testing.T, o bundle.BuildOptions) []byte {
	t.Helper()
	if o.File == "" {
		o.File = "sandbox.policy.yaml"
	}
	if o.Policy == nil {
		o.Policy = []byte(goodPolicy)
	}
	var buf bytes.Buffer
	if err := bundle.Build(&buf, o); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadVerifiesSignatures(t *testing.T) {
	t.Parallel()
	priv, pub := keyPair(t)
	other, _ := keyPair(t)
	v, err := bundle.LoadVerification(pub, "k1")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts bundle.BuildOptions
		want error // nil: accepted
	}{
		{"a bundle signed with the key and its id is accepted", bundle.BuildOptions{SigningKey: priv, KeyID: "k1"}, nil},
		{"an unsigned bundle is refused", bundle.BuildOptions{}, bundle.ErrSignature},
		{"a bundle signed with another key is refused", bundle.BuildOptions{SigningKey: other, KeyID: "k1"}, bundle.ErrSignature},
		{"a bundle signed with no key id is refused", bundle.BuildOptions{SigningKey: priv}, bundle.ErrSignature},
		{"a bundle signed under another key id is refused", bundle.BuildOptions{SigningKey: priv, KeyID: "k2"}, bundle.ErrSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.Revision, tc.opts.Serial = "r1", 1
			c, err := bundle.Read(build(t, tc.opts), v)
			if tc.want == nil {
				if err != nil || !c.Signed || c.Revision != "r1" || string(c.Policy) != goodPolicy {
					t.Fatalf("Read = %+v, %v; want the signed bundle r1", c, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Read err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReadWithoutKeys(t *testing.T) {
	t.Parallel()
	c, err := bundle.Read(build(t, bundle.BuildOptions{Revision: "r1", Serial: 3}), nil)
	if err != nil || c.Signed || c.Serial != 3 {
		t.Fatalf("Read = %+v, %v; want an unsigned bundle with serial 3", c, err)
	}
}

func TestBuildLocatesRegoErrors(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	err := bundle.Build(&buf, bundle.BuildOptions{File: "p.yaml", Policy: []byte(goodPolicy), Revision: "r1", Serial: 1,
		Modules: map[string][]byte{"mine.rego": []byte("package mine\n\nx := 1\ny if {\n")}})
	if err == nil || !strings.Contains(err.Error(), "operator/mine.rego:5") {
		t.Fatalf("Build err = %v, want a parse error at operator/mine.rego:5", err)
	}
}

func TestReadRefusesBadLayout(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"", "has space", "a@b"} {
		var buf bytes.Buffer
		if err := bundle.Build(&buf, bundle.BuildOptions{File: "p.yaml", Policy: []byte(goodPolicy), Revision: rev, Serial: 1}); err == nil {
			t.Errorf("Build with revision %q succeeded", rev)
		}
	}
}

// newManager is a Manager over an engine, as serve makes them.
func newManager(t *testing.T, cfg bundle.Config) (*bundle.Manager, *gate.Engine) {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = "http://127.0.0.1:1/b.tar.gz"
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	m, err := bundle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := gate.New(t.Context(), gate.Config{Source: m, Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	m.Attach(eng)
	return m, eng
}

func offer(t *testing.T, m *bundle.Manager, o bundle.BuildOptions) error {
	t.Helper()
	raw := build(t, o)
	c, err := bundle.Read(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m.Offer(t.Context(), c, raw, "etag-"+o.Revision)
}

// decide asks the engine about a Read of /etc/hostname.
func decide(t *testing.T, eng *gate.Engine) gate.Decision {
	t.Helper()
	q, err := eng.OpenQuery(t.Context(), "q1", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := q.Decide(t.Context(), gate.Call{Event: gate.EventPreToolUse, ToolName: "Read", ToolInput: json.RawMessage(`{"file_path":"/tmp/gatekeeper-bundle-test/a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestManagerFailsClosedWithoutBundle(t *testing.T) {
	t.Parallel()
	m, eng := newManager(t, bundle.Config{CacheDir: filepath.Join(t.TempDir(), "cache")})
	if d := decide(t, eng); d.Decision != gate.Deny || !strings.Contains(d.Reason, "no policy bundle has been loaded") {
		t.Fatalf("decision without a bundle = %+v, want a deny saying no bundle has been loaded", d)
	}
	if s := m.Status(); s.Ready || s.Revision != "" {
		t.Fatalf("status = %+v, want not ready", s)
	}
	if err := offer(t, m, bundle.BuildOptions{Revision: "r1", Serial: 1}); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, eng); d.Decision != gate.Allow || !strings.HasPrefix(d.Revision, "bundle:r1@sha256:") {
		t.Fatalf("decision under r1 = %+v, want an allow under bundle:r1@sha256:...", d)
	}
	if s := m.Status(); !s.Ready || s.Revision != "r1" || s.Serial != 1 {
		t.Fatalf("status = %+v, want ready on r1", s)
	}
}

func TestManagerKeepsLastGoodOnBrokenPolicy(t *testing.T) {
	t.Parallel()
	m, eng := newManager(t, bundle.Config{})
	if err := offer(t, m, bundle.BuildOptions{Revision: "r1", Serial: 1}); err != nil {
		t.Fatal(err)
	}
	before := eng.Revision()
	broken := []byte("version: 1\nworkspace_root: /tmp\ntools:\n  alow: [Read]\n")
	err := offer(t, m, bundle.BuildOptions{Revision: "r2", Serial: 2, File: "team.policy.yaml", Policy: broken})
	if err == nil || !strings.Contains(err.Error(), "bundle r2: data.gatekeeper.sandbox_policy (team.policy.yaml):4") {
		t.Fatalf("broken bundle err = %v, want one located at team.policy.yaml line 4 in bundle r2", err)
	}
	if eng.Revision() != before || m.Status().Revision != "r1" {
		t.Fatalf("revision %s / %s after a broken bundle, want r1's %s", eng.Revision(), m.Status().Revision, before)
	}
	evs := eng.Reloads()
	if last := evs[len(evs)-1]; last.Err == "" || !strings.HasPrefix(last.Revision, "bundle:r2@") {
		t.Fatalf("last reload event = %+v, want r2 refused", last)
	}
	// An operator module that redefines a built-in rule is refused with its path in the bundle.
	err = offer(t, m, bundle.BuildOptions{Revision: "r3", Serial: 3, Modules: map[string][]byte{"override.rego": []byte("package gatekeeper\n\ndecision := {\"decision\": \"allow\"}\n")}})
	if err == nil || !strings.Contains(err.Error(), "operator/override.rego") || m.Status().Revision != "r1" {
		t.Fatalf("operator module redefining decision: err %v, revision %s; want it refused by name and r1 kept", err, m.Status().Revision)
	}
}

func TestManagerAntiRollback(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		m, eng := newManager(t, bundle.Config{AllowRollback: allow})
		if err := offer(t, m, bundle.BuildOptions{Revision: "r5", Serial: 5}); err != nil {
			t.Fatal(err)
		}
		err := offer(t, m, bundle.BuildOptions{Revision: "r4", Serial: 4})
		if allow {
			if err != nil || m.Status().Revision != "r4" {
				t.Fatalf("rollback allowed: err %v, revision %s; want r4 in force", err, m.Status().Revision)
			}
			continue
		}
		if !errors.Is(err, bundle.ErrRollback) || m.Status().Revision != "r5" {
			t.Fatalf("rollback: err %v, revision %s; want ErrRollback and r5 kept", err, m.Status().Revision)
		}
		if err := offer(t, m, bundle.BuildOptions{Revision: "r5b", Serial: 5}); !errors.Is(err, bundle.ErrRollback) {
			t.Fatalf("a different bundle with the same serial: err %v, want ErrRollback", err)
		}
		evs := eng.Reloads()
		if last := evs[len(evs)-1]; !strings.Contains(last.Err, "rollback") {
			t.Fatalf("last reload event = %+v, want the rollback refusal", last)
		}
	}
}

func TestManagerExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	m, eng := newManager(t, bundle.Config{Now: clock})
	if err := offer(t, m, bundle.BuildOptions{Revision: "old", Serial: 1, Expires: now.Add(-time.Second)}); !errors.Is(err, bundle.ErrExpired) {
		t.Fatalf("an expired bundle: err %v, want ErrExpired", err)
	}
	if err := offer(t, m, bundle.BuildOptions{Revision: "r1", Serial: 2, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, eng); d.Decision != gate.Allow {
		t.Fatalf("decision before expiry = %+v, want allow", d)
	}
	now = now.Add(2 * time.Hour)
	m.CheckExpiry(t.Context())
	if d := decide(t, eng); d.Decision != gate.Deny || !strings.Contains(d.Reason, "expired") {
		t.Fatalf("decision after expiry = %+v, want a deny saying the bundle expired", d)
	}
	if s := m.Status(); s.Ready {
		t.Fatalf("status after expiry = %+v, want not ready", s)
	}
}

func TestCacheRestart(t *testing.T) {
	t.Parallel()
	priv, pub := keyPair(t)
	v, err := bundle.LoadVerification(pub, "k1")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cache")
	m, _ := newManager(t, bundle.Config{CacheDir: dir, Verify: v})
	raw := build(t, bundle.BuildOptions{Revision: "r1", Serial: 1, SigningKey: priv, KeyID: "k1"})
	c, err := bundle.Read(raw, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Offer(t.Context(), c, raw, `"e1"`); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "bundle.tar.gz"): 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: %v, %v; want mode %o", p, fi.Mode(), err, want)
		}
	}
	m2, eng2 := newManager(t, bundle.Config{CacheDir: dir, Verify: v})
	if s := m2.Status(); !s.Ready || s.Revision != "r1" || !s.FromCache || !s.SignatureVerified || m2.ETag() != `"e1"` {
		t.Fatalf("restarted status = %+v, want r1 from the cache, verified", s)
	}
	if d := decide(t, eng2); d.Decision != gate.Allow {
		t.Fatalf("decision on the cached bundle = %+v, want allow", d)
	}
	// A cache altered on disk fails its signature and is ignored.
	if err := os.WriteFile(filepath.Join(dir, "bundle.tar.gz"), build(t, bundle.BuildOptions{Revision: "evil", Serial: 9}), 0o600); err != nil {
		t.Fatal(err)
	}
	m3, eng3 := newManager(t, bundle.Config{CacheDir: dir, Verify: v})
	if s := m3.Status(); s.Ready {
		t.Fatalf("status on an unsigned cache = %+v, want not ready", s)
	}
	if d := decide(t, eng3); d.Decision != gate.Deny {
		t.Fatalf("decision on an unsigned cache = %+v, want deny", d)
	}
}
