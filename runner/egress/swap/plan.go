package swap

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// spotKind is what part of a request a spot is.
type spotKind int

const (
	spotOther      spotKind = iota // anywhere no secret is placed
	spotHeader                     // a header's value, as sent
	spotBasic                      // a part of a header's decoded Basic credentials
	spotQueryValue                 // a query parameter's decoded value
	spotBody                       // the request body
)

// spot is one piece of text of a request where a sentinel may be.
type spot struct {
	kind  spotKind
	where string // for messages: "the path", "header X-Token"
	name  string // spotHeader, spotBasic: the canonical header; spotQueryValue: the parameter
	part  string // spotBasic: runner.BasicUser or runner.BasicPassword
	text  string
	// unless, when set, is the decoded form of text: a sentinel found in
	// text counts only if unless lacks it (the decoded form is its own spot).
	unless *string
	// fold matches case-insensitively (a header name, which is sent
	// canonicalized or in lower case); text is then in lower case.
	fold bool
}

// holds reports whether sentinel is in sp.
func (sp spot) holds(sentinel string) bool {
	if sp.fold {
		return strings.Contains(sp.text, strings.ToLower(sentinel))
	}
	return strings.Contains(sp.text, sentinel) && (sp.unless == nil || !strings.Contains(*sp.unless, sentinel))
}

// placed reports whether sp is c's inject place.
func (c *secret) placed(sp spot) bool {
	p := c.place
	switch sp.kind {
	case spotHeader:
		return p.Header != "" && sp.name == http.CanonicalHeaderKey(p.Header)
	case spotBasic:
		return sp.name == "Authorization" && (p.Basic == sp.part || p.Basic == runner.BasicEither)
	case spotQueryValue:
		return p.Query != "" && sp.name == p.Query
	case spotBody:
		return p.Body
	}
	return false
}

// spots lists every piece of r (and body) a sentinel may hide in: the
// path (as sent and decoded), the query (each parameter's name and value,
// as sent and decoded), the URL's host, user info and fragment, the Host,
// every header's name and value (and the decoded Basic credentials of
// Authorization and Proxy-Authorization), the trailers and the body.
func spots(r *http.Request, body []byte) []spot {
	var out []spot
	add := func(kind spotKind, where, name, text string) {
		if text != "" {
			out = append(out, spot{kind: kind, where: where, name: name, text: text})
		}
	}
	if u := r.URL; u != nil {
		add(spotOther, "the path", "", u.EscapedPath())
		add(spotOther, "the path", "", u.Path)
		add(spotOther, "the path", "", u.Opaque)
		add(spotOther, "the URL's host", "", u.Host)
		add(spotOther, "the fragment", "", u.Fragment)
		add(spotOther, "the fragment", "", u.RawFragment)
		if u.User != nil {
			add(spotOther, "the URL's user info", "", u.User.String())
			add(spotOther, "the URL's user info", "", u.User.Username())
			pw, _ := u.User.Password()
			add(spotOther, "the URL's user info", "", pw)
		}
		for _, q := range splitQuery(u.RawQuery) {
			add(spotOther, "the name of a query parameter", "", q.rawKey)
			add(spotOther, "the name of a query parameter", "", q.key)
			where := fmt.Sprintf("query parameter %q", q.key)
			if q.decoded {
				add(spotQueryValue, where, q.key, q.value)
				out = append(out, spot{kind: spotOther, where: where + " (as sent, undecoded)", text: q.rawValue, unless: &q.value})
			} else {
				add(spotOther, where+" (which does not decode)", "", q.rawValue)
			}
		}
	}
	add(spotOther, "the Host", "", r.Host)
	for _, name := range slices.Sorted(maps.Keys(r.Header)) {
		out = append(out, spot{kind: spotOther, where: "the name of a header", text: strings.ToLower(name), fold: true})
		for _, v := range r.Header[name] {
			add(spotHeader, "header "+name, name, v)
			if name != "Authorization" && name != "Proxy-Authorization" {
				continue
			}
			if user, pw, ok := parseBasic(v); ok {
				kind := spotBasic
				if name != "Authorization" {
					kind = spotOther // Proxy-Authorization is no secret's place
				}
				out = append(out,
					spot{kind: kind, where: "the user of the Basic credentials of header " + name, name: name, part: runner.BasicUser, text: user},
					spot{kind: kind, where: "the password of the Basic credentials of header " + name, name: name, part: runner.BasicPassword, text: pw})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Trailer)) {
		// Trailers are no secret's place: Inject does not reach them.
		out = append(out, spot{kind: spotOther, where: "the name of a trailer", text: strings.ToLower(name), fold: true})
		for _, v := range r.Trailer[name] {
			add(spotOther, "trailer "+name, "", v)
		}
	}
	if len(body) > 0 {
		out = append(out, spot{kind: spotBody, where: "the body", text: string(body)})
	}
	return out
}

// queryParam is one "key=value" piece of a raw query.
type queryParam struct {
	raw              string // the piece as sent
	rawKey, rawValue string
	key, value       string // decoded (key is rawKey when it does not decode)
	decoded          bool   // the value decodes
}

// splitQuery splits a raw query at every '&', each piece at its first '='.
// A ';' separates nothing here (it stays in the value), so a sentinel after
// one is in the value before it: misplaced unless that is its parameter.
func splitQuery(raw string) []queryParam {
	if raw == "" {
		return nil
	}
	var out []queryParam
	for piece := range strings.SplitSeq(raw, "&") {
		q := queryParam{raw: piece}
		q.rawKey, q.rawValue, _ = strings.Cut(piece, "=")
		q.key = q.rawKey
		if k, err := url.QueryUnescape(q.rawKey); err == nil {
			q.key = k
		}
		if v, err := url.QueryUnescape(q.rawValue); err == nil {
			q.value, q.decoded = v, true
		}
		out = append(out, q)
	}
	return out
}

// parseBasic decodes "Basic <base64(user:password)>"; the scheme is
// matched case-insensitively and padding may be missing.
func parseBasic(v string) (user, password string, ok bool) {
	scheme, cred, found := strings.Cut(strings.TrimSpace(v), " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	cred = strings.TrimSpace(cred)
	b, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(cred); err != nil {
			return "", "", false
		}
	}
	user, password, ok = strings.Cut(string(b), ":")
	return user, password, ok
}

// splitHost normalizes the request's host: "name", "name:port", an IP
// address, or "[v6]:port". A missing port is 443, since secrets go only
// over TLS; a secret whose hosts name another port matches only when the
// caller passes the port.
func splitHost(host string) (string, uint16, bool) {
	if _, err := netip.ParseAddr(host); err == nil {
		h, err := nethost.Normalize(host)
		return h, 443, err == nil
	}
	h, p, err := nethost.SplitHostPort(host, 443)
	return h, p, err == nil
}

// Plan decides where the secrets of r, a request to host, stand. host is
// "name:port" (net.JoinHostPort), or a bare name or address taken as port
// 443: pass the port, or a secret whose hosts name a port never matches. body is the request's
// body, whole when complete is true, else its first bytes (the preview).
// For each secret whose sentinel is anywhere in r (see spots):
//
//   - host is not one of its hosts: RuleWrongHost;
//   - it is also outside the secret's place: RuleMisplaced;
//   - else the secret is to be injected, and its name is returned.
//
// A secret with Require whose hosts take host and whose sentinel is not in
// its place is RuleRequired; for a body-placed secret this is decided only
// when complete is true: a caller that planned a preview must, when
// BuffersBody(host), read the whole body (CheckBodySize) and plan again
// with complete=true before it trusts the names, or stream the body
// through Watch, which refuses any sentinel in it. Wrong hosts are
// reported before misplaced sentinels, which are reported before missing
// ones, each in the Set's order. The names are in the Set's order.
func (s *Set) Plan(r *http.Request, host string, body []byte, complete bool) ([]string, *Refusal) {
	h, port, hostOK := splitHost(host)
	all := spots(r, body)
	var names []string
	var wrong, misplaced, required *Refusal
	for _, c := range s.secrets {
		allowed := hostOK && c.allows(h, port)
		var inPlace bool
		var out *spot
		for i := range all {
			if !all[i].holds(c.sentinel) {
				continue
			}
			if c.placed(all[i]) {
				inPlace = true
			} else if out == nil {
				out = &all[i]
			}
		}
		found := inPlace || out != nil
		switch {
		case found && !allowed:
			where := out
			if where == nil {
				where = firstHolding(all, c.sentinel)
			}
			if wrong == nil {
				wrong = refuse(RuleWrongHost, "secret %q's sentinel is in %s of a request to %q, which is not one of the secret's hosts (%s); it may be sent only there",
					c.name, where.where, host, c.hostList)
			}
		case out != nil:
			if misplaced == nil {
				misplaced = refuse(RuleMisplaced, "secret %q's sentinel is in %s of a request to %q; it may be only in %s, where it is swapped for the secret",
					c.name, out.where, host, c.place)
			}
		case inPlace:
			names = append(names, c.name)
		case allowed && c.require && (complete || !c.place.Body):
			if required == nil {
				required = refuse(RuleRequired, "a request to %q must carry secret %q's sentinel in %s (require), so that it uses that secret and no credential of its own; this one does not",
					host, c.name, c.place)
			}
		}
	}
	for _, r := range []*Refusal{wrong, misplaced, required} {
		if r != nil {
			return nil, r
		}
	}
	return names, nil
}

// firstHolding returns the first spot that holds sentinel.
func firstHolding(all []spot, sentinel string) *spot {
	for i := range all {
		if all[i].holds(sentinel) {
			return &all[i]
		}
	}
	return &spot{where: "the request"}
}

// Plaintext refuses r, a plain http:// request, when any secret's sentinel
// is anywhere in it or in body (RulePlaintext): secrets go only over TLS.
// body should be all the proxy will send, or the caller streams the rest
// through Watch.
func (s *Set) Plaintext(r *http.Request, body []byte) *Refusal {
	all := spots(r, body)
	for _, c := range s.secrets {
		for _, sp := range all {
			if sp.holds(c.sentinel) {
				return refuse(RulePlaintext, "secret %q's sentinel is in %s of a plain http:// request; secrets are sent only over https",
					c.name, sp.where)
			}
		}
	}
	return nil
}

// BuffersBody reports whether a body-placed secret may go to host: then
// the proxy reads a request's body whole (at most MaxBody, CheckBodySize)
// and plans it with complete=true, since a sentinel past the preview is
// swapped only in a body read whole.
func (s *Set) BuffersBody(host string) bool {
	h, port, ok := splitHost(host)
	if !ok {
		return false
	}
	for _, c := range s.secrets {
		if c.place.Body && c.allows(h, port) {
			return true
		}
	}
	return false
}

// CheckBodySize refuses a body of n bytes that the proxy would have to
// read whole (BuffersBody) when n is more than MaxBody (RuleBodyTooLarge).
// A caller that does not know the length reads at most MaxBody+1 bytes
// and passes what it read.
func CheckBodySize(n int64) *Refusal {
	if n <= MaxBody {
		return nil
	}
	return refuse(RuleBodyTooLarge, "the request body is longer than %d bytes, the most the proxy reads whole to swap a secret's sentinel in a body; send a smaller body", MaxBody)
}
