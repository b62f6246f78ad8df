package rego

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/types"
)

// Packages operator modules may add rules to, and the rules of those
// packages they may extend. Every other rule of a built-in package, and
// every other package under gatekeeper, belongs to the built-in policy.
const (
	pkgDecision    = "data.gatekeeper"
	pkgConstraints = "data.gatekeeper.constraints"
)

// extensible are the built-in rules operator modules add to: the finding
// sets of the decision and the override constraints' violations.
var extensible = map[string]string{
	pkgDecision + ".deny":          "finding",
	pkgDecision + ".ask":           "finding",
	pkgDecision + ".allow":         "finding",
	pkgConstraints + ".violations": "violation",
}

// ErrOperatorModule marks an operator module refused because it could
// change the built-in policy or produce findings gatekeeper cannot read.
var ErrOperatorModule = errors.New("operator module refused")

// CompilePolicy parses the built-in policy and the operator's modules
// (file name → source, Rego v1), checks the operator's modules with
// CheckOperator, and compiles everything with Capabilities. Errors name the
// file and line.
func CompilePolicy(operator map[string]string) (*ast.Compiler, error) {
	builtinSrc, err := Builtin()
	if err != nil {
		return nil, err
	}
	for name := range operator {
		if _, clash := builtinSrc[name]; clash {
			return nil, fmt.Errorf("%w: %s: the name of a built-in module", ErrOperatorModule, name)
		}
	}
	builtins, err := parse(builtinSrc)
	if err != nil {
		return nil, err
	}
	ops, err := parse(operator)
	if err != nil {
		return nil, err
	}
	if err := CheckOperator(builtins, ops); err != nil {
		return nil, err
	}
	all := maps.Clone(builtins)
	maps.Copy(all, ops)
	return compileParsed(all)
}

// CheckOperator refuses operator modules (parsed, by file name) that could
// change the built-in modules' logic, and finding rules gatekeeper could
// not read. An operator module may:
//
//   - declare package gatekeeper and add to deny, ask and allow, or package
//     gatekeeper.constraints and add to violations, with helper rules and
//     functions of names the built-in package does not use;
//   - declare any package outside gatekeeper, for its own helpers.
//
// It may not declare another package under gatekeeper (gatekeeper.core
// holds the built-in helpers), define a rule or function the built-in
// package defines (decision, a default, a helper: Rego would merge its
// definitions into the built-in ones), name a rule with dots in those
// packages, or name one like a Rego built-in function or namespace
// (startswith, glob), which would replace that function for the built-in
// rules of the package too. A finding must be exactly {"rule": <non-empty
// string>, "reason": <non-empty string>} and a violation a string: a rule
// whose head can never be one (a string finding, an object without reason)
// is refused here, and one that produces such a value at run time denies
// the call (gatekeeper.unreadable_finding in core.rego). The error wraps
// ErrOperatorModule and names every problem's file and line.
func CheckOperator(builtins, operator map[string]*ast.Module) error {
	builtinRules := map[string]bool{}
	for _, m := range builtins {
		for _, r := range m.Rules {
			builtinRules[r.Path().String()] = true
		}
	}
	reservedNames := builtinNamespaces()
	var probs problems
	var typed []*ast.Rule // finding and violation rules whose head needs the type checker
	for _, name := range slices.Sorted(maps.Keys(operator)) {
		m := operator[name]
		pkg := m.Package.Path.String()
		if strings.HasPrefix(pkg, pkgDecision+".") && pkg != pkgConstraints {
			probs.add(m.Package.Location, "package %s is reserved for gatekeeper's built-in policy: put rules in package gatekeeper (deny, ask, allow) or gatekeeper.constraints (violations), and helpers in a package of your own", strings.TrimPrefix(pkg, "data."))
			continue
		}
		if pkg != pkgDecision && pkg != pkgConstraints {
			continue // the operator's own package: nothing built in lives there
		}
		for _, r := range m.Rules {
			path := r.Path().String()
			head := r.Head.Ref()
			shown := strings.TrimPrefix(path, "data.")
			switch kind, ext := extensible[path]; {
			case len(head.GroundPrefix()) > 1:
				probs.add(r.Location, "rule %s: a rule of package %s must have a one-word name (no dots), so that it cannot reach into the built-in policy", shown, strings.TrimPrefix(pkg, "data."))
			case ext:
				if r.Default {
					probs.add(r.Location, "rule %s: a default for %s would replace the built-in one; add to it with `contains`", shown, path)
					continue
				}
				if msg := literalProblem(kind, r); msg != "" {
					probs.add(r.Location, "%s", msg)
				} else if needsTypes(r) {
					typed = append(typed, r)
				}
			case builtinRules[path] || reservesPrefix(builtinRules, path):
				probs.add(r.Location, "rule %s is defined by gatekeeper's built-in policy, and Rego would merge this definition into it; give your rule another name (operator modules may add to deny, ask and allow, and to constraints.violations)", shown)
			case reservedNames[head[0].Value.String()]:
				probs.add(r.Location, "rule %s is named like Rego's built-in %q, which it would replace for the built-in rules of the package too; give it another name", shown, head[0].Value.String())
			}
		}
	}
	if len(probs) == 0 && len(typed) > 0 {
		probs = typeProblems(builtins, operator, typed)
	}
	if len(probs) > 0 {
		sort.Strings(probs)
		return fmt.Errorf("%w:\n%s", ErrOperatorModule, strings.Join(probs, "\n"))
	}
	return nil
}

type problems []string

func (p *problems) add(loc *ast.Location, format string, args ...any) {
	at := "?"
	if loc != nil {
		at = fmt.Sprintf("%s:%d", loc.File, loc.Row)
	}
	*p = append(*p, at+": "+fmt.Sprintf(format, args...))
}

// reservesPrefix reports whether path is a proper prefix of a built-in
// rule's path (a rule named core in package gatekeeper would be
// data.gatekeeper.core, the built-in helpers' package).
func reservesPrefix(builtinRules map[string]bool, path string) bool {
	for p := range builtinRules {
		if strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") {
			return true
		}
	}
	return false
}

// builtinNamespaces are the names an operator rule of a built-in package
// may not take: every Rego built-in function, and the first part of the
// dotted ones (glob, regex, time, …).
func builtinNamespaces() map[string]bool {
	out := map[string]bool{}
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		first, _, _ := strings.Cut(b.Name, ".")
		out[first] = true
	}
	return out
}

// literalProblem judges the head of a finding or violation rule written as
// a literal: a string finding, an object without rule or reason or with
// other keys, a non-string violation. It returns "" when the head is not a
// literal or is a good one.
func literalProblem(kind string, r *ast.Rule) string {
	key := r.Head.Key
	if key == nil {
		return fmt.Sprintf("rule %s must be a set: write `%s contains {...} if ...`", strings.TrimPrefix(r.Path().String(), "data."), r.Head.Ref())
	}
	name := strings.TrimPrefix(r.Path().String(), "data.")
	if kind == "violation" {
		switch key.Value.(type) {
		case ast.String, ast.Var, ast.Ref, ast.Call:
			return ""
		}
		return fmt.Sprintf("rule %s adds %s, not a string: a violation is a sentence", name, key)
	}
	switch v := key.Value.(type) {
	case ast.String:
		return fmt.Sprintf("rule %s adds the string %s (the usual OPA style), which gatekeeper cannot read: a finding is exactly {\"rule\": \"team.name\", \"reason\": <sentence>}", name, v)
	case ast.Number, ast.Boolean, ast.Null, *ast.Array, ast.Set, *ast.ArrayComprehension, *ast.SetComprehension:
		return fmt.Sprintf("rule %s adds %s, which gatekeeper cannot read: a finding is exactly {\"rule\": \"team.name\", \"reason\": <sentence>}", name, key)
	case ast.Object:
		var keys []string
		bad := ""
		v.Foreach(func(k, val *ast.Term) {
			s, ok := k.Value.(ast.String)
			if !ok || (s != "rule" && s != "reason") {
				bad = fmt.Sprintf("has the key %s", k)
				return
			}
			keys = append(keys, string(s))
			switch x := val.Value.(type) {
			case ast.String:
				if x == "" {
					bad = fmt.Sprintf("has an empty %s", string(s))
				}
			case ast.Var, ast.Ref, ast.Call:
			default:
				bad = fmt.Sprintf("has a %s that is not a string", string(s))
			}
		})
		if bad == "" && len(keys) != 2 {
			bad = "lacks rule or reason"
		}
		if bad != "" {
			return fmt.Sprintf("rule %s adds a finding that %s: a finding is exactly {\"rule\": \"team.name\", \"reason\": <sentence>}", name, bad)
		}
	}
	return ""
}

// needsTypes reports whether the head of r is computed (a variable, a
// reference, a call, or an object holding one), so that only the type
// checker can tell what it is.
func needsTypes(r *ast.Rule) bool { return !r.Head.Key.IsGround() }

const probePrefix = "gatekeeper_probe_"

// typeProblems compiles the modules with a copy of each rule of typed,
// under a name of its own, and refuses the rules whose head the type
// checker proves can never be a readable finding (or violation).
func typeProblems(builtins, operator map[string]*ast.Module, typed []*ast.Rule) problems {
	all := map[string]*ast.Module{}
	for name, m := range builtins {
		all[name] = m.Copy()
	}
	probeOf := map[string]*ast.Rule{}
	for name, m := range operator {
		cp := m.Copy()
		for i, r := range typed {
			if r.Module != m {
				continue
			}
			pr := r.Copy()
			v := ast.Var(fmt.Sprintf("%s%d", probePrefix, i))
			pr.Head.Name = v
			pr.Head.Reference = ast.Ref{ast.VarTerm(string(v))}
			pr.Module = cp
			cp.Rules = append(cp.Rules, pr)
			probeOf[cp.Package.Path.String()+"."+string(v)] = r
		}
		all[name] = cp
	}
	c, err := compileParsed(all)
	if err != nil {
		// The real compile reports it, without the probes' names.
		return nil
	}
	var probs problems
	for _, path := range slices.Sorted(maps.Keys(probeOf)) {
		r := probeOf[path]
		kind := extensible[r.Path().String()]
		set, ok := c.TypeEnv.Get(ast.MustParseRef(path)).(*types.Set)
		if !ok {
			continue
		}
		name := strings.TrimPrefix(r.Path().String(), "data.")
		if kind == "violation" {
			if !maybeString(set.Of()) {
				probs.add(r.Location, "rule %s adds values of type %s, never a string: a violation is a sentence", name, types.Sprint(set.Of()))
			}
			continue
		}
		if why := unreadable(set.Of()); why != "" {
			probs.add(r.Location, "rule %s adds findings of type %s, which gatekeeper cannot read (%s): a finding is exactly {\"rule\": \"team.name\", \"reason\": <sentence>}", name, types.Sprint(set.Of()), why)
		}
	}
	return probs
}

// unreadable says why a value of type t can never be a readable finding,
// or "" when it may be one.
func unreadable(t types.Type) string {
	switch t := t.(type) {
	case types.Any:
		if len(t) == 0 {
			return ""
		}
		var whys []string
		for _, m := range t {
			why := unreadable(m)
			if why == "" {
				return ""
			}
			whys = append(whys, why)
		}
		return strings.Join(whys, "; ")
	case *types.Object:
		seen := map[string]bool{}
		for _, p := range t.StaticProperties() {
			k, _ := p.Key.(string)
			if k != "rule" && k != "reason" {
				return fmt.Sprintf("it has the key %v", p.Key)
			}
			if !maybeString(p.Value) {
				return fmt.Sprintf("its %s is not a string", k)
			}
			seen[k] = true
		}
		if t.DynamicProperties() == nil && (!seen["rule"] || !seen["reason"]) {
			return "it lacks rule or reason"
		}
		return ""
	}
	return fmt.Sprintf("a %s is not an object", types.Sprint(t))
}

// maybeString reports whether a value of type t may be a string.
func maybeString(t types.Type) bool {
	switch t := t.(type) {
	case types.String:
		return true
	case types.Any:
		if len(t) == 0 {
			return true
		}
		return slices.ContainsFunc(t, maybeString)
	}
	return false
}
