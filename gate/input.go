package gate

import (
	"bytes"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
)

// This file builds the Rego input of a call (input.* in rego/): the call
// itself, the effective policy's terms, and the facts the sidecar reads
// from the tool's input (paths, pathfact.go; a WebFetch url, urlfact.go).

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
