package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/open-policy-agent/opa/v1/ast"
	oparego "github.com/open-policy-agent/opa/v1/rego"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
)

// Events a Call may come from.
const (
	EventPreToolUse = "PreToolUse"
	EventRun        = "run" // the sidecar re-deciding a sandboxed run itself
)

// SandboxTool is the tool name of gatekeeper's own sandbox.
const SandboxTool = "mcp__sandboxed_code__run"

// Outcomes of a Decision.
const (
	Allow = "allow"
	Deny  = "deny"
	Ask   = "ask"
)

// RuleError is the rule of every decision that failed closed.
const RuleError = "gatekeeper.error"

// Call is one tool call to decide.
type Call struct {
	Event     string
	ToolName  string
	ToolInput json.RawMessage // a JSON object
	ToolUseID string
	MCPServer *MCPServer
	// Cwd is the agent's working directory, against which its tools resolve
	// relative paths; empty means the workspace root.
	Cwd string
}

// MCPServer is where an mcp__ tool comes from, as the client reports it.
type MCPServer struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

// Decision is the outcome of one call.
type Decision struct {
	Decision string // Allow, Deny or Ask
	Reason   string // a sentence for the model
	Rule     string // the rule that decided
	// Revision and PolicyHash identify the policy that decided.
	Revision   string
	PolicyHash string
	// Effective is the query's effective policy the decision was made
	// under (nil when it could not be computed): what a run it allows must
	// run with, whatever reloads since.
	Effective *Effective
}

func failClosed(rev, hash string, err error) Decision {
	return Decision{
		Decision:   Deny,
		Rule:       RuleError,
		Reason:     fmt.Sprintf("gatekeeper could not decide this call (%v), so it is denied", err),
		Revision:   rev,
		PolicyHash: hash,
	}
}

// Decide evaluates the policy for call. It always returns a usable
// Decision: when anything goes wrong it is a deny with rule
// "gatekeeper.error", and the error says what went wrong.
func (q *Query) Decide(ctx context.Context, call Call) (Decision, error) {
	snap := q.engine.cur.Load() // one revision decides, whatever reloads meanwhile
	eff, err := q.effective(ctx, snap)
	if err != nil {
		return failClosed(snap.revision, "", err), err
	}
	d, err := decide(ctx, snap, eff, call, q.engine.cfg)
	if err != nil {
		d = failClosed(eff.Revision, eff.Hash, err)
	}
	d.Effective = eff
	return d, err
}

func decide(ctx context.Context, snap *snapshot, eff *Effective, call Call, cfg Config) (Decision, error) {
	in, err := buildInput(eff, call)
	if err != nil {
		return Decision{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.DecisionTimeout)
	defer cancel()
	rs, err := snap.decide.Eval(ctx, oparegoInput(in))
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return Decision{}, fmt.Errorf("%w: data.gatekeeper.decision is undefined", ErrBadDecision)
	}
	d, err := parseDecision(rs[0].Expressions[0].Value)
	if err != nil {
		return Decision{}, err
	}
	d.Revision, d.PolicyHash = eff.Revision, eff.Hash
	return d, nil
}

func oparegoInput(v ast.Value) oparego.EvalOption { return oparego.EvalParsedInput(v) }

// parseDecision accepts exactly {"decision", "reason", "rule"} with a known
// decision and non-empty strings; anything else is an error.
func parseDecision(v any) (Decision, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Decision{}, fmt.Errorf("%w: decision is %T, not an object", ErrBadDecision, v)
	}
	if len(m) != 3 {
		return Decision{}, fmt.Errorf("%w: decision has %d keys, want decision, reason, rule", ErrBadDecision, len(m))
	}
	var d Decision
	for key, dst := range map[string]*string{"decision": &d.Decision, "reason": &d.Reason, "rule": &d.Rule} {
		s, ok := m[key].(string)
		if !ok || s == "" {
			return Decision{}, fmt.Errorf("%w: %q is missing or not a non-empty string", ErrBadDecision, key)
		}
		*dst = s
	}
	switch d.Decision {
	case Allow, Deny, Ask:
		return d, nil
	}
	return Decision{}, fmt.Errorf("%w: decision %q is not allow, deny or ask", ErrBadDecision, d.Decision)
}

// pathField is an input field of a host file tool that holds a path.
type pathField struct {
	field     string
	required  bool // the tool needs it
	glob      bool // a pattern, judged by the directory it starts from
	split     bool // a list of patterns, split as Claude Code splits Grep's glob
	recursive bool // a directory here is searched recursively, its files read
}

// pathFields names, per host file tool, the input fields holding a path.
var pathFields = map[string][]pathField{
	"Read":         {{field: "file_path", required: true}},
	"Write":        {{field: "file_path", required: true}},
	"Edit":         {{field: "file_path", required: true}},
	"MultiEdit":    {{field: "file_path", required: true}},
	"NotebookEdit": {{field: "notebook_path", required: true}},
	"LS":           {{field: "path", required: true}},
	"Glob":         {{field: "path"}, {field: "pattern", glob: true}},
	"Grep":         {{field: "path", recursive: true}, {field: "glob", glob: true, split: true}},
}

// toolKind classifies a tool as rego/gatekeeper.rego's host_fs_tools and
// host_net_tools do (a test pins that they agree): "host_fs", "host_net" or
// "other".
func toolKind(name string) string {
	if _, ok := pathFields[name]; ok {
		return "host_fs"
	}
	if name == "WebFetch" || name == "WebSearch" {
		return "host_net"
	}
	return "other"
}

type pathFact struct {
	Field    string `json:"field"`
	Raw      string `json:"raw"`
	Abs      string `json:"abs"`
	Resolved string `json:"resolved"`
	Error    string `json:"error"`
	// Within lists forbidden files a recursive search of this directory
	// would read (Grep only, see within.go); WithinError says why the
	// directory could not be checked.
	Within      []withinMatch
	WithinError string
}

// covered returns Abs, Resolved and every ancestor of both (not "/"), the
// paths a deny glob is matched against.
func (f pathFact) covered() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range []string{f.Abs, f.Resolved} {
		for p != "" && p != "/" && !seen[p] {
			seen[p] = true
			out = append(out, p)
			i := strings.LastIndexByte(p, '/')
			if i <= 0 {
				break
			}
			p = p[:i]
		}
	}
	return out
}

// denyMatches returns the fs.deny globs (expanded and anchored) that match
// any covered path, ignoring case (internal/pathglob): for ASCII the same as
// Rego's glob.match(lower(g), ["/"], lower(path)), done once in Go instead
// of once per glob and path in the evaluator.
func denyMatches(eff *Effective, covered []string) []*ast.Term {
	var out []*ast.Term
	for _, i := range eff.deny.Matching(covered...) {
		out = append(out, ast.StringTerm(eff.deny.Glob(i)))
	}
	return out
}

// writeProtectMatches returns, for each write-protect glob matching any
// covered path, {"glob", "entry", "why"}: the glob (expanded, anchored),
// the built-in group or "sandbox.fs.write_protect" it comes from, and why
// the path is protected. The Rego rule host_fs.write_protected decides
// which tools it applies to.
func writeProtectMatches(eff *Effective, covered []string) []*ast.Term {
	var out []*ast.Term
	for _, i := range eff.writeProtect.Matching(covered...) {
		out = append(out, ast.ObjectTerm(
			ast.Item(ast.StringTerm("glob"), ast.StringTerm(eff.writeProtect.Glob(i))),
			ast.Item(ast.StringTerm("entry"), ast.StringTerm(eff.writeEntries[i].entry)),
			ast.Item(ast.StringTerm("why"), ast.StringTerm(eff.writeEntries[i].why)),
		))
	}
	return out
}

func withinTerms(ms []withinMatch) []*ast.Term {
	out := make([]*ast.Term, len(ms))
	for i, m := range ms {
		out[i] = ast.ObjectTerm(
			ast.Item(ast.StringTerm("path"), ast.StringTerm(m.Path)),
			ast.Item(ast.StringTerm("glob"), ast.StringTerm(m.Glob)),
		)
	}
	return out
}

func stringTerms(ss []string) []*ast.Term {
	out := make([]*ast.Term, len(ss))
	for i, s := range ss {
		out[i] = ast.StringTerm(s)
	}
	return out
}

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
}

func buildInput(eff *Effective, call Call) (ast.Value, error) {
	var toolInput map[string]any
	raw := call.ToolInput
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&toolInput); err != nil || toolInput == nil {
		return nil, fmt.Errorf("tool_input is not a JSON object")
	}
	tiv, err := ast.InterfaceToValue(toolInput)
	if err != nil {
		return nil, fmt.Errorf("convert tool_input: %w", err)
	}
	items := [][2]*ast.Term{
		ast.Item(ast.StringTerm("event"), ast.StringTerm(call.Event)),
		ast.Item(ast.StringTerm("tool_name"), ast.StringTerm(call.ToolName)),
		ast.Item(ast.StringTerm("tool_kind"), ast.StringTerm(toolKind(call.ToolName))),
		ast.Item(ast.StringTerm("tool_input"), ast.NewTerm(tiv)),
		ast.Item(ast.StringTerm("tool_use_id"), ast.StringTerm(call.ToolUseID)),
		ast.Item(ast.StringTerm("policy"), eff.term),
		ast.Item(ast.StringTerm("workspace_root"), ast.StringTerm(eff.root)),
		ast.Item(ast.StringTerm("run_languages"), eff.runLanguages),
	}
	items = append(items,
		ast.Item(ast.StringTerm("deny_globs"), eff.globsTerms[0]),
		ast.Item(ast.StringTerm("write_protect_globs"), eff.globsTerms[1]),
	)
	if call.MCPServer != nil {
		items = append(items, ast.Item(ast.StringTerm("mcp_server"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("name"), ast.StringTerm(call.MCPServer.Name)),
			ast.Item(ast.StringTerm("source"), ast.StringTerm(call.MCPServer.Source)),
		)))
	}
	if fields, ok := pathFields[call.ToolName]; ok {
		facts := pathFacts(eff, toolInput, fields, call.Cwd)
		terms := make([]*ast.Term, len(facts))
		for i, f := range facts {
			covered := f.covered()
			terms[i] = ast.ObjectTerm(
				ast.Item(ast.StringTerm("field"), ast.StringTerm(f.Field)),
				ast.Item(ast.StringTerm("raw"), ast.StringTerm(f.Raw)),
				ast.Item(ast.StringTerm("abs"), ast.StringTerm(f.Abs)),
				ast.Item(ast.StringTerm("resolved"), ast.StringTerm(f.Resolved)),
				ast.Item(ast.StringTerm("covered"), ast.ArrayTerm(stringTerms(covered)...)),
				ast.Item(ast.StringTerm("deny_matches"), ast.ArrayTerm(denyMatches(eff, covered)...)),
				ast.Item(ast.StringTerm("write_protect_matches"), ast.ArrayTerm(writeProtectMatches(eff, covered)...)),
				ast.Item(ast.StringTerm("deny_within"), ast.ArrayTerm(withinTerms(f.Within)...)),
				ast.Item(ast.StringTerm("within_error"), ast.StringTerm(f.WithinError)),
				ast.Item(ast.StringTerm("error"), ast.StringTerm(f.Error)),
			)
		}
		items = append(items, ast.Item(ast.StringTerm("paths"), ast.ArrayTerm(terms...)))
	} else {
		items = append(items, ast.Item(ast.StringTerm("paths"), ast.ArrayTerm()))
	}
	if call.ToolName == "WebFetch" {
		u := webFetchURL(eff, toolInput)
		items = append(items, ast.Item(ast.StringTerm("url"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("raw"), ast.StringTerm(u.Raw)),
			ast.Item(ast.StringTerm("host"), ast.StringTerm(u.Host)),
			ast.Item(ast.StringTerm("port"), ast.StringTerm(u.Port)),
			ast.Item(ast.StringTerm("allow_matches"), ast.ArrayTerm(stringTerms(u.AllowMatches)...)),
			ast.Item(ast.StringTerm("deny_matches"), ast.ArrayTerm(stringTerms(u.DenyMatches)...)),
			ast.Item(ast.StringTerm("error"), ast.StringTerm(u.Error)),
		)))
	}
	return ast.NewObject(items...), nil
}

func pathFacts(eff *Effective, in map[string]any, fields []pathField, cwd string) []pathFact {
	if cwd == "" {
		cwd = eff.Policy.WorkspaceRoot
	}
	opts := hostpath.Options{Home: eff.home, Cwd: cwd}
	var facts []pathFact
	base := cwd
	for _, f := range fields {
		v, present := in[f.field]
		s, isString := v.(string)
		switch {
		case !present && !f.required:
			if f.glob {
				continue
			}
			s = base // Glob and Grep search the working directory by default
		case !isString:
			facts = append(facts, pathFact{Field: f.field, Error: fmt.Sprintf("tool_input.%s is missing or not a string", f.field)})
			continue
		case !f.split && strings.TrimFunc(s, isJSSpace) != s:
			// Tools trim their paths (JavaScript's trim) after the hook saw
			// them; judging the untrimmed path would judge another path.
			facts = append(facts, pathFact{Field: f.field, Raw: s, Error: fmt.Sprintf("tool_input.%s %q has leading or trailing white space", f.field, s)})
			continue
		}
		if f.glob {
			patterns := []string{s}
			if f.split {
				patterns = splitGrepGlob(s)
			}
			for _, pat := range patterns {
				if fact, ok := globFact(f.field, pat, base, opts); ok {
					facts = append(facts, fact)
				}
			}
			continue
		}
		if f.field == "path" && present {
			base = s // a Glob or Grep pattern is relative to its path
		}
		p, err := hostpath.Normalize(s, opts)
		fact := pathFact{Field: f.field, Raw: s, Abs: p.Abs, Resolved: p.Resolved}
		if err != nil {
			fact.Error = err.Error()
		} else if f.recursive && hostpath.Within(p.Resolved, eff.root) {
			// Outside the workspace the search is denied anyway: no walk.
			fact.Within, fact.WithinError = withinFact(eff, p.Resolved, in)
		}
		facts = append(facts, fact)
	}
	return facts
}

// globFact judges a pattern by the directory it starts from, and only when
// it could leave the search path (absolute, ~, or climbing with ".."); ok
// is false for a pattern that stays below base.
func globFact(field, pattern, base string, opts hostpath.Options) (pathFact, bool) {
	if !strings.HasPrefix(pattern, "/") && !strings.HasPrefix(pattern, "~") && !containsDotDot(pattern) {
		return pathFact{}, false
	}
	s := hostpath.GlobBase(pattern)
	if !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "~") {
		s = strings.TrimSuffix(base, "/") + "/" + s
	}
	p, err := hostpath.Normalize(s, opts)
	fact := pathFact{Field: field, Raw: s, Abs: p.Abs, Resolved: p.Resolved}
	if err != nil {
		fact.Error = err.Error()
	}
	return fact, true
}

// isJSSpace reports the characters of JavaScript's \s, which
// String.prototype.trim removes and split(/\s+/) splits on: WhiteSpace
// (tab, vertical tab, form feed, space, U+FEFF and every Zs space,
// no-break ones included) and LineTerminator (LF, CR, U+2028, U+2029).
// U+0085 (NEL), white space to Go, is not among them.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\v', '\f', ' ', '\n', '\r', '\u2028', '\u2029', '\uFEFF':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

func containsDotDot(s string) bool {
	for _, part := range strings.Split(s, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// webFetchURL reads a WebFetch url as Claude Code's WebFetch does: a
// WHATWG URL (nethost.ParseURL, pinned to Node's new URL), refused with
// user info, and an http URL fetched over https (url.protocol = "https:",
// so "http://h/" goes to h:443 and "http://h:8080/" to h:8080). The net
// patterns are matched here, by the same functions as the egress proxy's:
// deny patterns with Match, allow patterns with Allows.
func webFetchURL(eff *Effective, in map[string]any) urlFact {
	s, ok := in["url"].(string)
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
	return f
}
