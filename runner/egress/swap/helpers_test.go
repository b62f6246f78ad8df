package swap

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// The test secrets' values and sentinels.
const (
	ghValue   = "ghp_R3alT0kenValue0123456789abcdef"
	pypiValue = "pypi-Pa55word/with+chars=="
	npmValue  = "npm_T0ken&with=query?chars"
	formValue = "form-S3cretInTheBody"
	gitValue  = "git_EitherPartToken"

	ghSentinel   = "gksentinel_00000000000000000000000000000001"
	pypiSentinel = "gksentinel_00000000000000000000000000000002"
	npmSentinel  = "gksentinel_00000000000000000000000000000003"
	formSentinel = "gksentinel_00000000000000000000000000000004"
	gitSentinel  = "gksentinel_00000000000000000000000000000005"
)

// testSecrets are one secret per place.
func testSecrets() []runner.Secret {
	return []runner.Secret{
		{Name: "github", Hosts: []string{"api.github.com", "github.com"}, Inject: runner.SecretPlace{Header: "Authorization"}, Require: true, Value: runner.NewHidden(ghValue)},
		{Name: "pypi", Hosts: []string{"pypi.example.com"}, Inject: runner.SecretPlace{Basic: runner.BasicPassword}, Value: runner.NewHidden(pypiValue)},
		{Name: "npm", Hosts: []string{"registry.example.com"}, Inject: runner.SecretPlace{Query: "access_token"}, Value: runner.NewHidden(npmValue)},
		{Name: "form", Hosts: []string{"*.upload.example.com"}, Inject: runner.SecretPlace{Body: true}, Require: true, Value: runner.NewHidden(formValue)},
		{Name: "git", Hosts: []string{"git.example.com:8443"}, Inject: runner.SecretPlace{Basic: runner.BasicEither}, Value: runner.NewHidden(gitValue)},
	}
}

// testSentinels are the test secrets' sentinels.
func testSentinels() map[string]string {
	return map[string]string{"github": ghSentinel, "pypi": pypiSentinel, "npm": npmSentinel, "form": formSentinel, "git": gitSentinel}
}

// allValues are every test secret's value.
var allValues = []string{ghValue, pypiValue, npmValue, formValue, gitValue}

// newTestSet compiles the test secrets.
func newTestSet(t testing.TB) *Set {
	t.Helper()
	s, err := New(testSecrets(), testSentinels())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// request builds a request to target with headers ("Name: value" lines).
func request(method, target string, headers ...string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		r.Header.Add(k, v)
	}
	return r
}

// basic returns a Basic Authorization value for user and password.
func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// chunks is a reader that returns its data in reads of the given sizes,
// cycling through them.
type chunks struct {
	data  []byte
	sizes []int
	i     int
}

// Read implements io.Reader.
func (c *chunks) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := c.sizes[c.i%len(c.sizes)]
	c.i++
	n = max(1, min(n, len(p), len(c.data)))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// noValue fails t when any test secret's value is in s.
func noValue(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range allValues {
		if strings.Contains(s, v) {
			t.Errorf("%s holds a secret's value: %q", what, s)
		}
	}
}

// asRefusal returns err as a *Refusal, failing t when it is not one.
func asRefusal(t *testing.T, err error) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v is not a *Refusal", err)
	}
	return r
}
