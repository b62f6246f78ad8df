package swap

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Inject swaps the named secrets' sentinels in r for their values, each in
// its place only: a header's values; the user or password (or both, for
// "either") of the Basic credentials of Authorization, decoded and encoded
// again; the decoded values of a query parameter, encoded again (every
// other parameter keeps its form as sent). It rewrites r.URL.RawQuery and
// r.Header, not r.RequestURI. A body-placed secret is injected by
// InjectBody. names must come from Plan for this request, after the
// policy allowed it; a name the Set does not know is ignored.
func (s *Set) Inject(r *http.Request, names []string) {
	for _, c := range s.lookup(names) {
		switch {
		case c.place.Header != "":
			vs := r.Header[http.CanonicalHeaderKey(c.place.Header)]
			for i, v := range vs {
				vs[i] = strings.ReplaceAll(v, c.sentinel, c.value.Reveal())
			}
		case c.place.Basic != "":
			vs := r.Header["Authorization"]
			for i, v := range vs {
				if cred, ok := c.injectBasic(v); ok {
					vs[i] = "Basic " + cred
					c.remember(cred)
				}
			}
		case c.place.Query != "":
			if r.URL != nil {
				r.URL.RawQuery = c.injectQuery(r.URL.RawQuery)
			}
		}
	}
}

// injectBasic swaps c's sentinel in the Basic credentials v, in c's part,
// and returns the new credentials' base64; false when v is not Basic or
// holds no sentinel in that part.
func (c *secret) injectBasic(v string) (string, bool) {
	user, pw, ok := parseBasic(v)
	if !ok {
		return "", false
	}
	u2, p2 := user, pw
	if c.place.Basic == runner.BasicUser || c.place.Basic == runner.BasicEither {
		u2 = strings.ReplaceAll(user, c.sentinel, c.value.Reveal())
	}
	if c.place.Basic == runner.BasicPassword || c.place.Basic == runner.BasicEither {
		p2 = strings.ReplaceAll(pw, c.sentinel, c.value.Reveal())
	}
	if u2 == user && p2 == pw {
		return "", false
	}
	return base64.StdEncoding.EncodeToString([]byte(u2 + ":" + p2)), true
}

// injectQuery swaps c's sentinel in the values of c's query parameter.
func (c *secret) injectQuery(raw string) string {
	params := splitQuery(raw)
	if params == nil {
		return raw
	}
	pieces := make([]string, len(params))
	for i, q := range params {
		pieces[i] = q.raw
		if q.key == c.place.Query && q.decoded && strings.Contains(q.value, c.sentinel) {
			pieces[i] = q.rawKey + "=" + url.QueryEscape(strings.ReplaceAll(q.value, c.sentinel, c.value.Reveal()))
		}
	}
	return strings.Join(pieces, "&")
}

// InjectBody returns body with the sentinel of every named body-placed
// secret swapped for its value; body itself is not changed. The caller
// sets the request's Content-Length to the result's length. names must
// come from Plan with complete=true, after the policy allowed the request.
func (s *Set) InjectBody(body []byte, names []string) []byte {
	out := body
	for _, c := range s.lookup(names) {
		if c.place.Body {
			out = bytes.ReplaceAll(out, []byte(c.sentinel), []byte(c.value.Reveal()))
		}
	}
	return out
}

// BodyPlaced reports whether any of the named secrets is placed in the
// body: the request's body must then be read whole and passed to
// InjectBody.
func (s *Set) BodyPlaced(names []string) bool {
	for _, c := range s.lookup(names) {
		if c.place.Body {
			return true
		}
	}
	return false
}
