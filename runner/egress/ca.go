package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// Validity of the CA and of its leaf certificates.
const (
	// caValidity is how long a CA made by NewCA is valid; LoadOrCreateCA
	// replaces a stored CA with less than caMinRemaining left.
	caValidity     = 90 * 24 * time.Hour
	caMinRemaining = 7 * 24 * time.Hour
	// leafValidity is a leaf's lifetime; a cached leaf is reused until
	// half of it has passed.
	leafValidity = 24 * time.Hour
	// clockSkew backdates NotBefore for clients whose clock lags.
	clockSkew = time.Minute
	// maxLeaves bounds the leaf cache.
	maxLeaves = 1024
)

// CA is the egress proxy's certificate authority: the proxy presents a leaf
// it signs to a sandbox whose CONNECT it intercepts, and the sandbox
// trusts it (CertPEM). The CA is constrained to sign leaves only
// (MaxPathLen 0). A CA is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey // one key for every leaf

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA makes a CA with a fresh ECDSA P-256 key, named "gatekeeper egress
// CA <random>", valid for 90 days.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make egress CA key: %w", err)
	}
	id := make([]byte, 8)
	rand.Read(id)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: "gatekeeper egress CA " + hex.EncodeToString(id), Organization: []string{"gatekeeper"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("make egress CA certificate: %w", err)
	}
	return newCA(der, key)
}

// newCA completes a CA from its certificate and key.
func newCA(der []byte, key *ecdsa.PrivateKey) (*CA, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse egress CA certificate: %w", err)
	}
	if !cert.IsCA || cert.MaxPathLen != 0 {
		return nil, errors.New("egress CA certificate is not a CA limited to signing leaves")
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("egress CA key does not match its certificate")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make egress leaf key: %w", err)
	}
	return &CA{
		cert:    cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:     key,
		leafKey: leafKey,
		leaves:  make(map[string]*tls.Certificate),
	}, nil
}

// LoadOrCreateCA reads the CA kept at path (its certificate and key, PEM),
// or makes one with NewCA and writes it there, mode 0600. It refuses a
// file that is a symbolic link, has any permission beyond 0600, or
// belongs to another user, since whoever can read or replace the key can
// read every intercepted request. A stored CA with less than 7 days left
// is replaced.
func LoadOrCreateCA(path string) (*CA, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return createCA(path)
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("load egress CA %s: it is a symbolic link", path)
	case err != nil:
		return nil, fmt.Errorf("load egress CA: %w", err)
	}
	defer f.Close()
	if err := checkPrivateFile(f); err != nil {
		return nil, fmt.Errorf("load egress CA %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("load egress CA: %w", err)
	}
	ca, err := parseCA(data)
	if err != nil {
		return nil, fmt.Errorf("load egress CA %s: %w", path, err)
	}
	if time.Until(ca.cert.NotAfter) < caMinRemaining {
		return replaceCA(path)
	}
	return ca, nil
}

// checkPrivateFile requires f to be a regular file of this user's with no
// permission beyond 0600.
func checkPrivateFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if perm := fi.Mode().Perm(); perm&^0o600 != 0 {
		return fmt.Errorf("mode %#o allows others; it must be 0600", perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("owned by uid %d, not this user (%d)", st.Uid, os.Getuid())
	}
	return nil
}

// parseCA reads a CA written by (*CA).marshal.
func parseCA(data []byte) (*CA, error) {
	var der []byte
	var key *ecdsa.PrivateKey
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			der = b.Bytes
		case "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse key: %w", err)
			}
			key = k
		}
	}
	if der == nil || key == nil {
		return nil, errors.New("want a CERTIFICATE and an EC PRIVATE KEY block")
	}
	return newCA(der, key)
}

// createCA makes a CA and writes it to path, which must not exist.
func createCA(path string) (*CA, error) {
	ca, data, err := freshCA()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create egress CA: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("write egress CA %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write egress CA %s: %w", path, err)
	}
	return ca, nil
}

// replaceCA writes a fresh CA over the expiring one at path, atomically.
func replaceCA(path string) (*CA, error) {
	tmp := path + ".new"
	os.Remove(tmp)
	ca, err := createCA(tmp)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("replace egress CA %s: %w", path, err)
	}
	return ca, nil
}

// freshCA makes a CA and its file contents.
func freshCA() (*CA, []byte, error) {
	ca, err := NewCA()
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal egress CA key: %w", err)
	}
	data := append(append([]byte(nil), ca.certPEM...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
	return ca, data, nil
}

// CertPEM returns the CA's certificate, PEM-encoded, for the sandbox's
// trust store.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Leaf returns a certificate for host (a normalized name or IP literal),
// signed by the CA, valid for 24 hours from a minute ago. Leaves are
// cached (at most 1024, each reused for half its life).
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	now := time.Now()
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && now.Before(c.Leaf.NotAfter.Add(-leafValidity/2)) {
		return c, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: host},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(leafValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign egress leaf for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse egress leaf for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: ca.leafKey, Leaf: leaf}
	if len(ca.leaves) >= maxLeaves {
		for k := range ca.leaves { // evict an arbitrary one
			delete(ca.leaves, k)
			break
		}
	}
	ca.leaves[host] = c
	return c, nil
}

// randSerial is a random 127-bit certificate serial number.
func randSerial() *big.Int {
	b := make([]byte, 16)
	rand.Read(b)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}
