package egress

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// SentinelPrefix begins every sentinel, so that a scanner (or a person)
// recognizes one in a log or a leaked file.
const SentinelPrefix = "gksentinel_"

// NewSentinels makes a random sentinel for each secret: name →
// "gksentinel_" and 32 hex digits (128 random bits). A sandbox gets its own
// set; a session keeps its sandbox's.
func NewSentinels(secrets []runner.Secret) map[string]string {
	out := make(map[string]string, len(secrets))
	for _, s := range secrets {
		b := make([]byte, 16)
		rand.Read(b)
		out[s.Name] = SentinelPrefix + hex.EncodeToString(b)
	}
	return out
}
