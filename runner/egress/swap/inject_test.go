package swap

import (
	"encoding/base64"
	"io"
	"strings"
	"testing"
)

func TestInject(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	cases := []struct {
		name      string
		target    string
		headers   []string
		host      string
		header    string // the header to check, or "" for the query
		want      string // its value after Inject, or the raw query
		wantBasic [2]string
	}{
		{name: "a header's sentinel is swapped in place",
			target: "https://api.github.com/", headers: []string{"Authorization: Bearer " + ghSentinel}, host: "api.github.com",
			header: "Authorization", want: "Bearer " + ghValue},
		{name: "a Basic password is swapped inside the base64",
			target: "https://pypi.example.com/simple/", headers: []string{"Authorization: " + basic("__token__", pypiSentinel)}, host: "pypi.example.com",
			header: "Authorization", wantBasic: [2]string{"__token__", pypiValue}},
		{name: "an either secret in the user is swapped there",
			target: "https://git.example.com:8443/r.git", headers: []string{"Authorization: " + basic(gitSentinel, "x-oauth-basic")}, host: "git.example.com:8443",
			header: "Authorization", wantBasic: [2]string{gitValue, "x-oauth-basic"}},
		{name: "an either secret in the password is swapped there",
			target: "https://git.example.com:8443/r.git", headers: []string{"Authorization: " + basic("oauth2", gitSentinel)}, host: "git.example.com:8443",
			header: "Authorization", wantBasic: [2]string{"oauth2", gitValue}},
		{name: "a query sentinel is swapped and encoded; other parameters keep their form",
			target: "https://registry.example.com/p?b=%7e+x&access_token=" + npmSentinel + "&c", host: "registry.example.com",
			want: "b=%7e+x&access_token=npm_T0ken%26with%3Dquery%3Fchars&c"},
		{name: "a percent-encoded query sentinel is swapped",
			target: "https://registry.example.com/p?access_token=pre%2D%67" + npmSentinel[1:], host: "registry.example.com",
			want: "access_token=pre-npm_T0ken%26with%3Dquery%3Fchars"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := request("GET", tc.target, tc.headers...)
			names, ref := s.Plan(r, tc.host, nil, true)
			if ref != nil || len(names) != 1 {
				t.Fatalf("Plan = %q, %v", names, ref)
			}
			s.Inject(r, names)
			switch {
			case tc.header == "":
				if r.URL.RawQuery != tc.want {
					t.Fatalf("query = %q, want %q", r.URL.RawQuery, tc.want)
				}
				if got := r.URL.Query().Get("access_token"); !strings.HasSuffix(got, npmValue) {
					t.Fatalf("access_token decodes to %q", got)
				}
			case tc.wantBasic != [2]string{}:
				u, p, ok := r.BasicAuth()
				if !ok || u != tc.wantBasic[0] || p != tc.wantBasic[1] {
					t.Fatalf("Basic = %q, %q, %v; want %q", u, p, ok, tc.wantBasic)
				}
			default:
				if got := r.Header.Get(tc.header); got != tc.want {
					t.Fatalf("%s = %q, want %q", tc.header, got, tc.want)
				}
			}
		})
	}
}

func TestInjectOnlyNamedSecretsInTheirPlace(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	r := request("GET", "https://api.github.com/?x=1", "Authorization: Bearer "+ghSentinel, "X-Other: "+pypiSentinel)
	s.Inject(r, nil)
	s.Inject(r, []string{"no-such-secret"})
	if got := r.Header.Get("Authorization"); got != "Bearer "+ghSentinel {
		t.Fatalf("Inject without the name swapped: %q", got)
	}
	s.Inject(r, []string{"github", "pypi"})
	if got := r.Header.Get("X-Other"); got != pypiSentinel {
		t.Errorf("a Basic secret was swapped in another header: %q", got)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+ghValue {
		t.Errorf("Authorization = %q", got)
	}
	if got := string(s.InjectBody([]byte(ghSentinel+formSentinel), []string{"github", "form"})); got != ghSentinel+formValue {
		t.Errorf("InjectBody swapped outside body secrets: %q", got)
	}
	in := []byte("x" + formSentinel)
	_ = s.InjectBody(in, []string{"form"})
	if string(in) != "x"+formSentinel {
		t.Errorf("InjectBody changed its argument: %q", in)
	}
}

func TestInjectedBasicCredentialsAreScrubbedWhole(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	r := request("GET", "https://pypi.example.com/", "Authorization: "+basic("__token__", pypiSentinel))
	names, _ := s.Plan(r, "pypi.example.com", nil, true)
	s.Inject(r, names)
	cred := strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
	if _, err := base64.StdEncoding.DecodeString(cred); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(s.Scrub(strings.NewReader("echo: Basic "+cred+"."), names))
	if err != nil || string(out) != "echo: Basic "+pypiSentinel+"." {
		t.Fatalf("Scrub = %q, %v; want the credential replaced whole", out, err)
	}
}
