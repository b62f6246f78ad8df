package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// netPolicy allows WebFetch with a net policy whose deny list a look-alike
// spelling must not slip past.
const netPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [WebFetch]
sandbox:
  net:
    enabled: true
    allow: ["*.example.com", "pypi.org", "api.local:8443", "*.amazonaws.com", "10.0.0.1"]
    deny: ["bad.example.com", "upgrade.example.com:443", "127.0.0.1"]
ceilings: {net_hosts: ["*.example.com", "files.pythonhosted.org:443", "*.amazonaws.com"]}
`

// fetchCase is one WebFetch url and the decision the sidecar must reach.
type fetchCase struct {
	name, url, decision, rule, reasonHas string
}

// checkFetches decides each case as a WebFetch over c in query q, one
// subtest each, asserting the decision, the rule and a part of the reason.
func (c *client) checkFetches(t *testing.T, q string, tests []fetchCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			input, err := json.Marshal(map[string]string{"url": tc.url, "prompt": "x"})
			must(t, err)
			r := c.decide(q, "WebFetch", string(input), "toolu_net", "")
			if r["decision"] != tc.decision || r["rule"] != tc.rule || !strings.Contains(fmt.Sprint(r["reason"]), tc.reasonHas) {
				t.Fatalf("%q: got %v %v %q; want %s %s with %q", tc.url, r["decision"], r["rule"], r["reason"], tc.decision, tc.rule, tc.reasonHas)
			}
		})
	}
}

// TestLookAlikeHostsInWebFetch sends WebFetch calls whose url spells a
// denied host in a way Node's URL parser (and so Claude Code's WebFetch)
// turns back into the denied host, through the real sidecar: each is
// judged as the host WebFetch will really fetch, by the egress proxy's own
// normalizer and matcher, and denied by net.host_denied. A sidecar that
// only lower-cased the host would let "*.example.com" allow every such
// spelling.
func TestLookAlikeHostsInWebFetch(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: netPolicy})
	c := h.connect(t)
	q := c.open("")
	tests := []fetchCase{
		{"the denied host itself", "https://bad.example.com/", "deny", "net.host_denied", `host bad.example.com is forbidden by sandbox.net.deny pattern "bad.example.com"`},
		{"full-width letters", "https://ｂａｄ.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"full-width capitals", "https://ＢＡＤ.ＥＸＡＭＰＬＥ.ＣＯＭ/", "deny", "net.host_denied", "host bad.example.com "},
		{"a soft hyphen", "https://b\u00adad.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a zero-width space", "https://ba\u200bd.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a word joiner", "https://bad\u2060.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a byte order mark", "https://\ufeffbad.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a variation selector", "https://bad\ufe0f.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a combining grapheme joiner", "https://b\u034fad.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"circled letters", "https://ⓑⓐⓓ.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"mathematical letters", "https://𝐛𝐚𝐝.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"an ideographic full stop", "https://bad。example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a full-width full stop", "https://bad．example．com/", "deny", "net.host_denied", "host bad.example.com "},
		{"upper case and a trailing dot", "https://BAD.Example.COM./", "deny", "net.host_denied", "host bad.example.com "},
		{"a percent-encoded letter", "https://b%61d.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a percent-encoded dot", "https://bad%2eexample.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a percent-encoded full-width letter", "https://%ef%bd%82ad.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a percent-encoded soft hyphen", "https://ba%c2%add.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a tab inside the host", "https://ba\td.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"a newline inside the host", "https://bad.exa\nmple.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"leading white space", "  https://bad.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"backslashes for slashes", `https:\\bad.example.com\x`, "deny", "net.host_denied", "host bad.example.com "},
		{"no slashes at all", "https:bad.example.com", "deny", "net.host_denied", "host bad.example.com "},
		{"a backslash before an @", `https://bad.example.com\@pypi.org/`, "deny", "net.host_denied", "host bad.example.com "},
		{"an upper-case scheme", "HTTPS://bad.example.com/", "deny", "net.host_denied", "host bad.example.com "},
		{"the denied address", "https://127.0.0.1/", "deny", "net.host_denied", `host 127.0.0.1 is forbidden by sandbox.net.deny pattern "127.0.0.1"`},
		{"the denied address in two parts", "https://127.1/", "deny", "net.host_denied", "host 127.0.0.1 "},
		{"the denied address in hex", "https://0x7f.0.0.1/", "deny", "net.host_denied", "host 127.0.0.1 "},
		{"the denied address as an integer", "https://2130706433/", "deny", "net.host_denied", "host 127.0.0.1 "},
		{"the denied address in octal", "https://0177.0.0.1/", "deny", "net.host_denied", "host 127.0.0.1 "},
		{"the denied address as mapped IPv6", "https://[::ffff:127.0.0.1]/", "deny", "net.host_denied", "host 127.0.0.1 "},
		{"the denied address in full-width digits", "https://１２７.０.０.１/", "deny", "net.host_denied", "host 127.0.0.1 "},
		{"the denied address as mapped IPv6 in hex", "https://[::ffff:7f00:1]/", "deny", "net.host_denied", "host 127.0.0.1 "},
		{"the denied address with a trailing dot", "https://127.0.0.1./", "deny", "net.host_denied", "host 127.0.0.1 "},
		{"the denied address in hex parts behind a backslash", `https:\\0x7f.1\x`, "deny", "net.host_denied", "host 127.0.0.1 "},
		{"an http url is fetched on 443, which is denied", "http://upgrade.example.com/", "deny", "net.host_denied", `host upgrade.example.com is forbidden by sandbox.net.deny pattern "upgrade.example.com:443"`},
		{"an http url with port 80 is fetched on 443 too", "http://upgrade.example.com:80/", "deny", "net.host_denied", "upgrade.example.com:443"},
		{"an http url keeps another port", "http://api.local:8443/", "allow", "net.host_allowed", "api.local"},
		{"an http url without that port is fetched on 443", "http://api.local/", "deny", "net.host_not_allowed", "api.local (port 443)"},
		{"an allowed address in octal", "https://012.0.0.1/", "allow", "net.host_allowed", "host 10.0.0.1 "},
		{"a wildcard reaches its own subdomains", "https://a.b.example.com/", "allow", "net.host_allowed", "host a.b.example.com "},
		{"a wildcard does not reach across a public suffix below it", "https://attacker.s3.amazonaws.com/", "deny", "net.host_not_allowed", "attacker.s3.amazonaws.com"},
		{"a wildcard reaches the domain's own hosts", "https://ec2.amazonaws.com/", "allow", "net.host_allowed", "ec2.amazonaws.com"},
		{"user info is refused", "https://pypi.org@bad.example.com/", "deny", "net.bad_url", "carries credentials"},
		{"empty user info is refused", "https://@pypi.org/", "deny", "net.bad_url", "carries credentials"},
		{"a zero-width joiner is refused as Node refuses it", "https://ba\u200dd.example.com/", "deny", "net.bad_url", "bad url"},
		{"a percent-encoded colon is refused", "https://%3A%3A1/", "deny", "net.bad_url", "bad url"},
		{"an underscore is refused", "https://b_d.example.com/", "deny", "net.bad_url", "bad url"},
		{"another scheme is refused", "ftp://pypi.org/", "deny", "net.bad_url", "not http or https"},
	}
	c.checkFetches(t, q, tests)
}

// TestOverrideHostsWithinCeilingsAreCheckedInGo opens queries over the
// real socket whose overrides add net.allow hosts: the sidecar decides
// "within ceilings.net_hosts" with the egress proxy's pattern functions and
// the policy package refuses public-suffix-wide and non-canonical patterns.
func TestOverrideHostsWithinCeilingsAreCheckedInGo(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: netPolicy})
	c := h.connect(t)
	tests := []struct {
		name, allow string
		violation   string // "" when the query opens
	}{
		{"a subdomain of a wildcard ceiling", `["a.example.com"]`, ""},
		{"a deeper wildcard under a wildcard ceiling", `["*.b.example.com", "c.example.com:8443"]`, ""},
		{"a host with the ceiling's port", `["files.pythonhosted.org:443"]`, ""},
		{"a host the base policy allows", `["pypi.org"]`, ""},
		{"the bare domain of a wildcard ceiling", `["example.com"]`, "sandbox.net.allow host example.com is not within ceilings.net_hosts"},
		{"a host without the ceiling's port", `["files.pythonhosted.org"]`, "sandbox.net.allow host files.pythonhosted.org is not within ceilings.net_hosts"},
		{"another port than the ceiling's", `["files.pythonhosted.org:80"]`, "sandbox.net.allow host files.pythonhosted.org:80 is not within ceilings.net_hosts"},
		{"a look-alike suffix", `["notexample.com"]`, "sandbox.net.allow host notexample.com is not within ceilings.net_hosts"},
		{"a broader wildcard", `["*.com"]`, `host pattern too broad: "*.com"`},
		{"a wildcard over a wildcard DNS service", `["*.nip.io"]`, `host pattern too broad: "*.nip.io" would match every host under "nip.io", a wildcard DNS service`},
		{"a wildcard below a wildcard DNS service", `["*.x.sslip.io"]`, `every host under "sslip.io", a wildcard DNS service`},
		{"a host under a wildcard ceiling, no public suffix between", `["ec2.amazonaws.com"]`, ""},
		{"a host across a public suffix below a wildcard ceiling", `["attacker.s3.amazonaws.com"]`, "sandbox.net.allow host attacker.s3.amazonaws.com is not within ceilings.net_hosts"},
		{"a wildcard across a public suffix below a wildcard ceiling", `["*.attacker.s3.amazonaws.com"]`, "sandbox.net.allow host *.attacker.s3.amazonaws.com is not within ceilings.net_hosts"},
		{"a non-canonical spelling", `["A.EXAMPLE.COM"]`, `"A.EXAMPLE.COM" is not written in canonical form; write "a.example.com"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(`{"type":"open_query","id":"o","sandbox_policy":{"net":{"enabled":true,"allow":` + tc.allow + `}}}`)
			if tc.violation == "" {
				if r["type"] != "query_opened" {
					t.Fatalf("open_query: %v", r)
				}
				return
			}
			v := fmt.Sprint(r["violations"])
			if r["code"] != "policy_override_rejected" || !strings.Contains(v, tc.violation) {
				t.Fatalf("open_query: %v; want policy_override_rejected with %q", r, tc.violation)
			}
		})
	}
}

// builtinPolicy allowlists, on purpose, hosts that the built-in blocks
// refuse whatever the policy says.
const builtinPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [WebFetch]
sandbox:
  net:
    enabled: true
    allow: ["169.254.169.254", "metadata.google.internal", "[fd00:ec2::254]", "api.anthropic.com", "*.openai.azure.com",
            "10.0.0.1", "[fd12::1]:8443", "0.0.0.0", "pypi.org", "127.0.0.1.nip.io"]
    deny: []
`

// TestWebFetchBuiltinBlocks sends WebFetch calls to hosts the egress proxy
// refuses every sandbox whatever its policy says, through the real sidecar:
// the gate applies the proxy's own tables and address classification
// (internal/nethost.CheckBuiltin) to the host and port WebFetch fetches, in
// every spelling, and denies by net.metadata, net.model_vendor and
// net.private_address even when net.allow names the host: an allowlist
// entry never opens a metadata address or a model vendor's API.
func TestWebFetchBuiltinBlocks(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: builtinPolicy})
	c := h.connect(t)
	q := c.open("")
	const meta, vendor, private = "net.metadata", "net.model_vendor", "net.private_address"
	tests := []fetchCase{
		{"the AWS metadata address, allowlisted", "https://169.254.169.254/latest/meta-data/", "deny", meta, "WebFetch: host 169.254.169.254 is a cloud metadata endpoint, which no policy can allow"},
		{"the metadata address over http", "http://169.254.169.254/latest/meta-data/", "deny", meta, "host 169.254.169.254 "},
		{"the metadata address as one hex number", "https://0xa9fea9fe/", "deny", meta, "host 169.254.169.254 "},
		{"the metadata address in octal parts", "https://0251.0376.0251.0376/", "deny", meta, "host 169.254.169.254 "},
		{"the metadata address as mapped IPv6", "https://[::ffff:a9fe:a9fe]/", "deny", meta, "host 169.254.169.254 "},
		{"the metadata address through NAT64", "https://[64:ff9b::a9fe:a9fe]/", "deny", meta, "host 64:ff9b::a9fe:a9fe "},
		{"the metadata address in full-width digits", "https://１６９.２５４.１６９.２５４/", "deny", meta, "host 169.254.169.254 "},
		{"the AWS IPv6 metadata address, allowlisted", "https://[fd00:ec2::254]/", "deny", meta, "host fd00:ec2::254 "},
		{"the ECS task metadata address, not allowlisted", "http://169.254.170.2/v2/credentials", "deny", meta, "host 169.254.170.2 "},
		{"the Alibaba metadata address, not allowlisted", "http://100.100.100.200/latest/meta-data/", "deny", meta, ""},
		{"the GCP metadata name, allowlisted", "http://metadata.google.internal/computeMetadata/v1/", "deny", meta, "host metadata.google.internal "},
		{"the GCP metadata name in capitals with a trailing dot", "https://METADATA.Google.Internal./", "deny", meta, "host metadata.google.internal "},
		{"the bare metadata name", "http://metadata/", "deny", meta, "host metadata "},
		{"a model vendor, allowlisted", "https://api.anthropic.com/v1/messages", "deny", vendor, "WebFetch: host api.anthropic.com is a model vendor API (api.anthropic.com), which no policy can allow"},
		{"a model vendor in full-width letters", "https://ａｐｉ.anthropic.com/", "deny", vendor, "host api.anthropic.com "},
		{"a model vendor with a soft hyphen", "https://api.anthro\u00adpic.com/", "deny", vendor, "host api.anthropic.com "},
		{"a model vendor under an allowlisted wildcard", "https://mine.openai.azure.com/openai/deployments/x", "deny", vendor, "(*.openai.azure.com)"},
		{"a model vendor, not allowlisted", "https://bedrock-runtime.us-east-1.amazonaws.com/", "deny", vendor, "(bedrock-runtime.*.amazonaws.com)"},
		{"loopback, not allowlisted", "https://127.0.0.1/", "deny", private, `WebFetch: host 127.0.0.1 is a private, loopback or link-local address; allow it by listing "127.0.0.1:443" in sandbox.net.allow`},
		{"loopback in two parts on another port", "http://127.1:8080/", "deny", private, `listing "127.0.0.1:8080"`},
		{"loopback as one number", "https://2130706433/", "deny", private, "host 127.0.0.1 "},
		{"IPv6 loopback", "https://[::1]/", "deny", private, `listing "[::1]:443"`},
		{"IPv4-compatible loopback", "https://[::127.0.0.1]/", "deny", private, "host ::7f00:1 "},
		{"6to4 of loopback", "https://[2002:7f00:1::1]/", "deny", private, ""},
		{"a private address next to an allowlisted one", "https://10.0.0.2/", "deny", private, `listing "10.0.0.2:443"`},
		{"link-local", "https://169.254.1.1/", "deny", private, ""},
		{"CGNAT", "https://100.64.0.1/", "deny", private, ""},
		{"an allowlisted private IPv6 address on another port", "https://[fd12::1]/", "deny", private, `listing "[fd12::1]:443"`},
		{"the unspecified address, allowlisted", "https://0.0.0.0/", "deny", private, "unspecified, multicast or broadcast address, which no policy can allow"},
		{"the unspecified address as zero", "https://0/", "deny", private, "host 0.0.0.0 "},
		{"multicast", "https://224.0.0.1/", "deny", private, "unspecified, multicast or broadcast"},
		{"broadcast", "https://255.255.255.255/", "deny", private, ""},
		{"an allowlisted private address", "https://10.0.0.1/", "allow", "net.host_allowed", "host 10.0.0.1 "},
		{"an allowlisted private address in octal", "https://012.0.0.1/", "allow", "net.host_allowed", "host 10.0.0.1 "},
		{"an allowlisted private IPv6 address on its port", "https://[fd12::1]:8443/", "allow", "net.host_allowed", ""},
		{"a public address, not allowlisted", "https://93.184.215.14/", "deny", "net.host_not_allowed", "host 93.184.215.14 (port 443)"},
		{"an ordinary allowlisted name", "https://pypi.org/simple/", "allow", "net.host_allowed", ""},
		// The documented limit: the agent process resolves the names WebFetch
		// fetches, the sidecar does not; a name that resolves privately is
		// judged by the allow list alone (the egress proxy resolves, and
		// refuses it, for sandboxes).
		{"an allowlisted name that resolves to loopback", "https://127.0.0.1.nip.io/", "allow", "net.host_allowed", ""},
	}
	c.checkFetches(t, q, tests)
}
