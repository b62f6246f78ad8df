package egress

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// SentinelPrefix starts every sentinel, so that the proxy and the
// policy can tell one in a request.
const SentinelPrefix = "gksentinel_"

// NewSentinels makes a fresh sentinel for each secret, by name:
// SentinelPrefix and 32 random hex digits. A sandbox gets its own, once;
// a session keeps its sandbox's.
func NewSentinels(secrets []runner.Secret) map[string]string {
	m := make(map[string]string, len(secrets))
	for _, s := range secrets {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		m[s.Name] = SentinelPrefix + hex.EncodeToString(b[:])
	}
	return m
}
