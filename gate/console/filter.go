package console

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// Filter selects records of the live stream. Within a field any listed
// value matches; all fields given must match. The zero Filter matches
// every record. The browser and `gatekeeper tail` send the same query
// parameters (kind, decision, rule, tool, query, q) and the server applies
// this one Filter to both.
type Filter struct {
	// Kinds are record kinds: decision, run, code_call, query, session,
	// egress, rotate.
	Kinds []string
	// Decisions are allow, deny or ask.
	Decisions []string
	// Rules are rule names; one ending in "*" matches by prefix
	// ("host_fs.*").
	Rules []string
	// Tools are exact tool names.
	Tools []string
	// Queries are query ids or their prefixes ("q_3fa8").
	Queries []string
	// Search matches, case-insensitively, a substring of the record's
	// tool, rule, reason, ids, outcome, error, host or tool input.
	Search string
}

// ParseFilter reads a Filter from query parameters.
func ParseFilter(v url.Values) Filter {
	clean := func(xs []string) []string {
		var out []string
		for _, x := range xs {
			if x = strings.TrimSpace(x); x != "" {
				out = append(out, x)
			}
		}
		return out
	}
	return Filter{
		Kinds: clean(v["kind"]), Decisions: clean(v["decision"]), Rules: clean(v["rule"]),
		Tools: clean(v["tool"]), Queries: clean(v["query"]), Search: strings.TrimSpace(v.Get("q")),
	}
}

// Values returns f as query parameters; ParseFilter(f.Values()) is f.
func (f Filter) Values() url.Values {
	v := url.Values{}
	for key, xs := range map[string][]string{"kind": f.Kinds, "decision": f.Decisions, "rule": f.Rules, "tool": f.Tools, "query": f.Queries} {
		for _, x := range xs {
			v.Add(key, x)
		}
	}
	if f.Search != "" {
		v.Set("q", f.Search)
	}
	return v
}

func (f Filter) match(e *entry) bool {
	r := &e.rec
	anyOf := func(want []string, got string, eq func(w, g string) bool) bool {
		return len(want) == 0 || slices.ContainsFunc(want, func(w string) bool { return eq(w, got) })
	}
	exact := func(w, g string) bool { return w == g }
	rule := func(w, g string) bool {
		if p, ok := strings.CutSuffix(w, "*"); ok {
			return strings.HasPrefix(g, p)
		}
		return w == g
	}
	return anyOf(f.Kinds, string(r.Kind), exact) &&
		anyOf(f.Decisions, r.Decision, exact) &&
		anyOf(f.Rules, r.Rule, rule) &&
		anyOf(f.Tools, r.Tool, exact) &&
		anyOf(f.Queries, r.QueryID, func(w, g string) bool { return g != "" && strings.HasPrefix(g, w) }) &&
		(f.Search == "" || strings.Contains(e.hay, strings.ToLower(f.Search)))
}

// maxHayInput bounds how much of a record's tool input the search box
// looks through.
const maxHayInput = 64 << 10

// haystack is the lower-cased text Filter.Search matches in.
func haystack(r *audit.Record) string {
	var b strings.Builder
	for _, s := range []string{string(r.Kind), r.Tool, r.Event, r.Decision, r.Rule, r.Reason, r.QueryID, r.RunID, r.DecisionID,
		r.ToolUseID, string(r.Outcome), r.Error, r.Host, r.Method, r.Path, strings.Join(r.Secrets, "\n"), r.Client, r.Image, r.Runtime, r.Server, r.ErrorKind, r.SessionID} {
		if s != "" {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	if r.ToolInput != nil {
		if in, err := json.Marshal(r.ToolInput); err == nil {
			b.Write(in[:min(len(in), maxHayInput)])
		}
	}
	return strings.ToLower(b.String())
}
