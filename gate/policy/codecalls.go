package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// CodeCalls is the policy's code_calls section: which tools of the
// operator's MCP servers a sandboxed program may call through the bridge
// (code mode), and the bounds on those calls. Every call is still decided
// by the Rego policy; a tool that no callable glob names is denied.
type CodeCalls struct {
	// Callable maps an MCP server's name to globs of its tool names that
	// code may call. A glob's only wildcard is "*", any run of characters;
	// everything else matches itself. A server missing here has no
	// callable tool; the default is none at all.
	Callable map[string][]string `yaml:"callable" json:"callable"`
	// MaxCalls is the most calls one run may make (all outcomes count).
	MaxCalls int `yaml:"max_calls" json:"max_calls"`
	// MaxInFlight is the most calls of one run in flight at once.
	MaxInFlight int `yaml:"max_in_flight" json:"max_in_flight"`
	// MaxArgumentBytes bounds one call's arguments, as JSON.
	MaxArgumentBytes ByteSize `yaml:"max_argument_bytes" json:"max_argument_bytes"`
	// MaxResultBytes bounds one call's result, as JSON.
	MaxResultBytes ByteSize `yaml:"max_result_bytes" json:"max_result_bytes"`
	// Timeout bounds one call, decision and server together.
	Timeout Duration `yaml:"timeout" json:"timeout"`
}

// Hard bounds of code_calls, whatever a policy says: a call's arguments
// and result are held in the sidecar's memory and cross the sandbox's
// stdin and stdout as one frame each.
const (
	MaxCodeCallsPerRun      = 10000
	MaxCodeCallsInFlight    = 64
	MaxCodeCallArgumentSize = 16 << 20
	MaxCodeCallResultSize   = 64 << 20
	MaxCodeCallTimeout      = 10 * time.Minute
)

// defaultCodeCalls are the bounds a policy starts from, with no callable
// tool: enough for a program that pages through a few thousand records
// (200 calls of up to 1m each, 4 at a time, so a few servers can be joined
// concurrently without one run saturating a server), small enough that a
// runaway loop ends after a few hundred audit lines; 256k of arguments is
// far above any real tool input and far below a memory problem; 30s lets
// a slow remote tool answer (the run's own timeout still bounds it).
func defaultCodeCalls() CodeCalls {
	return CodeCalls{MaxCalls: 200, MaxInFlight: 4, MaxArgumentBytes: 256 << 10, MaxResultBytes: 1 << 20, Timeout: Duration(30 * time.Second)}
}

// Limits returns the bounds as the runner takes them.
func (c CodeCalls) Limits() runner.CallLimits {
	return runner.CallLimits{
		MaxCalls:         c.MaxCalls,
		MaxInFlight:      c.MaxInFlight,
		MaxArgumentBytes: int64(c.MaxArgumentBytes),
		MaxResultBytes:   int64(c.MaxResultBytes),
		Timeout:          c.Timeout.Std(),
	}
}

// Clone returns a deep copy.
func (c CodeCalls) Clone() CodeCalls {
	if c.Callable != nil {
		m := make(map[string][]string, len(c.Callable))
		for k, v := range c.Callable {
			m[k] = slices.Clone(v)
		}
		c.Callable = m
	}
	return c
}

// Matching returns the callable globs of server that match tool, in their
// order; none means code may not call the tool.
func (c CodeCalls) Matching(server, tool string) []string {
	out := []string{}
	for _, g := range c.Callable[server] {
		if MatchToolGlob(g, tool) {
			out = append(out, g)
		}
	}
	return out
}

// MatchToolGlob reports whether tool matches glob, whose only wildcard is
// "*" (any run of characters, none included). This is gatekeeper's one
// matcher of callable tool globs.
func MatchToolGlob(glob, tool string) bool {
	parts := strings.Split(glob, "*")
	if len(parts) == 1 {
		return glob == tool
	}
	if !strings.HasPrefix(tool, parts[0]) {
		return false
	}
	rest := tool[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return len(rest) >= len(last) && strings.HasSuffix(rest, last)
}

var (
	// serverNameRE is an MCP server's name in the policy (they become
	// Python module names in the sandbox).
	serverNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	toolGlobRE   = regexp.MustCompile(`^[A-Za-z0-9_.*-]{1,128}$`)
)

// codeCalls checks a code_calls section.
func (v *validator) codeCalls(c CodeCalls) {
	for _, server := range slices.Sorted(maps.Keys(c.Callable)) {
		at := "code_calls.callable." + server
		if !serverNameRE.MatchString(server) {
			v.add(at, "server name %q is not a lower-case name of at most 32 letters, digits and _ starting with a letter", server)
		}
		for i, g := range c.Callable[server] {
			switch {
			case !toolGlobRE.MatchString(g):
				v.add(fmt.Sprintf("%s[%d]", at, i), "%q is not a tool name glob: 1 to 128 of A-Z a-z 0-9 _ . - and the wildcard *", g)
			case slices.Index(c.Callable[server], g) < i:
				v.add(fmt.Sprintf("%s[%d]", at, i), "%q is listed twice", g)
			}
		}
	}
	for _, f := range []struct {
		path   string
		n, min int64
		max    int64
		show   func(int64) string
	}{
		{runner.RuleMaxCalls, int64(c.MaxCalls), 0, MaxCodeCallsPerRun, count},
		{runner.RuleMaxInFlight, int64(c.MaxInFlight), 1, MaxCodeCallsInFlight, count},
		{runner.RuleMaxArgumentBytes, int64(c.MaxArgumentBytes), 1, MaxCodeCallArgumentSize, size},
		{runner.RuleMaxResultBytes, int64(c.MaxResultBytes), 1, MaxCodeCallResultSize, size},
		{runner.RuleTimeout, int64(c.Timeout), 1, int64(MaxCodeCallTimeout), dur},
	} {
		if f.n < f.min || f.n > f.max {
			v.add(f.path, "%s is out of range: %s to %s", f.show(f.n), f.show(f.min), f.show(f.max))
		}
	}
}

func count(n int64) string { return fmt.Sprint(n) }
func size(n int64) string  { return ByteSize(n).String() }
func dur(n int64) string   { return time.Duration(n).String() }

// narrows checks that an override's code_calls (o) asks for no more than
// the base section (c) allows: every server it names is callable in the
// base, every entry is either one of the base's globs for that server,
// written as it is there, or a plain tool name (no *) a base glob
// matches; and every bound is at most the base's. A glob that is not
// literally the base's is refused even when it happens to be narrower:
// which tools a glob matches depends on what the server lists, so only
// these two forms are narrower whatever it lists.
func (v *validator) narrows(c, o CodeCalls) {
	for _, server := range slices.Sorted(maps.Keys(o.Callable)) {
		at := "code_calls.callable." + server
		base, ok := c.Callable[server]
		if !ok {
			v.add(at, "server %q has no callable tools in the policy, and an override may only narrow code_calls.callable", server)
			continue
		}
		for i, g := range o.Callable[server] {
			if slices.Contains(base, g) || (!strings.Contains(g, "*") && len(c.Matching(server, g)) > 0) {
				continue
			}
			v.add(fmt.Sprintf("%s[%d]", at, i), "%q widens code_calls.callable.%s: an override may only repeat one of the policy's globs (%s) or name a tool one of them matches", g, server, strings.Join(base, ", "))
		}
	}
	for _, f := range []struct {
		path       string
		base, over int64
		show       func(int64) string
	}{
		{runner.RuleMaxCalls, int64(c.MaxCalls), int64(o.MaxCalls), count},
		{runner.RuleMaxInFlight, int64(c.MaxInFlight), int64(o.MaxInFlight), count},
		{runner.RuleMaxArgumentBytes, int64(c.MaxArgumentBytes), int64(o.MaxArgumentBytes), size},
		{runner.RuleMaxResultBytes, int64(c.MaxResultBytes), int64(o.MaxResultBytes), size},
		{runner.RuleTimeout, int64(c.Timeout), int64(o.Timeout), dur},
	} {
		if f.over > f.base {
			v.add(f.path, "%s exceeds the policy's %s: an override may only lower it", f.show(f.over), f.show(f.base))
		}
	}
}

// overrideKey is the key of a per-query override (sandbox_policy) that
// carries its code_calls section; every other key is the sandbox's.
const overrideKey = "code_calls"

// QueryOverride is Override for the whole per-query override: the sandbox
// keys are merged over the base sandbox as Override does, and a code_calls
// key over the base code_calls section, where callable, when given,
// replaces the base's map and may only narrow it, and each bound may only
// be lowered (see narrows). Every problem is located in the override.
func (p *Policy) QueryOverride(raw []byte) (Sandbox, CodeCalls, error) {
	merged, calls := p.Sandbox.Clone(), p.CodeCalls.Clone()
	if len(raw) == 0 {
		return merged, calls, nil
	}
	// JSON is YAML, but tabs and pretty-printing are not always; compact it.
	var compact bytes.Buffer
	if json.Compact(&compact, raw) == nil {
		raw = compact.Bytes()
	}
	const file = "sandbox_policy"
	root, probs := parseDoc(file, raw)
	if len(probs) > 0 {
		return Sandbox{}, CodeCalls{}, &Error{Problems: probs}
	}
	var ccNode *yaml.Node
	if root.Kind == yaml.MappingNode {
		rest := *root
		rest.Content = nil
		for i := 0; i+1 < len(root.Content); i += 2 {
			if k := root.Content[i]; k.Value == overrideKey {
				if ccNode != nil {
					probs = append(probs, Problem{File: file, Line: k.Line, Col: k.Column, Path: overrideKey, Msg: fmt.Sprintf("key %q appears twice", overrideKey)})
				}
				ccNode = root.Content[i+1]
				continue
			}
			rest.Content = append(rest.Content, root.Content[i], root.Content[i+1])
		}
		root = &rest
	}
	pos, sbProbs := decodeNode(file, root, reflect.ValueOf(&merged).Elem(), "sandbox")
	probs = append(probs, sbProbs...)
	if ccNode != nil {
		calls.Callable = nil // a callable given replaces the base's map
		ccPos, ccProbs := decodeNode(file, ccNode, reflect.ValueOf(&calls).Elem(), overrideKey)
		probs = append(probs, ccProbs...)
		if _, given := ccPos[overrideKey+".callable"]; !given {
			calls.Callable = p.CodeCalls.Clone().Callable
		}
		if pos != nil {
			maps.Copy(pos, ccPos)
		}
	}
	if len(probs) > 0 {
		return Sandbox{}, CodeCalls{}, &Error{Problems: probs}
	}
	merged.defaultImage()
	v := validator{file: file, pos: pos}
	v.sandbox(merged, "sandbox.")
	v.netSecrets(merged, p.Secrets, "sandbox.", false)
	v.codeCalls(calls)
	v.narrows(p.CodeCalls, calls)
	if err := v.err(); err != nil {
		return Sandbox{}, CodeCalls{}, err
	}
	return merged, calls, nil
}
