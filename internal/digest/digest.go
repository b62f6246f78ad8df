// Package digest names content by its SHA-256 in the one encoding
// gatekeeper writes it: lower-case hex. A shorter name is a prefix of it.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
)

// SHA256 returns the lower-case hex SHA-256 of b (64 characters).
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
