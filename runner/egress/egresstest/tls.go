package egresstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// CA is a certificate authority for tests: it signs leaf certificates for
// the HTTPS servers a test starts, and a client (or the egress proxy,
// through Config.UpstreamRoots) trusts it through Pool. It lives only in
// memory. A CA is safe for concurrent use.
type CA struct {
	// Cert is the CA's certificate and PEM its PEM encoding, which a
	// sandbox's client can be given as its CA file.
	Cert *x509.Certificate
	PEM  []byte
	key  *ecdsa.PrivateKey
}

var (
	testCAOnce sync.Once
	testCA     *CA
)

// TestCA returns the process's test CA, made on first use: the upstreams
// TLSServer starts hold leaves from it. A CA of NewCA is another, which
// nothing trusts unless told to (a forged upstream).
func TestCA() *CA {
	testCAOnce.Do(func() {
		ca, err := newCA("gatekeeper egresstest CA")
		if err != nil {
			panic(fmt.Sprintf("egresstest: make the test CA: %v", err))
		}
		testCA = ca
	})
	return testCA
}

// NewCA makes a CA of its own called name, distinct from TestCA's.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := newCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func newCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err)
	}
	return n
}

// Pool returns a new pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf returns a server certificate signed by the CA for names: each a
// DNS name, or an IP literal (put in the IP addresses). The chain holds
// the leaf alone; the CA is the trust anchor.
func (ca *CA) Leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	if len(names) == 0 {
		t.Fatal("egresstest: a leaf needs at least one name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if a, err := netip.ParseAddr(n); err == nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(a.AsSlice()))
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Server is an HTTPS server a test started (TLSServer, CA.Serve). It is
// closed when the test ends.
type Server struct {
	// Port is the port it listens on, on every IPv4 address of the host
	// (0.0.0.0): a sandbox must reach it only through the egress proxy,
	// which dials it at 127.0.0.1.
	Port int
	// CA signed its certificate.
	CA *CA
}

// Addr returns "127.0.0.1:Port", where a client on this host reaches it.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// TLSServer serves h over HTTPS (HTTP/2 and HTTP/1.1, by ALPN) on
// 0.0.0.0 and a random port, with a leaf from TestCA for names, until t
// ends. A proxy configured with TestCA().Pool() as its upstream roots
// verifies it.
func TLSServer(t testing.TB, h http.Handler, names ...string) *Server {
	t.Helper()
	return TestCA().Serve(t, h, names...)
}

// Serve is TLSServer with a leaf from ca.
func (ca *CA) Serve(t testing.TB, h http.Handler, names ...string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{ca.Leaf(t, names...)},
			NextProtos:   []string{"h2", "http/1.1"},
			MinVersion:   tls.VersionTLS12,
		},
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return &Server{Port: ln.Addr().(*net.TCPAddr).Port, CA: ca}
}

// Client returns an HTTP client that trusts ca and connects every name to
// 127.0.0.1 (the port from the URL), for tests of the fixtures from this
// host. It tries HTTP/2.
func (ca *CA) Client() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: ca.Pool()},
			ForceAttemptHTTP2: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				_, port, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
			},
		},
	}
}
