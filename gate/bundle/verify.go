package bundle

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"
)

// MaxBytes bounds a bundle's size, compressed and each file: 32 MiB. A
// policy bundle is a few KiB; the bound stops a gzip bomb.
const MaxBytes = 32 << 20

// ErrSignature marks a bundle refused because its signature is missing,
// does not verify, or names no key.
var ErrSignature = errors.New("bundle signature refused")

// Verification is the key a bundle's signature must verify with. A nil
// *Verification verifies nothing (and refuses a signed bundle, as OPA
// does without keys).
type Verification struct {
	// KeyID names the key: a bundle's JWT must carry it as its "kid".
	KeyID string
	key   *keys.Config
}

// LoadVerification reads a PEM public key (RSA: RS256; ECDSA: ES256,
// ES384 or ES512 by its curve) for the key id id.
func LoadVerification(file, id string) (*Verification, error) {
	if id == "" {
		return nil, errors.New("a verification key needs a key id (--bundle-key-id): a signature without one is refused")
	}
	pemBytes, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("verification key: %w", err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("verification key %s: no PEM block", file)
	}
	var pub any
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var c *x509.Certificate
		if c, err = x509.ParseCertificate(block.Bytes); err == nil {
			pub = c.PublicKey
		}
	default:
		return nil, fmt.Errorf("verification key %s: a %s, want a public key", file, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("verification key %s: %w", file, err)
	}
	alg, err := algorithm(pub)
	if err != nil {
		return nil, fmt.Errorf("verification key %s: %w", file, err)
	}
	return &Verification{KeyID: id, key: &keys.Config{Key: string(pemBytes), Algorithm: alg}}, nil
}

// algorithm is the JWS algorithm for a public or private key.
func algorithm(k any) (string, error) {
	switch k := k.(type) {
	case *rsa.PublicKey, *rsa.PrivateKey:
		return "RS256", nil
	case *ecdsa.PublicKey:
		return ecAlg(k.Curve.Params().BitSize)
	case *ecdsa.PrivateKey:
		return ecAlg(k.Curve.Params().BitSize)
	}
	return "", fmt.Errorf("a %T key; want RSA or ECDSA", k)
}

func ecAlg(bits int) (string, error) {
	switch bits {
	case 256:
		return "ES256", nil
	case 384:
		return "ES384", nil
	case 521:
		return "ES512", nil
	}
	return "", fmt.Errorf("an ECDSA key of %d bits", bits)
}

// config is OPA's verification config for v: the one key under its id,
// and no key id of its own, so that OPA takes the key id from the JWT
// and a JWT naming none is refused ("verification key ID is empty")
// rather than checked against a default. A signature is required.
func (v *Verification) config() *opabundle.VerificationConfig {
	if v == nil {
		return nil
	}
	return opabundle.NewVerificationConfig(map[string]*keys.Config{v.KeyID: v.key}, "", "", nil)
}

// Read verifies and reads a bundle (a .tar.gz) with OPA's bundle reader.
func Read(raw []byte, v *Verification) (*Contents, error) {
	b, err := opabundle.NewReader(bytes.NewReader(raw)).
		WithBundleVerificationConfig(v.config()).
		WithSizeLimitBytes(MaxBytes).
		Read()
	if err != nil {
		return nil, classify(err)
	}
	return FromBundle(&b, v)
}

// ReadUnverified reads a bundle without checking its signature, for
// gatekeeper bundle build's check of what it built. Contents.Signed is
// false.
func ReadUnverified(raw []byte) (*Contents, error) {
	b, err := opabundle.NewReader(bytes.NewReader(raw)).WithSkipBundleVerification(true).WithSizeLimitBytes(MaxBytes).Read()
	if err != nil {
		return nil, err
	}
	return contents(&b, false)
}

// FromBundle checks a bundle OPA's reader (or downloader) has read with
// v's config: its signature names v's key in the JWT header, and it is a
// gatekeeper policy bundle.
func FromBundle(b *opabundle.Bundle, v *Verification) (*Contents, error) {
	if v != nil {
		if len(b.Signatures.Signatures) != 1 {
			return nil, fmt.Errorf("%w: want one signature, the bundle has %d", ErrSignature, len(b.Signatures.Signatures))
		}
		kid, err := headerKeyID(b.Signatures.Signatures[0])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSignature, err)
		}
		if kid != v.KeyID {
			return nil, fmt.Errorf("%w: signed with key id %q, want %q", ErrSignature, kid, v.KeyID)
		}
	}
	return contents(b, v != nil)
}

// headerKeyID is the "kid" of a compact JWT's header. The header is part
// of what the signature covers; OPA has verified it by now.
func headerKeyID(token string) (string, error) {
	h, _, ok := strings.Cut(token, ".")
	if !ok {
		return "", errors.New("the signature is not a compact JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return "", fmt.Errorf("the signature's header: %w", err)
	}
	var hdr struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(raw, &hdr); err != nil {
		return "", fmt.Errorf("the signature's header: %w", err)
	}
	if hdr.Kid == "" {
		return "", errors.New("the signature names no key id (kid)")
	}
	return hdr.Kid, nil
}

// classify marks OPA's verification failures with ErrSignature; other
// read errors (a Rego syntax error, bad JSON) are returned as they are,
// each naming its file in the bundle.
func classify(err error) error {
	msg := err.Error()
	for _, s := range []string{"signature", "verification key", "JWT", "scope mismatch", "not included in bundle signature", "digest mismatch", "hash"} {
		if strings.Contains(msg, s) {
			return fmt.Errorf("%w: %w", ErrSignature, err)
		}
	}
	return err
}
