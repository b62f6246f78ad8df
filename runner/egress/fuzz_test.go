package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// FuzzNormalizeHost checks that NormalizeHost never panics, fails only with
// ErrBadHost, is idempotent, returns either a canonical IP address or a
// valid ASCII name, and that a pattern made from its output matches it.
// Seeds live in testdata/fuzz/FuzzNormalizeHost.
func FuzzNormalizeHost(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string) {
		out, err := NormalizeHost(in)
		if err != nil {
			if !errors.Is(err, ErrBadHost) {
				t.Fatalf("NormalizeHost(%q): %v does not wrap ErrBadHost", in, err)
			}
			return
		}
		if again, err := NormalizeHost(out); err != nil || again != out {
			t.Fatalf("NormalizeHost(%q) = %q, but NormalizeHost(%q) = %q, %v", in, out, out, again, err)
		}
		pattern := out
		if ip, err := netip.ParseAddr(out); err == nil {
			if ip.String() != out || ip.Is4In6() || ip.Zone() != "" {
				t.Fatalf("NormalizeHost(%q) = %q, not a canonical unmapped address", in, out)
			}
			if ip.Is6() {
				pattern = "[" + out + "]"
			}
		} else {
			if len(out) > maxNameLen {
				t.Fatalf("NormalizeHost(%q) = %q, longer than %d bytes", in, out, maxNameLen)
			}
			for l := range strings.SplitSeq(out, ".") {
				if !validLabel(l) {
					t.Fatalf("NormalizeHost(%q) = %q, with invalid label %q", in, out, l)
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
