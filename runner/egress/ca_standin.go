package egress

// STAND-IN (wire helper): the proxy helper's CA replaces this file at
// merge. It exists only so that the wiring compiles and its tests run.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"time"
)

// CA is the sidecar's certificate authority for intercepted hosts.
type CA struct {
	cert []byte // PEM
}

// NewCA makes a CA in memory.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gatekeeper egress CA (stand-in)"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &CA{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LoadOrCreateCA loads the CA at path, or makes one there.
func LoadOrCreateCA(path string) (*CA, error) {
	if b, err := os.ReadFile(path); err == nil {
		return &CA{cert: b}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ca, err := NewCA()
	if err != nil {
		return nil, err
	}
	return ca, os.WriteFile(path, ca.cert, 0o600)
}

// CertPEM is the CA's certificate.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.cert...) }

// CACert is the proxy's CA certificate (PEM); nil without a CA.
func (p *Proxy) CACert() []byte {
	if p.cfg.CA == nil {
		return nil
	}
	return p.cfg.CA.CertPEM()
}
