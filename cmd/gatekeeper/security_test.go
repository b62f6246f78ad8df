package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// operatorModules are --rego-dir modules of issue 10, section 6: what an
// operator module may not do to the built-in policy, and the line of
// `gatekeeper policy check` that says so.
var operatorModules = []struct {
	name, module, want string
}{
	{"a string finding, the usual OPA style", "package gatekeeper\n\ndeny contains \"no reads\" if input.tool_name == \"Read\"\n",
		`team.rego:3: rule gatekeeper.deny adds the string "no reads" (the usual OPA style), which gatekeeper cannot read`},
	{"a sprintf finding", "package gatekeeper\n\ndeny contains msg if {\n\tmsg := sprintf(\"no %s\", [input.tool_name])\n}\n",
		`team.rego:3: rule gatekeeper.deny adds findings of type string, which gatekeeper cannot read`},
	{"a finding without reason", "package gatekeeper\n\nask contains {\"rule\": \"team.ask\"} if true\n",
		`team.rego:3: rule gatekeeper.ask adds a finding that lacks rule or reason`},
	{"a redefined built-in helper", "package gatekeeper\n\nallowlisted if true\n",
		`team.rego:3: rule gatekeeper.allowlisted is defined by gatekeeper's built-in policy`},
	{"a redefined decision", "package gatekeeper\n\ndefault decision := {\"decision\": \"allow\", \"rule\": \"team.yes\", \"reason\": \"yes\"}\n",
		`team.rego:3: rule gatekeeper.decision is defined by gatekeeper's built-in policy`},
	{"the built-in helpers' package", "package gatekeeper.core\n\nin_workspace(_) if true\n",
		`team.rego:1: package gatekeeper.core is reserved for gatekeeper's built-in policy`},
	{"a Rego built-in shadowed for the whole package", "package gatekeeper\n\nstartswith(_, _) := true\n",
		`team.rego:3: rule gatekeeper.startswith is named like Rego's built-in "startswith"`},
	{"a constraints helper", "package gatekeeper.constraints\n\nfmt(_, _) := \"x\"\n",
		`team.rego:3: rule gatekeeper.constraints.fmt is defined by gatekeeper's built-in policy`},
}

// TestPolicyCheckRefusesOperatorRegoThatChangesTheBuiltins: `policy check
// --rego-dir` fails on each, naming file and line, and passes a good one.
func TestPolicyCheckRefusesOperatorRegoThatChangesTheBuiltins(t *testing.T) {
	t.Parallel()
	for _, tc := range operatorModules {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, file := writePolicy(t, cliPolicy)
			regoDir := filepath.Join(dir, "rego.d")
			must(t, os.MkdirAll(regoDir, 0o755))
			must(t, os.WriteFile(filepath.Join(regoDir, "team.rego"), []byte(tc.module), 0o644))
			out, err := cli(t, "", "policy", "check", "--rego-dir", regoDir, file)
			if code, ok := err.(exitError); !ok || code != 1 || !strings.Contains(out, filepath.Join(regoDir, tc.want)) {
				t.Fatalf("policy check: %v\n%s\nwant exit 1 and %q", err, out, tc.want)
			}
		})
	}
	dir, file := writePolicy(t, cliPolicy)
	regoDir := filepath.Join(dir, "rego.d")
	must(t, os.MkdirAll(regoDir, 0o755))
	must(t, os.WriteFile(filepath.Join(regoDir, "team.rego"), []byte(goodModule), 0o644))
	if out, err := cli(t, "", "policy", "check", "--rego-dir", regoDir, file); err != nil || !strings.Contains(out, ": ok (revision") {
		t.Fatalf("policy check of a good module: %v\n%s", err, out)
	}
}

func TestPolicyCheckRefusesAWriteProtectGroupThatCannotBeLifted(t *testing.T) {
	t.Parallel()
	_, file := writePolicy(t, strings.Replace(cliPolicy, `fs: {deny: ["~/.ssh/**"]}`, `fs: {deny: ["~/.ssh/**"], write_protect_allow: [agent_config, git_config]}`, 1))
	out, err := cli(t, "", "policy", "check", file)
	if code, ok := err.(exitError); !ok || code != 1 ||
		!strings.Contains(out, `sandbox.fs.write_protect_allow[0]: "agent_config" cannot be lifted`) ||
		!strings.Contains(out, `sandbox.fs.write_protect_allow[1]: "git_config" lies within "git_dir"`) {
		t.Fatalf("policy check: %v\n%s", err, out)
	}
}

const goodModule = `package gatekeeper

deny contains {"rule": "team.no_notes", "reason": "notes are private"} if {
	input.tool_name == "Read"
	endswith(input.tool_input.file_path, "notes.txt")
}
`

// TestServeRefusesAReloadThatWouldChangeTheBuiltins: a running sidecar
// whose --rego-dir gains a module that could change the built-in policy
// refuses the reload, logs it, and keeps deciding with the old policy.
func TestServeRefusesAReloadThatWouldChangeTheBuiltins(t *testing.T) {
	t.Parallel()
	dir, file := writePolicy(t, cliPolicy)
	regoDir := filepath.Join(dir, "rego.d")
	must(t, os.MkdirAll(regoDir, 0o755))
	must(t, os.WriteFile(filepath.Join(regoDir, "team.rego"), []byte(goodModule), 0o644))
	sock, tokenFile := filepath.Join(dir, "gk.sock"), filepath.Join(dir, "token")
	revision, logs := serveInProcess(t, dir, file, "--rego-dir", regoDir, "--watch-interval", "50ms")
	rev0 := waitFor(t, "the sidecar to serve", revision, func(r string) bool { return r != "" }, logs)
	token, err := os.ReadFile(tokenFile)
	must(t, err)
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	ws, _, err := d.DialContext(t.Context(), "ws://gatekeeper/v1/ws", http.Header{"Authorization": {"Bearer " + strings.TrimSpace(string(token))}})
	must(t, err)
	defer ws.Close()
	do := func(frame string) map[string]any {
		t.Helper()
		must(t, ws.WriteMessage(websocket.TextMessage, []byte(frame)))
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, data, err := ws.ReadMessage()
		must(t, err)
		var m map[string]any
		must(t, json.Unmarshal(data, &m))
		return m
	}
	do(`{"type":"hello","id":"h","v":1,"client":"test"}`)
	q, _ := do(`{"type":"open_query","id":"o"}`)["query_id"].(string)
	decide := func(path string) map[string]any {
		return do(fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":%q},"tool_use_id":"t"}`, q, path))
	}
	check := func(when string) {
		t.Helper()
		if r := decide("/etc/passwd"); r["rule"] != "host_fs.outside_workspace" || r["policy_revision"] != rev0 {
			t.Errorf("%s: Read /etc/passwd: %v, want host_fs.outside_workspace under %s", when, r, rev0)
		}
		if r := decide(filepath.Join(dir, "ws", "notes.txt")); r["rule"] != "team.no_notes" {
			t.Errorf("%s: the operator's own rule: %v", when, r)
		}
	}
	check("before")
	for i, tc := range operatorModules {
		must(t, os.WriteFile(filepath.Join(regoDir, "zz.rego"), []byte(tc.module), 0o644))
		want := fmt.Sprintf("zz.rego:%s", strings.SplitN(strings.TrimPrefix(tc.want, "team.rego:"), ":", 2)[0])
		waitFor(t, "the refused reload of "+tc.name, func() string {
			if strings.Count(logs.String(), "policy reload refused") > i && strings.Contains(logs.String(), want) {
				return "logged"
			}
			return ""
		}, func(r string) bool { return r != "" }, logs)
		if r := revision(); r != rev0 {
			t.Fatalf("after %s the revision is %q, want the old %q", tc.name, r, rev0)
		}
		check("after " + tc.name)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
