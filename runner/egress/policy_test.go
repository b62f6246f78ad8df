package egress

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// TestDecide runs the whole policy, resolution included, without a
// network: nothing here is dialed.
func TestDecide(t *testing.T) {
	t.Parallel()
	everything := []string{
		"api.anthropic.com", "api.openai.com", "*.openai.azure.com", "*.amazonaws.com",
		"metadata.google.internal", "metadata", "169.254.169.254", "fd00:ec2::254",
		"100.100.100.200", "metadata-ip.test", "nat64-meta.test", "public.test", "*.example.com", "extra-vendor.example",
	}
	tests := []struct {
		name      string
		net       runner.Network
		hostport  string
		wantRule  string
		wantAddrs string // comma-separated, for an allow
	}{
		{"an allowlisted public name is allowed", runner.Network{Enabled: true, Allow: []string{"public.test"}},
			"public.test:443", RuleAllowlisted, "93.184.215.14"},
		{"a disabled network denies everything", runner.Network{Enabled: false, Allow: []string{"public.test"}},
			"public.test:443", RuleDisabled, ""},
		{"an unlisted name is denied", runner.Network{Enabled: true, Allow: []string{"public.test"}},
			"other.test:443", RuleNotAllowlisted, ""},
		{"an empty allow list denies everything", runner.Network{Enabled: true},
			"public.test:443", RuleNotAllowlisted, ""},
		{"a port-restricted pattern denies another port", runner.Network{Enabled: true, Allow: []string{"public.test:443"}},
			"public.test:80", RuleNotAllowlisted, ""},
		{"deny beats allow", runner.Network{Enabled: true, Allow: []string{"public.test"}, Deny: []string{"public.test"}},
			"public.test:443", RuleDenylisted, ""},
		{"a deny pattern applies to resolved addresses", runner.Network{Enabled: true, Allow: []string{"public.test"}, Deny: []string{"93.184.215.14"}},
			"public.test:443", RuleDenylisted, ""},
		{"a metadata name is denied even when allowlisted", runner.Network{Enabled: true, Allow: everything},
			"metadata.google.internal:80", RuleMetadata, ""},
		{"the bare metadata name is denied even when allowlisted", runner.Network{Enabled: true, Allow: everything},
			"metadata:80", RuleMetadata, ""},
		{"the metadata address is denied even when allowlisted", runner.Network{Enabled: true, Allow: everything},
			"169.254.169.254:80", RuleMetadata, ""},
		{"the IPv6 metadata address is denied even when allowlisted", runner.Network{Enabled: true, Allow: everything},
			"[fd00:ec2::254]:80", RuleMetadata, ""},
		{"a name resolving to the metadata address is denied", runner.Network{Enabled: true, Allow: everything},
			"metadata-ip.test:80", RuleMetadata, ""},
		{"a name resolving to NAT64 metadata is denied", runner.Network{Enabled: true, Allow: everything},
			"nat64-meta.test:80", RuleMetadata, ""},
		{"a vendor API is denied even when allowlisted", runner.Network{Enabled: true, Allow: everything},
			"api.anthropic.com:443", RuleModelVendor, ""},
		{"an Azure OpenAI host is denied even when allowlisted", runner.Network{Enabled: true, Allow: everything},
			"me.openai.azure.com:443", RuleModelVendor, ""},
		{"a Bedrock runtime host is denied even when allowlisted", runner.Network{Enabled: true, Allow: everything},
			"bedrock-runtime.eu-west-1.amazonaws.com:443", RuleModelVendor, ""},
		{"an extra vendor host is denied even when allowlisted", runner.Network{Enabled: true, Allow: everything},
			"extra-vendor.example:443", RuleModelVendor, ""},
		{"a name resolving to a private address is refused", runner.Network{Enabled: true, Allow: []string{"rebind.test"}},
			"rebind.test:80", RulePrivateAddress, ""},
		{"a name resolving to a private address is allowed with the literal", runner.Network{Enabled: true, Allow: []string{"rebind.test", "10.0.0.1"}},
			"rebind.test:80", RuleAllowlisted, "10.0.0.1"},
		{"a literal with another port does not allow the private address", runner.Network{Enabled: true, Allow: []string{"rebind.test", "10.0.0.1:8080"}},
			"rebind.test:80", RulePrivateAddress, ""},
		{"a literal with the same port allows the private address", runner.Network{Enabled: true, Allow: []string{"rebind.test", "10.0.0.1:80"}},
			"rebind.test:80", RuleAllowlisted, "10.0.0.1"},
		{"one private address among public ones refuses the name", runner.Network{Enabled: true, Allow: []string{"public-mixed.test"}},
			"public-mixed.test:443", RulePrivateAddress, ""},
		{"a private IP literal needs its own allow entry", runner.Network{Enabled: true, Allow: []string{"public.test", "rebind.test"}},
			"10.0.0.1:80", RuleNotAllowlisted, ""},
		{"an allowlisted private IP literal is allowed", runner.Network{Enabled: true, Allow: []string{"10.0.0.1"}},
			"10.0.0.1:80", RuleAllowlisted, "10.0.0.1"},
		{"a name resolving to the unspecified address is refused", runner.Network{Enabled: true, Allow: []string{"unspecified.test", "0.0.0.0"}},
			"unspecified.test:80", RulePrivateAddress, ""},
		{"an unresolvable name is refused", runner.Network{Enabled: true, Allow: []string{"nowhere.test"}},
			"nowhere.test:80", RuleUnresolvable, ""},
		{"a wildcard allows a subdomain", runner.Network{Enabled: true, Allow: []string{"*.example.com", "127.0.0.1"}},
			"a.b.example.com:443", RuleAllowlisted, "127.0.0.1"},
		{"a wildcard does not reach across a public suffix below it", runner.Network{Enabled: true, Allow: []string{"*.amazonaws.com", "127.0.0.1"}},
			"attacker.s3.amazonaws.com:443", RuleNotAllowlisted, ""},
		{"a wildcard does not allow the bare domain", runner.Network{Enabled: true, Allow: []string{"*.example.com", "127.0.0.1"}},
			"example.com:443", RuleNotAllowlisted, ""},
	}
	p, err := New(Config{Auditor: &recorder{}, Resolver: newResolver(testNames), Dialer: &loopbackDialer{}, ExtraVendorHosts: []string{"extra-vendor.example"}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			np, err := compileNetwork(tt.net)
			if err != nil {
				t.Fatalf("compileNetwork: %v", err)
			}
			host, port, err := nethost.SplitHostPort(tt.hostport, 0)
			if err != nil {
				t.Fatalf("SplitHostPort(%q): %v", tt.hostport, err)
			}
			v := p.decide(t.Context(), np, target{host: host, port: port})
			if v.rule != tt.wantRule {
				t.Fatalf("decide(%s) = %s (%s); want %s", tt.hostport, v.rule, v.reason, tt.wantRule)
			}
			if wantAllow := tt.wantRule == RuleAllowlisted; (v.decision == Allow) != wantAllow {
				t.Fatalf("decide(%s) decision %s with rule %s", tt.hostport, v.decision, v.rule)
			}
			var got []string
			for _, a := range v.addrs {
				got = append(got, a.String())
			}
			if strings.Join(got, ",") != tt.wantAddrs {
				t.Fatalf("decide(%s) addresses %v; want %s", tt.hostport, got, tt.wantAddrs)
			}
			if !strings.Contains(v.reason, host) {
				t.Fatalf("decide(%s) reason %q does not name the host", tt.hostport, v.reason)
			}
		})
	}
}

func TestDenialBodyNamesTheRuleAndTheHost(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Auditor: &recorder{}, Resolver: newResolver(testNames)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	np, err := compileNetwork(runner.Network{Enabled: true, Allow: []string{"allowed.test"}})
	if err != nil {
		t.Fatalf("compileNetwork: %v", err)
	}
	v := p.decide(t.Context(), np, target{host: "evil.example", port: 443})
	want := "gatekeeper egress denied: host \"evil.example:443\" is not in sandbox.net.allow (rule egress.not_allowlisted)\n"
	if got := v.body(); got != want {
		t.Fatalf("body %q; want %q", got, want)
	}
}

func TestCheckAddrsDialsOnlyWhatItChecked(t *testing.T) {
	t.Parallel()
	np, err := compileNetwork(runner.Network{Enabled: true, Allow: []string{"x.test", "127.0.0.1"}})
	if err != nil {
		t.Fatalf("compileNetwork: %v", err)
	}
	in := []netip.Addr{
		netip.MustParseAddr("::ffff:127.0.0.1"),
		netip.MustParseAddr("127.0.0.1"),
		netip.MustParseAddr("93.184.215.14"),
	}
	v := checkAddrs(np, target{host: "x.test", port: 80}, verdict{decision: Allow, rule: RuleAllowlisted}, in)
	want := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("93.184.215.14")}
	if v.decision != Allow || !slices.Equal(v.addrs, want) {
		t.Fatalf("checkAddrs = %s %v; want allow %v (unmapped, deduplicated, in order)", v.decision, v.addrs, want)
	}
}

func TestValidateNetworkReportsEveryBadPatternWithItsLocation(t *testing.T) {
	t.Parallel()
	err := ValidateNetwork(runner.Network{
		Enabled: true,
		Allow:   []string{"example.com", "*", "ok.example:443"},
		Deny:    []string{"a.*.b"},
	})
	if !errors.Is(err, nethost.ErrBadPattern) {
		t.Fatalf("ValidateNetwork: %v; want an error wrapping nethost.ErrBadPattern", err)
	}
	for _, want := range []string{"net.allow[1]", "net.deny[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateNetwork error %q does not name %s", err, want)
		}
	}
	if err := ValidateNetwork(runner.Network{Enabled: true, Allow: []string{"*.example.com", "[::1]:80"}}); err != nil {
		t.Errorf("ValidateNetwork of a good network: %v", err)
	}
}
