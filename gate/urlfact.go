package gate

import (
	"fmt"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
)

// This file reads the url fact of a WebFetch call.

// urlFact is what the sidecar reads from a WebFetch url: where Claude
// Code's WebFetch will connect, and which net patterns match it.
type urlFact struct {
	Raw   string
	Host  string // nethost.Normalize's form
	Port  string // the port fetched, after the https upgrade
	Error string
	// AllowMatches and DenyMatches are the sandbox.net.allow patterns that
	// allow, and the sandbox.net.deny patterns that match, Host on Port.
	AllowMatches, DenyMatches []string
	// Builtin is the built-in block (nethost.CheckBuiltin) that refuses
	// Host on Port whatever the policy says: none, or one.
	Builtin []nethost.Block
}

// webFetchURL reads a WebFetch url as Claude Code's WebFetch does: a
// WHATWG URL (nethost.ParseURL, pinned to Node's new URL), refused with
// user info, and an http URL fetched over https (url.protocol = "https:",
// so "http://h/" goes to h:443 and "http://h:8080/" to h:8080). The net
// patterns are matched here, by the same functions as the egress proxy's:
// deny patterns with Match, allow patterns with Allows; and so are the
// built-in blocks (nethost.CheckBuiltin: metadata, model vendors, and
// non-public IP literals not themselves allowlisted). The agent process
// resolves a name WebFetch fetches, not the sidecar: a name that resolves
// to a blocked address passes here (the egress proxy, which resolves
// itself, catches it for sandboxes).
func webFetchURL(eff *Effective, in ast.Object) urlFact {
	s, ok, _ := inputString(in, "url")
	if !ok {
		return urlFact{Error: "tool_input.url is missing or not a string"}
	}
	f := urlFact{Raw: s}
	u, err := nethost.ParseURL(s)
	switch {
	case err != nil:
		f.Error = err.Error()
		return f
	case u.Credentials:
		f.Error = fmt.Sprintf("url %q carries credentials (user info before an @)", s)
		return f
	}
	u = u.Upgraded()
	port := u.EffectivePort()
	f.Host, f.Port = u.Host, strconv.Itoa(int(port))
	f.AllowMatches, f.DenyMatches = []string{}, []string{}
	for _, p := range eff.netAllow {
		if p.Allows(u.Host, port) {
			f.AllowMatches = append(f.AllowMatches, p.String())
		}
	}
	for _, p := range eff.netDeny {
		if p.Match(u.Host, port) {
			f.DenyMatches = append(f.DenyMatches, p.String())
		}
	}
	f.Builtin = []nethost.Block{}
	if b, ok := nethost.CheckBuiltin(u.Host, port, eff.netAllow); ok {
		f.Builtin = append(f.Builtin, b)
	}
	return f
}
