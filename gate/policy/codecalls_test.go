package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

const codeCallsPolicy = minimal + `code_calls:
  callable:
    crm: [get_*, list_customers]
    billing: ["*"]
  max_calls: 100
  timeout: 20s
`

func TestCodeCallsDefaults(t *testing.T) {
	t.Parallel()
	p, err := decode(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.CodeCalls.Callable) != 0 {
		t.Errorf("callable = %v; the default is no tool at all", p.CodeCalls.Callable)
	}
	want := runner.CallLimits{MaxCalls: 200, MaxInFlight: 4, MaxArgumentBytes: 256 << 10, MaxResultBytes: 1 << 20, Timeout: 30 * time.Second}
	if got := p.CodeCalls.Limits(); got != want {
		t.Errorf("limits = %+v, want %+v", got, want)
	}
}

func TestCodeCallsDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, wantErr string
	}{
		{name: "a server name that is no module name is refused", src: "code_calls:\n  callable:\n    CRM: [x]\n", wantErr: `p.yaml:5:10: code_calls.callable.CRM: server name "CRM"`},
		{name: "a glob with a character tool names lack is refused", src: "code_calls:\n  callable:\n    crm: [\"get/*\"]\n", wantErr: `code_calls.callable.crm[0]: "get/*" is not a tool name glob`},
		{name: "a glob listed twice is refused", src: "code_calls:\n  callable:\n    crm: [a, a]\n", wantErr: `code_calls.callable.crm[1]: "a" is listed twice`},
		{name: "a server listed twice is refused", src: "code_calls:\n  callable:\n    crm: [a]\n    crm: [b]\n", wantErr: `key "crm" appears twice`},
		{name: "an unknown key is refused", src: "code_calls:\n  max_call: 3\n", wantErr: `unknown key "max_call"`},
		{name: "callable must be a mapping", src: "code_calls:\n  callable: [a]\n", wantErr: `code_calls.callable: expected a mapping`},
		{name: "no call in flight is refused", src: "code_calls:\n  max_in_flight: 0\n", wantErr: `code_calls.max_in_flight: 0 is out of range: 1 to 64`},
		{name: "a result past the hard bound is refused", src: "code_calls:\n  max_result_bytes: 65m\n", wantErr: `code_calls.max_result_bytes: 65m is out of range: 1 to 64m`},
		{name: "a timeout of zero is refused", src: "code_calls:\n  timeout: 0s\n", wantErr: `code_calls.timeout: 0s is out of range`},
		{name: "a null callable is refused", src: "code_calls:\n  callable: null\n", wantErr: `null is not a value`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decode(t, minimal+tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
	p, err := decode(t, codeCallsPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.CodeCalls.Matching("crm", "get_invoice"); !slices.Equal(got, []string{"get_*"}) {
		t.Errorf("Matching(crm, get_invoice) = %v", got)
	}
	if got := p.CodeCalls.Matching("crm", "delete_customer"); len(got) != 0 {
		t.Errorf("Matching(crm, delete_customer) = %v, want none", got)
	}
	if got := p.CodeCalls.Matching("mail", "get_x"); len(got) != 0 {
		t.Errorf("a server the policy does not name matched %v", got)
	}
}

func TestMatchToolGlob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		glob, tool string
		want       bool
	}{
		{"get_user", "get_user", true},
		{"get_user", "get_users", false},
		{"get_*", "get_", true},
		{"get_*", "get_user", true},
		{"get_*", "xget_user", false},
		{"*_user", "get_user", true},
		{"*_user", "get_user_x", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "a_b_b_c", true},
		{"a*b*c", "acb", false},
		{"ab*ba", "aba", false}, // prefix and suffix may not overlap
		{"*", "", true},
		{"*", "anything.at-all", true},
		{"get.*", "getX", false}, // "." is no wildcard
	} {
		if got := policy.MatchToolGlob(tc.glob, tc.tool); got != tc.want {
			t.Errorf("MatchToolGlob(%q, %q) = %v, want %v", tc.glob, tc.tool, got, tc.want)
		}
	}
}

func TestCodeCallsOverrideOnlyNarrows(t *testing.T) {
	t.Parallel()
	base, err := decode(t, codeCallsPolicy)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, raw, wantErr string
		check              func(t *testing.T, c policy.CodeCalls)
	}{
		{name: "no code_calls key keeps the policy's section", raw: `{"proc":{"cpus":0.5}}`, check: func(t *testing.T, c policy.CodeCalls) {
			if len(c.Callable) != 2 || c.MaxCalls != 100 {
				t.Errorf("code_calls = %+v", c)
			}
		}},
		{name: "fewer servers", raw: `{"code_calls":{"callable":{"crm":["get_*"]}}}`, check: func(t *testing.T, c policy.CodeCalls) {
			if len(c.Callable) != 1 || !slices.Equal(c.Callable["crm"], []string{"get_*"}) {
				t.Errorf("callable = %v", c.Callable)
			}
		}},
		{name: "an exact tool a policy glob matches", raw: `{"code_calls":{"callable":{"crm":["get_invoice"],"billing":["refund"]}}}`, check: func(t *testing.T, c policy.CodeCalls) {
			if len(c.Matching("crm", "get_user")) != 0 || len(c.Matching("crm", "get_invoice")) != 1 || len(c.Matching("billing", "refund")) != 1 {
				t.Errorf("callable = %v", c.Callable)
			}
		}},
		{name: "an empty callable map calls nothing", raw: `{"code_calls":{"callable":{}}}`, check: func(t *testing.T, c policy.CodeCalls) {
			if len(c.Callable) != 0 {
				t.Errorf("callable = %v", c.Callable)
			}
		}},
		{name: "lower bounds, callable kept", raw: `{"code_calls":{"max_calls":5,"timeout":"1s","max_result_bytes":"64k"}}`, check: func(t *testing.T, c policy.CodeCalls) {
			if c.MaxCalls != 5 || c.Timeout.Std() != time.Second || c.MaxResultBytes != 64<<10 || len(c.Callable) != 2 {
				t.Errorf("code_calls = %+v", c)
			}
		}},
		{name: "a server the policy does not name is refused", raw: `{"code_calls":{"callable":{"mail":["send"]}}}`, wantErr: `sandbox_policy:1:35: code_calls.callable.mail: server "mail" has no callable tools in the policy`},
		{name: "a tool no policy glob matches is refused", raw: `{"code_calls":{"callable":{"crm":["delete_customer"]}}}`, wantErr: `code_calls.callable.crm[0]: "delete_customer" widens code_calls.callable.crm`},
		{name: "a wider glob is refused", raw: `{"code_calls":{"callable":{"crm":["*"]}}}`, wantErr: `"*" widens code_calls.callable.crm`},
		{name: "a narrower glob not in the policy is refused too", raw: `{"code_calls":{"callable":{"crm":["get_user_*"]}}}`, wantErr: `"get_user_*" widens`},
		{name: "a glob of another server is refused", raw: `{"code_calls":{"callable":{"crm":["get_*","*"]}}}`, wantErr: `code_calls.callable.crm[1]: "*" widens`},
		{name: "a raised bound is refused naming the field", raw: `{"code_calls":{"max_calls":101}}`, wantErr: `code_calls.max_calls: 101 exceeds the policy's 100: an override may only lower it`},
		{name: "a raised timeout is refused naming the field", raw: `{"code_calls":{"timeout":"21s"}}`, wantErr: `code_calls.timeout: 21s exceeds the policy's 20s`},
		{name: "a raised in-flight bound is refused", raw: `{"code_calls":{"max_in_flight":5}}`, wantErr: `code_calls.max_in_flight: 5 exceeds the policy's 4`},
		{name: "code_calls twice is refused", raw: `{"code_calls":{"max_calls":1},"code_calls":{"max_calls":2}}`, wantErr: `key "code_calls" appears twice`},
		{name: "an unknown key in code_calls is refused", raw: `{"code_calls":{"callable_tools":{}}}`, wantErr: `code_calls.callable_tools: unknown key`},
		{name: "sandbox and code_calls problems are reported together", raw: `{"proc":{"user":0},"code_calls":{"max_calls":1000}}`, wantErr: `uid 0 (root) is never allowed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, c, err := base.QueryOverride([]byte(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
	if len(base.CodeCalls.Callable) != 2 || !slices.Equal(base.CodeCalls.Callable["crm"], []string{"get_*", "list_customers"}) {
		t.Errorf("an override changed the base: %v", base.CodeCalls.Callable)
	}
	// Both problems of a mixed override are reported.
	_, _, err = base.QueryOverride([]byte(`{"proc":{"user":0},"code_calls":{"max_calls":1000}}`))
	if msgs := problems(t, err); len(msgs) != 2 {
		t.Errorf("problems = %q, want the uid and max_calls", msgs)
	}
}

// FuzzQueryOverride: an override never panics the decoder, a refused one
// is an *Error with problems, and an accepted one never widens code_calls:
// every tool its globs match (a sample: each glob with * written as x, and
// as nothing) the policy's globs match too, and no bound rises.
func FuzzQueryOverride(f *testing.F) {
	f.Add([]byte(`{"code_calls":{"callable":{"crm":["get_invoice"]},"max_calls":3}}`))
	f.Add([]byte(`{"code_calls":{"callable":{"crm":["get_*"],"billing":["*"]}}}`))
	f.Add([]byte(`{"proc":{"cpus":0.5},"code_calls":{"timeout":"1s"}}`))
	f.Add([]byte(`{"code_calls":{"callable":{}}}`))
	f.Add([]byte(`code_calls: {callable: {crm: [list_customers]}}`))
	base, err := policy.Decode("p.yaml", []byte(codeCallsPolicy), "/etc/gatekeeper")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, c, err := base.QueryOverride(raw)
		if err != nil {
			var pe *policy.Error
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %v is not an *Error with problems", err)
			}
			return
		}
		for server, globs := range c.Callable {
			for _, g := range globs {
				for _, tool := range []string{strings.ReplaceAll(g, "*", "x"), strings.ReplaceAll(g, "*", "")} {
					if len(base.CodeCalls.Matching(server, tool)) == 0 {
						t.Fatalf("override %q lets code call %s.%s, which the policy does not", raw, server, tool)
					}
				}
			}
		}
		b := base.CodeCalls
		if c.MaxCalls > b.MaxCalls || c.MaxInFlight > b.MaxInFlight || c.MaxArgumentBytes > b.MaxArgumentBytes || c.MaxResultBytes > b.MaxResultBytes || c.Timeout > b.Timeout {
			t.Fatalf("override %q raised a bound: %+v over %+v", raw, c, b)
		}
	})
}
