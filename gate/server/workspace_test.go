package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/artifacts"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// savingRunner stands in for Docker: it saves a snapshot into each run's
// workspace (a file holding the run's code) and returns a file, and
// records how many runs of one workspace overlapped. It claims nothing
// about isolation (the runner's conformance suite does, on the engine).
type savingRunner struct {
	mu      sync.Mutex
	specs   []runner.Spec
	active  map[runner.Workspace]int
	overlap bool
	hold    time.Duration
}

func (f *savingRunner) Run(ctx context.Context, s runner.Spec) (runner.Result, error) {
	f.mu.Lock()
	f.specs = append(f.specs, s)
	if f.active == nil {
		f.active = map[runner.Workspace]int{}
	}
	f.active[s.Workspace]++
	if s.Workspace != nil && f.active[s.Workspace] > 1 {
		f.overlap = true
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active[s.Workspace]--
		f.mu.Unlock()
	}()
	time.Sleep(f.hold)
	res := runner.Result{RunID: s.RunID, Reason: runner.Exited, Image: s.Sandbox.Image, Runtime: runner.Runc,
		Files: []runner.File{{Path: "out.bin", Size: 3, SHA256: "x", Change: runner.FileCreated, MediaType: "application/octet-stream", Content: []byte{0, 1, 2}}}}
	if s.Workspace != nil {
		tmp, err := os.CreateTemp(s.Workspace.TempDir(), "snapshot-*.tar")
		if err != nil {
			return res, err
		}
		tmp.WriteString(s.Code)
		tmp.Close()
		if err := s.Workspace.Replace(tmp.Name(), 4096); err != nil {
			return res, err
		}
		res.Workspace = runner.WorkspaceSaved
	}
	return res, nil
}

// runOnce decides and runs code in query q, returning the run's last frame.
func runOnce(c *client, q, toolUseID, rest string) map[string]any {
	c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, toolUseID, sdkServer)
	return c.do(fmt.Sprintf(`{"type":"run","id":%q,"query_id":%q,"tool_use_id":%q,"language":"python","code":"x"%s}`, "r_"+toolUseID, q, toolUseID, rest))
}

func TestAQuerysWorkspaceLastsUntilItCloses(t *testing.T) {
	t.Parallel()
	store, err := workspace.OpenStore(filepath.Join(t.TempDir(), "workspaces"))
	must(t, err)
	fr := &savingRunner{}
	h := start(t, options{runner: fr, workspaces: store})
	c := h.connect(t)
	a, b := c.open(""), c.open("")
	res := runOnce(c, a, "toolu_1", "")
	if res["type"] != "run_result" || res["workspace"] != "saved" {
		t.Fatalf("run in query a: %v", res)
	}
	runOnce(c, a, "toolu_2", "")
	runOnce(c, b, "toolu_3", "")
	if fr.specs[0].Workspace == nil || fr.specs[0].Workspace != fr.specs[1].Workspace || fr.specs[2].Workspace == fr.specs[0].Workspace {
		t.Fatalf("workspaces handed to the runner: %v %v %v; want a's twice and b's apart", fr.specs[0].Workspace, fr.specs[1].Workspace, fr.specs[2].Workspace)
	}
	if n := store.Len(); n != 2 {
		t.Fatalf("the store holds %d workspaces, want 2", n)
	}
	if r := c.do(fmt.Sprintf(`{"type":"close_query","id":"c","query_id":%q}`, a)); r["type"] != "query_closed" {
		t.Fatalf("close_query: %v", r)
	}
	if _, err := os.Stat(fr.specs[0].Workspace.TempDir()); !os.IsNotExist(err) {
		t.Errorf("query a's workspace after close_query: %v; want it removed", err)
	}
	if store.Len() != 1 {
		t.Errorf("the store holds %d workspaces after a close_query, want 1", store.Len())
	}
	c.ws.Close() // the connection ends: its queries, and their workspaces, go
	// The store forgets a workspace, then removes its directory: wait for
	// both (the connection's end is handled after the socket closes).
	left := func() int { entries, _ := os.ReadDir(store.Dir()); return len(entries) }
	deadline := time.Now().Add(5 * time.Second)
	for (store.Len() != 0 || left() != 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if store.Len() != 0 {
		t.Errorf("the store holds %d workspaces after the connection ended, want 0", store.Len())
	}
	if n := left(); n != 0 {
		t.Errorf("%d directories left in the store", n)
	}
}

func TestRunsOfOneQueryTakeTurns(t *testing.T) {
	t.Parallel()
	store, err := workspace.OpenStore(t.TempDir())
	must(t, err)
	fr := &savingRunner{hold: 100 * time.Millisecond}
	h := start(t, options{runner: fr, workspaces: store})
	c := h.connect(t)
	q := c.open("")
	for i := range 3 {
		c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"x"}`, fmt.Sprintf("toolu_%d", i), sdkServer)
	}
	for i := range 3 {
		c.send(fmt.Sprintf(`{"type":"run","id":"r%d","query_id":%q,"tool_use_id":"toolu_%d","language":"python","code":"x"}`, i, q, i))
	}
	for range 3 {
		if r := c.recv(); r["type"] != "run_result" {
			t.Fatalf("run: %v", r)
		}
	}
	if fr.overlap {
		t.Error("two runs of one query had its workspace at once; each must start from what the one before left")
	}
}

func TestRunFilesInAndOut(t *testing.T) {
	t.Parallel()
	policy := strings.Replace(testPolicy, "  proc: {timeout: 10s}\n", "  proc: {timeout: 10s}\n  output: {max_files: 2, max_files_bytes: 8}\n", 1)
	fr := &savingRunner{}
	h := start(t, options{runner: fr, policy: policy})
	c := h.connect(t)
	q := c.open("")

	res := runOnce(c, q, "toolu_1", `,"files":{"a.bin":{"base64":"AP8="},"b.txt":"text"},"outputs":["out"]`)
	if res["type"] != "run_result" {
		t.Fatalf("run: %v", res)
	}
	got := fr.specs[0]
	if got.Files["a.bin"] != "\x00\xff" || got.Files["b.txt"] != "text" || len(got.Outputs) != 1 || got.Outputs[0] != "out" {
		t.Errorf("spec files %q outputs %q; want the base64 file decoded, the text as is, and the outputs", got.Files, got.Outputs)
	}
	if got.Sandbox.MaxFiles != 2 || got.Sandbox.MaxFilesBytes != 8 {
		t.Errorf("spec caps %d files, %d bytes; want the policy's 2 and 8", got.Sandbox.MaxFiles, got.Sandbox.MaxFilesBytes)
	}
	if got.Workspace != nil {
		t.Errorf("a sidecar without workspaces handed the runner one")
	}
	files, _ := json.Marshal(res["files"])
	if string(files) != `[{"base64":"AAEC","change":"created","media_type":"application/octet-stream","path":"out.bin","sha256":"x","size":3}]` || res["workspace"] != "" {
		t.Errorf("run_result files %s, workspace %q", files, res["workspace"])
	}
	// The run is decided on its input as the client sent it.
	var run audit.Record
	for _, rec := range readAudit(t, h.auditPath) {
		if rec.Kind == audit.KindRun {
			run = rec
		}
	}
	if run.Files != 1 || run.Outcome != audit.OutcomeExited {
		t.Errorf("audit run line: %+v", run)
	}

	for _, tc := range []struct{ name, files string }{
		{"three files are more than max_files", `{"a":"1","b":"2","c":"3"}`},
		{"nine bytes are more than max_files_bytes", `{"a":"12345","b":"6789"}`},
		{"nine bytes in base64 are too", `{"a":{"base64":"MTIzNDU2Nzg5"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runOnce(c, q, "toolu_"+strings.ReplaceAll(tc.name, " ", "_"), `,"files":`+tc.files)
			if r["code"] != "invalid_field" || !strings.Contains(r["message"].(string), "the query's sandbox.output allows 2 files of 8") {
				t.Errorf("got %v", r)
			}
		})
	}
}

func readAudit(t *testing.T, path string) []audit.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	var out []audit.Record
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r audit.Record
		must(t, json.Unmarshal([]byte(line), &r))
		out = append(out, r)
	}
	return out
}

func TestTheRunsPolicySeesItsFilesAndOutputsAsSent(t *testing.T) {
	t.Parallel()
	fr := &fakeRunner{}
	h := startWithRego(t, fr, `package gatekeeper

deny contains {"rule": "team.no_elf", "reason": "no executables"} if {
	input.event == "run"
	some _, f in input.tool_input.files
	startswith(f.base64, "f0VMR")
}

deny contains {"rule": "team.no_dotfiles_back", "reason": "dot files stay in the sandbox"} if {
	input.event == "run"
	some p in input.tool_input.outputs
	startswith(p, ".")
}
`)
	c := h.connect(t)
	q := c.open("")
	for _, tc := range []struct{ name, rest, rule string }{
		{"a binary file, as base64", `,"files":{"tool":{"base64":"f0VMRgIBAQ=="}}`, "team.no_elf"},
		{"an outputs path", `,"outputs":[".ssh"]`, "team.no_dotfiles_back"},
	} {
		r := runOnce(c, q, "toolu_"+strings.ReplaceAll(tc.name, " ", "_"), tc.rest)
		if r["code"] != "run_denied" || r["rule"] != tc.rule {
			t.Errorf("%s: got %v, want run_denied by %s", tc.name, r, tc.rule)
		}
	}
	if len(fr.specs) != 0 {
		t.Errorf("%d runs reached the runner, want none", len(fr.specs))
	}
}

func TestARunsArtifactIsLinkedFromItsAuditLine(t *testing.T) {
	t.Parallel()
	dir, err := artifacts.Open(filepath.Join(t.TempDir(), "artifacts"))
	must(t, err)
	h := start(t, options{runner: &savingRunner{}, artifacts: dir})
	c := h.connect(t)
	q := c.open("")
	res := runOnce(c, q, "toolu_a", `,"files":{"in.txt":"data"}`)
	if res["type"] != "run_result" {
		t.Fatalf("run: %v", res)
	}
	var line audit.Record
	for _, rec := range readAudit(t, h.auditPath) {
		if rec.Kind == audit.KindRun {
			line = rec
		}
	}
	if line.Artifact == "" {
		t.Fatalf("the run's audit line names no artifact: %+v", line)
	}
	data, err := os.ReadFile(filepath.Join(dir.Path(), line.Artifact))
	must(t, err)
	if artifacts.Digest(data) != line.ArtifactSHA256 {
		t.Errorf("the audit line's artifact_sha256 %s is not the SHA-256 of %s", line.ArtifactSHA256, line.Artifact)
	}
	e, err := dir.Find(line.RunID)
	must(t, err)
	if e.Code != "x" || e.QueryID != q || e.ToolUseID != "toolu_a" || len(e.Files) != 1 || e.Files[0].SHA256 != artifacts.Digest([]byte("data")) ||
		e.Result.RunID != line.RunID || len(e.Result.Files) != 1 || e.Result.Files[0].Base64 != nil {
		t.Errorf("artifact %+v: want the code (store_code always), the input's digest, and the result without file content", e.Artifact)
	}
}
