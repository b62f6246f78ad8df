package gate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
)

// httpRuleProblems finds, in the operator's modules (file name → source,
// which compiled), request rules (event http_request) that can never do what
// they say, and returns each as "file:line: text":
//
//   - input.http.method compared with a string that has a lower-case
//     letter: the proxy gives the method as sent, and clients send the
//     standard ones in upper case, so `input.http.method == "get"` never
//     holds and a deny written with it never fires;
//   - input.http.host compared with a host that neither sandbox.net.inspect
//     nor a secret's hosts match: requests to it are tunnelled, never
//     decided, so the rule never runs;
//   - input.http.path compared with (or tested with startswith against) a
//     literal that does not start with "/": every path does.
//
// It reads comparisons written directly against the input (==, !=, =,
// in, startswith), not values passed through variables: a check made
// statically, best effort, that the policy's own tests complement.
func httpRuleProblems(operator map[string]string, p *policy.Policy) []string {
	inspected := make([]nethost.Pattern, 0, len(p.Sandbox.Net.Inspect))
	for _, h := range p.Sandbox.Net.Inspect {
		if q, err := nethost.ParseAllow(h); err == nil {
			inspected = append(inspected, q)
		}
	}
	for _, s := range p.Secrets {
		for _, h := range s.Hosts {
			if q, err := nethost.ParseAllow(h); err == nil {
				inspected = append(inspected, q)
			}
		}
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(operator)) {
		// The parsed module, as written: the compiler rewrites
		// comparisons through local variables.
		m, err := ast.ParseModuleWithOpts(name, operator[name], ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			continue // unreachable: the module compiled
		}
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			for _, f := range comparedFields(e) {
				if msg := f.problem(inspected); msg != "" {
					out = append(out, fmt.Sprintf("%s:%d: %s", e.Location.File, e.Location.Row, msg))
				}
			}
			return false
		})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// comparison is one literal an expression compares an input.http field with.
type comparison struct {
	field   string // "method", "host" or "path"
	literal string
	prefix  bool // startswith
}

func (c comparison) problem(inspected []nethost.Pattern) string {
	switch c.field {
	case "method":
		if c.literal != strings.ToUpper(c.literal) {
			return fmt.Sprintf("input.http.method is compared with %q, but a request's method arrives as sent, upper case for the standard methods (%q): the comparison never holds", c.literal, strings.ToUpper(c.literal))
		}
	case "host":
		h, err := nethost.Normalize(c.literal)
		switch {
		case err != nil:
			return fmt.Sprintf("input.http.host is compared with %q, which is not a host name: %v", c.literal, err)
		case h != c.literal:
			return fmt.Sprintf("input.http.host is compared with %q, but the host arrives normalized (%q): the comparison never holds", c.literal, h)
		case !policy.Reachable(h, inspected):
			return fmt.Sprintf("input.http.host is compared with %q, which neither sandbox.net.inspect nor a secret's hosts match: its requests are tunnelled, never decided, so this rule never runs (add the host to sandbox.net.inspect)", c.literal)
		}
	case "path":
		if !strings.HasPrefix(c.literal, "/") {
			what := "compared with"
			if c.prefix {
				what = "tested for the prefix"
			}
			return fmt.Sprintf("input.http.path is %s %q, but every path starts with \"/\": the comparison never holds (write %q)", what, c.literal, "/"+c.literal)
		}
	}
	return ""
}

// comparedFields returns the literals e compares input.http.method, host
// and path with.
func comparedFields(e *ast.Expr) []comparison {
	if !e.IsCall() {
		return nil
	}
	ops := e.Operands()
	switch e.Operator().String() {
	case "equal", "neq", "eq":
		if len(ops) != 2 {
			return nil
		}
		if c, ok := compared(ops[0], ops[1], false); ok {
			return []comparison{c}
		}
		if c, ok := compared(ops[1], ops[0], false); ok {
			return []comparison{c}
		}
	case "startswith":
		if len(ops) == 2 {
			if c, ok := compared(ops[0], ops[1], true); ok && c.field == "path" {
				return []comparison{c}
			}
		}
	case "internal.member_2":
		if len(ops) != 2 {
			return nil
		}
		var out []comparison
		each := func(t *ast.Term) {
			if c, ok := compared(ops[0], t, false); ok {
				out = append(out, c)
			}
		}
		switch coll := ops[1].Value.(type) {
		case ast.Set:
			coll.Foreach(each)
		case *ast.Array:
			coll.Foreach(each)
		}
		return out
	}
	return nil
}

// compared reports the field of ref when it is input.http.method, host or
// path and lit is a string.
func compared(ref, lit *ast.Term, prefix bool) (comparison, bool) {
	r, ok := ref.Value.(ast.Ref)
	s, isStr := lit.Value.(ast.String)
	if !ok || !isStr {
		return comparison{}, false
	}
	for _, f := range []string{"method", "host", "path"} {
		if r.String() == "input.http."+f {
			return comparison{field: f, literal: string(s), prefix: prefix}, true
		}
	}
	return comparison{}, false
}
