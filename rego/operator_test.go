package rego_test

import (
	"errors"
	"strings"
	"testing"

	oparego "github.com/open-policy-agent/opa/v1/rego"

	"github.com/gatekeeper-ai/gatekeeper/rego"
)

// TestCompilePolicyRefusesModulesThatChangeTheBuiltins is the table of what
// an operator module may and may not do (issue 10, section 6).
func TestCompilePolicyRefusesModulesThatChangeTheBuiltins(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, module string
		want         string // "" for accepted, else a part of the error
	}{
		{"a deny finding object is accepted", `package gatekeeper

deny contains {"rule": "team.no_notes", "reason": "notes are private"} if input.tool_name == "Read"
`, ""},
		{"a finding built from a sprintf is accepted", `package gatekeeper

deny contains {"rule": "team.x", "reason": msg} if {
	input.tool_name == "Read"
	msg := sprintf("no %s", [input.tool_name])
}
`, ""},
		{"a finding taken from the input is left to the run-time check", `package gatekeeper

deny contains f if f := input.tool_input.finding
`, ""},
		{"ask, allow and a helper of a new name are accepted", `package gatekeeper

team_tools := {"Read"}

ask contains {"rule": "team.ask", "reason": "ask"} if input.tool_name in team_tools

allow contains {"rule": "team.allow", "reason": "ok"} if input.tool_name == "TodoWrite"
`, ""},
		{"a violation of the constraints is accepted", `package gatekeeper.constraints

violations contains "sandbox.net.enabled is not allowed for this team" if input.merged.net.enabled
`, ""},
		{"a library package of the operator's own is accepted", `package team.lib

in_workspace(p) if true

decision := "anything"
`, ""},
		{"a string deny finding is refused", `package gatekeeper

deny contains "reads are not allowed" if input.tool_name == "Read"
`, `team.rego:3: rule gatekeeper.deny adds the string "reads are not allowed" (the usual OPA style), which gatekeeper cannot read`},
		{"a sprintf deny message is refused", `package gatekeeper

deny contains msg if {
	input.tool_name == "Read"
	msg := sprintf("no %s", [input.tool_name])
}
`, `team.rego:3: rule gatekeeper.deny adds findings of type string, which gatekeeper cannot read (a string is not an object)`},
		{"a finding without reason is refused", `package gatekeeper

deny contains {"rule": "team.x"} if true
`, `team.rego:3: rule gatekeeper.deny adds a finding that lacks rule or reason`},
		{"a finding with a third key is refused", `package gatekeeper

ask contains {"rule": "team.x", "reason": "r", "severity": "high"} if true
`, `team.rego:3: rule gatekeeper.ask adds a finding that has the key "severity"`},
		{"a computed finding without reason is refused", `package gatekeeper

allow contains f if {
	f := {"rule": sprintf("team.%s", [input.tool_name])}
}
`, `rule gatekeeper.allow adds findings of type object<rule: string>, which gatekeeper cannot read (it lacks rule or reason)`},
		{"an empty rule name is refused", `package gatekeeper

deny contains {"rule": "", "reason": "r"} if true
`, `adds a finding that has an empty rule`},
		{"a number violation is refused", `package gatekeeper.constraints

violations contains 5 if true
`, `rule gatekeeper.constraints.violations adds 5, not a string`},
		{"a single-value allow is refused", `package gatekeeper

allow if input.tool_name == "Read"
`, `rule gatekeeper.allow must be a set`},
		{"a default decision is refused", `package gatekeeper

default decision := {"decision": "allow", "rule": "team.x", "reason": "y"}
`, `team.rego:3: rule gatekeeper.decision is defined by gatekeeper's built-in policy`},
		{"a helper of the built-in package is refused", `package gatekeeper

allowlisted if true
`, `team.rego:3: rule gatekeeper.allowlisted is defined by gatekeeper's built-in policy`},
		{"a helper of the constraints package is refused", `package gatekeeper.constraints

fmt(n, u) := "x"
`, `rule gatekeeper.constraints.fmt is defined by gatekeeper's built-in policy`},
		{"the package of the built-in helpers is refused", `package gatekeeper.core

in_workspace(p) if true
`, `team.rego:1: package gatekeeper.core is reserved for gatekeeper's built-in policy`},
		{"any other package under gatekeeper is refused", `package gatekeeper.team

deny contains {"rule": "a", "reason": "b"} if true
`, `package gatekeeper.team is reserved`},
		{"a rule reaching into the helpers' package with a dotted name is refused", `package gatekeeper

core.in_workspace := true
`, `team.rego:3: rule gatekeeper.core.in_workspace: a rule of package gatekeeper must have a one-word name`},
		{"a rule named like the helpers' package is refused", `package gatekeeper

core := {"a": 1}
`, `rule gatekeeper.core is defined by gatekeeper's built-in policy`},
		{"a function named like a Rego built-in is refused", `package gatekeeper

startswith(a, b) := true
`, `team.rego:3: rule gatekeeper.startswith is named like Rego's built-in "startswith"`},
		{"a rule named like a Rego namespace is refused", `package gatekeeper

glob := {"match": true}
`, `rule gatekeeper.glob is named like Rego's built-in "glob"`},
		{"a default for deny is refused", `package gatekeeper

default deny := {}
`, `a default for data.gatekeeper.deny would replace the built-in one`},
		{"the helpers' package spelled with a string key is refused", `package gatekeeper["core"]

in_workspace(_) if true
`, `team.rego:1: package gatekeeper.core is reserved`},
		{"a rule reaching into the helpers' package with a string key is refused", `package gatekeeper

core["in_workspace"] := true
`, `rule gatekeeper.core.in_workspace: a rule of package gatekeeper must have a one-word name`},
		{"allow as an object is refused", `package gatekeeper

allow[x] if x := {"rule": "team.a", "reason": "b"}
`, `conflicting rules data.gatekeeper.allow`},
		{"a rule shadowing input is refused", `package gatekeeper

input := {"tool_name": "Read", "tool_kind": "other"}
`, `rules must not shadow input`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := rego.CompilePolicy(map[string]string{"/ops/team.rego": tc.module})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted; want an error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error\n%v\ndoes not contain %q", err, tc.want)
			case tc.want != "" && strings.Contains(tc.want, "team.rego") && !errors.Is(err, rego.ErrOperatorModule):
				t.Fatalf("error %v does not wrap ErrOperatorModule", err)
			}
		})
	}
}

func TestCompilePolicyRefusesTheNameOfABuiltinModule(t *testing.T) {
	t.Parallel()
	_, err := rego.CompilePolicy(map[string]string{"rego/gatekeeper.rego": "package gatekeeper\n"})
	if !errors.Is(err, rego.ErrOperatorModule) {
		t.Fatalf("err = %v, want ErrOperatorModule", err)
	}
}

// TestABuiltinShadowedInTheSamePackageWouldChangeBuiltinRules shows why a
// rule named like a Rego built-in is refused: OPA resolves the name to the
// package's rule for every module of the package, built-in rules included.
func TestABuiltinShadowedInTheSamePackageWouldChangeBuiltinRules(t *testing.T) {
	t.Parallel()
	c, err := rego.Compile(map[string]string{
		"builtin.rego":  "package p\n\nq if startswith(\"abc\", \"x\")\n",
		"operator.rego": "package p\n\nstartswith(_, _) := true\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := oparego.New(oparego.Query("data.p.q"), oparego.Compiler(c)).Eval(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !rs.Allowed() {
		t.Fatalf("q is %v: OPA no longer lets a rule shadow a built-in; the refusal may be relaxed", rs)
	}
}
