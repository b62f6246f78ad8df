package swap

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestScrubEveryFormAcrossEveryChunkSize(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	names := []string{"github", "pypi", "npm", "form", "git"}
	for _, c := range s.secrets {
		for _, form := range c.forms {
			in := "<<" + form + ">> and " + form
			want := "<<" + c.sentinel + ">> and " + c.sentinel
			for size := 1; size <= len(form)+1; size++ {
				for _, sizes := range [][]int{{size}, {size, 1}, {1, size, 2}} {
					got, err := io.ReadAll(s.Scrub(&chunks{data: []byte(in), sizes: sizes}, names))
					if err != nil || string(got) != want {
						t.Fatalf("secret %s, form %d bytes long, reads of %v: Scrub = %q, %v; want %q", c.name, len(form), sizes, got, err, want)
					}
				}
			}
		}
	}
}

func TestScrubForms(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	for _, v := range []string{ghValue, pypiValue, npmValue} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			for pre := range 3 {
				for post := range 3 {
					payload := strings.Repeat("p", pre) + v + strings.Repeat("s", post)
					in := `{"echo":"` + enc.EncodeToString([]byte(payload)) + `"}`
					got, err := io.ReadAll(s.Scrub(strings.NewReader(in), []string{"github", "pypi", "npm"}))
					if err != nil {
						t.Fatal(err)
					}
					if dec := decodeLoosely(enc, got); strings.Contains(dec, v) || strings.Contains(string(got), enc.EncodeToString([]byte(v))) {
						t.Errorf("base64 of the value with %d bytes before and %d after survives: %q", pre, post, got)
					}
					if !strings.Contains(string(got), "gksentinel_") {
						t.Errorf("no sentinel where the base64 of the value was: %q", got)
					}
				}
			}
		}
		for _, e := range []string{url.QueryEscape(v), url.PathEscape(v), lowerEscapes.Replace(url.QueryEscape(v))} {
			got, err := io.ReadAll(s.Scrub(strings.NewReader("https://x/?t="+e+"&u=1"), []string{"github", "pypi", "npm"}))
			if err != nil || strings.Contains(string(got), e) {
				t.Errorf("URL form %q survives: %q, %v", e, got, err)
			}
		}
	}
}

// lowerEscapes puts the test values' percent escapes in lower case.
var lowerEscapes = strings.NewReplacer("%2F", "%2f", "%2B", "%2b", "%3D", "%3d", "%26", "%26", "%3F", "%3f")

// decodeLoosely decodes the base64 inside b's JSON string, best effort.
func decodeLoosely(enc *base64.Encoding, b []byte) string {
	s := strings.TrimSuffix(strings.TrimPrefix(string(b), `{"echo":"`), `"}`)
	d, _ := enc.DecodeString(s)
	return string(d)
}

func TestScrubBinaryBodyInRandomChunks(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	names := []string{"github", "pypi", "npm", "form", "git"}
	rng := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, 300<<10)
	for i := range body {
		body[i] = byte(rng.IntN(256))
	}
	for i := 0; i < 200; i++ {
		c := s.secrets[rng.IntN(len(s.secrets))]
		f := c.forms[rng.IntN(len(c.forms))]
		at := rng.IntN(len(body) - len(f))
		copy(body[at:], f)
	}
	want, err := replaceAll(body, func() []pattern { r, _ := s.patterns(names); return r }())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range allValues {
		if bytes.Contains(want, []byte(v)) {
			t.Fatal("the reference output holds a value")
		}
	}
	for round := 0; round < 20; round++ {
		sizes := []int{1 + rng.IntN(7), 1 + rng.IntN(100), 1 + rng.IntN(70000)}
		got, err := io.ReadAll(s.Scrub(&chunks{data: bytes.Clone(body), sizes: sizes}, names))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("reads of %v: Scrub differs from one pass over the whole body (err %v)", sizes, err)
		}
	}
	got, err := io.ReadAll(iotest.OneByteReader(s.Scrub(bytes.NewReader(body), names)))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("one-byte reads of the scrubbed body: differs (err %v)", err)
	}
}

func TestScrubWithoutNamesPassesTheBody(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	in := strings.NewReader(ghValue)
	if r := s.Scrub(in, nil); r != io.Reader(in) {
		t.Fatal("Scrub without names wrapped the body")
	}
	got, _ := io.ReadAll(s.Scrub(strings.NewReader(ghValue+pypiValue), []string{"pypi"}))
	if string(got) != ghValue+pypiSentinel {
		t.Fatalf("Scrub touched a secret it was not named: %q", got)
	}
}

func TestScrubCutsAValueSpelledAcrossItsSentinel(t *testing.T) {
	t.Parallel()
	sentinel := "gksentinel_0123456789abcdef0123456789abcdef"
	value := "fXYZ-overlapping-value" // starts with the sentinel's last byte
	s, err := New([]runner.Secret{{Name: "o", Hosts: []string{"example.com"}, Inject: runner.SecretPlace{Header: "X"}, Value: runner.NewHidden(value)}},
		map[string]string{"o": sentinel})
	if err != nil {
		t.Fatal(err)
	}
	// One replacement leaves sentinel+value[1:], which spells the value.
	in := "a " + value + value[1:] + " b"
	got, err := io.ReadAll(s.Scrub(strings.NewReader(in), []string{"o"}))
	if !errors.Is(err, ErrUnscrubbable) {
		t.Fatalf("Scrub = %q, %v; want ErrUnscrubbable", got, err)
	}
	if strings.Contains(string(got), value) {
		t.Fatalf("Scrub emitted the value before it failed: %q", got)
	}
	h := http.Header{"Echo": {in}, "Other": {"fine"}}
	s.ScrubHeader(h, []string{"o"})
	if _, ok := h["Echo"]; ok || h.Get("Other") != "fine" {
		t.Fatalf("ScrubHeader = %v; want Echo deleted, Other kept", h)
	}
}

func TestScrubPassesASourceError(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	boom := errors.New("boom")
	src := io.MultiReader(strings.NewReader("ok "+ghValue[:5]), iotest.ErrReader(boom))
	got, err := io.ReadAll(s.Scrub(src, []string{"github"}))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if strings.Contains(string(got), ghValue[:5]) {
		t.Fatalf("a held-back partial value was emitted on the error: %q", got)
	}
}

func TestScrubHeader(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	h := http.Header{
		"Set-Cookie":       {"t=" + url.QueryEscape(npmValue) + "; Path=/", "plain"},
		"X-Echo-Auth":      {"Bearer " + ghValue},
		"Www-Authenticate": {"Basic " + base64.StdEncoding.EncodeToString([]byte("__token__:"+pypiValue))},
		"X-" + ghValue:     {"the name holds the value"},
		"X-Part":           {ghValue[:10]},
	}
	s.ScrubHeader(h, []string{"github", "pypi", "npm"})
	want := map[string]string{
		"Set-Cookie":  "t=" + npmSentinel + "; Path=/",
		"X-Echo-Auth": "Bearer " + ghSentinel,
		"X-Part":      ghValue[:10],
	}
	if _, ok := h["X-"+ghValue]; ok {
		t.Error("a header whose name holds the value was kept")
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if got := h.Get("Www-Authenticate"); strings.Contains(got, base64.StdEncoding.EncodeToString([]byte(pypiValue))[:8]) || !strings.Contains(got, pypiSentinel) {
		t.Errorf("Www-Authenticate = %q, want the encoded value replaced", got)
	}
	for k, vs := range h {
		for _, v := range vs {
			noValue(t, k, v)
		}
	}
}

func TestWatch(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	cases := []struct {
		name   string
		host   string
		body   string
		rule   string // "" when the body passes
		secret string
	}{
		{name: "a body without sentinels passes unchanged", host: "api.github.com", body: "\x00\x01binary\xff" + strings.Repeat("gksentinel_", 50)},
		{name: "a header secret's sentinel in a body to its host is misplaced", host: "api.github.com", body: "{" + ghSentinel + "}", rule: RuleMisplaced, secret: "github"},
		{name: "a sentinel to another host is refused", host: "example.org", body: "x=" + pypiSentinel, rule: RuleWrongHost, secret: "pypi"},
		{name: "a body secret's sentinel streamed past the buffered part is misplaced", host: "a.upload.example.com", body: "x" + formSentinel, rule: RuleMisplaced, secret: "form"},
		{name: "a body secret's sentinel to another host is refused", host: "api.github.com", body: formSentinel, rule: RuleWrongHost, secret: "form"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for size := 1; size <= len(ghSentinel)+1; size++ {
				got, err := io.ReadAll(s.Watch(&chunks{data: []byte(tc.body), sizes: []int{size}}, tc.host))
				if tc.rule == "" {
					if err != nil || string(got) != tc.body {
						t.Fatalf("reads of %d: Watch = %q, %v", size, got, err)
					}
					continue
				}
				r := asRefusal(t, err)
				if r.Rule != tc.rule || !strings.Contains(r.Reason, `"`+tc.secret+`"`) {
					t.Fatalf("reads of %d: Watch refused %v, want %s for %s", size, r, tc.rule, tc.secret)
				}
				if strings.Contains(string(got), "gksentinel_0") {
					t.Fatalf("reads of %d: Watch passed the sentinel on: %q", size, got)
				}
				noValue(t, "refusal", r.Error())
			}
		})
	}
}

func TestScrubJSONForms(t *testing.T) {
	t.Parallel()
	const value = "tök/en&<x>-0123456789"
	s, err := New([]runner.Secret{{Name: "j", Hosts: []string{"example.com"}, Inject: runner.SecretPlace{Body: true}, Value: runner.NewHidden(value)}},
		map[string]string{"j": formSentinel})
	if err != nil {
		t.Fatal(err)
	}
	goJSON, _ := json.Marshal(map[string]string{"v": value})
	for _, in := range []string{
		string(goJSON),                                        // Go: \u0026, \u003c, \u003e
		`{"v":"tök\/en&<x>-0123456789"}`,                      // PHP: \/
		`{"v": "t\u00f6k/en&<x>-0123456789"}`,                 // Python: \u00f6
		`{"v": "t\u00f6k\/en\u0026\u003cx\u003e-0123456789"}`, // all of them
	} {
		got, err := io.ReadAll(s.Scrub(strings.NewReader(in), []string{"j"}))
		if err != nil || !strings.Contains(string(got), formSentinel) {
			t.Errorf("Scrub(%s) = %q, %v; want the JSON form replaced", in, got, err)
		}
		var back map[string]string
		if json.Unmarshal(got, &back) == nil && strings.Contains(back["v"], "0123456789") {
			t.Errorf("Scrub(%s) = %q still decodes to the value", in, got)
		}
	}
}

func TestScrubAllNamesCatchesAStoredValue(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	if got := s.Names(); strings.Join(got, ",") != "github,pypi,npm,form,git" {
		t.Fatalf("Names = %q", got)
	}
	// A body secret injected into an earlier upload comes back in a later
	// response into which nothing was injected.
	got, err := io.ReadAll(s.Scrub(strings.NewReader(`{"stored":"`+formValue+`"}`), s.Names()))
	if err != nil || string(got) != `{"stored":"`+formSentinel+`"}` {
		t.Fatalf("Scrub with Names() = %q, %v", got, err)
	}
}
