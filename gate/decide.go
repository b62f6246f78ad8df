package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/open-policy-agent/opa/v1/ast"
	oparego "github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
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
	// AgentID and AgentType name the subagent making the call, as Claude
	// Code's hook input does (agent_id only inside a subagent); empty when
	// absent. They reach the policy as input.agent_id and input.agent_type,
	// present only when not empty.
	AgentID, AgentType string
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
	v, err := evalDecision(ctx, snap.decide, in, cfg.DecisionTimeout)
	if err != nil {
		return Decision{}, err
	}
	d, err := parseDecision(v)
	if err != nil {
		return Decision{}, err
	}
	d.Revision, d.PolicyHash = eff.Revision, eff.Hash
	return d, nil
}

// evalDecision evaluates the prepared decision query over in, cancelled
// after timeout or when ctx ends, and returns its one value, unconverted.
//
// The cancellation is a flag the evaluator polls, raised by a timer: left
// to itself, OPA would start a goroutine per evaluation to watch ctx, and
// waking it (and a thread for it) costs more than the rest of a small
// decision's bookkeeping. The result stays an ast.Value: parseDecision
// reads it without converting it to Go maps first.
func evalDecision(ctx context.Context, pq oparego.PreparedEvalQuery, in ast.Value, timeout time.Duration) (ast.Value, error) {
	cancel := topdown.NewCancel()
	timer := time.AfterFunc(timeout, cancel.Cancel)
	stop := context.AfterFunc(ctx, cancel.Cancel)
	defer func() {
		timer.Stop()
		stop()
	}()
	rs, err := pq.Eval(ctx, oparegoInput(in), oparego.EvalExternalCancel(cancel), oparego.EvalGenerateJSON(keepTerm))
	if err != nil {
		return nil, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, fmt.Errorf("%w: data.gatekeeper.decision is undefined", ErrBadDecision)
	}
	v, ok := rs[0].Expressions[0].Value.(ast.Value)
	if !ok {
		return nil, fmt.Errorf("%w: decision is %T, not a Rego value", ErrBadDecision, rs[0].Expressions[0].Value)
	}
	return v, nil
}

// keepTerm is an EvalGenerateJSON function that keeps a result as the
// ast.Value it is.
func keepTerm(t *ast.Term, _ *oparego.EvalContext) (any, error) { return t.Value, nil }

func oparegoInput(v ast.Value) oparego.EvalOption { return oparego.EvalParsedInput(v) }

// Keys of the decision object.
var (
	keyDecision = ast.StringTerm("decision")
	keyReason   = ast.StringTerm("reason")
	keyRule     = ast.StringTerm("rule")
)

// parseDecision accepts exactly {"decision", "reason", "rule"} with a known
// decision and non-empty strings; anything else is an error.
func parseDecision(v ast.Value) (Decision, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return Decision{}, fmt.Errorf("%w: decision is %s, not an object", ErrBadDecision, ast.ValueName(v))
	}
	if obj.Len() != 3 {
		return Decision{}, fmt.Errorf("%w: decision has %d keys, want decision, reason, rule", ErrBadDecision, obj.Len())
	}
	var d Decision
	for _, f := range []struct {
		key *ast.Term
		dst *string
	}{{keyDecision, &d.Decision}, {keyReason, &d.Reason}, {keyRule, &d.Rule}} {
		var s ast.String
		if t := obj.Get(f.key); t != nil {
			s, _ = t.Value.(ast.String)
		}
		if s == "" {
			return Decision{}, fmt.Errorf("%w: %q is missing or not a non-empty string", ErrBadDecision, string(f.key.Value.(ast.String)))
		}
		*f.dst = string(s)
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

// Walks reports whether deciding a call of tool may walk a directory tree
// (a recursive search's deny_within, see within.go), which can take long:
// the server decides such calls off its connection's reader.
func Walks(tool string) bool {
	for _, f := range pathFields[tool] {
		if f.recursive {
			return true
		}
	}
	return false
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
	var out []string
	for _, p := range []string{f.Abs, f.Resolved} {
		for p != "" && p != "/" && !slices.Contains(out, p) {
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
func denyMatches(eff *Effective, m pathMatches) []*ast.Term {
	var out []*ast.Term
	for i := range eff.deny.Len() {
		if m.deny.has(i) {
			out = append(out, ast.StringTerm(eff.deny.Glob(i)))
		}
	}
	return out
}

// writeProtectMatches returns, for each write-protect glob matching any
// covered path, {"glob", "entry", "why"}: the glob (expanded, anchored),
// the built-in group or "sandbox.fs.write_protect" it comes from, and why
// the path is protected. The Rego rule host_fs.write_protected decides
// which tools it applies to.
func writeProtectMatches(eff *Effective, m pathMatches) []*ast.Term {
	var out []*ast.Term
	for i := range eff.writeProtect.Len() {
		if !m.writeProtect.has(i) {
			continue
		}
		out = append(out, ast.ObjectTerm(
			ast.Item(ast.StringTerm("glob"), ast.StringTerm(eff.writeProtect.Glob(i))),
			ast.Item(ast.StringTerm("entry"), ast.StringTerm(eff.writeEntries[i].entry)),
			ast.Item(ast.StringTerm("why"), ast.StringTerm(eff.writeEntries[i].why)),
		))
	}
	return out
}

// globBits is a set of glob indices.
type globBits []uint64

func (b globBits) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

// union returns b with the indices of c added; b may be changed.
func (b globBits) union(c globBits) globBits {
	for len(b) < len(c) {
		b = append(b, 0)
	}
	for i, w := range c {
		b[i] |= w
	}
	return b
}

func bitsOf(indices []int) globBits {
	var b globBits
	for _, i := range indices {
		for len(b) <= i/64 {
			b = append(b, 0)
		}
		b[i/64] |= 1 << (i % 64)
	}
	return b
}

// pathMatches are the deny and write-protect globs that match a path.
type pathMatches struct {
	deny, writeProtect globBits
}

// maxMatchCache bounds the directories whose matches an Effective keeps.
const maxMatchCache = 1024

// matches returns the globs that match any path of f.covered(). Those of
// f's own paths (Abs and Resolved) are matched each time; those of their
// ancestors, which the calls of one workspace share, are kept in the
// Effective's cache (bounded: it is emptied when full). The result is the
// same either way: matching is a function of the path and the Effective.
func (eff *Effective) matches(f pathFact, covered []string) pathMatches {
	var m pathMatches
	for _, p := range covered {
		var pm pathMatches
		if p == f.Abs || p == f.Resolved {
			pm = eff.match(p)
		} else if c, ok := eff.matchCache.Load(p); ok {
			pm = c.(pathMatches)
		} else {
			pm = eff.match(p)
			if eff.matchCacheLen.Add(1) > maxMatchCache {
				eff.matchCache.Clear()
				eff.matchCacheLen.Store(1)
			}
			eff.matchCache.Store(p, pm)
		}
		m.deny = m.deny.union(pm.deny)
		m.writeProtect = m.writeProtect.union(pm.writeProtect)
	}
	return m
}

// match matches one path against the deny and write-protect globs.
func (eff *Effective) match(p string) pathMatches {
	return pathMatches{deny: bitsOf(eff.deny.Matching(p)), writeProtect: bitsOf(eff.writeProtect.Matching(p))}
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

// blockTerms renders built-in blocks as input.url.builtin's
// {"block", "reason"} objects.
func blockTerms(bs []nethost.Block) []*ast.Term {
	out := make([]*ast.Term, len(bs))
	for i, b := range bs {
		out[i] = ast.ObjectTerm(
			ast.Item(ast.StringTerm("block"), ast.StringTerm(b.Kind)),
			ast.Item(ast.StringTerm("reason"), ast.StringTerm(b.Reason)),
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
	// Builtin is the built-in block (nethost.CheckBuiltin) that refuses
	// Host on Port whatever the policy says: none, or one.
	Builtin []nethost.Block
}

// Keys of the Rego input and of its objects, made once (terms are never
// changed once made): building an input allocates its values only.
var (
	kEvent, kToolName, kToolKind, kToolInput, kToolUseID = ast.StringTerm("event"), ast.StringTerm("tool_name"), ast.StringTerm("tool_kind"), ast.StringTerm("tool_input"), ast.StringTerm("tool_use_id")
	kPolicy, kWorkspaceRoot, kRunLanguages               = ast.StringTerm("policy"), ast.StringTerm("workspace_root"), ast.StringTerm("run_languages")
	kDenyGlobs, kWriteProtectGlobs                       = ast.StringTerm("deny_globs"), ast.StringTerm("write_protect_globs")
	kMCPServer, kName, kSource, kPaths, kURL             = ast.StringTerm("mcp_server"), ast.StringTerm("name"), ast.StringTerm("source"), ast.StringTerm("paths"), ast.StringTerm("url")
	kField, kRaw, kAbs, kResolved, kCovered              = ast.StringTerm("field"), ast.StringTerm("raw"), ast.StringTerm("abs"), ast.StringTerm("resolved"), ast.StringTerm("covered")
	kDenyMatches, kWriteProtectMatches, kDenyWithin      = ast.StringTerm("deny_matches"), ast.StringTerm("write_protect_matches"), ast.StringTerm("deny_within")
	kWithinError, kError, kHost, kPort, kAllowMatches    = ast.StringTerm("within_error"), ast.StringTerm("error"), ast.StringTerm("host"), ast.StringTerm("port"), ast.StringTerm("allow_matches")
	kBuiltin, kGitRepository, kAgentID, kAgentType       = ast.StringTerm("builtin"), ast.StringTerm("git_repository"), ast.StringTerm("agent_id"), ast.StringTerm("agent_type")
)

func buildInput(eff *Effective, call Call) (ast.Value, error) {
	raw := call.ToolInput
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	toolInput, err := parseToolInput(raw)
	if err != nil {
		return nil, err
	}
	in := ast.NewObjectWithCapacity(16)
	in.Insert(kEvent, ast.StringTerm(call.Event))
	in.Insert(kToolName, ast.StringTerm(call.ToolName))
	in.Insert(kToolKind, ast.StringTerm(toolKind(call.ToolName)))
	in.Insert(kToolInput, ast.NewTerm(toolInput))
	in.Insert(kToolUseID, ast.StringTerm(call.ToolUseID))
	in.Insert(kPolicy, eff.term)
	in.Insert(kWorkspaceRoot, eff.rootTerm)
	in.Insert(kRunLanguages, eff.runLanguages)
	in.Insert(kDenyGlobs, eff.globsTerms[0])
	in.Insert(kWriteProtectGlobs, eff.globsTerms[1])
	if call.AgentID != "" {
		in.Insert(kAgentID, ast.StringTerm(call.AgentID))
	}
	if call.AgentType != "" {
		in.Insert(kAgentType, ast.StringTerm(call.AgentType))
	}
	if call.MCPServer != nil {
		in.Insert(kMCPServer, ast.ObjectTerm(
			ast.Item(kName, ast.StringTerm(call.MCPServer.Name)),
			ast.Item(kSource, ast.StringTerm(call.MCPServer.Source)),
		))
	}
	var paths []*ast.Term
	if fields, ok := pathFields[call.ToolName]; ok {
		facts := pathFacts(eff, toolInput, fields, call.Cwd)
		paths = make([]*ast.Term, len(facts))
		for i, f := range facts {
			covered := f.covered()
			matches := eff.matches(f, covered)
			repo := ""
			if hostFSWriteTools[call.ToolName] && f.Error == "" {
				if repo = gitRepository(f.Abs); repo == "" && f.Resolved != "" {
					repo = gitRepository(f.Resolved)
				}
			}
			paths[i] = ast.ObjectTerm(
				ast.Item(kField, ast.StringTerm(f.Field)),
				ast.Item(kRaw, ast.StringTerm(f.Raw)),
				ast.Item(kAbs, ast.StringTerm(f.Abs)),
				ast.Item(kResolved, ast.StringTerm(f.Resolved)),
				ast.Item(kCovered, ast.ArrayTerm(stringTerms(covered)...)),
				ast.Item(kDenyMatches, ast.ArrayTerm(denyMatches(eff, matches)...)),
				ast.Item(kWriteProtectMatches, ast.ArrayTerm(writeProtectMatches(eff, matches)...)),
				ast.Item(kDenyWithin, ast.ArrayTerm(withinTerms(f.Within)...)),
				ast.Item(kWithinError, ast.StringTerm(f.WithinError)),
				ast.Item(kError, ast.StringTerm(f.Error)),
				ast.Item(kGitRepository, ast.StringTerm(repo)),
			)
		}
	}
	in.Insert(kPaths, ast.ArrayTerm(paths...))
	if call.ToolName == "WebFetch" {
		u := webFetchURL(eff, toolInput)
		in.Insert(kURL, ast.ObjectTerm(
			ast.Item(kRaw, ast.StringTerm(u.Raw)),
			ast.Item(kHost, ast.StringTerm(u.Host)),
			ast.Item(kPort, ast.StringTerm(u.Port)),
			ast.Item(kAllowMatches, ast.ArrayTerm(stringTerms(u.AllowMatches)...)),
			ast.Item(kDenyMatches, ast.ArrayTerm(stringTerms(u.DenyMatches)...)),
			ast.Item(kBuiltin, ast.ArrayTerm(blockTerms(u.Builtin)...)),
			ast.Item(kError, ast.StringTerm(u.Error)),
		))
	}
	return in, nil
}

// inputString returns tool_input's value under key when it is a string;
// present says whether the key is there at all.
func inputString(in ast.Object, key string) (s string, isString, present bool) {
	t := in.Get(ast.StringTerm(key))
	if t == nil {
		return "", false, false
	}
	str, ok := t.Value.(ast.String)
	return string(str), ok, true
}

func pathFacts(eff *Effective, in ast.Object, fields []pathField, cwd string) []pathFact {
	if cwd == "" {
		cwd = eff.Policy.WorkspaceRoot
	}
	opts := hostpath.Options{Home: eff.home, Cwd: cwd}
	var facts []pathFact
	base := cwd
	for _, f := range fields {
		s, isString, present := inputString(in, f.field)
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
