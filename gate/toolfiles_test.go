package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

// wrapperEnv is a policy over two real MCP servers (the Go SDK's, over
// streamable HTTP on loopback) and one that is down, the client to them,
// and a Wrappers whose Generate calls are counted.
type wrapperEnv struct {
	eng       *gate.Engine
	servers   *mcpservers.Servers
	wrappers  *gate.Wrappers
	generated atomic.Int32
	log       bytes.Buffer // Wrappers' log; written only by the test's goroutine
}

func newWrapperEnv(t *testing.T) *wrapperEnv {
	t.Helper()
	alpha := mcptest.HTTP(t, "alpha", 10, nil)
	beta := mcptest.HTTP(t, "beta", 10, nil)
	// Nothing listens on port 1 of loopback: the server is down.
	down := mcpservers.Config{Name: "down", URL: "http://127.0.0.1:1/mcp"}
	e := newEnv(t, `version: 1
workspace_root: ./ws
tools:
  allow: [mcp__sandboxed_code__run]
mcp_servers:
  alpha: {description: "the alpha records, from the policy", url: "`+alpha.URL+`"}
  beta: {description: "the beta records, from the policy", url: "`+beta.URL+`"}
  down: {description: "a server that is down", url: "`+down.URL+`"}
code_calls:
  callable:
    alpha: [records, look*]
    beta: [lookup]
    down: ["*"]
`)
	w := &wrapperEnv{eng: e.engine(t)}
	var err error
	w.servers, err = mcpservers.New([]mcpservers.Config{alpha, beta, down}, mcpservers.Options{Logger: quiet})
	must(t, err)
	t.Cleanup(func() { w.servers.Close() })
	w.wrappers = gate.NewWrappers(w.servers, gate.WrapperOptions{
		Logger: slog.New(slog.NewTextHandler(&w.log, nil)),
		Generate: func(s []runner.ServerTools) (map[string][]byte, error) {
			w.generated.Add(1)
			return toolwrap.Generate(s)
		},
	})
	return w
}

// toolFiles builds a run's Spec, as the sidecar does, in a query opened
// with override, and returns its ToolFiles.
func (w *wrapperEnv) toolFiles(t *testing.T, override string) map[string][]byte {
	t.Helper()
	var raw []byte
	if override != "" {
		raw = []byte(override)
	}
	q, err := w.eng.OpenQuery(t.Context(), "q_wrap", raw)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	spec, err := eff.RunSpec(t.Context(), gate.RunRequest{RunID: "run_1", QueryID: "q_wrap", Language: "python",
		ToolServers: w.servers, Auditor: discardAuditor{}, Wrappers: w.wrappers})
	must(t, err)
	if spec.Caller == nil {
		t.Fatal("the run got no bridge")
	}
	return spec.ToolFiles
}

const pyDir = toolwrap.PythonDir + "/" + toolwrap.PythonPackage + "/"

// modules returns the servers that have a Python module in files.
func modules(files map[string][]byte) []string {
	var out []string
	for p := range files {
		if name, ok := strings.CutPrefix(p, pyDir); ok && name != "__init__.py" {
			out = append(out, strings.TrimSuffix(name, ".py"))
		}
	}
	slices.Sort(out)
	return out
}

// tools returns which of the test server's tools a module in files calls.
func tools(files map[string][]byte, server string) []string {
	var out []string
	for _, tool := range []string{"records", "lookup", "delete_record", "sleep", "hang", "crash", "big", "fail", "secret_digest", "pid", "spawn", "media"} {
		if bytes.Contains(files[pyDir+server+".py"], []byte(`"`+tool+`"`)) {
			out = append(out, tool)
		}
	}
	return out
}

// TestToolFilesOnlyCallable: a run's wrappers hold exactly the tools the
// callable globs name, described as the policy describes the server; a
// server that is down has no module, and is logged.
func TestToolFilesOnlyCallable(t *testing.T) {
	t.Parallel()
	w := newWrapperEnv(t)
	files := w.toolFiles(t, "")
	if got, want := modules(files), []string{"alpha", "beta"}; !slices.Equal(got, want) {
		t.Errorf("modules %v, want %v", got, want)
	}
	if got, want := tools(files, "alpha"), []string{"records", "lookup"}; !slices.Equal(got, want) {
		t.Errorf("alpha's wrappers call %v, want %v", got, want)
	}
	if got, want := tools(files, "beta"), []string{"lookup"}; !slices.Equal(got, want) {
		t.Errorf("beta's wrappers call %v, want %v", got, want)
	}
	alpha := string(files[pyDir+"alpha.py"])
	if !strings.Contains(alpha, "the alpha records, from the policy") || strings.Contains(alpha, "test records over HTTP") {
		t.Errorf("alpha's module is not described by the policy:\n%s", alpha)
	}
	if _, ok := files[toolwrap.NodeDir+"/"+toolwrap.NodePackage+"/alpha.d.ts"]; !ok {
		t.Error("no Node types for alpha")
	}
	if log := w.log.String(); !strings.Contains(log, "mcp_server=down") {
		t.Errorf("the down server was not logged: %q", log)
	}
}

// TestToolFilesNarrowed: a per-query override that narrows callable
// narrows the files: only what the query's code may call is there.
func TestToolFilesNarrowed(t *testing.T) {
	t.Parallel()
	w := newWrapperEnv(t)
	files := w.toolFiles(t, `{"code_calls":{"callable":{"alpha":["lookup"]}}}`)
	if got, want := modules(files), []string{"alpha"}; !slices.Equal(got, want) {
		t.Errorf("modules %v, want %v", got, want)
	}
	if got, want := tools(files, "alpha"), []string{"lookup"}; !slices.Equal(got, want) {
		t.Errorf("alpha's wrappers call %v, want %v", got, want)
	}
}

// TestToolFilesCached: runs under the same callable lists and unchanged
// servers share one tree, generated once; another list is generated once
// more and does not evict the first.
func TestToolFilesCached(t *testing.T) {
	t.Parallel()
	w := newWrapperEnv(t)
	first := w.toolFiles(t, "")
	again := w.toolFiles(t, "")
	if n := w.generated.Load(); n != 1 {
		t.Errorf("two runs under one policy generated %d times, want 1", n)
	}
	if reflect.ValueOf(first).Pointer() != reflect.ValueOf(again).Pointer() {
		t.Error("the second run got another tree, not the cached one")
	}
	narrow := w.toolFiles(t, `{"code_calls":{"callable":{"alpha":["lookup"]}}}`)
	if n := w.generated.Load(); n != 2 {
		t.Errorf("a narrowed list generated %d times in all, want 2", n)
	}
	if reflect.DeepEqual(first, narrow) {
		t.Error("the narrowed run got the full tree")
	}
	back := w.toolFiles(t, "")
	if n := w.generated.Load(); n != 2 || reflect.ValueOf(first).Pointer() != reflect.ValueOf(back).Pointer() {
		t.Errorf("back to the policy's list: generated %d times in all (want 2), same tree %v", n, reflect.ValueOf(first).Pointer() == reflect.ValueOf(back).Pointer())
	}
}

// TestToolFilesNoBridge: a run with no bridge (no ToolServers) gets no
// wrappers, even with a Wrappers.
func TestToolFilesNoBridge(t *testing.T) {
	t.Parallel()
	w := newWrapperEnv(t)
	q, err := w.eng.OpenQuery(t.Context(), "q_wrap", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	spec, err := eff.RunSpec(t.Context(), gate.RunRequest{RunID: "run_1", Language: "python", Wrappers: w.wrappers})
	must(t, err)
	if spec.Caller != nil || spec.ToolFiles != nil || w.generated.Load() != 0 {
		t.Errorf("a run without ToolServers got Tools %T and %d files (%d generated)", spec.Caller, len(spec.ToolFiles), w.generated.Load())
	}
}

// TestToolFilesAllDown: a run whose only callable server is down gets the
// runtime and no module, so that its calls fail with kind server, not at
// import.
func TestToolFilesAllDown(t *testing.T) {
	t.Parallel()
	w := newWrapperEnv(t)
	files := w.toolFiles(t, `{"code_calls":{"callable":{"down":["*"]}}}`)
	if got := modules(files); len(got) != 0 {
		t.Errorf("modules %v, want none", got)
	}
	if _, ok := files[pyDir+"__init__.py"]; !ok {
		t.Errorf("no runtime among %d files", len(files))
	}
	if log := w.log.String(); !strings.Contains(log, "mcp_server=down") {
		t.Errorf("the down server was not logged: %q", log)
	}
}

// TestARunDoesNotWaitForAConnectingServer: at a run's start, a callable
// server that is still starting (the Go SDK's test server over stdio, held
// before it serves until the test releases it) is left out of the run's
// wrappers and named unavailable, with why, in the tool description, once
// the listing's bound has passed; the server that is up keeps its module
// and its calls, which the slow one does not hold up. A call to the slow
// one fails with the reason. Once released, the slow server's connect,
// which went on, gives the next run its module.
func TestARunDoesNotWaitForAConnectingServer(t *testing.T) {
	t.Parallel()
	bin, err := mcptest.Build(t.TempDir())
	must(t, err)
	release := filepath.Join(t.TempDir(), "release")
	e := newEnv(t, `version: 1
workspace_root: ./ws
tools:
  allow: [mcp__sandboxed_code__run]
mcp_servers:
  ready: {description: "records that are ready", command: ["`+bin+`", "-name", "ready", "-records", "5"]}
  slow: {description: "records slow to start", command: ["`+bin+`", "-name", "slow", "-records", "5", "-wait-for", "`+release+`"]}
code_calls:
  callable:
    ready: [lookup]
    slow: [lookup]
`)
	eng := e.engine(t)
	ready := mcptest.Stdio(bin, "ready", 5, nil)
	slow := mcptest.Stdio(bin, "slow", 5, nil)
	slow.Command = append(slow.Command, "-wait-for", release)
	servers, err := mcpservers.New([]mcpservers.Config{ready, slow}, mcpservers.Options{Logger: quiet})
	must(t, err)
	t.Cleanup(func() { servers.Close() })
	// ready is up (its tools cached) before the run; slow cannot be until
	// released. The bound is what the run waits for slow, not an assertion.
	if _, ok, err := servers.Tool(t.Context(), "ready", "lookup"); !ok || err != nil {
		t.Fatalf("ready: lookup: %v %v", ok, err)
	}
	w := gate.NewWrappers(servers, gate.WrapperOptions{Logger: quiet, ListWait: 300 * time.Millisecond})
	q, err := eng.OpenQuery(t.Context(), "q_slow", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	run := func() runner.Spec {
		t.Helper()
		spec, err := eff.RunSpec(t.Context(), gate.RunRequest{RunID: "run_1", QueryID: "q_slow", Language: "python",
			ToolServers: servers, Auditor: discardAuditor{}, Wrappers: w})
		if err != nil {
			t.Fatalf("the run did not start: %v", err)
		}
		return spec
	}

	spec := run()
	if got, want := modules(spec.ToolFiles), []string{"ready"}; !slices.Equal(got, want) {
		t.Errorf("modules %v while slow starts, want %v", got, want)
	}
	desc, err := w.Description(t.Context(), eff, "base")
	must(t, err)
	for _, want := range []string{"- ready (1 tool): records that are ready\n", `- slow: unavailable now, "mcp server \"slow\": MCP server unavailable: still connecting`} {
		if !strings.Contains(desc, want) {
			t.Errorf("the description lacks %q:\n%s", want, desc)
		}
	}
	res := spec.Caller.CallTool(t.Context(), runner.NestedCall{Server: "ready", Tool: "lookup", Arguments: json.RawMessage(`{"id": 2}`), Seq: 1, InFlight: 1})
	if res.Err != nil || !strings.Contains(string(res.Result), `"name":"ready-2"`) {
		t.Errorf("a call to ready while slow starts: %+v %s", res.Err, res.Result)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	res = spec.Caller.CallTool(ctx, runner.NestedCall{Server: "slow", Tool: "lookup", Arguments: json.RawMessage(`{"id": 2}`), Seq: 2, InFlight: 1})
	cancel()
	if res.Err == nil || res.Result != nil || !strings.Contains(res.Err.Message, `MCP server "slow"`) || !strings.Contains(res.Err.Message, "still connecting") {
		t.Errorf("a call to slow while it starts was not refused with why: %+v %s", res.Err, res.Result)
	}

	must(t, os.WriteFile(release, nil, 0o600))
	// slow's connect began with the first listing and has the MCP
	// client's connect timeout to finish; this bound only stops a broken
	// test.
	giveUp := time.Now().Add(2 * mcpservers.DefaultConnectTimeout)
	for !slices.Contains(modules(run().ToolFiles), "slow") {
		if time.Now().After(giveUp) {
			t.Fatal("slow's module never came once it had started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	desc, err = w.Description(t.Context(), eff, "base")
	must(t, err)
	if !strings.Contains(desc, "- slow (1 tool): records slow to start\n") || strings.Contains(desc, "unavailable") {
		t.Errorf("once started, slow is not described as up:\n%s", desc)
	}
}
