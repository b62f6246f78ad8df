package gate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// env is a policy file, a workspace and a fake home in a temporary directory.
type env struct {
	dir, ws, home, policyFile, regoDir string
}

const testPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [Read, Write, Edit, Glob, Grep, LS, WebFetch, Task, mcp__sandboxed_code__run]
  ask: [NotebookEdit]
  deny: [Bash]
sandbox:
  fs:
    deny: ["~/.ssh/**", "~/.aws/**", "**/.env", "~/.*"]
  proc: {timeout: 10s, memory: 256m}
ceilings: {memory: 1g, timeout: 60s, runtimes: [runc, runsc], net_hosts: ["pypi.org"], session: {idle_timeout: 20m, max_lifetime: 1h}}
`

func newEnvB(b *testing.B) *gate.Engine {
	b.Helper()
	e := newEnv(b, testPolicy)
	eng, err := gate.New(b.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home})
	if err != nil {
		b.Fatal(err)
	}
	return eng
}

func newEnv(t testing.TB, policyText string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, ws: filepath.Join(dir, "ws"), home: filepath.Join(dir, "home"), policyFile: filepath.Join(dir, "policy.yaml"), regoDir: filepath.Join(dir, "rego.d")}
	for _, d := range []string{e.ws, filepath.Join(e.ws, "src"), filepath.Join(e.home, ".ssh"), e.regoDir, filepath.Join(dir, "outside")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(e.home, ".ssh", "id_rsa"), []byte("KEY"), 0o600))
	must(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("hi"), 0o644))
	must(t, os.Symlink("/etc", filepath.Join(e.ws, "etc-link")))
	must(t, os.Symlink(filepath.Join(dir, "outside"), filepath.Join(e.ws, "out-dir")))
	must(t, os.Symlink("etc-link", filepath.Join(e.ws, "chain")))
	must(t, os.WriteFile(e.policyFile, []byte(policyText), 0o644))
	return e
}

var quiet = slog.New(slog.DiscardHandler)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) engine(t *testing.T) *gate.Engine {
	t.Helper()
	eng, err := gate.New(t.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home})
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	return eng
}

func decide(t *testing.T, q *gate.Query, tool string, input any, mcp *gate.MCPServer) gate.Decision {
	t.Helper()
	raw, err := json.Marshal(input)
	must(t, err)
	d, _ := q.Decide(t.Context(), gate.Call{Event: gate.EventPreToolUse, ToolName: tool, ToolInput: raw, ToolUseID: "toolu_1", MCPServer: mcp})
	return d
}

func TestDecide(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	q, err := e.engine(t).OpenQuery(t.Context(), "q1", nil)
	must(t, err)
	sdk := &gate.MCPServer{Name: "sandboxed_code", Source: "sdk"}
	tests := []struct {
		name     string
		tool     string
		input    any
		mcp      *gate.MCPServer
		decision string
		rule     string
		reason   string
	}{
		{"a read inside the workspace is allowed", "Read", map[string]any{"file_path": e.ws + "/notes.txt"}, nil, "allow", "host_fs.inside_workspace", ""},
		{"a relative read resolves against the workspace", "Read", map[string]any{"file_path": "notes.txt"}, nil, "allow", "host_fs.inside_workspace", ""},
		{"a write of a new file inside the workspace is allowed", "Write", map[string]any{"file_path": e.ws + "/src/new.py", "content": "x"}, nil, "allow", "host_fs.inside_workspace", ""},
		{"a traversal out of the workspace is denied", "Read", map[string]any{"file_path": e.ws + "/../../../etc/passwd"}, nil, "deny", "host_fs.outside_workspace", "/etc/passwd"},
		{"a traversal into the home .ssh hits the deny glob", "Read", map[string]any{"file_path": e.ws + "/../home/.ssh/id_rsa"}, nil, "deny", "host_fs.deny_glob", "is forbidden by the policy's fs.deny pattern"},
		{"a tilde path to .ssh is denied", "Read", map[string]any{"file_path": "~/.ssh/id_rsa"}, nil, "deny", "host_fs.deny_glob", ""},
		{"an absolute path with doubled slashes and dots is cleaned", "Read", map[string]any{"file_path": e.ws + "//./src/../../ws/../home/.ssh//id_rsa"}, nil, "deny", "host_fs.deny_glob", ""},
		{"a symlink inside the workspace pointing to /etc is denied", "Read", map[string]any{"file_path": e.ws + "/etc-link/passwd"}, nil, "deny", "host_fs.outside_workspace", "resolves to /etc/passwd"},
		{"a chain of symlinks leaving the workspace is denied", "Read", map[string]any{"file_path": e.ws + "/chain/hostname"}, nil, "deny", "host_fs.outside_workspace", ""},
		{"a write of a new file under a symlinked directory is denied", "Write", map[string]any{"file_path": e.ws + "/out-dir/new.txt", "content": "x"}, nil, "deny", "host_fs.outside_workspace", ""},
		{"a .env inside the workspace is denied", "Edit", map[string]any{"file_path": e.ws + "/.env", "old_string": "a", "new_string": "b"}, nil, "deny", "host_fs.deny_glob", "**/.env"},
		{"a path with a NUL byte is denied", "Read", map[string]any{"file_path": e.ws + "/notes.txt\x00.png"}, nil, "deny", "host_fs.bad_path", ""},
		{"a very long path is denied", "Read", map[string]any{"file_path": e.ws + "/" + strings.Repeat("a/", 3000)}, nil, "deny", "host_fs.bad_path", ""},
		{"a path with a leading space is denied (tools trim it)", "Grep", map[string]any{"pattern": ".", "path": " ~/.ssh"}, nil, "deny", "host_fs.bad_path", "white space"},
		{"a path with a leading NBSP is denied", "Glob", map[string]any{"pattern": "*", "path": "\u00a0/etc"}, nil, "deny", "host_fs.bad_path", "white space"},
		{"a path with a trailing newline is denied", "Read", map[string]any{"file_path": e.ws + "/notes.txt\n"}, nil, "deny", "host_fs.bad_path", "white space"},
		{"a path with a leading BOM is denied", "Read", map[string]any{"file_path": "\ufeff" + e.ws + "/notes.txt"}, nil, "deny", "host_fs.bad_path", "white space"},
		{"a read without file_path is denied", "Read", map[string]any{"path": e.ws + "/notes.txt"}, nil, "deny", "host_fs.bad_path", "file_path"},
		{"a file_path that is not a string is denied", "Read", map[string]any{"file_path": []string{e.ws}}, nil, "deny", "host_fs.bad_path", ""},
		{"a glob in the workspace is allowed", "Glob", map[string]any{"pattern": "**/*.py"}, nil, "allow", "host_fs.inside_workspace", ""},
		{"an absolute glob outside the workspace is denied", "Glob", map[string]any{"pattern": "/etc/**/*.conf"}, nil, "deny", "host_fs.outside_workspace", ""},
		{"a glob climbing with .. is denied", "Glob", map[string]any{"pattern": "../../*", "path": e.ws}, nil, "deny", "host_fs.outside_workspace", ""},
		{"a grep of a path outside is denied", "Grep", map[string]any{"pattern": "KEY", "path": e.dir + "/outside"}, nil, "deny", "host_fs.outside_workspace", ""},
		{"LS of the home directory is denied", "LS", map[string]any{"path": e.home}, nil, "deny", "host_fs.outside_workspace", ""},
		{"Bash is denied by the deny list", "Bash", map[string]any{"command": "ls"}, nil, "deny", "tools.deny_list", `tool "Bash" is denied`},
		{"a case variant of a tool name is not allowlisted", "read", map[string]any{"file_path": e.ws + "/notes.txt"}, nil, "deny", "tools.not_allowlisted", ""},
		{"a tool name with a trailing space is malformed", "Read ", map[string]any{"file_path": e.ws + "/notes.txt"}, nil, "deny", "tools.malformed_name", ""},
		{"a tool name with a zero-width space is malformed", "Re\u200bad", map[string]any{"file_path": e.ws + "/notes.txt"}, nil, "deny", "tools.malformed_name", ""},
		{"a Cyrillic look-alike tool name is malformed", "Rеad", map[string]any{"file_path": e.ws + "/notes.txt"}, nil, "deny", "tools.malformed_name", ""},
		{"an unknown tool is denied", "Frobnicate", map[string]any{}, nil, "deny", "tools.not_allowlisted", `tool "Frobnicate" is not allowlisted`},
		{"a subagent is gated like any tool", "Task", map[string]any{"prompt": "x"}, nil, "allow", "tools.allow_list", ""},
		{"an unlisted subagent tool is denied", "Agent", map[string]any{"prompt": "x"}, nil, "deny", "tools.not_allowlisted", ""},
		{"the ask list asks", "NotebookEdit", map[string]any{"notebook_path": e.ws + "/n.ipynb", "new_source": ""}, nil, "ask", "tools.ask_list", ""},
		{"the sandbox tool from the in-process server is allowed", wire.SandboxTool, map[string]any{"language": "python", "code": "print(1)"}, sdk, "allow", "tools.allow_list", ""},
		{"the sandbox tool from a configured server is denied", wire.SandboxTool, map[string]any{"language": "python", "code": "print(1)"}, &gate.MCPServer{Name: "sandboxed_code", Source: "stdio"}, "deny", "mcp.untrusted_sandboxed_code", "stdio"},
		{"the sandbox tool without provenance is denied", wire.SandboxTool, map[string]any{"language": "python", "code": "print(1)"}, nil, "deny", "mcp.untrusted_sandboxed_code", ""},
		{"a colliding mcp name is not the sandbox tool", "mcp__sandboxed_code__run__x", map[string]any{}, sdk, "deny", "tools.not_allowlisted", ""},
		{"an mcp name from another server is a mismatch", "mcp__sandboxed__code_run", map[string]any{}, sdk, "deny", "mcp.server_mismatch", ""},
		{"WebFetch is denied while the network is off", "WebFetch", map[string]any{"url": "https://pypi.org/simple", "prompt": "x"}, nil, "deny", "net.disabled", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := decide(t, q, tc.tool, tc.input, tc.mcp)
			if d.Decision != tc.decision || d.Rule != tc.rule {
				t.Fatalf("decision = %s/%s (%s), want %s/%s", d.Decision, d.Rule, d.Reason, tc.decision, tc.rule)
			}
			if !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", d.Reason, tc.reason)
			}
			if !strings.HasPrefix(d.Revision, "sha256:") || !strings.HasPrefix(d.PolicyHash, "sha256:") {
				t.Errorf("revision %q / policy hash %q not reported", d.Revision, d.PolicyHash)
			}
		})
	}
}

func TestOpenQueryOverride(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	eng := e.engine(t)
	tests := []struct {
		name     string
		override string
		want     []string // violations; nil means accepted
	}{
		{"no override is the base policy", ``, nil},
		{"an override within the ceilings is accepted", `{"proc":{"timeout":"30s","memory":"512m"}}`, nil},
		{"an override beyond two ceilings lists both", `{"proc":{"timeout":"10m","memory":"8g"}}`, []string{"sandbox.proc.memory 8g exceeds ceiling 1g", "sandbox.proc.timeout 600s exceeds ceiling 60s"}},
		{"an override may not run as root", `{"proc":{"user":0}}`, []string{"sandbox_policy:1:17: sandbox.proc.user: uid 0 (root) is never allowed"}},
		{"an override may not add a mount", `{"fs":{"deps":"/opt"}}`, []string{`sandbox.fs.deps cannot be changed by an override (asked for "/opt")`}},
		{"an override may not name unknown keys", `{"fs":{"read_only":false}}`, []string{`sandbox_policy:1:8: sandbox.fs.read_only: unknown key "read_only" (known: image, workspace, tmp, deps, deny, write_protect, write_protect_allow)`}},
		{"an override may not add a host outside the ceilings", `{"net":{"enabled":true,"allow":["pypi.org","evil.example"]}}`, []string{"sandbox.net.allow host evil.example is not within ceilings.net_hosts"}},
		{"an override may turn a session on within the ceilings", `{"session":{"idle_timeout":"5m"}}`, nil},
		{"an override may not keep a session idle past its ceiling", `{"session":{"idle_timeout":"30m"}}`, []string{"sandbox.session.idle_timeout 1800s exceeds ceiling 1200s"}},
		{"an override may not let a session live past its ceiling", `{"session":{"idle_timeout":"5m","max_lifetime":"2h"}}`, []string{"sandbox.session.max_lifetime 7200s exceeds ceiling 3600s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var raw []byte
			if tc.override != "" {
				raw = []byte(tc.override)
			}
			q, err := eng.OpenQuery(t.Context(), "q", raw)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				eff, err := q.Effective(t.Context())
				must(t, err)
				if base := mustBase(t, eng).Hash; (tc.override != "") == (eff.Hash == base) {
					t.Errorf("effective hash %s against the base's %s: want it changed exactly when there is an override", eff.Hash, base)
				}
				return
			}
			var oe *gate.OverrideError
			if !errors.As(err, &oe) {
				t.Fatalf("err = %v, want *OverrideError", err)
			}
			if strings.Join(oe.Violations, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("violations\n%q\nwant\n%q", oe.Violations, tc.want)
			}
		})
	}
}

func mustBase(t *testing.T, eng *gate.Engine) *gate.Effective {
	t.Helper()
	q, err := eng.OpenQuery(t.Context(), "base", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	return eff
}

func TestOverrideChangesTheEffectiveSandbox(t *testing.T) {
	t.Parallel()
	eng := newEnv(t, testPolicy).engine(t)
	q, err := eng.OpenQuery(t.Context(), "q", []byte(`{"proc":{"timeout":"30s"}}`))
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	if got := eff.Policy.Sandbox.Proc.Timeout.Std(); got != 30*time.Second {
		t.Errorf("timeout = %v", got)
	}
	if !strings.Contains(string(eff.JSON), `"timeout":30000`) {
		t.Errorf("effective JSON does not carry the timeout in ms: %s", eff.JSON)
	}
}

func TestReload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	eng := e.engine(t)
	q, err := eng.OpenQuery(t.Context(), "q", nil)
	must(t, err)
	rev0 := eng.Revision()
	read := map[string]any{"file_path": e.ws + "/notes.txt"}

	// A broken policy file is refused; the old policy stays in force.
	must(t, os.WriteFile(e.policyFile, []byte(testPolicy+"bogus: 1\n"), 0o644))
	if err := eng.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), `policy.yaml:12:1: bogus: unknown key "bogus"`) {
		t.Fatalf("reload of a broken file: err = %v", err)
	}
	if eng.Revision() != rev0 || decide(t, q, "Read", read, nil).Decision != "allow" {
		t.Fatalf("a failed reload changed the policy")
	}

	// A broken Rego module is refused with its file and line.
	must(t, os.WriteFile(e.policyFile, []byte(testPolicy), 0o644))
	must(t, os.WriteFile(filepath.Join(e.regoDir, "team.rego"), []byte("package gatekeeper\n\ndeny contains x if {\n  x := \n}\n"), 0o644))
	if err := eng.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), "team.rego:") {
		t.Fatalf("reload of broken rego: err = %v", err)
	}
	if eng.Revision() != rev0 {
		t.Fatalf("a failed rego reload changed the revision")
	}

	// A good operator rule takes effect, and its deny beats the built-in allow.
	must(t, os.WriteFile(filepath.Join(e.regoDir, "team.rego"), []byte(`package gatekeeper

deny contains {"rule": "team.no_notes", "reason": "notes are private"} if {
	input.tool_name == "Read"
	endswith(input.tool_input.file_path, "notes.txt")
}
`), 0o644))
	must(t, eng.Reload(t.Context()))
	if eng.Revision() == rev0 {
		t.Fatal("revision did not change")
	}
	if d := decide(t, q, "Read", read, nil); d.Rule != "team.no_notes" || d.Decision != "deny" || d.Revision != eng.Revision() {
		t.Fatalf("after reload: %+v", d)
	}
}

// TestReloadHistoryListsRefusalsOnce: the history holds the first load,
// each refusal with its reason (once, however often it is retried) and
// each reload that took effect.
func TestReloadHistoryListsRefusalsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	eng := e.engine(t)
	rev0 := eng.Revision()
	must(t, os.WriteFile(e.policyFile, []byte(testPolicy+"bogus: 1\n"), 0o644))
	for range 3 {
		if eng.Reload(t.Context()) == nil {
			t.Fatal("a broken policy reloaded")
		}
	}
	must(t, os.Remove(e.policyFile))
	if eng.Reload(t.Context()) == nil {
		t.Fatal("a missing policy file reloaded")
	}
	must(t, os.WriteFile(e.policyFile, []byte(strings.Replace(testPolicy, "ask: [NotebookEdit]", "ask: []", 1)), 0o644))
	must(t, eng.Reload(t.Context()))
	must(t, eng.Reload(t.Context())) // unchanged: not listed

	h := eng.Reloads()
	if len(h) != 4 {
		t.Fatalf("history has %d events, want 4 (load, refused, unreadable, reloaded): %+v", len(h), h)
	}
	if h[0].Revision != rev0 || h[0].Err != "" {
		t.Errorf("first event %+v, want the first load of %s", h[0], rev0)
	}
	if h[1].Previous != rev0 || h[1].Revision == "" || !strings.Contains(h[1].Err, `unknown key "bogus"`) {
		t.Errorf("second event %+v, want the refused revision and its reason", h[1])
	}
	if h[2].Revision != "" || !strings.Contains(h[2].Err, "no such file") {
		t.Errorf("third event %+v, want the unreadable file", h[2])
	}
	if h[3].Err != "" || h[3].Previous != rev0 || h[3].Revision != eng.Revision() || h[3].Revision == rev0 {
		t.Errorf("last event %+v, want the reload to %s", h[3], eng.Revision())
	}
}

func TestNewRefusesBrokenPolicies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, rego, want string
	}{
		{"a syntax error names the file and line", "package gatekeeper\n\nallow contains x if {\n", "team.rego:4"},
		{"http.send is not available", "package gatekeeper\n\ndeny contains x if {\n  x := http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1\"})\n}\n", "undefined function http.send"},
		{"opa.runtime is not available", "package gatekeeper\n\ndeny contains x if {\n  x := opa.runtime().env\n}\n", "undefined function opa.runtime"},
		{"a reason that is not a string is refused", "package gatekeeper\n\nallow contains {\"rule\": \"a\", \"reason\": 5} if true\n", `team.rego:3: rule gatekeeper.allow adds a finding that has a reason that is not a string`},
		{"a rule redefining decision is refused", "package gatekeeper\n\ndecision := {\"decision\": \"allow\", \"rule\": \"team.yes\", \"reason\": \"yes\"}\n", `team.rego:3: rule gatekeeper.decision is defined by gatekeeper's built-in policy`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, testPolicy)
			must(t, os.WriteFile(filepath.Join(e.regoDir, "team.rego"), []byte(tc.rego), 0o644))
			_, err := gate.New(t.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home})
			if !errors.Is(err, gate.ErrPolicy) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrPolicy containing %q", err, tc.want)
			}
		})
	}
}

func TestDecideFailsClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, rego string
		timeout    time.Duration
	}{
		{"an evaluation error denies", "package gatekeeper\n\nallow contains {\"rule\": \"x\", \"reason\": \"y\"} if {\n  1 / 0 == 1\n}\n", 0},
		{"a timeout denies", "package gatekeeper\n\nallow contains {\"rule\": \"x\", \"reason\": \"y\"} if {\n  count([1 | some i in numbers.range(1, 3000); some j in numbers.range(1, 3000)]) > 0\n}\n", 20 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, testPolicy)
			must(t, os.WriteFile(filepath.Join(e.regoDir, "team.rego"), []byte(tc.rego), 0o644))
			eng, err := gate.New(t.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home, DecisionTimeout: tc.timeout})
			must(t, err)
			q, err := eng.OpenQuery(t.Context(), "q", nil)
			must(t, err)
			raw, _ := json.Marshal(map[string]any{"file_path": e.ws + "/notes.txt"})
			d, err := q.Decide(t.Context(), gate.Call{Event: gate.EventPreToolUse, ToolName: "Read", ToolInput: raw})
			if err == nil || d.Decision != "deny" || d.Rule != gate.RuleError {
				t.Fatalf("decision %+v, err %v: want a gatekeeper.error deny", d, err)
			}
		})
	}
}

func TestRelativePathsResolveAgainstTheAgentsCwd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	q, err := e.engine(t).OpenQuery(t.Context(), "q", nil)
	must(t, err)
	tests := []struct {
		name, tool string
		input      map[string]any
		cwd        string
		decision   string
		rule       string
	}{
		{"a relative grep from a cwd above the workspace is judged there", "Grep", map[string]any{"pattern": ".", "path": "home/.ssh"}, e.dir, "deny", "host_fs.deny_glob"},
		{"a glob with no path searches the cwd", "Glob", map[string]any{"pattern": "*"}, e.dir, "deny", "host_fs.outside_workspace"},
		{"a relative read from the workspace cwd is allowed", "Read", map[string]any{"file_path": "notes.txt"}, e.ws, "allow", "host_fs.inside_workspace"},
		{"a relative read from a cwd outside is outside", "Read", map[string]any{"file_path": "notes.txt"}, e.dir + "/outside", "deny", "host_fs.outside_workspace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw, _ := json.Marshal(tc.input)
			d, _ := q.Decide(t.Context(), gate.Call{Event: gate.EventPreToolUse, ToolName: tc.tool, ToolInput: raw, ToolUseID: "t", Cwd: tc.cwd})
			if d.Decision != tc.decision || d.Rule != tc.rule {
				t.Fatalf("decision = %s/%s (%s), want %s/%s", d.Decision, d.Rule, d.Reason, tc.decision, tc.rule)
			}
		})
	}
}

// TestADecisionCarriesThePolicyItWasDecidedUnder: the sidecar decided a
// run under one revision and then looked the query's effective policy up
// again to run it, so a reload in between ran it under the next
// revision's sandbox while its audit line named the first. A decision now
// carries the effective policy it was made under, which a reload does not
// change.
func TestADecisionCarriesThePolicyItWasDecidedUnder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	eng := e.engine(t)
	q, err := eng.OpenQuery(t.Context(), "q", []byte(`{"proc":{"timeout":"20s"}}`))
	must(t, err)
	run := map[string]any{"language": "python", "code": "print(1)"}
	sdk := &gate.MCPServer{Name: "sandboxed_code", Source: "sdk"}
	before := decide(t, q, wire.SandboxTool, run, sdk)
	if before.Decision != "allow" || before.Effective == nil {
		t.Fatalf("before the reload: %+v", before)
	}
	must(t, os.WriteFile(e.policyFile, []byte(strings.Replace(testPolicy, "memory: 256m", "memory: 128m", 1)), 0o644))
	must(t, eng.Reload(t.Context()))
	after := decide(t, q, wire.SandboxTool, run, sdk)
	tests := []struct {
		name   string
		d      gate.Decision
		memory int64
	}{
		{"the decision before the reload keeps its policy", before, 256 << 20},
		{"the decision after the reload has the new one", after, 128 << 20},
	}
	for _, tc := range tests {
		eff := tc.d.Effective
		switch {
		case eff == nil:
			t.Errorf("%s: no effective policy", tc.name)
		case eff.Revision != tc.d.Revision || eff.Hash != tc.d.PolicyHash:
			t.Errorf("%s: effective %s %s, decision %s %s", tc.name, eff.Revision, eff.Hash, tc.d.Revision, tc.d.PolicyHash)
		case int64(eff.Policy.Sandbox.Proc.Memory) != tc.memory || eff.Policy.Sandbox.Proc.Timeout.Std() != 20*time.Second:
			t.Errorf("%s: memory %d, timeout %s; want %d and the override's 20s", tc.name, eff.Policy.Sandbox.Proc.Memory, eff.Policy.Sandbox.Proc.Timeout.Std(), tc.memory)
		}
	}
	if before.Revision == after.Revision {
		t.Fatal("the reload did not change the revision")
	}
}

// TestSubagentCallsReachThePolicy: agent_id and agent_type of a call made
// inside a Claude Code subagent are in the Rego input, so an operator who
// allows the Agent tool can still hold a subagent's calls to other rules;
// the main thread's calls carry no agent_id.
func TestSubagentCallsReachThePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	must(t, os.WriteFile(filepath.Join(e.regoDir, "agents.rego"), []byte(`package gatekeeper

deny contains {"rule": "team.subagents_do_not_write", "reason": sprintf("subagent %s (%s) may not write", [input.agent_id, input.agent_type])} if {
	input.tool_name == "Write"
	input.agent_id
}

deny contains {"rule": "team.no_reviewer_reads", "reason": "the reviewer reads nothing"} if {
	input.tool_name == "Read"
	input.agent_type == "code-reviewer"
}
`), 0o644))
	q, err := e.engine(t).OpenQuery(t.Context(), "q", nil)
	must(t, err)
	write := json.RawMessage(fmt.Sprintf(`{"file_path":%q,"content":"x"}`, e.ws+"/a.txt"))
	read := json.RawMessage(fmt.Sprintf(`{"file_path":%q}`, e.ws+"/notes.txt"))
	tests := []struct {
		name                               string
		tool                               string
		input                              json.RawMessage
		agentID, agentType                 string
		wantDecision, wantRule, wantReason string
	}{
		{"the main thread writes", "Write", write, "", "", "allow", "host_fs.inside_workspace", ""},
		{"a session started with --agent writes on its main thread (agent_type alone)", "Write", write, "", "general-purpose", "allow", "host_fs.inside_workspace", ""},
		{"a subagent's write is denied by the operator's rule", "Write", write, "a1b2c3", "general-purpose", "deny", "team.subagents_do_not_write", "subagent a1b2c3 (general-purpose) may not write"},
		{"a subagent reads", "Read", read, "a1b2c3", "general-purpose", "allow", "host_fs.inside_workspace", ""},
		{"the reviewer subagent's read is denied", "Read", read, "d4e5", "code-reviewer", "deny", "team.no_reviewer_reads", ""},
		{"the reviewer type on the main thread is judged by type too", "Read", read, "", "code-reviewer", "deny", "team.no_reviewer_reads", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := q.Decide(t.Context(), gate.Call{Event: gate.EventPreToolUse, ToolName: tc.tool, ToolInput: tc.input, ToolUseID: "toolu_1", AgentID: tc.agentID, AgentType: tc.agentType})
			must(t, err)
			if d.Decision != tc.wantDecision || d.Rule != tc.wantRule || !strings.Contains(d.Reason, tc.wantReason) {
				t.Errorf("got %s %s %q, want %s %s %q", d.Decision, d.Rule, d.Reason, tc.wantDecision, tc.wantRule, tc.wantReason)
			}
		})
	}
}

// TestInstalledPathsAreWriteProtectedInEveryPolicy: the paths Config.Protect
// returns (the binaries and files Claude Code's installed settings name)
// cannot be written by a host file tool, even inside the workspace and
// whatever the policy lifts, as the path given or through a link to it;
// a change in them takes effect at the next reload check.
func TestInstalledPathsAreWriteProtectedInEveryPolicy(t *testing.T) {
	t.Parallel()
	liftAll := strings.Replace(testPolicy, "    deny:", "    write_protect_allow: [agent_memory, git_dir, git_config, ide_config]\n    deny:", 1)
	for name, pol := range map[string]string{"the test policy": testPolicy, "a policy lifting every liftable group": liftAll} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, pol)
			bin := filepath.Join(e.ws, "tools", "gate[1]keeper")
			token := filepath.Join(e.ws, "token")
			must(t, os.MkdirAll(filepath.Dir(bin), 0o755))
			must(t, os.WriteFile(bin, []byte("bin"), 0o755))
			must(t, os.Symlink(bin, filepath.Join(e.ws, "link-to-gatekeeper")))
			var installed atomic.Pointer[[]string]
			installed.Store(&[]string{bin})
			eng, err := gate.New(t.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home,
				Protect: func() ([]string, error) { return *installed.Load(), nil }})
			must(t, err)
			q, err := eng.OpenQuery(t.Context(), "q", nil)
			must(t, err)
			write := func(tool, path string) gate.Decision {
				in := map[string]any{"file_path": path, "content": "#!/bin/sh\nexit 0\n", "old_string": "bin", "new_string": "x"}
				return decide(t, q, tool, in, nil)
			}
			for _, tc := range []struct{ tool, path string }{
				{"Write", bin}, {"Edit", bin}, {"Write", filepath.Join(e.ws, "link-to-gatekeeper")},
				{"Write", filepath.Join(e.ws, "tools", "..", "tools", "gate[1]keeper")},
			} {
				if d := write(tc.tool, tc.path); d.Decision != "deny" || d.Rule != "host_fs.write_protected" || !strings.Contains(d.Reason, "gatekeeper's Claude Code installation") {
					t.Errorf("%s %s: %s %s %q, want host_fs.write_protected", tc.tool, tc.path, d.Decision, d.Rule, d.Reason)
				}
			}
			if d := write("Write", filepath.Join(e.ws, "tools", "gate1keeper")); d.Decision != "allow" {
				t.Errorf("a sibling the brackets would match as a glob: %s %s", d.Decision, d.Rule)
			}
			if d := write("Write", token); d.Decision != "allow" {
				t.Fatalf("the token before it is installed: %s %s", d.Decision, d.Rule)
			}
			installed.Store(&[]string{bin, token})
			must(t, eng.Reload(t.Context()))
			q2, err := eng.OpenQuery(t.Context(), "q2", nil)
			must(t, err)
			if d := decide(t, q2, "Write", map[string]any{"file_path": token, "content": "x"}, nil); d.Rule != "host_fs.write_protected" {
				t.Errorf("the token after the reload: %s %s", d.Decision, d.Rule)
			}
		})
	}
	// The group cannot be lifted.
	e := newEnv(t, testPolicy)
	must(t, os.WriteFile(e.policyFile, []byte(strings.Replace(testPolicy, "    deny:", "    write_protect_allow: [claude_code_install]\n    deny:", 1)), 0o644))
	if _, err := gate.New(t.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, Home: e.home}); err == nil || !strings.Contains(err.Error(), "claude_code_install") {
		t.Errorf("a policy lifting claude_code_install: %v, want refused", err)
	}
	// A Protect that fails refuses the load: no policy without the list.
	e = newEnv(t, testPolicy)
	if _, err := gate.New(t.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, Home: e.home,
		Protect: func() ([]string, error) { return nil, errors.New("managed settings unreadable") }}); err == nil || !strings.Contains(err.Error(), "managed settings unreadable") {
		t.Errorf("a failing Protect: %v", err)
	}
}

// TestInstalledPathsAreProtectedWhereTheirLinksLead: an installed path
// that is a link (install --gatekeeper /home/u/bin/gatekeeper, a link into
// the workspace) is write-protected where it leads, dangling or not, and
// the protection follows the link when it is pointed elsewhere.
func TestInstalledPathsAreProtectedWhereTheirLinksLead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	bin := filepath.Join(e.ws, "build", "gatekeeper")
	must(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	must(t, os.WriteFile(bin, []byte("bin"), 0o755))
	outside := t.TempDir()
	binLink := filepath.Join(outside, "gatekeeper")
	tokenLink := filepath.Join(outside, "token")
	must(t, os.Symlink(bin, binLink))
	must(t, os.Symlink(filepath.Join(e.ws, "secrets", "token"), tokenLink)) // dangling: the model could create it
	eng, err := gate.New(t.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home,
		Protect: func() ([]string, error) { return []string{binLink, tokenLink}, nil }})
	must(t, err)
	q, err := eng.OpenQuery(t.Context(), "q", nil)
	must(t, err)
	for _, p := range []string{bin, filepath.Join(e.ws, "secrets", "token")} {
		if d := decide(t, q, "Write", map[string]any{"file_path": p, "content": "x"}, nil); d.Decision != "deny" || d.Rule != "host_fs.write_protected" {
			t.Errorf("Write %s, where an installed link leads: %s %s %q, want host_fs.write_protected", p, d.Decision, d.Rule, d.Reason)
		}
	}
	// Pointed elsewhere, the link protects its new target at the next
	// reload check, and the old one is the workspace's again.
	other := filepath.Join(e.ws, "build", "gatekeeper2")
	must(t, os.Remove(binLink))
	must(t, os.Symlink(other, binLink))
	must(t, eng.Reload(t.Context()))
	q2, err := eng.OpenQuery(t.Context(), "q2", nil)
	must(t, err)
	if d := decide(t, q2, "Write", map[string]any{"file_path": other, "content": "x"}, nil); d.Rule != "host_fs.write_protected" {
		t.Errorf("the link's new target after the reload: %s %s", d.Decision, d.Rule)
	}
	if d := decide(t, q2, "Write", map[string]any{"file_path": bin, "content": "x"}, nil); d.Decision != "allow" {
		t.Errorf("the link's old target after the reload: %s %s %q", d.Decision, d.Rule, d.Reason)
	}
}

// TestReloadSaysChangedServersWaitForARestart: the sidecar starts the
// clients of the first load's mcp_servers once, so a reload that changes
// them takes effect (its policy serves) but warns, once per change, that
// the servers are still the ones it started with; a reload back to those
// warns nothing.
func TestReloadSaysChangedServersWaitForARestart(t *testing.T) {
	t.Parallel()
	servers := func(names ...string) string {
		s := "mcp_servers:\n"
		for _, n := range names {
			s += "  " + n + ": {url: \"http://127.0.0.1:1/mcp\"}\n"
		}
		return s
	}
	e := newEnv(t, testPolicy+servers("crm"))
	var log strings.Builder
	eng, err := gate.New(t.Context(), gate.Config{Logger: slog.New(slog.NewTextHandler(&log, nil)), PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home})
	must(t, err)
	warnings := func() int { return strings.Count(log.String(), "mcp_servers changed") }
	for i, step := range []struct {
		policy string
		want   int
	}{
		{testPolicy + servers("crm", "billing"), 1},                          // a server added
		{testPolicy + servers("crm", "billing") + "# the same servers\n", 1}, // another revision, the same change: no second warning
		{testPolicy + servers("crm"), 1},                                     // back to what runs
		{testPolicy, 2},                                                      // a server removed
	} {
		must(t, os.WriteFile(e.policyFile, []byte(step.policy), 0o644))
		must(t, eng.Reload(t.Context()))
		if got := warnings(); got != step.want {
			t.Fatalf("step %d: %d warnings, want %d; log:\n%s", i, got, step.want, log.String())
		}
	}
	if !strings.Contains(log.String(), `started_with=[crm] policy_names=[]`) {
		t.Errorf("the warning does not name what runs and what the policy names:\n%s", log.String())
	}
}
