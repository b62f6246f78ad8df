package egresstest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"testing"
)

// SentinelPattern matches a sentinel as egress.NewSentinels makes them.
var SentinelPattern = regexp.MustCompile(`^gksentinel_[0-9a-f]{32}$`)

// SecretValue returns a secret value for a test: "gkreal_<name>_" and 40
// random hex digits, so that finding it anywhere is a leak and never a
// coincidence.
func SecretValue(t testing.TB, name string) string {
	t.Helper()
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "gkreal_" + name + "_" + hex.EncodeToString(b)
}

// LeakForms are the spellings of v a leak could take: v itself,
// URL-escaped (query and path), and base64 in the standard and URL
// alphabets at each of the three alignments v can have inside a longer
// encoded string (Basic credentials "user:v"), cut to the characters that
// depend on v's bytes alone.
func LeakForms(v string) []string {
	forms := []string{v, url.QueryEscape(v), url.PathEscape(v)}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pad := range 3 {
			s := enc.EncodeToString(append(bytes.Repeat([]byte{0}, pad), v...))
			start, end := 0, len(v)/3*4
			if pad > 0 {
				// The first group mixes the prefix's bytes with v's.
				start = 4
				end = start + (len(v)-(3-pad))/3*4
			}
			if end > start {
				forms = append(forms, s[start:end])
			}
		}
	}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// FindLeaks says where data holds a value of values (name → value) in any
// of its LeakForms; nil when it holds none.
func FindLeaks(data []byte, values map[string]string) []string {
	var out []string
	for _, name := range sortedKeys(values) {
		for _, f := range LeakForms(values[name]) {
			if i := bytes.Index(data, []byte(f)); i >= 0 {
				out = append(out, fmt.Sprintf("secret %s (as %q) at byte %d of %d", name, f, i, len(data)))
			}
		}
	}
	return out
}
