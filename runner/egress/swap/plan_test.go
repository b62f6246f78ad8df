package swap

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	const S = ghSentinel
	cases := []struct {
		name     string
		req      *http.Request
		host     string
		body     string
		complete bool
		want     []string
		rule     string
		where    string // a phrase the refusal's reason must hold
	}{
		{name: "a header sentinel to its host is injected",
			req: request("GET", "https://api.github.com/user", "Authorization: Bearer "+S), host: "api.github.com", want: []string{"github"}},
		{name: "a host with its port matches a pattern without one",
			req: request("GET", "https://github.com/x", "Authorization: token "+S), host: "github.com:443", want: []string{"github"}},
		{name: "a header sentinel to another host is refused",
			req: request("GET", "https://evil.example.org/", "Authorization: Bearer "+S), host: "evil.example.org", rule: RuleWrongHost, where: "header Authorization"},
		{name: "a sentinel in a subdomain of its host is refused",
			req: request("GET", "https://x.api.github.com/", "Authorization: Bearer "+S), host: "x.api.github.com", rule: RuleWrongHost},
		{name: "a host that does not parse is no secret's host",
			req: request("GET", "https://api.github.com/", "Authorization: Bearer "+S), host: "api github com", rule: RuleWrongHost},
		{name: "a sentinel in the path is misplaced",
			req: request("GET", "https://api.github.com/repos/"+S, "Authorization: Bearer "+S), host: "api.github.com", rule: RuleMisplaced, where: "the path"},
		{name: "a percent-encoded sentinel in the path is misplaced",
			req: request("GET", "https://api.github.com/x/%67"+S[1:], "Authorization: Bearer "+S), host: "api.github.com", rule: RuleMisplaced, where: "the path"},
		{name: "a percent-encoded sentinel in the query is misplaced",
			req: request("GET", "https://api.github.com/x?q=%67"+S[1:], "Authorization: Bearer "+S), host: "api.github.com", rule: RuleMisplaced, where: `query parameter "q"`},
		{name: "a sentinel in another header is misplaced",
			req: request("GET", "https://api.github.com/", "Authorization: Bearer "+S, "X-Debug: "+S), host: "api.github.com", rule: RuleMisplaced, where: "header X-Debug"},
		{name: "a sentinel as a header name is misplaced",
			req: request("GET", "https://api.github.com/", "Authorization: Bearer "+S, "X-"+S+": 1"), host: "api.github.com", rule: RuleMisplaced, where: "the name of a header"},
		{name: "a sentinel in the body of a header secret is misplaced",
			req: request("POST", "https://api.github.com/", "Authorization: Bearer "+S), host: "api.github.com", body: `{"t":"` + S + `"}`, complete: true, rule: RuleMisplaced, where: "the body"},
		{name: "a header secret's sentinel inside Basic credentials is misplaced",
			req: request("GET", "https://api.github.com/", "Authorization: "+basic("x", S)), host: "api.github.com", rule: RuleMisplaced, where: "password of the Basic credentials"},
		{name: "a required secret's request without its header is refused",
			req: request("GET", "https://api.github.com/"), host: "api.github.com", rule: RuleRequired, where: "header Authorization"},
		{name: "a required secret's request with a credential of its own is refused",
			req: request("GET", "https://api.github.com/", "Authorization: Bearer ghp_mine"), host: "api.github.com", rule: RuleRequired},
		{name: "a required secret's request with the sentinel misplaced is misplaced, not missing",
			req: request("GET", "https://api.github.com/?t="+S), host: "api.github.com", rule: RuleMisplaced, where: `query parameter "t"`},
		{name: "a required secret does not bind other hosts",
			req: request("GET", "https://pypi.example.com/simple/"), host: "pypi.example.com", want: nil},

		{name: "a Basic password sentinel is injected",
			req: request("GET", "https://pypi.example.com/simple/", "Authorization: "+basic("__token__", pypiSentinel)), host: "pypi.example.com", want: []string{"pypi"}},
		{name: "a Basic scheme in lower case and without padding is read",
			req: request("GET", "https://pypi.example.com/", "Authorization: basic "+strings.TrimRight(basic("u", pypiSentinel)[6:], "=")), host: "pypi.example.com", want: []string{"pypi"}},
		{name: "a Basic password sentinel in the user is misplaced",
			req: request("GET", "https://pypi.example.com/", "Authorization: "+basic(pypiSentinel, "x")), host: "pypi.example.com", rule: RuleMisplaced, where: "the user of the Basic credentials"},
		{name: "a Basic sentinel in Proxy-Authorization is misplaced",
			req: request("GET", "https://pypi.example.com/", "Proxy-Authorization: "+basic("u", pypiSentinel)), host: "pypi.example.com", rule: RuleMisplaced, where: "Proxy-Authorization"},
		{name: "a Basic sentinel not base64-encoded is misplaced",
			req: request("GET", "https://pypi.example.com/", "Authorization: Bearer "+pypiSentinel), host: "pypi.example.com", rule: RuleMisplaced, where: "header Authorization"},
		{name: "a Basic sentinel to another host is refused",
			req: request("GET", "https://api.github.com/", "Authorization: "+basic("u", pypiSentinel)), host: "api.github.com", rule: RuleWrongHost, where: "password of the Basic"},
		{name: "an either sentinel in the user is injected",
			req: request("GET", "https://git.example.com:8443/r.git", "Authorization: "+basic(gitSentinel, "x-oauth-basic")), host: "git.example.com:8443", want: []string{"git"}},
		{name: "an either sentinel in the password is injected",
			req: request("GET", "https://git.example.com:8443/r.git", "Authorization: "+basic("oauth2", gitSentinel)), host: "git.example.com:8443", want: []string{"git"}},
		{name: "a host pattern's port is its port",
			req: request("GET", "https://git.example.com/r.git", "Authorization: "+basic("oauth2", gitSentinel)), host: "git.example.com", rule: RuleWrongHost},

		{name: "a query sentinel is injected",
			req: request("GET", "https://registry.example.com/pkg?access_token="+npmSentinel), host: "registry.example.com", want: []string{"npm"}},
		{name: "a percent-encoded query sentinel is injected",
			req: request("GET", "https://registry.example.com/pkg?a=1&access_token=%67"+npmSentinel[1:]), host: "registry.example.com", want: []string{"npm"}},
		{name: "a query sentinel in another parameter is misplaced",
			req: request("GET", "https://registry.example.com/pkg?token="+npmSentinel), host: "registry.example.com", rule: RuleMisplaced, where: `query parameter "token"`},
		{name: "a query sentinel as a parameter name is misplaced",
			req: request("GET", "https://registry.example.com/pkg?"+npmSentinel+"=1"), host: "registry.example.com", rule: RuleMisplaced, where: "the name of a query parameter"},
		{name: "a query sentinel after a semicolon is in the parameter before it",
			req: request("GET", "https://registry.example.com/pkg?a=1;access_token="+npmSentinel), host: "registry.example.com", rule: RuleMisplaced, where: `query parameter "a"`},
		{name: "a query sentinel in the fragment is misplaced",
			req: func() *http.Request {
				r := request("GET", "https://registry.example.com/pkg?access_token="+npmSentinel)
				r.URL.Fragment = npmSentinel
				return r
			}(), host: "registry.example.com", rule: RuleMisplaced, where: "the fragment"},
		{name: "a sentinel in the URL's user info is misplaced",
			req: request("GET", "https://u:"+npmSentinel+"@registry.example.com/"), host: "registry.example.com", rule: RuleMisplaced, where: "user info"},
		{name: "a header sentinel in a trailer of that name is misplaced",
			req: func() *http.Request {
				r := request("POST", "https://api.github.com/", "Authorization: Bearer "+S)
				r.Trailer = http.Header{"Authorization": {"Bearer " + S}}
				return r
			}(), host: "api.github.com", rule: RuleMisplaced, where: "trailer Authorization"},
		{name: "an either sentinel in the user with no password is injected",
			req: request("GET", "https://git.example.com:8443/r.git", "Authorization: "+basic(gitSentinel, "")), host: "git.example.com:8443", want: []string{"git"}},
		{name: "a Basic password sentinel with no user is injected",
			req: request("GET", "https://pypi.example.com/", "Authorization: "+basic("", pypiSentinel)), host: "pypi.example.com", want: []string{"pypi"}},
		{name: "a sentinel in a trailer is misplaced",
			req: func() *http.Request {
				r := request("POST", "https://registry.example.com/?access_token="+npmSentinel)
				r.Trailer = http.Header{"X-Sum": {npmSentinel}}
				return r
			}(), host: "registry.example.com", rule: RuleMisplaced, where: "trailer X-Sum"},

		{name: "a body sentinel is injected",
			req: request("POST", "https://a.upload.example.com/"), host: "a.upload.example.com", body: "name=x&key=" + formSentinel, complete: true, want: []string{"form"}},
		{name: "a body sentinel in a binary body is injected",
			req: request("POST", "https://a.upload.example.com/"), host: "a.upload.example.com", body: "\x00\xff\xfe" + formSentinel + "\x00", complete: true, want: []string{"form"}},
		{name: "a body sentinel to another host is refused",
			req: request("POST", "https://api.github.com/", "Authorization: Bearer "+S), host: "api.github.com", body: formSentinel, complete: true, rule: RuleWrongHost, where: "the body"},
		{name: "a body sentinel in a header is misplaced",
			req: request("POST", "https://a.upload.example.com/", "X-Key: "+formSentinel), host: "a.upload.example.com", body: formSentinel, complete: true, rule: RuleMisplaced, where: "header X-Key"},
		{name: "a required body secret missing from a preview is not yet refused",
			req: request("POST", "https://a.upload.example.com/"), host: "a.upload.example.com", body: "first bytes", complete: false, want: nil},
		{name: "a required body secret missing from a whole body is refused",
			req: request("POST", "https://a.upload.example.com/"), host: "a.upload.example.com", body: "all of it", complete: true, rule: RuleRequired, where: "body"},

		{name: "a header secret's sentinel to a body secret's host is refused",
			req: request("GET", "https://a.upload.example.com/", "Authorization: Bearer "+S), host: "a.upload.example.com", rule: RuleWrongHost},
		{name: "a wrong host wins over a misplaced sentinel",
			req: request("GET", "https://registry.example.com/?x="+npmSentinel, "X: "+pypiSentinel), host: "registry.example.com", rule: RuleWrongHost, where: "header X"},
		{name: "a request without sentinels to a host no secret takes is planned empty",
			req: request("GET", "https://example.org/", "Authorization: Bearer mine"), host: "example.org", want: nil},
	}
	s := newTestSet(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			names, r := s.Plan(tc.req, tc.host, []byte(tc.body), tc.complete)
			if tc.rule == "" {
				if r != nil {
					t.Fatalf("Plan refused: %v", r)
				}
				if !slices.Equal(names, tc.want) {
					t.Fatalf("Plan = %q, want %q", names, tc.want)
				}
				return
			}
			if r == nil {
				t.Fatalf("Plan = %q, want a refusal %s", names, tc.rule)
			}
			if r.Rule != tc.rule || !strings.Contains(r.Reason, tc.where) {
				t.Fatalf("Plan refused %v, want rule %s with %q in the reason", r, tc.rule, tc.where)
			}
			if names != nil {
				t.Errorf("a refusal came with names %q", names)
			}
			for _, sen := range testSentinels() {
				if strings.Contains(r.Error(), sen) {
					t.Errorf("refusal %q holds a sentinel", r.Error())
				}
			}
			noValue(t, "refusal", r.Error())
		})
	}
}

func TestPlanInjectsSeveralSecrets(t *testing.T) {
	t.Parallel()
	secrets := []runner.Secret{
		{Name: "key", Hosts: []string{"api.example.com"}, Inject: runner.SecretPlace{Header: "X-Api-Key"}, Value: runner.NewHidden("key-value-0123456789")},
		{Name: "tok", Hosts: []string{"api.example.com"}, Inject: runner.SecretPlace{Query: "token"}, Require: true, Value: runner.NewHidden("tok-value-0123456789")},
		{Name: "body", Hosts: []string{"api.example.com"}, Inject: runner.SecretPlace{Body: true}, Value: runner.NewHidden("body-value-0123456789")},
	}
	sent := map[string]string{"key": "gksentinel_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "tok": "gksentinel_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "body": "gksentinel_cccccccccccccccccccccccccccccccc"}
	s, err := New(secrets, sent)
	if err != nil {
		t.Fatal(err)
	}
	r := request("POST", "https://api.example.com/v1?token="+sent["tok"], "X-Api-Key: "+sent["key"])
	body := []byte(`{"k":"` + sent["body"] + `"}`)
	names, ref := s.Plan(r, "api.example.com", body, true)
	if ref != nil || !slices.Equal(names, []string{"key", "tok", "body"}) {
		t.Fatalf("Plan = %q, %v; want all three", names, ref)
	}
	if !s.BodyPlaced(names) || s.BodyPlaced(names[:2]) {
		t.Errorf("BodyPlaced(%q) = %v, (%q) = %v", names, s.BodyPlaced(names), names[:2], s.BodyPlaced(names[:2]))
	}
	s.Inject(r, names)
	body = s.InjectBody(body, names)
	if got := r.Header.Get("X-Api-Key"); got != "key-value-0123456789" {
		t.Errorf("X-Api-Key = %q", got)
	}
	if got := r.URL.Query().Get("token"); got != "tok-value-0123456789" {
		t.Errorf("token = %q", got)
	}
	if string(body) != `{"k":"body-value-0123456789"}` {
		t.Errorf("body = %q", body)
	}
	// The same request without the required query sentinel is refused.
	r2 := request("POST", "https://api.example.com/v1", "X-Api-Key: "+sent["key"])
	if _, ref := s.Plan(r2, "api.example.com", nil, true); ref == nil || ref.Rule != RuleRequired || !strings.Contains(ref.Reason, `"tok"`) {
		t.Errorf("Plan without the required sentinel = %v, want %s for tok", ref, RuleRequired)
	}
}

func TestPlaintext(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	cases := []struct {
		name  string
		req   *http.Request
		body  string
		where string // "" for no refusal
	}{
		{name: "no sentinel passes", req: request("GET", "http://api.github.com/", "Authorization: Bearer mine")},
		{name: "a header sentinel is refused", req: request("GET", "http://api.github.com/", "Authorization: Bearer "+ghSentinel), where: "header Authorization"},
		{name: "a Basic sentinel is refused", req: request("GET", "http://pypi.example.com/", "Authorization: "+basic("u", pypiSentinel)), where: "Basic"},
		{name: "a query sentinel is refused", req: request("GET", "http://registry.example.com/?access_token="+npmSentinel), where: "query parameter"},
		{name: "a body sentinel is refused", req: request("POST", "http://a.upload.example.com/"), body: "x" + formSentinel, where: "the body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.Plaintext(tc.req, []byte(tc.body))
			switch {
			case tc.where == "" && r != nil:
				t.Fatalf("Plaintext refused: %v", r)
			case tc.where == "":
			case r == nil:
				t.Fatal("Plaintext passed a sentinel")
			case r.Rule != RulePlaintext || !strings.Contains(r.Reason, tc.where):
				t.Fatalf("Plaintext = %v, want %s with %q", r, RulePlaintext, tc.where)
			}
		})
	}
}

func TestBuffersBodyAndCheckBodySize(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	for host, want := range map[string]bool{
		"a.upload.example.com": true, "a.upload.example.com:8443": true, "upload.example.com": false, "api.github.com": false, "": false,
	} {
		if got := s.BuffersBody(host); got != want {
			t.Errorf("BuffersBody(%q) = %v, want %v", host, got, want)
		}
	}
	if r := CheckBodySize(MaxBody); r != nil {
		t.Errorf("CheckBodySize(MaxBody) = %v", r)
	}
	if r := CheckBodySize(MaxBody + 1); r == nil || r.Rule != RuleBodyTooLarge {
		t.Errorf("CheckBodySize(MaxBody+1) = %v, want %s", r, RuleBodyTooLarge)
	}
}

func TestPlanBasicUser(t *testing.T) {
	t.Parallel()
	const sen = "gksentinel_dddddddddddddddddddddddddddddddd"
	s, err := New([]runner.Secret{{Name: "u", Hosts: []string{"git.example.com"}, Inject: runner.SecretPlace{Basic: runner.BasicUser}, Value: runner.NewHidden("user-token-0123456789")}},
		map[string]string{"u": sen})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, password, rule string
	}{
		{user: sen, password: ""},
		{user: sen, password: "x-oauth-basic"},
		{user: "x", password: sen, rule: RuleMisplaced},
	} {
		r := request("GET", "https://git.example.com/r.git", "Authorization: "+basic(tc.user, tc.password))
		names, ref := s.Plan(r, "git.example.com", nil, true)
		switch {
		case tc.rule == "" && (ref != nil || len(names) != 1):
			t.Errorf("user %q, password %q: Plan = %q, %v; want u injected", tc.user, tc.password, names, ref)
		case tc.rule != "" && (ref == nil || ref.Rule != tc.rule):
			t.Errorf("user %q, password %q: Plan = %q, %v; want %s", tc.user, tc.password, names, ref, tc.rule)
		case tc.rule == "":
			s.Inject(r, names)
			if u, p, _ := r.BasicAuth(); u != "user-token-0123456789" || p != tc.password {
				t.Errorf("after Inject: %q, %q", u, p)
			}
		}
	}
}

func TestPlanHostForms(t *testing.T) {
	t.Parallel()
	const sen = "gksentinel_eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
	s, err := New([]runner.Secret{{Name: "ip", Hosts: []string{"[::1]:8443", "10.0.0.1", "API.Example.com:8443"}, Inject: runner.SecretPlace{Header: "X-Key"}, Value: runner.NewHidden("ip-token-0123456789")}},
		map[string]string{"ip": sen})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"[::1]:8443": true, "::1": false, "[::1]": false, "[::1]:443": false,
		"10.0.0.1": true, "10.0.0.1:99": true, "0x0a.0.0.1:443": true,
		"api.example.com:8443": true, "API.EXAMPLE.COM.:8443": true, "api.example.com": false,
	} {
		r := request("GET", "https://x/", "X-Key: "+sen)
		names, ref := s.Plan(r, host, nil, true)
		if got := ref == nil && len(names) == 1; got != want {
			t.Errorf("Plan to %q = %q, %v; want injected %v", host, names, ref, want)
		}
		if !want && (ref == nil || ref.Rule != RuleWrongHost) {
			t.Errorf("Plan to %q = %v, want %s", host, ref, RuleWrongHost)
		}
	}
}
