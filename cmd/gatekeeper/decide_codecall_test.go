package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// codeCallCLIPolicy lets code call crm's get_* and delete_* tools, asks
// before one, and its operator rule (noDestructiveRule) denies a tool
// that is not read-only on its annotations.
const codeCallCLIPolicy = `version: 1
workspace_root: ./ws
tools:
  ask: [mcp__crm__get_secret]
mcp_servers:
  crm: {url: "http://127.0.0.1:9/mcp"}
code_calls:
  callable:
    crm: ["get_*", "delete_*"]
`

const noDestructiveRule = `package gatekeeper

deny contains {"rule": "ops.no_destructive", "reason": "code may not call a destructive tool"} if {
	input.event == "code_call"
	input.code_call.annotations.destructiveHint
}
`

// TestDecideDecidesACodeCallAsTheGateDoes: decide given a nested call
// (event code_call) answers what a program's call through the bridge
// gets: the callable globs, the tool's annotations (MCP's defaults where
// left out) as an operator rule reads them, the run's bounds, an ask
// that is a deny in code, and a query's narrowing override.
func TestDecideDecidesACodeCallAsTheGateDoes(t *testing.T) {
	t.Parallel()
	dir, file := writePolicy(t, codeCallCLIPolicy)
	regoDir := filepath.Join(dir, "rego")
	must(t, os.MkdirAll(regoDir, 0o755))
	must(t, os.WriteFile(filepath.Join(regoDir, "ops.rego"), []byte(noDestructiveRule), 0o644))
	tests := []struct {
		name     string
		call     string
		wantCode int
		wantRule string
		wantText string // in the reason, or on stderr for bad input
	}{
		{name: "a read-only callable tool is allowed",
			call:     `{"event":"code_call","server":"crm","tool":"get_customer","arguments":{"id":1},"annotations":{"readOnlyHint":true}}`,
			wantRule: "code_calls.callable"},
		{name: "a tool with no hints is destructive by MCP's default, which the operator's rule denies",
			call:     `{"event":"code_call","server":"crm","tool":"delete_customer","arguments":{"id":1}}`,
			wantCode: 1, wantRule: "ops.no_destructive"},
		{name: "a read-only tool is not destructive whatever it says",
			call:     `{"event":"code_call","server":"crm","tool":"delete_customer","annotations":{"readOnlyHint":true,"destructiveHint":true}}`,
			wantRule: "code_calls.callable"},
		{name: "a tool no callable glob names",
			call:     `{"event":"code_call","server":"crm","tool":"update_customer","annotations":{"readOnlyHint":true}}`,
			wantCode: 1, wantRule: "code_calls.not_callable"},
		{name: "a tool the server does not list",
			call:     `{"event":"code_call","server":"crm","tool":"get_nothing","tool_known":false}`,
			wantCode: 1, wantRule: "code_calls.unknown_tool"},
		{name: "a call past the run's max_calls",
			call:     `{"event":"code_call","server":"crm","tool":"get_customer","calls":201,"annotations":{"readOnlyHint":true}}`,
			wantCode: 1, wantRule: "code_calls.max_calls"},
		{name: "an ask is a deny when no human can answer",
			call:     `{"event":"code_call","server":"crm","tool":"get_secret","annotations":{"readOnlyHint":true}}`,
			wantCode: 1, wantRule: "tools.ask_list"},
		{name: "a query's override narrows callable",
			call:     `{"event":"code_call","server":"crm","tool":"delete_customer","annotations":{"readOnlyHint":true},"sandbox_policy":{"code_calls":{"callable":{"crm":["get_*"]}}}}`,
			wantCode: 1, wantRule: "code_calls.not_callable"},
		{name: "an unknown field is bad input",
			call:     `{"event":"code_call","server":"crm","tool":"get_customer","argument":{}}`,
			wantCode: 2, wantText: `unknown field "argument"`},
		{name: "a call without its tool is bad input",
			call:     `{"event":"code_call","server":"crm"}`,
			wantCode: 2, wantText: `"server" and "tool" are required`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := cli(t, tc.call, "decide", "--policy", file, "--rego-dir", regoDir, "--claude-code-dir", "")
			code := 0
			if e, ok := err.(exitError); ok {
				code = int(e)
			} else if err != nil {
				t.Fatalf("decide: %v\n%s", err, out)
			}
			if code != tc.wantCode {
				t.Fatalf("exit status %d, want %d\n%s", code, tc.wantCode, out)
			}
			if tc.wantCode == 2 {
				if !strings.Contains(out, tc.wantText) {
					t.Errorf("output %q does not say %q", out, tc.wantText)
				}
				return
			}
			var res decideResult
			must(t, json.Unmarshal([]byte(out), &res))
			if want := map[bool]string{true: "deny", false: "allow"}[tc.wantCode == 1]; res.Decision != want {
				t.Errorf("decision %q, want %q", res.Decision, want)
			}
			if res.Rule != tc.wantRule || !strings.Contains(res.Reason, tc.wantText) || !strings.HasPrefix(res.PolicyRevision, "sha256:") {
				t.Errorf("decision %+v; want rule %s and a reason with %q", res, tc.wantRule, tc.wantText)
			}
		})
	}
}
