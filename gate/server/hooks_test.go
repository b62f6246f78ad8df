package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

// observer records what the server tells it, and how many audit lines were
// written by then.
type observer struct {
	h     **harness
	mu    sync.Mutex
	infos []server.RunInfo
	lines []int
}

func (o *observer) ObserveRun(info server.RunInfo) {
	rep, _ := audit.VerifyFile((*o.h).auditPath)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.infos = append(o.infos, info)
	o.lines = append(o.lines, rep.Lines)
}

func TestRunObserverSeesTheFinishedRunAfterItsAuditLine(t *testing.T) {
	t.Parallel()
	var h *harness
	obs := &observer{h: &h}
	h = start(t, options{runner: &fakeRunner{}, observer: obs})
	c := h.connect(t)
	q := c.open("")
	c.decide(q, "mcp__sandboxed_code__run", `{"language":"python","code":"print('hello')"}`, "toolu_obs", sdkServer)
	c.send(fmt.Sprintf(`{"type":"run","id":"r","query_id":%q,"tool_use_id":"toolu_obs","language":"python","code":"print('hello')","files":{"in.csv":"1,2"}}`, q))
	c.recv() // output
	if res := c.recv(); res["type"] != "run_result" {
		t.Fatalf("run: %v", res)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.infos) != 1 {
		t.Fatalf("observer told of %d runs, want 1", len(obs.infos))
	}
	info := obs.infos[0]
	if info.Spec.Code != "print('hello')" || info.Spec.Files["in.csv"] != "1,2" || info.Result.Stdout != "hello\n" || info.ToolUseID != "toolu_obs" || info.Spec.OnOutput != nil {
		t.Errorf("observed %+v", info)
	}
	var pol struct {
		Sandbox json.RawMessage `json:"sandbox"`
	}
	if err := json.Unmarshal(info.Policy, &pol); err != nil || len(pol.Sandbox) == 0 || !strings.HasPrefix(info.PolicyHash, "sha256:") {
		t.Errorf("observed policy %s (hash %q): %v", info.Policy, info.PolicyHash, err)
	}
	if obs.lines[0] != 3 { // the query, the decision and the run itself
		t.Errorf("the observer ran with %d audit lines written, want 3 (query, decision, run)", obs.lines[0])
	}
}

func TestUIIsServedUnderUIOnly(t *testing.T) {
	t.Parallel()
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "console at "+r.URL.Path) })
	h := start(t, options{ui: ui})
	hc := h.httpClient()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cases := []struct {
		path, want string
		status     int
	}{
		{"/ui/", "console at /ui/", 200},
		{"/ui/assets/app.js", "console at /ui/assets/app.js", 200},
		{"/ui", "", http.StatusMovedPermanently},
		{"/uix", "", http.StatusNotFound},
	}
	for _, tc := range cases {
		resp, err := hc.Get("http://gk" + tc.path)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.want != "" && string(body) != tc.want) {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
	}
}

func TestTheGivenRegistryHoldsTheServersMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := start(t, options{registry: reg})
	c := h.connect(t)
	c.decide(c.open(""), "Bash", `{"command":"ls"}`, "toolu_reg", "")
	fams, err := reg.Gather()
	must(t, err)
	for _, f := range fams {
		if f.GetName() == "gatekeeper_decisions_total" {
			return
		}
	}
	t.Fatal("the registry given in Config has no gatekeeper_decisions_total")
}
