package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"

	"github.com/open-policy-agent/opa/v1/ast"
	oparego "github.com/open-policy-agent/opa/v1/rego"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
)

// Events a Call may come from.
const (
	EventPreToolUse = "PreToolUse"
	EventRun        = "run" // the sidecar re-deciding a sandboxed run itself
)

// SandboxTool is the tool name of gatekeeper's own sandbox, the run tool
// of its MCP server SandboxServer.
const (
	SandboxTool   = "mcp__sandboxed_code__run"
	SandboxServer = "sandboxed_code"
)

// SourceGatekeeper is the MCPServer.Source the sidecar itself gives
// gatekeeper's own `gatekeeper mcp` server of a Claude Code session (see
// gate/server's hook endpoint); no client can send it. The built-in policy
// trusts the sandbox tool from it and from an SDK client's in-process
// server ("sdk").
const SourceGatekeeper = "gatekeeper"

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
		return failClosed(eff.Revision, eff.Hash, err), err
	}
	return d, nil
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

// pathFields names, per host file tool, the input fields holding a path, and
// whether the tool needs one.
var pathFields = map[string][]struct {
	field     string
	required  bool
	glob      bool
	recursive bool // a directory here is searched recursively, its files read
}{
	"Read":         {{field: "file_path", required: true}},
	"Write":        {{field: "file_path", required: true}},
	"Edit":         {{field: "file_path", required: true}},
	"MultiEdit":    {{field: "file_path", required: true}},
	"NotebookEdit": {{field: "notebook_path", required: true}},
	"LS":           {{field: "path", required: true}},
	"Glob":         {{field: "path"}, {field: "pattern", glob: true}},
	"Grep":         {{field: "path", recursive: true}, {field: "glob", glob: true}},
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

// denyMatches returns the fs.deny globs (expanded) that match any covered
// path: the same matching as Rego's glob.match(g, ["/"], path), done once
// in Go instead of once per glob and path in the evaluator.
func denyMatches(eff *Effective, covered []string) []*ast.Term {
	var out []*ast.Term
	for i, m := range eff.denyMatchers {
		for _, c := range covered {
			if m.Match(c) {
				out = append(out, ast.StringTerm(eff.denyGlobs[i]))
				break
			}
		}
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

type urlFact struct {
	Raw   string `json:"raw"`
	Host  string `json:"host"`
	Port  string `json:"port"`
	Error string `json:"error"`
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
	}
	globs := make([]*ast.Term, len(eff.denyGlobs))
	for i, g := range eff.denyGlobs {
		globs[i] = ast.StringTerm(g)
	}
	items = append(items, ast.Item(ast.StringTerm("deny_globs"), ast.ArrayTerm(globs...)))
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
		u := webFetchURL(toolInput)
		items = append(items, ast.Item(ast.StringTerm("url"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("raw"), ast.StringTerm(u.Raw)),
			ast.Item(ast.StringTerm("host"), ast.StringTerm(u.Host)),
			ast.Item(ast.StringTerm("port"), ast.StringTerm(u.Port)),
			ast.Item(ast.StringTerm("error"), ast.StringTerm(u.Error)),
		)))
	}
	return ast.NewObject(items...), nil
}

func pathFacts(eff *Effective, in map[string]any, fields []struct {
	field     string
	required  bool
	glob      bool
	recursive bool
}, cwd string) []pathFact {
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
		case strings.TrimFunc(s, isJSSpace) != s:
			// Tools trim their paths (JavaScript's trim) after the hook saw
			// them; judging the untrimmed path would judge another path.
			facts = append(facts, pathFact{Field: f.field, Raw: s, Error: fmt.Sprintf("tool_input.%s %q has leading or trailing white space", f.field, s)})
			continue
		}
		if f.glob {
			// A pattern is judged by the directory it starts from, and only
			// when it could leave the search path.
			if !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "~") && !containsDotDot(s) {
				continue
			}
			s = hostpath.GlobBase(s)
			if !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "~") {
				s = strings.TrimSuffix(base, "/") + "/" + s
			}
		} else if f.field == "path" && present {
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

// isJSSpace reports the characters JavaScript's String.prototype.trim
// removes: white space (including NBSP and BOM) and line terminators.
func isJSSpace(r rune) bool {
	return unicode.IsSpace(r) || r == '\uFEFF' || unicode.Is(unicode.Zs, r)
}

func containsDotDot(s string) bool {
	for _, part := range strings.Split(s, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

func webFetchURL(in map[string]any) urlFact {
	s, ok := in["url"].(string)
	if !ok {
		return urlFact{Error: "tool_input.url is missing or not a string"}
	}
	f := urlFact{Raw: s}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		f.Error = fmt.Sprintf("url %q does not parse", s)
	case u.Scheme != "http" && u.Scheme != "https":
		f.Error = fmt.Sprintf("url %q is not http or https", s)
	case u.Hostname() == "":
		f.Error = fmt.Sprintf("url %q names no host", s)
	case u.User != nil:
		f.Error = fmt.Sprintf("url %q carries credentials", s)
	default:
		f.Host = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		f.Port = u.Port()
		if f.Port == "" {
			f.Port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if ip := net.ParseIP(f.Host); ip != nil {
			f.Host = ip.String()
		}
	}
	return f
}
