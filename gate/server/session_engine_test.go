package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// TestAReloadThatChangesTheSandboxEndsTheSessionAtItsNextRun: on the real
// engine, a query's session keeps its interpreter while the policy holds;
// a reload that changes the query's sandbox (its memory limit) ends the
// session at the next run, which starts afresh and says policy_changed,
// rather than running under the old settings; the audit log has the old
// session's end and the new one's start under the new revision.
func TestAReloadThatChangesTheSandboxEndsTheSessionAtItsNextRun(t *testing.T) {
	t.Parallel()
	r := realRunner(t)
	store, err := workspace.OpenStore(t.TempDir())
	must(t, err)
	h := start(t, options{runner: r, workspaces: store, policy: sessionPolicy})
	c := h.connect(t)
	c.wait = 2 * time.Minute // a session's first run makes its container, which a loaded machine takes long to do
	q := c.open("")
	run := func(toolUseID, code string) (stdout, stderr string, res map[string]any) {
		t.Helper()
		input := fmt.Sprintf(`{"language":"python","code":%q}`, code)
		if d := c.decide(q, "mcp__sandboxed_code__run", input, toolUseID, sdkServer); d["decision"] != "allow" {
			t.Fatalf("decide: %v", d)
		}
		c.send(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":%q,"language":"python","code":%q}`, q, toolUseID, code))
		for {
			f := c.recv()
			switch f["type"] {
			case "output":
				if f["stream"] == "stderr" {
					stderr += f["data"].(string)
				} else {
					stdout += f["data"].(string)
				}
			case "run_result":
				return stdout, stderr, f
			default:
				t.Fatalf("run: %v", f)
			}
		}
	}
	run("toolu_1", "x = 41")
	if out, _, res := run("toolu_2", "x += 1; print(x)"); out != "42\n" || res["state_lost"] != nil {
		t.Fatalf("second run under the same policy: stdout %q, state_lost %v; want 42 from the kept x", out, res["state_lost"])
	}
	rev0 := h.engine.Revision()
	policy := filepath.Join(h.dir, "policy.yaml")
	must(t, os.WriteFile(policy, []byte(strings.Replace(sessionPolicy, "proc: {timeout: 10s}", "proc: {timeout: 10s, memory: 300m}", 1)), 0o644))
	must(t, h.engine.Reload(t.Context()))
	if h.engine.Revision() == rev0 {
		t.Fatal("the reload kept the old revision")
	}
	out, stderr, res := run("toolu_3", "print(x)")
	lost, _ := res["state_lost"].(map[string]any)
	if lost["reason"] != "policy_changed" || lost["fresh"] != true || out != "" || !strings.Contains(stderr, "NameError") {
		t.Errorf("the run after the reload: state_lost %v, stdout %q, stderr %q; want a fresh session that says policy_changed and no x", res["state_lost"], out, stderr)
	}
	c.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, q))
	var events []string
	for _, l := range records(t, h.auditPath, audit.KindSession) {
		e := l.Event + " " + l.Reason
		if l.Event == audit.SessionStart {
			e += map[bool]string{true: "under the old revision", false: "under the new revision"}[l.Revision == rev0]
		}
		events = append(events, e)
	}
	want := []string{"session_start under the old revision", "session_end policy_changed", "session_start under the new revision", "session_end closed"}
	if strings.Join(events, "|") != strings.Join(want, "|") {
		t.Errorf("session lines = %q, want %q", events, want)
	}
}
