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

// TestLookAlikeHostsInWebFetch sends WebFetch calls whose url spells a
// denied host in a way Node's URL parser (and so Claude Code's WebFetch)
// turns back into the denied host, through the real sidecar: each is
// judged as the host WebFetch will really fetch, by the egress proxy's own
// normalizer and matcher, and denied by net.host_denied. Before, the
// sidecar only lower-cased the host, so every such spelling was allowed by
// "*.example.com".
func TestLookAlikeHostsInWebFetch(t *testing.T) {
	t.Parallel()
	h := start(t, options{policy: netPolicy})
	c := h.connect(t)
	q := c.open("")
	tests := []struct {
		name, url, decision, rule, reasonHas string
	}{
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
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			input, err := json.Marshal(map[string]string{"url": tc.url, "prompt": "x"})
			must(t, err)
			r := c.decide(q, "WebFetch", string(input), "toolu_net", "")
			if r["decision"] != tc.decision || r["rule"] != tc.rule || !strings.Contains(r["reason"].(string), tc.reasonHas) {
				t.Fatalf("%q: got %v %v %q; want %s %s with %q", tc.url, r["decision"], r["rule"], r["reason"], tc.decision, tc.rule, tc.reasonHas)
			}
		})
	}
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
