package policy_test

import (
	"strings"
	"testing"
)

// TestNetPatternsOverPublicSuffixesAreRefused pins what the policy file,
// its ceilings and a per-query override accept as host patterns: the one
// parser of internal/nethost, with allow lists and ceilings.net_hosts
// refusing wildcards whose domain is a public suffix, and every pattern
// written in its canonical form. Each problem is located.
func TestNetPatternsOverPublicSuffixesAreRefused(t *testing.T) {
	t.Parallel()
	const allow = minimal + "sandbox:\n  net:\n    allow: [%s]\n"
	const deny = minimal + "sandbox:\n  net:\n    deny: [%s]\n"
	const ceiling = minimal + "ceilings:\n  net_hosts: [%s]\n"
	tests := []struct {
		name, doc, pattern string
		want               string // a substring of the one problem; "" for none
	}{
		{"a generic top-level domain in net.allow", allow, `"*.com"`, `p.yaml:5:12: sandbox.net.allow[0]: host pattern too broad: "*.com" would match every host under "com", a public suffix`},
		{"a second-level public suffix in net.allow", allow, `"*.co.uk"`, `sandbox.net.allow[0]: host pattern too broad: "*.co.uk"`},
		{"a private-section suffix in net.allow", allow, `"*.github.io"`, `"*.github.io" would match every host under "github.io", a public suffix where anyone can register a name`},
		{"S3 buckets in net.allow", allow, `"*.s3.amazonaws.com"`, `host pattern too broad`},
		{"an unknown top-level domain in net.allow", allow, `"*.internal"`, `"internal", a top-level domain`},
		{"a public suffix with a port in net.allow", allow, `"*.com:443"`, `host pattern too broad: "*.com:443"`},
		{"a wildcard DNS service in net.allow", allow, `"*.nip.io"`, `p.yaml:5:12: sandbox.net.allow[0]: host pattern too broad: "*.nip.io" would match every host under "nip.io", a wildcard DNS service`},
		{"a wildcard below a wildcard DNS service in net.allow", allow, `"*.dev.sslip.io"`, `every host under "sslip.io", a wildcard DNS service`},
		{"a wildcard DNS service in ceilings.net_hosts", ceiling, `"*.traefik.me"`, `p.yaml:4:14: ceilings.net_hosts[0]: host pattern too broad: "*.traefik.me"`},
		{"a generic top-level domain in ceilings.net_hosts", ceiling, `"*.com"`, `p.yaml:4:14: ceilings.net_hosts[0]: host pattern too broad: "*.com"`},
		{"a private-section suffix in ceilings.net_hosts", ceiling, `"*.herokuapp.com"`, `ceilings.net_hosts[0]: host pattern too broad`},
		{"a bare star", allow, `"*"`, `sandbox.net.allow[0]: bad host pattern "*": only a leading "*." wildcard`},
		{"a star and a dot", allow, `"*."`, `sandbox.net.allow[0]: bad host pattern "*."`},
		{"a star over every label", allow, `"*.*.example.com"`, `only a leading "*." wildcard`},
		{"a wildcard over addresses", allow, `"*.1"`, `a wildcard needs a domain name, not an IP address`},
		{"a wildcard over an address's tail", ceiling, `"*.0.0.1"`, `a wildcard needs a domain name, not an IP address`},
		{"an address range", allow, `"10.0.0.0/8"`, `not a URL, path or address range`},
		{"a URL", ceiling, `"https://pypi.org"`, `not a URL, path or address range`},
		{"upper case", allow, `"PyPI.org"`, `sandbox.net.allow[0]: "PyPI.org" is not written in canonical form; write "pypi.org"`},
		{"a trailing dot", ceiling, `"pypi.org."`, `write "pypi.org"`},
		{"an IDN", allow, `"bücher.example"`, `write "xn--bcher-kva.example"`},
		{"an inet_aton address", deny, `"0x7f.1"`, `sandbox.net.deny[0]: "0x7f.1" is not written in canonical form; write "127.0.0.1"`},
		{"a bare IPv6 address", deny, `"::1"`, `write "[::1]"`},
		{"a leading zero in a port", allow, `"pypi.org:0443"`, `write "pypi.org:443"`},
		{"a full-width look-alike", allow, `"ｐｙｐｉ.org"`, `write "pypi.org"`},
		{"a wildcard in net.deny may be as broad as it likes", deny, `"*.com"`, ""},
		{"a wildcard under a registrable domain", allow, `"*.pythonhosted.org"`, ""},
		{"a site under a private suffix", ceiling, `"*.me.github.io"`, ""},
		{"an exact host that is a suffix", allow, `"github.io"`, ""},
		{"an address with a port", allow, `"127.0.0.1:8080"`, ""},
		{"a bracketed IPv6 address", ceiling, `"[::1]:443"`, ""},
		{"an exact host under a wildcard DNS service", allow, `"203.0.113.7.nip.io"`, ""},
		{"a wildcard DNS service in net.deny", deny, `"*.nip.io"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decode(t, strings.Replace(tc.doc, "%s", tc.pattern, 1))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s accepted", tc.pattern)
			}
			got := problems(t, err)
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("problems %q; want one containing %q", got, tc.want)
			}
		})
	}
}

func TestOverrideNetPatternsOverPublicSuffixesAreRefused(t *testing.T) {
	t.Parallel()
	base, err := decode(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, raw, want string }{
		{"a generic top-level domain", `{"net":{"enabled":true,"allow":["*.com"]}}`, `sandbox_policy:1:32: sandbox.net.allow[0]: host pattern too broad: "*.com"`},
		{"a private-section suffix after a good entry", `{"net":{"enabled":true,"allow":["pypi.org","*.github.io"]}}`, `sandbox.net.allow[1]: host pattern too broad: "*.github.io"`},
		{"a wildcard DNS service", `{"net":{"enabled":true,"allow":["*.xip.io"]}}`, `sandbox_policy:1:32: sandbox.net.allow[0]: host pattern too broad: "*.xip.io" would match every host under "xip.io", a wildcard DNS service`},
		{"a non-canonical spelling", `{"net":{"allow":["PYPI.ORG"]}}`, `sandbox.net.allow[0]: "PYPI.ORG" is not written in canonical form; write "pypi.org"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := base.Override([]byte(tc.raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
		})
	}
}
