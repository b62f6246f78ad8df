package nethost

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// FuzzNormalize checks that Normalize never panics, fails only with
// ErrBadHost, is idempotent, returns either a canonical IP address or a
// valid ASCII name, and that a pattern made from its output matches it.
// Seeds live in testdata/fuzz/FuzzNormalize.
func FuzzNormalize(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Normalize(in)
		if err != nil {
			if !errors.Is(err, ErrBadHost) {
				t.Fatalf("Normalize(%q): %v does not wrap ErrBadHost", in, err)
			}
			return
		}
		if again, err := Normalize(out); err != nil || again != out {
			t.Fatalf("Normalize(%q) = %q, but Normalize(%q) = %q, %v", in, out, out, again, err)
		}
		pattern := out
		if ip, err := netip.ParseAddr(out); err == nil {
			if ip.String() != out || ip.Is4In6() || ip.Zone() != "" {
				t.Fatalf("Normalize(%q) = %q, not a canonical unmapped address", in, out)
			}
			if ip.Is6() {
				pattern = "[" + out + "]"
			}
		} else {
			if len(out) > maxNameLen {
				t.Fatalf("Normalize(%q) = %q, longer than %d bytes", in, out, maxNameLen)
			}
			for l := range strings.SplitSeq(out, ".") {
				if !validLabel(l) {
					t.Fatalf("Normalize(%q) = %q, with invalid label %q", in, out, l)
				}
			}
		}
		p, err := ParsePattern(pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q) of a normalized host: %v", pattern, err)
		}
		if !p.Match(out, 443) {
			t.Fatalf("pattern %q does not match its own host %q", pattern, out)
		}
	})
}

// FuzzParsePattern checks that ParsePattern never panics, fails only with
// ErrBadPattern, and that a parsed pattern's String parses back to it.
// Seeds live in testdata/fuzz/FuzzParsePattern.
func FuzzParsePattern(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		p, err := ParsePattern(in)
		if err != nil {
			if !errors.Is(err, ErrBadPattern) {
				t.Fatalf("ParsePattern(%q): %v does not wrap ErrBadPattern", in, err)
			}
			return
		}
		back, err := ParsePattern(p.String())
		if err != nil || back != p {
			t.Fatalf("ParsePattern(%q) = %q, which parses back to %#v, %v", in, p, back, err)
		}
	})
}

// FuzzParseURL checks that ParseURL never panics, fails only with
// ErrBadURL, and returns a host that Normalize leaves as it is. Seeds are
// the URLs of testdata/whatwg/urls.json.
func FuzzParseURL(f *testing.F) {
	var cases []struct {
		URL string `json:"url"`
	}
	data, err := os.ReadFile("testdata/whatwg/urls.json")
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		f.Add(c.URL)
	}
	f.Fuzz(func(t *testing.T, in string) {
		u, err := ParseURL(in)
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("ParseURL(%q): %v does not wrap ErrBadURL", in, err)
			}
			return
		}
		if again, err := Normalize(u.Host); err != nil || again != u.Host {
			t.Fatalf("ParseURL(%q).Host = %q, but Normalize gives %q, %v", in, u.Host, again, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("ParseURL(%q).Scheme = %q", in, u.Scheme)
		}
	})
}
