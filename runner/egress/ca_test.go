package egress

import (
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestNewCAMakesACAThatSignsOnlyLeaves(t *testing.T) {
	t.Parallel()
	ca, err := NewCA()
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	c := ca.cert
	if !c.IsCA || c.MaxPathLen != 0 || !c.MaxPathLenZero || c.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA certificate IsCA %v MaxPathLen %d (zero %v) usage %v; want a CA limited to leaves", c.IsCA, c.MaxPathLen, c.MaxPathLenZero, c.KeyUsage)
	}
	if !regexp.MustCompile(`^gatekeeper egress CA [0-9a-f]{16}$`).MatchString(c.Subject.CommonName) {
		t.Errorf("CA name %q", c.Subject.CommonName)
	}
	other, _ := NewCA()
	if other.cert.Subject.CommonName == c.Subject.CommonName {
		t.Errorf("two CAs share the name %q", c.Subject.CommonName)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatalf("CertPEM is not a PEM certificate")
	}
	for _, host := range []string{"api.example.com", "10.1.2.3", "2001:db8::1"} {
		leaf, err := ca.Leaf(host)
		if err != nil {
			t.Fatalf("Leaf(%s): %v", host, err)
		}
		l := leaf.Leaf
		if _, err := l.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("leaf for %s does not verify for it: %v", host, err)
		}
		if _, err := l.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: roots}); err == nil {
			t.Errorf("leaf for %s verifies for another host", host)
		}
		isIP := net.ParseIP(host) != nil
		if isIP != (len(l.IPAddresses) == 1) || isIP == (len(l.DNSNames) == 1) {
			t.Errorf("leaf for %s: DNS %v IP %v", host, l.DNSNames, l.IPAddresses)
		}
		if life := l.NotAfter.Sub(l.NotBefore); life != leafValidity+clockSkew || time.Until(l.NotBefore) > -clockSkew+5*time.Second {
			t.Errorf("leaf for %s valid %s from %s; want 24h from a minute ago", host, life, l.NotBefore)
		}
		if again, _ := ca.Leaf(host); again != leaf {
			t.Errorf("leaf for %s was not cached", host)
		}
		if _, err := l.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: time.Now().Add(25 * time.Hour)}); err == nil {
			t.Errorf("leaf for %s verifies after 25 hours", host)
		}
	}
}

func TestLoadOrCreateCAKeepsItInAPrivateFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "ca.pem")
	ca, err := LoadOrCreateCA(path)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA file %v mode %v; want 0600", err, fi.Mode())
	}
	again, err := LoadOrCreateCA(path)
	if err != nil || string(again.CertPEM()) != string(ca.CertPEM()) {
		t.Fatalf("reload: %v; same CA %v", err, err == nil && string(again.CertPEM()) == string(ca.CertPEM()))
	}

	link := filepath.Join(dir, "link.pem")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a symbolic link was accepted: %v", err)
	}
	dangling := filepath.Join(dir, "dangling.pem")
	if err := os.Symlink(filepath.Join(dir, "nowhere.pem"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dangling); err == nil {
		t.Errorf("a dangling symbolic link was followed")
	}
	if _, err := os.Stat(filepath.Join(dir, "nowhere.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a CA was written through a dangling link")
	}
	open := filepath.Join(dir, "open.pem")
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(open, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(open); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a world-readable CA file was accepted: %v", err)
	}
	if os.Getuid() == 0 {
		other := filepath.Join(dir, "other.pem")
		if err := os.WriteFile(other, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateCA(other); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Errorf("another user's CA file was accepted: %v", err)
		}
	}
}

func TestNewSentinelsAreRandomPerCall(t *testing.T) {
	t.Parallel()
	secrets := []runner.Secret{{Name: "a"}, {Name: "b"}}
	s1, s2 := NewSentinels(secrets), NewSentinels(secrets)
	re := regexp.MustCompile(`^gksentinel_[0-9a-f]{32}$`)
	for _, m := range []map[string]string{s1, s2} {
		if len(m) != 2 || !re.MatchString(m["a"]) || !re.MatchString(m["b"]) || m["a"] == m["b"] {
			t.Errorf("sentinels %v", m)
		}
	}
	if s1["a"] == s2["a"] {
		t.Errorf("two sandboxes got the same sentinel %s", s1["a"])
	}
}
