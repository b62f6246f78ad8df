package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/client/claudecode"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

// launchCodesRule is an operator rule that refuses a run, at the
// sidecar's re-decision of it (event run), whose code names the launch
// codes; the model's PreToolUse call for the same run is allowed.
const launchCodesRule = `package gatekeeper

deny contains {"rule": "team.no_launch_codes", "reason": "runs may not touch the launch codes"} if {
	input.event == "run"
	contains(input.tool_input.code, "launch_codes")
}
`

// engineInputs writes the operator's inputs beside a policy that allows
// sandboxed runs: a rego dir with launchCodesRule and a Claude Code
// managed settings directory whose hook names a binary (a module of the
// revision).
func engineInputs(t *testing.T) (dir, file, regoDir, ccDir string) {
	t.Helper()
	dir, file = writePolicy(t, runPolicy)
	regoDir, ccDir = filepath.Join(dir, "team.d"), filepath.Join(dir, "claude-code")
	must(t, os.MkdirAll(regoDir, 0o755))
	must(t, os.MkdirAll(ccDir, 0o755))
	must(t, os.WriteFile(filepath.Join(regoDir, "team.rego"), []byte(launchCodesRule), 0o644))
	must(t, os.WriteFile(filepath.Join(ccDir, claudecode.SettingsFile), []byte(`{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"/opt/gk/bin/gatekeeper","args":["hook"]}]}]}}`), 0o644))
	return dir, file, regoDir, ccDir
}

var revisionRE = regexp.MustCompile(`: ok \(revision (sha256:[0-9a-f]{64})\)`)

// policyCheckRevision runs policy check with args and returns the
// revision it prints.
func policyCheckRevision(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cli(t, "", append([]string{"policy", "check"}, args...)...)
	m := revisionRE.FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("policy check %v: %v\n%s", args, err, out)
	}
	return m[1]
}

// decidedRun reads a run's decision as decide and run print it, with the
// exit status, which must be 1.
func decidedRun(t *testing.T, what, out string, err error) decideResult {
	t.Helper()
	if code, ok := err.(exitError); !ok || code != 1 {
		t.Fatalf("%s: %v, want exit status 1 (denied)\n%s", what, err, out)
	}
	var res decideResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%s printed %q: %v", what, out, err)
	}
	return res
}

// runAuditLine is the audit line of the run with tool_use_id in log.
func runAuditLine(t *testing.T, log, toolUseID string) audit.Record {
	t.Helper()
	f, err := os.Open(log)
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec audit.Record
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Kind == audit.KindRun && rec.ToolUseID == toolUseID {
			return rec
		}
	}
	t.Fatalf("no run line for %s in %s", toolUseID, log)
	return audit.Record{}
}

// TestOneOperatorRuleDecidesUnderEveryCommand runs one operator rule
// through the four commands that load a policy, with the operator's
// inputs given as flags and, in the second case, as GATEKEEPER_REGO_DIR
// and GATEKEEPER_CLAUDE_CODE_DIR: policy check prints the revision; decide
// denies the run's call by the rule; serve (real OPA, a real sidecar)
// allows the model's call and then refuses its run frame by the rule, and
// its audit line names the rule; gatekeeper run refuses the same run by
// the rule before it makes a sandbox (its --runner does not exist, so a
// run the rule let through would fail naming it). All four report one
// revision, which counts the rule and the managed settings, so that no
// command runs the code past the rule or reports a revision of its own.
func TestOneOperatorRuleDecidesUnderEveryCommand(t *testing.T) {
	const rule = "team.no_launch_codes"
	const code = `print(open("launch_codes").read())`
	for _, how := range []string{"flags", "environment"} {
		t.Run("the operator's inputs as "+how, func(t *testing.T) {
			_, file, regoDir, ccDir := engineInputs(t)
			var inputs []string // what each command is given
			if how == "flags" {
				inputs = []string{"--rego-dir", regoDir, "--claude-code-dir", ccDir}
			} else {
				t.Setenv("GATEKEEPER_REGO_DIR", regoDir)
				t.Setenv("GATEKEEPER_CLAUDE_CODE_DIR", ccDir)
			}
			revisions := map[string]string{}

			revisions["policy check"] = policyCheckRevision(t, append(inputs, file)...)
			if bare := policyCheckRevision(t, "--rego-dir", "", "--claude-code-dir", "", file); bare == revisions["policy check"] {
				t.Errorf("the revision %s does not count the rego dir and the managed settings", bare)
			}

			call := fmt.Sprintf(`{"event":"run","tool_name":"mcp__sandboxed_code__run","tool_input":{"language":"python","code":%q},"mcp_server":{"name":"sandboxed_code","source":"sdk"}}`, code)
			out, err := cli(t, call, append([]string{"decide", "--policy", file}, inputs...)...)
			d := decidedRun(t, "decide", out, err)
			if d.Decision != "deny" || d.Rule != rule {
				t.Errorf("decide: %s by %s, want deny by %s", d.Decision, d.Rule, rule)
			}
			revisions["decide"] = d.PolicyRevision

			out, err = cli(t, "", append([]string{"run", "--policy", file, "--lang", "python", "--runner", "podman", "-c", code}, inputs...)...)
			r := decidedRun(t, "run", out, err)
			if r.Decision != "deny" || r.Rule != rule {
				t.Errorf("run: %s by %s, want deny by %s", r.Decision, r.Rule, rule)
			}
			revisions["run"] = r.PolicyRevision

			side := startWSSidecar(t, file, inputs...)
			input, err := json.Marshal(map[string]string{"language": "python", "code": code})
			must(t, err)
			pre := side.do(t, fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":"mcp__sandboxed_code__run","tool_input":%s,"tool_use_id":"toolu_1","mcp_server":{"name":"sandboxed_code","source":"sdk"}}`, side.query, input))
			if pre["decision"] != "allow" {
				t.Fatalf("serve: the model's call: %v, want allow (the rule judges the run)", pre)
			}
			frame, err := json.Marshal(map[string]any{"type": "run", "id": "r", "query_id": side.query, "tool_use_id": "toolu_1", "language": "python", "code": code})
			must(t, err)
			if e := side.do(t, string(frame)); e["code"] != "run_denied" || e["rule"] != rule {
				t.Errorf("serve: the run: %v, want run_denied by %s", e, rule)
			}
			line := runAuditLine(t, filepath.Join(filepath.Dir(file), "audit.jsonl"), "toolu_1")
			if line.Decision != "deny" || line.Rule != rule {
				t.Errorf("serve's audit line: %s by %s, want deny by %s", line.Decision, line.Rule, rule)
			}
			if pre["policy_revision"] != line.PolicyRevision {
				t.Errorf("serve decided the call under %v and the run under %s", pre["policy_revision"], line.PolicyRevision)
			}
			revisions["serve"] = line.PolicyRevision

			for cmd, rev := range revisions {
				if rev != revisions["policy check"] {
					t.Errorf("revisions differ: %v", revisions)
					break
				}
				if !strings.HasPrefix(rev, "sha256:") {
					t.Errorf("%s reports no revision: %q", cmd, rev)
				}
			}
		})
	}
}

// noLookup13Rule is an operator rule that refuses sandboxed code's lookup
// of record 13, on the nested call's argument.
const noLookup13Rule = `package gatekeeper

deny contains {"rule": "ops.no_13", "reason": "record 13 may not be read from code"} if {
	input.event == "code_call"
	input.code_call.tool == "lookup"
	input.code_call.arguments.id == 13
}
`

// TestRunDecidesNestedCallsByTheOperatorRule: gatekeeper run, given
// --rego-dir, decides the nested calls of its program by the operator's
// rule, as serve does (gate/server's code-mode engine test): on the real
// Docker engine, a real MCP server (mcptest, over stdio) and real OPA, the
// program's lookup of record 12 is answered, that of 13 is refused with
// the rule, and the code_call line on stderr names it; a run without the
// operator's modules would have the server answer 13 as well.
func TestRunDecidesNestedCallsByTheOperatorRule(t *testing.T) {
	bin, err := mcptest.Build(t.TempDir())
	must(t, err)
	dir, file := writePolicy(t, fmt.Sprintf(`version: 1
workspace_root: ./ws
tools:
  allow: [mcp__sandboxed_code__run]
sandbox:
  fs: {image: python}
  proc: {timeout: 60s}
mcp_servers:
  places:
    description: test places
    command: [%q, -name, places, -records, "50"]
code_calls:
  callable: {places: [lookup]}
`, bin))
	regoDir := filepath.Join(dir, "ops.d")
	must(t, os.MkdirAll(regoDir, 0o755))
	must(t, os.WriteFile(filepath.Join(regoDir, "ops.rego"), []byte(noLookup13Rule), 0o644))
	const code = `import gatekeeper_tools as gk
from gatekeeper_tools import places
print("LOOKUP 12", places.lookup(id=12)["id"])
try:
    places.lookup(id=13)
    print("LOOKUP 13 answered")
except gk.ToolCallDenied as e:
    print("DENIED", e.rule)
`
	var stdout, stderr strings.Builder
	err = run(t.Context(), []string{"run", "--policy", file, "--rego-dir", regoDir, "--claude-code-dir", "", "--instance", "cli-engine-test", "--lang", "python", "-c", code},
		strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var rep wire.RunReport
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("run printed %q: %v", stdout.String(), err)
	}
	if want := "LOOKUP 12 12\nDENIED ops.no_13\n"; rep.Stdout != want {
		t.Errorf("the program printed %q, want %q (stderr %q)", rep.Stdout, want, rep.Stderr)
	}
	denied := regexp.MustCompile(`msg=code_call .*server=places tool=lookup decision=deny rule=ops.no_13 `)
	if !denied.MatchString(stderr.String()) {
		t.Errorf("no code_call line denies the lookup by ops.no_13:\n%s", stderr.String())
	}
}
