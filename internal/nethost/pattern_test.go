package nethost

import (
	"errors"
	"testing"
)

func TestPatternMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
		host    string // normalized
		port    uint16
		want    bool
	}{
		{"an exact name matches itself", "example.com", "example.com", 443, true},
		{"an exact name matches on any port", "example.com", "example.com", 8080, true},
		{"an exact name is normalized", "EXAMPLE.com.", "example.com", 80, true},
		{"an exact name does not match a subdomain", "example.com", "a.example.com", 443, false},
		{"an exact name does not match a longer name", "example.com", "notexample.com", 443, false},
		{"a wildcard matches a subdomain", "*.example.com", "a.example.com", 443, true},
		{"a wildcard matches a deeper subdomain", "*.example.com", "a.b.example.com", 443, true},
		{"a wildcard does not match the bare domain", "*.example.com", "example.com", 443, false},
		{"a wildcard does not match a longer name", "*.example.com", "notexample.com", 443, false},
		{"a wildcard does not match the domain as a prefix", "*.example.com", "example.com.evil.test", 443, false},
		{"a port restricts the match", "example.com:8443", "example.com", 8443, true},
		{"a port refuses other ports", "example.com:8443", "example.com", 443, false},
		{"a wildcard with a port", "*.example.com:443", "a.example.com", 443, true},
		{"a wildcard with a port refuses other ports", "*.example.com:443", "a.example.com", 80, false},
		{"an IPv4 pattern matches the address", "10.0.0.1", "10.0.0.1", 80, true},
		{"an IPv4 pattern in inet_aton spelling", "0x7f.1", "127.0.0.1", 80, true},
		{"an IPv4 pattern with a port", "127.0.0.1:8080", "127.0.0.1", 8080, true},
		{"an IPv4 pattern with a port refuses other ports", "127.0.0.1:8080", "127.0.0.1", 8081, false},
		{"a bare IPv6 pattern", "::1", "::1", 443, true},
		{"a bracketed IPv6 pattern with a port", "[::1]:443", "::1", 443, true},
		{"a mapped IPv6 pattern is its IPv4 address", "[::ffff:7f00:1]:80", "127.0.0.1", 80, true},
		{"an IP pattern does not match a name", "127.0.0.1", "localhost", 80, false},
		{"a name pattern does not match an address", "example.com", "93.184.215.14", 80, false},
		{"an IDN pattern matches its punycode", "bücher.example", "xn--bcher-kva.example", 443, true},
		{"the zero pattern matches nothing", "", "example.com", 443, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p Pattern
			if tt.pattern != "" {
				var err error
				if p, err = ParsePattern(tt.pattern); err != nil {
					t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
				}
			}
			if got := p.Match(tt.host, tt.port); got != tt.want {
				t.Fatalf("ParsePattern(%q).Match(%q, %d) = %v; want %v", tt.pattern, tt.host, tt.port, got, tt.want)
			}
		})
	}
}

func TestParsePatternRefusesBadPatterns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
	}{
		{"an empty pattern", ""},
		{"a lone star", "*"},
		{"a star and a dot", "*."},
		{"a star inside a name", "a.*.example.com"},
		{"a star without a dot", "*example.com"},
		{"a wildcard over an address", "*.1.2.3.4"},
		{"port 0", "example.com:0"},
		{"an empty port", "example.com:"},
		{"a port out of range", "example.com:70000"},
		{"an unclosed bracket", "[::1"},
		{"a space", "exa mple.com"},
		{"a name ending in a bad number", "example.300"},
		{"a zone", "fe80::1%eth0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if p, err := ParsePattern(tt.pattern); !errors.Is(err, ErrBadPattern) {
				t.Fatalf("ParsePattern(%q) = %v, %v; want an error wrapping ErrBadPattern", tt.pattern, p, err)
			}
		})
	}
}

func TestPatternStringParsesBackToTheSamePattern(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern, want string
	}{
		{"a name", "Example.COM.", "example.com"},
		{"a wildcard with a port", "*.Example.com:443", "*.example.com:443"},
		{"an inet_aton address", "0x7f.1:80", "127.0.0.1:80"},
		{"a bare IPv6 address", "::1", "[::1]"},
		{"a bracketed IPv6 address with a port", "[::1]:8080", "[::1]:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePattern(tt.pattern)
			if err != nil {
				t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
			}
			if got := p.String(); got != tt.want {
				t.Fatalf("ParsePattern(%q).String() = %q; want %q", tt.pattern, got, tt.want)
			}
			if back, err := ParsePattern(p.String()); err != nil || back != p {
				t.Fatalf("ParsePattern(%q) = %#v, %v; want %#v", p.String(), back, err, p)
			}
		})
	}
}

func TestMatchNormalizesTheHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern, host string
		port                uint16
		want                bool
		wantErr             error
	}{
		{"an upper-case host with a trailing dot", "*.example.com", "A.Example.COM.", 443, true, nil},
		{"an inet_aton host against a dotted pattern", "127.0.0.1", "2130706433", 80, true, nil},
		{"a bad pattern", "*", "example.com", 80, false, ErrBadPattern},
		{"a bad host", "example.com", "exa mple.com", 80, false, ErrBadHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Match(tt.pattern, tt.host, tt.port)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("Match(%q, %q, %d) = %v, %v; want %v, %v", tt.pattern, tt.host, tt.port, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, glob, host string
		want             bool
	}{
		{"a plain name", "api.openai.com", "api.openai.com", true},
		{"a plain name does not match a subdomain", "api.openai.com", "x.api.openai.com", false},
		{"a leading wildcard matches a subdomain", "*.openai.azure.com", "me.openai.azure.com", true},
		{"a leading wildcard matches a deeper subdomain", "*.openai.azure.com", "a.b.openai.azure.com", true},
		{"a leading wildcard does not match the domain", "*.openai.azure.com", "openai.azure.com", false},
		{"an inner star matches one label", "bedrock-runtime.*.amazonaws.com", "bedrock-runtime.us-east-1.amazonaws.com", true},
		{"an inner star does not match two labels", "bedrock-runtime.*.amazonaws.com", "bedrock-runtime.a.b.amazonaws.com", false},
		{"an inner star does not match no label", "bedrock-runtime.*.amazonaws.com", "bedrock-runtime.amazonaws.com", false},
		{"a star within a label", "*-aiplatform.googleapis.com", "us-central1-aiplatform.googleapis.com", true},
		{"a star within a label needs its suffix", "*-aiplatform.googleapis.com", "aiplatform.googleapis.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := ParseGlob(tt.glob)
			if err != nil {
				t.Fatalf("ParseGlob(%q): %v", tt.glob, err)
			}
			if got := g.Match(tt.host); got != tt.want {
				t.Fatalf("ParseGlob(%q).Match(%q) = %v; want %v", tt.glob, tt.host, got, tt.want)
			}
		})
	}
}

// TestAllowsStopsAtPublicSuffixes pins the allow-list matching that both
// the gate (WebFetch) and the egress proxy use.
func TestAllowsStopsAtPublicSuffixes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern, host string
		want                bool
	}{
		{"a wildcard allows a host of its own domain", "*.amazonaws.com", "ec2.amazonaws.com", true},
		{"a wildcard does not allow a host under a private suffix below it", "*.amazonaws.com", "attacker.s3.amazonaws.com", false},
		{"a wildcard does not allow the private suffix itself", "*.amazonaws.com", "s3.amazonaws.com", false},
		{"a wildcard under a private suffix allows its own hosts", "*.me.github.io", "docs.me.github.io", true},
		{"a wildcard under an ICANN suffix allows its hosts", "*.example.co.uk", "a.b.example.co.uk", true},
		{"an exact pattern allows itself even when it is a suffix", "github.io", "github.io", true},
		{"Allows never allows what Match does not", "*.example.com", "example.com", false},
		{"an IP literal allows itself", "10.0.0.1", "10.0.0.1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePattern(tt.pattern)
			if err != nil {
				t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
			}
			if got := p.Allows(tt.host, 443); got != tt.want {
				t.Fatalf("ParsePattern(%q).Allows(%q, 443) = %v; want %v", tt.pattern, tt.host, got, tt.want)
			}
			if got := p.Match(tt.host, 443); tt.want && !got {
				t.Fatalf("ParsePattern(%q).Match(%q, 443) = false but Allows is true", tt.pattern, tt.host)
			}
		})
	}
}

func TestCheckAllowRefusesPublicSuffixWidePatterns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern string
		tooBroad      bool
	}{
		{"a generic top-level domain", "*.com", true},
		{"a country code second-level suffix", "*.co.uk", true},
		{"a suffix made by a wildcard rule", "*.foo.ck", true},
		{"an internationalized top-level domain", "*.рф", true},
		{"an unlisted top-level domain", "*.internal", true},
		{"a private-section suffix: GitHub Pages", "*.github.io", true},
		{"a private-section suffix: S3 buckets", "*.s3.amazonaws.com", true},
		{"a private-section suffix: Cloud Storage buckets", "*.googleapis.com", true},
		{"a private-section suffix made by a wildcard rule", "*.eu-west-1.compute.amazonaws.com", true},
		{"a wildcard suffix with a port", "*.com:443", true},
		{"a wildcard DNS service: nip.io", "*.nip.io", true},
		{"a wildcard DNS service: sslip.io", "*.sslip.io", true},
		{"a wildcard DNS service: xip.io", "*.xip.io", true},
		{"a wildcard DNS service: traefik.me", "*.traefik.me", true},
		{"a wildcard DNS service: rbndr.us", "*.rbndr.us", true},
		{"a wildcard DNS service: 1u.ms", "*.1u.ms", true},
		{"a wildcard DNS service in capitals with a port", "*.NIP.IO:443", true},
		{"a wildcard below a wildcard DNS service", "*.app.sslip.io", true},
		{"a wildcard below an address under a wildcard DNS service", "*.10.0.0.1.nip.io", true},
		{"an exact host under a wildcard DNS service", "203.0.113.7.nip.io", false},
		{"the wildcard DNS service's own name", "nip.io", false},
		{"a look-alike of a wildcard DNS service", "*.notnip.io", false},
		{"a wildcard DNS service's name as a label elsewhere", "*.nip.io.example.com", false},
		{"a registrable domain", "*.example.com", false},
		{"a registrable domain under a country code suffix", "*.example.co.uk", false},
		{"a site under a private suffix", "*.me.github.io", false},
		{"an exception to a wildcard rule", "*.www.ck", false},
		{"a domain that holds private suffixes below it", "*.amazonaws.com", false},
		{"an exact host that is a suffix", "github.io", false},
		{"an exact top-level domain", "com", false},
		{"an IP address", "10.0.0.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePattern(tt.pattern)
			if err != nil {
				t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
			}
			err = p.CheckAllow()
			if got := errors.Is(err, ErrTooBroad); got != tt.tooBroad {
				t.Fatalf("ParsePattern(%q).CheckAllow() = %v; want too broad: %v", tt.pattern, err, tt.tooBroad)
			}
			if _, err2 := ParseAllow(tt.pattern); errors.Is(err2, ErrTooBroad) != tt.tooBroad {
				t.Fatalf("ParseAllow(%q) = %v; want too broad: %v", tt.pattern, err2, tt.tooBroad)
			}
		})
	}
}

func TestCovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ceiling, pattern string
		want                   bool
	}{
		{"a host covers itself", "pypi.org", "pypi.org", true},
		{"a host does not cover another", "pypi.org", "evil.example", false},
		{"a host does not cover its subdomain", "pypi.org", "a.pypi.org", false},
		{"a host does not cover a wildcard over it", "pypi.org", "*.pypi.org", false},
		{"a wildcard covers a subdomain", "*.example.com", "a.example.com", true},
		{"a wildcard covers a deeper wildcard", "*.example.com", "*.a.example.com", true},
		{"a wildcard covers itself", "*.example.com", "*.example.com", true},
		{"a wildcard does not cover its bare domain", "*.example.com", "example.com", false},
		{"a wildcard does not cover a look-alike suffix", "*.example.com", "notexample.com", false},
		{"a wildcard does not cover a broader wildcard", "*.a.example.com", "*.example.com", false},
		{"a portless host covers it with a port", "pypi.org", "pypi.org:443", true},
		{"a portless wildcard covers a subdomain with a port", "*.example.com", "a.example.com:8443", true},
		{"a host with a port does not cover it without", "pypi.org:443", "pypi.org", false},
		{"a host with a port does not cover another port", "pypi.org:443", "pypi.org:80", false},
		{"a host with a port covers the same port", "pypi.org:443", "pypi.org:443", true},
		{"an address covers itself", "10.0.0.1", "10.0.0.1:80", true},
		{"a wildcard never covers an address", "*.example.com", "10.0.0.1", false},
		{"an address does not cover a name", "10.0.0.1", "a.example.com", false},
		{"IPv6 in any spelling", "[::1]", "[0:0:0:0:0:0:0:1]:8080", true},
		// What a wildcard covers, it allows (Allows): never a host across a
		// public suffix below it, which belongs to whoever registered it.
		{"a wildcard covers a host with no public suffix between", "*.amazonaws.com", "ec2.amazonaws.com", true},
		{"a wildcard does not cover a host across a public suffix below it", "*.amazonaws.com", "attacker.s3.amazonaws.com", false},
		{"a wildcard does not cover a wildcard across a public suffix below it", "*.amazonaws.com", "*.attacker.s3.amazonaws.com", false},
		{"a wildcard does not cover a host under a wildcard suffix rule", "*.amazonaws.com", "ec2-1-2-3-4.us-east-1.compute.amazonaws.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err1 := ParsePattern(tt.ceiling)
			p, err2 := ParsePattern(tt.pattern)
			if err1 != nil || err2 != nil {
				t.Fatalf("ParsePattern: %v, %v", err1, err2)
			}
			if got := c.Covers(p); got != tt.want {
				t.Fatalf("%q.Covers(%q) = %v; want %v", tt.ceiling, tt.pattern, got, tt.want)
			}
		})
	}
	if (Pattern{}).Covers(Pattern{}) {
		t.Error("the zero pattern covers itself")
	}
}

func TestCheckAllowExplainsAWildcardDNSRefusal(t *testing.T) {
	t.Parallel()
	_, err := ParseAllow("*.dev.sslip.io")
	want := `host pattern too broad: "*.dev.sslip.io" would match every host under "sslip.io", a wildcard DNS service that answers a name under it with any address the name spells (10.0.0.1.sslip.io is 10.0.0.1), so it would reach every address; allow the exact hosts you need`
	if err == nil || err.Error() != want {
		t.Fatalf("ParseAllow(*.dev.sslip.io) = %v; want %s", err, want)
	}
	svcs := WildcardDNSServices()
	svcs[0] = "changed"
	if WildcardDNSServices()[0] == "changed" {
		t.Error("WildcardDNSServices shares memory with its callers")
	}
	for _, s := range WildcardDNSServices() {
		if n, err := Normalize(s); err != nil || n != s {
			t.Errorf("wildcard DNS service %q is not in canonical form: %q, %v", s, n, err)
		}
	}
}
