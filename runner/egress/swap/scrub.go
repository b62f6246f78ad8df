package swap

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// scrubForms lists the spellings of c's value that Scrub replaces: the
// value; its URL encodings (query and path escaping, with upper and lower
// case hex); its JSON string forms (see jsonForms); its base64 (standard and URL alphabets) whole and padded, and
// as it appears inside a longer base64 text at each of the three
// alignments (the characters that depend on the value alone). A form the
// sentinels themselves spell is left out (New refuses a value they spell).
func (s *Set) scrubForms(c *secret) []string {
	v := c.value.Reveal()
	forms := []string{v}
	for _, e := range []string{url.QueryEscape(v), url.PathEscape(v)} {
		forms = append(forms, e, lowerHex(e))
	}
	forms = append(forms, jsonForms(v)...)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		forms = append(forms, enc.EncodeToString([]byte(v)))
		for o := range 3 {
			forms = append(forms, inner(enc, v, o))
		}
	}
	return s.usable(forms)
}

// usable drops empty forms, duplicates and forms the sentinels spell.
func (s *Set) usable(forms []string) []string {
	out := forms[:0:0]
	for _, f := range forms {
		if f != "" && !slices.Contains(out, f) && !s.inSentinels(f) {
			out = append(out, f)
		}
	}
	return out
}

// jsonForms returns v as JSON encoders write it inside a string, in every
// combination of: <, > and & escaped (Go's default) or not; non-ASCII as
// \uXXXX (Python's default) or not; '/' as "\/" (PHP's default) or not.
func jsonForms(v string) []string {
	var out []string
	for _, html := range []bool{true, false} {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) != nil {
			continue
		}
		q := strings.TrimSuffix(b.String(), "\n")
		q = q[1 : len(q)-1]
		for _, q := range []string{q, strings.ReplaceAll(q, "/", `\/`)} {
			out = append(out, q, asciiJSON(q))
		}
	}
	return out
}

// asciiJSON writes every non-ASCII rune of the JSON string body q as
// \uXXXX (UTF-16), as Python's json.dumps does by default.
func asciiJSON(q string) string {
	var b strings.Builder
	for _, r := range q {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// escape matches one percent escape.
var escape = regexp.MustCompile(`%[0-9A-F]{2}`)

// lowerHex returns s with its percent escapes in lower case.
func lowerHex(s string) string {
	return escape.ReplaceAllStringFunc(s, strings.ToLower)
}

// inner returns the base64 characters of v that depend on v alone when v
// is preceded by o bytes (mod 3) and followed by more.
func inner(enc *base64.Encoding, v string, o int) string {
	raw := enc.WithPadding(base64.NoPadding).EncodeToString(append(make([]byte, o), v...))
	skip := []int{0, 2, 3}[o]
	end := len(raw)
	if (o+len(v))%3 != 0 {
		end-- // the last character holds bits of the next byte too
	}
	if end <= skip {
		return ""
	}
	return raw[skip:end]
}

// patterns returns the replacement patterns of the named secrets: every
// form of each, and every Basic credential Inject wrote for it, replaced by
// its sentinel; and the guard patterns that fail a stream with
// ErrUnscrubbable should a form survive.
func (s *Set) patterns(names []string) (replace, guard []pattern) {
	for _, c := range s.lookup(names) {
		forms := append(slices.Clone(c.forms), s.usable(c.rememberedCredentials())...)
		for _, f := range forms {
			replace = append(replace, pattern{find: []byte(f), with: []byte(c.sentinel)})
			guard = append(guard, pattern{find: []byte(f), err: func() error { return ErrUnscrubbable }})
		}
	}
	return replace, guard
}

// Scrub returns a reader of body with every form of the named secrets'
// values (see scrubForms, and each Basic credential Inject wrote) replaced
// by the secret's sentinel, across reads of any size: it holds back at
// most the longest form's length less one byte. Its output then passes a
// second check that fails with ErrUnscrubbable, before a form is emitted,
// should a replacement have spelled one with the bytes around it. The
// length changes: the caller drops Content-Length. names are those Inject
// was given, or better Names(); with none, body is returned as is.
func (s *Set) Scrub(body io.Reader, names []string) io.Reader {
	replace, guard := s.patterns(names)
	if len(replace) == 0 {
		return body
	}
	return newStream(newStream(body, replace), guard)
}

// ScrubHeader replaces every form of the named secrets' values in the
// values of h as Scrub does in a body. A header whose name holds a form, or
// whose value would hold one after the replacement, is deleted.
func (s *Set) ScrubHeader(h http.Header, names []string) {
	replace, guard := s.patterns(names)
	if len(replace) == 0 {
		return
	}
	for name, vs := range h {
		if _, err := replaceAll([]byte(name), guard); err != nil {
			delete(h, name)
			continue
		}
		for i, v := range vs {
			out, _ := replaceAll([]byte(v), replace)
			if _, err := replaceAll(out, guard); err != nil {
				delete(h, name)
				break
			}
			vs[i] = string(out)
		}
	}
}

// Watch returns a reader of body, a request body the proxy streams to host
// without injecting anything, that fails with a *Refusal as soon as any
// secret's sentinel is in it, even split across reads: RuleWrongHost when
// host is not one of the secret's hosts, else RuleMisplaced (a secret not
// placed in the body; or a body-placed one, which is swapped only in a body
// read whole: see BuffersBody). The bytes before the sentinel are passed
// on; the proxy aborts the upstream request on the error.
func (s *Set) Watch(body io.Reader, host string) io.Reader {
	h, port, hostOK := splitHost(host)
	pats := make([]pattern, 0, len(s.secrets))
	for _, c := range s.secrets {
		var r *Refusal
		switch {
		case !hostOK || !c.allows(h, port):
			r = refuse(RuleWrongHost, "secret %q's sentinel is in the body of a request to %q, which is not one of the secret's hosts (%s); it may be sent only there",
				c.name, host, c.hostList)
		case c.place.Body:
			r = refuse(RuleMisplaced, "secret %q's sentinel is in the body of a request to %q past the part the proxy read whole, where it cannot be swapped",
				c.name, host)
		default:
			r = refuse(RuleMisplaced, "secret %q's sentinel is in the body of a request to %q; it may be only in %s, where it is swapped for the secret",
				c.name, host, c.place)
		}
		pats = append(pats, pattern{find: []byte(c.sentinel), err: func() error { return r }})
	}
	if len(pats) == 0 {
		return body
	}
	return newStream(body, pats)
}
