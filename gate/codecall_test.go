package gate_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

const codeCallPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [mcp__sandboxed_code__run]
  deny: [mcp__crm__get_secrets]
code_calls:
  callable:
    crm: [get_*]
  max_calls: 5
  max_in_flight: 4
  max_argument_bytes: 1k
  max_result_bytes: 4k
  timeout: 1s
`

// codeCallRego is an operator's module: it denies on an argument's value
// and on the run's counters, and asks for destructive tools.
const codeCallRego = `package gatekeeper

deny contains {"rule": "ops.no_vip", "reason": "customer c-vip may not be read from code"} if {
	input.event == "code_call"
	input.code_call.arguments.customer_id == "c-vip"
}

deny contains {"rule": "ops.too_parallel", "reason": "at most two calls at once"} if {
	input.event == "code_call"
	input.code_call.counters.in_flight > 2
}

ask contains {"rule": "ops.destructive", "reason": "a destructive tool needs a human"} if {
	input.event == "code_call"
	input.code_call.annotations.destructiveHint
}
`

// fakeServers is one MCP server, crm, for unit speed; the real MCP client
// is tested with real servers in its own package.
type fakeServers struct {
	mu    sync.Mutex
	calls []string
	args  []string // the arguments each call brought, as received
	asked []string // the tools Tool was asked about
}

var (
	yes, no  = true, false
	crmTools = map[string]runner.ToolInfo{
		"get_customer":   {Name: "get_customer", ReadOnly: &yes, Destructive: &no},
		"get_and_reset":  {Name: "get_and_reset"}, // no hints: MCP's default is destructive
		"get_secrets":    {Name: "get_secrets", ReadOnly: &yes},
		"get_everything": {Name: "get_everything", ReadOnly: &yes},
		"get_broken":     {Name: "get_broken", ReadOnly: &yes},
		"get_slowly":     {Name: "get_slowly", ReadOnly: &yes},
		"get_garbled":    {Name: "get_garbled", ReadOnly: &yes},
		"get_order": {Name: "get_order", ReadOnly: &yes, InputSchema: json.RawMessage(`{"type":"object","properties":{
			"order_id":{"type":"string"},"lines":{"type":"integer"}},"required":["order_id"],"additionalProperties":false}`)},
		"get_remote":      {Name: "get_remote", ReadOnly: &yes, InputSchema: json.RawMessage(`{"$ref":"https://schemas.example/order.json"}`)},
		"delete_customer": {Name: "delete_customer", Destructive: &yes},
	}
)

func (f *fakeServers) Tool(_ context.Context, server, tool string) (runner.ToolInfo, bool, error) {
	f.mu.Lock()
	f.asked = append(f.asked, server+"."+tool)
	f.mu.Unlock()
	if tool == "get_undescribable" {
		return runner.ToolInfo{}, false, &runner.ServerError{Server: server, Kind: errors.New("MCP server unavailable"), Reason: "it could not be reached",
			Cause: errors.New(`Post "http://10.0.0.7:9/opsmarker/mcp": dial tcp: connection refused`)}
	}
	info, ok := crmTools[tool]
	return info, ok && server == "crm", nil
}

func (f *fakeServers) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	f.calls = append(f.calls, server+"."+tool)
	f.args = append(f.args, string(args))
	f.mu.Unlock()
	switch tool {
	case "get_everything":
		return json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 5000) + `"}]}`), nil
	case "get_broken":
		return nil, &runner.ServerError{Server: server, Kind: errors.New("MCP server unavailable"), Reason: "its connection failed during get_broken",
			Cause: errors.New("fork/exec /opt/opsmarker/bin/internal-mcp: connection reset by peer")}
	case "get_slowly":
		<-ctx.Done()
		return nil, ctx.Err()
	case "get_garbled":
		return json.RawMessage(`{"content":[` + "\n\"}{\"type\":\"run\""), nil
	}
	return json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": tool + " " + string(args)}}, "isError": false})
}

func (f *fakeServers) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

type codeCallCase struct {
	Name      string `yaml:"name"`
	Server    string `yaml:"server"`
	Tool      string `yaml:"tool"`
	Arguments string `yaml:"arguments"`
	Seq       int    `yaml:"seq"`
	InFlight  int    `yaml:"in_flight"`
	Want      struct {
		Kind      string  `yaml:"kind"`
		Decision  string  `yaml:"decision"`
		Rule      string  `yaml:"rule"`
		ErrorRule *string `yaml:"error_rule"`
		Message   string  `yaml:"message"`
		// AuditError is in the audit line's error and not in what the
		// program gets: the operator's part of a server's failure.
		AuditError string `yaml:"audit_error"`
	} `yaml:"want"`
}

func codeCallEngine(t *testing.T) (*gate.Engine, *env) {
	t.Helper()
	e := newEnv(t, codeCallPolicy)
	must(t, os.WriteFile(filepath.Join(e.regoDir, "ops.rego"), []byte(codeCallRego), 0o644))
	return e.engine(t), e
}

// codeCallLog is query q_1's effective policy under codeCallEngine, and a
// real audit log in a temporary directory, with its path.
func codeCallLog(t *testing.T) (*gate.Effective, string, *audit.Log) {
	t.Helper()
	eng, _ := codeCallEngine(t)
	q, err := eng.OpenQuery(t.Context(), "q_1", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	logPath := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(logPath, audit.Options{})
	must(t, err)
	return eff, logPath, log
}

// TestCodeCallCases decides and makes each call of testdata/code_calls.yaml
// with the real engine (real OPA, the operator's module checked and
// compiled as the sidecar does) and writes each line with the real audit
// writer, whose chain then verifies.
func TestCodeCallCases(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/code_calls.yaml")
	must(t, err)
	var cases []codeCallCase
	must(t, yaml.Unmarshal(data, &cases))
	if len(cases) < 10 {
		t.Fatalf("read %d cases", len(cases))
	}
	eff, logPath, log := codeCallLog(t)
	servers := &fakeServers{}
	caller := gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "run_1", QueryID: "q_1", ToolUseID: "toolu_1", Servers: servers, Auditor: log})

	type sent struct {
		c   codeCallCase
		res runner.ToolResult
	}
	var got []sent
	for _, c := range cases {
		if c.Server == "" {
			c.Server = "crm"
		}
		if c.Seq == 0 {
			c.Seq = 1
		}
		if c.InFlight == 0 {
			c.InFlight = 1
		}
		res := caller.CallTool(t.Context(), runner.NestedCall{Server: c.Server, Tool: c.Tool, Arguments: json.RawMessage(c.Arguments), Seq: c.Seq, InFlight: c.InFlight})
		got = append(got, sent{c, res})
	}
	must(t, log.Close())

	rep, err := audit.VerifyFile(logPath)
	if err != nil {
		t.Fatalf("the chain of code_call lines does not verify: %v", err)
	}
	lines := readRecords(t, logPath)
	if len(lines) != len(cases) || rep.Lines != len(cases) {
		t.Fatalf("%d audit lines (%d verified) for %d calls; want one each", len(lines), rep.Lines, len(cases))
	}
	for i, s := range got {
		c, rec := s.c, lines[i]
		t.Run(c.Name, func(t *testing.T) {
			kind, errRule := "", ""
			if s.res.Err != nil {
				kind, errRule = s.res.Err.Kind, s.res.Err.Rule
			}
			if kind != c.Want.Kind {
				t.Errorf("kind = %q (%+v), want %q", kind, s.res.Err, c.Want.Kind)
			}
			if want := c.Want.Rule; c.Want.Kind != "" {
				if c.Want.ErrorRule != nil {
					want = *c.Want.ErrorRule
				}
				if errRule != want {
					t.Errorf("error rule = %q, want %q", errRule, want)
				}
			}
			if c.Want.Message != "" && (s.res.Err == nil || !strings.Contains(s.res.Err.Message, c.Want.Message)) {
				t.Errorf("error = %+v, want a message with %q", s.res.Err, c.Want.Message)
			}
			if rec.Kind != audit.KindCodeCall || rec.Decision != c.Want.Decision || rec.Rule != c.Want.Rule {
				t.Errorf("audit line: kind %q decision %q rule %q; want code_call %q %q", rec.Kind, rec.Decision, rec.Rule, c.Want.Decision, c.Want.Rule)
			}
			if rec.RunID != "run_1" || rec.QueryID != "q_1" || rec.ToolUseID != "toolu_1" || rec.Server != c.Server || rec.Tool != c.Tool || rec.CallSeq != c.Seq {
				t.Errorf("audit line names %q/%q/%q %s.%s #%d", rec.RunID, rec.QueryID, rec.ToolUseID, rec.Server, rec.Tool, rec.CallSeq)
			}
			if sum := sha256.Sum256([]byte(c.Arguments)); rec.ArgumentsSHA256 != hex.EncodeToString(sum[:]) || rec.ArgumentsBytes != int64(len(c.Arguments)) {
				t.Errorf("arguments sha256 %s size %d; want those of %q", rec.ArgumentsSHA256, rec.ArgumentsBytes, c.Arguments)
			}
			if s.res.Err == nil {
				if sum := sha256.Sum256(s.res.Result); rec.ResultSHA256 != hex.EncodeToString(sum[:]) || rec.ResultBytes != int64(len(s.res.Result)) {
					t.Errorf("result sha256 %s size %d; want those of the result returned", rec.ResultSHA256, rec.ResultBytes)
				}
			} else if rec.ErrorKind != s.res.Err.Kind || (rec.Error != s.res.Err.Message && rec.Reason != s.res.Err.Message && !strings.HasPrefix(s.res.Err.Message, rec.Reason+": ") && c.Want.AuditError == "") || (rec.ResultSHA256 != "") != (s.res.Err.Rule == "code_calls.max_result_bytes") {
				t.Errorf("audit error %q %q, result %q; want the error returned, and the result's hash only when it was withheld for its size", rec.ErrorKind, rec.Error, rec.ResultSHA256)
			}
			if a := c.Want.AuditError; a != "" && (!strings.Contains(rec.Error, a) || s.res.Err == nil || strings.Contains(s.res.Err.Message, a)) {
				t.Errorf("audit error %q, program's error %+v: want %q in the first only", rec.Error, s.res.Err, a)
			}
			if rec.PolicyHash != eff.Hash {
				t.Errorf("policy hash %q, want the run's %q", rec.PolicyHash, eff.Hash)
			}
		})
	}
	// Only allowed calls reached the server.
	var allowed []string
	for _, s := range got {
		if s.c.Want.Decision == gate.Allow {
			allowed = append(allowed, "crm."+s.c.Tool)
		}
	}
	if c := servers.called(); strings.Join(c, ",") != strings.Join(allowed, ",") {
		t.Errorf("the server saw %v; want only the allowed calls %v", c, allowed)
	}
	servers.mu.Lock()
	asked := strings.Join(servers.asked, ",")
	servers.mu.Unlock()
	if strings.Contains(asked, "delete_customer") || strings.Contains(asked, "billing.") || !strings.Contains(asked, "crm.get_ghost") {
		t.Errorf("servers were asked about %s; want only tools a callable glob names", asked)
	}
	if t.Failed() {
		t.Logf("audit lines: %s", mustRead(t, logPath))
	}
}

func readRecords(t *testing.T, path string) []audit.Record {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r audit.Record
		must(t, json.Unmarshal(sc.Bytes(), &r))
		out = append(out, r)
	}
	must(t, sc.Err())
	return out
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return string(b)
}

// failingAuditor refuses every line.
type failingAuditor struct{}

func (failingAuditor) Write(audit.Record) error { return errors.New("disk full") }

// TestCodeCallWithoutAuditStopsTheRun: a result whose line cannot be
// written is withheld, and no later call of the run reaches a server.
func TestCodeCallWithoutAuditStopsTheRun(t *testing.T) {
	t.Parallel()
	eng, _ := codeCallEngine(t)
	q, err := eng.OpenQuery(t.Context(), "q_1", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	servers := &fakeServers{}
	caller := gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "run_1", Servers: servers, Auditor: failingAuditor{}})
	call := runner.NestedCall{Server: "crm", Tool: "get_customer", Arguments: json.RawMessage(`{"customer_id":"c-1"}`), Seq: 1, InFlight: 1}
	res := caller.CallTool(t.Context(), call)
	if res.Err == nil || res.Err.Kind != runner.ToolDenied || res.Err.Rule != gate.RuleError || res.Result != nil {
		t.Fatalf("first call = %+v, want its result withheld", res)
	}
	call.Seq = 2
	if res := caller.CallTool(t.Context(), call); res.Err == nil || res.Err.Rule != gate.RuleError {
		t.Fatalf("second call = %+v, want it refused", res)
	}
	if c := servers.called(); len(c) != 1 {
		t.Errorf("the server saw %v; want only the first call", c)
	}
}

// TestCodeCallOverrides: a per-query override narrows the callable tools
// and lowers the bounds the run's Spec carries; one that widens is refused
// naming the field.
func TestCodeCallOverrides(t *testing.T) {
	t.Parallel()
	eng, _ := codeCallEngine(t)
	ctx := t.Context()
	q, err := eng.OpenQuery(ctx, "q_narrow", []byte(`{"code_calls":{"callable":{"crm":["get_customer"]},"max_calls":2}}`))
	must(t, err)
	eff, err := q.Effective(ctx)
	must(t, err)
	spec, err := eff.RunSpec(t.Context(), gate.RunRequest{RunID: "run_1", Language: "python"})
	must(t, err)
	if spec.Caller != nil {
		t.Errorf("a run without ToolServers got a bridge: %T", spec.Caller)
	}
	withTools, err := eff.RunSpec(t.Context(), gate.RunRequest{RunID: "run_1", Language: "python", ToolServers: &fakeServers{}, Auditor: discardAuditor{}})
	must(t, err)
	if _, ok := withTools.Caller.(*gate.CodeCaller); !ok {
		t.Errorf("a run with ToolServers under a callable list got Tools %T, want the gate's CodeCaller", withTools.Caller)
	}
	want := runner.CallLimits{MaxCalls: 2, MaxInFlight: 4, MaxArgumentBytes: 1 << 10, MaxResultBytes: 4 << 10, Timeout: time.Second}
	if spec.Sandbox.Calls != want {
		t.Errorf("Sandbox.Calls = %+v, want %+v", spec.Sandbox.Calls, want)
	}
	caller := eff.CodeCaller(gate.RunRequest{RunID: "run_1", QueryID: "q_narrow"}, &fakeServers{}, discardAuditor{})
	if caller == nil {
		t.Fatal("no ToolCaller for a query whose code may call a tool")
	}
	none, err := eng.OpenQuery(ctx, "q_none", []byte(`{"code_calls":{"callable":{}}}`))
	must(t, err)
	noneEff, err := none.Effective(ctx)
	must(t, err)
	if c := noneEff.CodeCaller(gate.RunRequest{RunID: "run_2"}, &fakeServers{}, discardAuditor{}); c != nil {
		t.Errorf("a query whose code may call no tool got a bridge: %T", c)
	}
	for tool, rule := range map[string]string{"get_customer": "", "get_everything": "code_calls.not_callable"} {
		res := caller.CallTool(ctx, runner.NestedCall{Server: "crm", Tool: tool, Arguments: json.RawMessage(`{}`), Seq: 1, InFlight: 1})
		switch {
		case rule == "" && res.Err != nil:
			t.Errorf("%s under the narrowed list: %+v, want a result", tool, res.Err)
		case rule != "" && (res.Err == nil || res.Err.Rule != rule):
			t.Errorf("%s under the narrowed list: %+v, want rule %s", tool, res.Err, rule)
		}
	}
	for raw, field := range map[string]string{
		`{"code_calls":{"callable":{"crm":["*"]}}}`:        "code_calls.callable.crm[0]",
		`{"code_calls":{"callable":{"mail":["send"]}}}`:    "code_calls.callable.mail",
		`{"code_calls":{"max_result_bytes":"1m"}}`:         "code_calls.max_result_bytes",
		`{"code_calls":{"callable":{"crm":["delete_*"]}}}`: "code_calls.callable.crm[0]",
	} {
		_, err := eng.OpenQuery(ctx, "q_wide", []byte(raw))
		var oe *gate.OverrideError
		if !errors.As(err, &oe) || !strings.Contains(strings.Join(oe.Violations, "\n"), field) {
			t.Errorf("override %s: %v, want it refused naming %s", raw, err, field)
		}
	}
}

type discardAuditor struct{}

// recordingAuditor keeps every line.
type recordingAuditor struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (a *recordingAuditor) Write(r audit.Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
	return nil
}

func (a *recordingAuditor) all() []audit.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]audit.Record(nil), a.recs...)
}

func (discardAuditor) Write(audit.Record) error { return nil }

// TestCodeCallForwardsWhatThePolicySaw: a program cannot make the policy
// and the server read different arguments. A repeated key (the policy,
// like encoding/json, keeps the last; some servers' parsers keep the
// first) and invalid UTF-8 reach the server as the policy read them.
func TestCodeCallForwardsWhatThePolicySaw(t *testing.T) {
	t.Parallel()
	eng, _ := codeCallEngine(t)
	q, err := eng.OpenQuery(t.Context(), "q_1", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	for _, tc := range []struct {
		name, args, forwarded, rule string
	}{
		{"a denied value hidden before a repeated key is denied", `{"customer_id":"c-1","customer_id":"c-vip"}`, "", "ops.no_vip"},
		{"a denied value hidden after a repeated key never reaches the server", `{"customer_id":"c-vip","customer_id":"c-1"}`, `{"customer_id":"c-1"}`, ""},
		{"a repeated key inside a nested object is forwarded once", `{"q":{"customer_id":"c-vip","customer_id":"c-2"},"n":1.50}`, `{"n":1.50,"q":{"customer_id":"c-2"}}`, ""},
		{"invalid UTF-8 is forwarded as the policy read it", "{\"customer_id\":\"c-\xff\"}", `{"customer_id":"c-\ufffd"}`, ""},
		{"keys out of order, spaces and escapes are forwarded canonical", "{ \"z\" : [ 1, 2.0 ] ,\n \"customer_id\" : \"c\\u002d1\\/x\", \"a\":{} }", `{"a":{},"customer_id":"c-1/x","z":[1,2.0]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			servers := &fakeServers{}
			lines := &recordingAuditor{}
			caller := gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "run_1", Servers: servers, Auditor: lines})
			res := caller.CallTool(t.Context(), runner.NestedCall{Server: "crm", Tool: "get_customer", Arguments: json.RawMessage(tc.args), Seq: 1, InFlight: 1})
			if tc.rule != "" {
				if res.Err == nil || res.Err.Rule != tc.rule || len(servers.args) != 0 {
					t.Fatalf("got %+v, server saw %q; want rule %s and no call", res.Err, servers.args, tc.rule)
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("got %+v", res.Err)
			}
			var want any
			must(t, json.Unmarshal([]byte(tc.forwarded), &want))
			if len(servers.args) != 1 {
				t.Fatalf("server saw %q", servers.args)
			}
			var got any
			must(t, json.Unmarshal([]byte(servers.args[0]), &got))
			if gs, ws := fmt.Sprint(got), fmt.Sprint(want); gs != ws || strings.Count(servers.args[0], "customer_id") != 1 || strings.Contains(servers.args[0], `"n":1.50`) != strings.Contains(tc.forwarded, `"n":1.50`) {
				t.Errorf("server got %s, want %s", servers.args[0], tc.forwarded)
			}
			// The line's hash and size are of the bytes the server got, not
			// of the program's.
			recs := lines.all()
			sum := sha256.Sum256([]byte(servers.args[0]))
			if len(recs) != 1 || recs[0].ArgumentsSHA256 != hex.EncodeToString(sum[:]) || recs[0].ArgumentsBytes != int64(len(servers.args[0])) {
				t.Errorf("audit lines %+v; want one with the sha256 and size of the forwarded %s", recs, servers.args[0])
			}
			if tc.args != servers.args[0] && len(recs) == 1 && recs[0].ArgumentsBytes == int64(len(tc.args)) {
				t.Errorf("the line's size is the program's %d bytes, not the forwarded %d", len(tc.args), len(servers.args[0]))
			}
		})
	}
}

// TestCodeCallConcurrentCallsEachGetOneChainedLine: a run's calls in
// flight at once each get their answer and one line of a chain that
// verifies.
func TestCodeCallConcurrentCallsEachGetOneChainedLine(t *testing.T) {
	t.Parallel()
	eff, logPath, log := codeCallLog(t)
	servers := &fakeServers{}
	caller := gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "run_1", Servers: servers, Auditor: log})
	const n = 5 // max_calls
	var wg sync.WaitGroup
	errs := make([]*runner.ToolError, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := json.RawMessage(`{"customer_id":"c-` + string(rune('a'+i)) + `"}`)
			errs[i] = caller.CallTool(t.Context(), runner.NestedCall{Server: "crm", Tool: "get_customer", Arguments: args, Seq: i + 1, InFlight: 2}).Err
		}()
	}
	wg.Wait()
	must(t, log.Close())
	for i, e := range errs {
		if e != nil {
			t.Errorf("call %d: %+v", i+1, e)
		}
	}
	rep, err := audit.VerifyFile(logPath)
	if err != nil || rep.Lines != n {
		t.Fatalf("verify: %d lines, %v; want %d", rep.Lines, err, n)
	}
	seen := map[int]bool{}
	for _, rec := range readRecords(t, logPath) {
		seen[rec.CallSeq] = rec.Kind == audit.KindCodeCall && rec.Decision == gate.Allow
	}
	for i := 1; i <= n; i++ {
		if !seen[i] {
			t.Errorf("no allowed code_call line for call %d", i)
		}
	}
	if len(servers.called()) != n {
		t.Errorf("the server saw %d calls, want %d", len(servers.called()), n)
	}
}

// BenchmarkCodeCallDecision is the gate's cost of one allowed nested call
// over a server that answers at once: decision, forwarding, audit line to
// a real log.
func BenchmarkCodeCallDecision(b *testing.B) {
	e := newEnv(b, codeCallPolicy)
	must(b, os.WriteFile(filepath.Join(e.regoDir, "ops.rego"), []byte(codeCallRego), 0o644))
	eng, err := gate.New(b.Context(), gate.Config{Logger: quiet, PolicyFile: e.policyFile, RegoDir: e.regoDir, Home: e.home})
	must(b, err)
	q, err := eng.OpenQuery(b.Context(), "q_1", nil)
	must(b, err)
	eff, err := q.Effective(b.Context())
	must(b, err)
	log, err := audit.Open(filepath.Join(b.TempDir(), "audit.log"), audit.Options{})
	must(b, err)
	defer log.Close()
	caller := gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "run_1", Servers: &nopServers{}, Auditor: log})
	call := runner.NestedCall{Server: "crm", Tool: "get_customer", Arguments: json.RawMessage(`{"customer_id":"c-1","page":3,"fields":["name","email"]}`), Seq: 1, InFlight: 1}
	b.ResetTimer()
	for b.Loop() {
		if res := caller.CallTool(b.Context(), call); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

// nopServers answers every call of crm at once, keeping nothing.
type nopServers struct{}

func (nopServers) Tool(_ context.Context, server, tool string) (runner.ToolInfo, bool, error) {
	info, ok := crmTools[tool]
	return info, ok && server == "crm", nil
}

func (nopServers) CallTool(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
}

// TestCodeCallWithoutItsPartsIsDenied: a CodeCaller missing its policy,
// servers or audit log denies every call and reaches no server.
func TestCodeCallWithoutItsPartsIsDenied(t *testing.T) {
	t.Parallel()
	eng, _ := codeCallEngine(t)
	q, err := eng.OpenQuery(t.Context(), "q_1", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	servers := &fakeServers{}
	for name, cfg := range map[string]gate.CodeCallerConfig{
		"no policy":    {Servers: servers, Auditor: discardAuditor{}},
		"no servers":   {Effective: eff, Auditor: discardAuditor{}},
		"no audit log": {Effective: eff, Servers: servers},
	} {
		res := gate.NewCodeCaller(cfg).CallTool(t.Context(), runner.NestedCall{Server: "crm", Tool: "get_customer", Arguments: json.RawMessage(`{}`), Seq: 1, InFlight: 1})
		if res.Err == nil || res.Err.Kind != runner.ToolDenied || res.Err.Rule != gate.RuleError {
			t.Errorf("%s: %+v, want a deny by %s", name, res, gate.RuleError)
		}
	}
	if c := servers.called(); len(c) != 0 {
		t.Errorf("the server saw %v", c)
	}
}

// TestCodeCallRefusalsAreAudited: a call the bridge refused itself gets
// its line from the gate (runner.RefusalRecorder), a deny naming the
// refusal's rule and kind, and the run's omitted refusals one line that
// counts them; both chain with the calls' lines, and no server is asked.
func TestCodeCallRefusalsAreAudited(t *testing.T) {
	t.Parallel()
	eff, logPath, log := codeCallLog(t)
	servers := &fakeServers{}
	var rr runner.RefusalRecorder = gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "run_1", QueryID: "q_1", ToolUseID: "toolu_1", Servers: servers, Auditor: log})
	args := json.RawMessage(`{"customer_id":"c-1"}`)
	rr.Refused(runner.ToolRefusal{Call: runner.NestedCall{Server: "crm", Tool: "get_customer", Arguments: args, Seq: 6},
		Err: runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxCalls, Message: "too many"}})
	rr.Refused(runner.ToolRefusal{Call: runner.NestedCall{Seq: 7}, Err: runner.ToolError{Kind: runner.ToolBadRequest, Rule: runner.RuleBadRequest, Message: "not a request"}})
	rr.Omitted(runner.RefusalCounts{ByRule: map[string]int{runner.RuleBadRequest: 900, runner.RuleMaxRefusals: 3}, Closed: true})
	must(t, log.Close())
	if _, err := audit.VerifyFile(logPath); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, logPath)
	if len(recs) != 3 {
		t.Fatalf("%d lines; want 3", len(recs))
	}
	sum := sha256.Sum256(args)
	want := []audit.Record{
		{Decision: gate.Deny, Rule: runner.RuleMaxCalls, Reason: "too many", ErrorKind: runner.ToolLimit, Server: "crm", Tool: "get_customer", ServerSource: gate.SourcePolicy, CallSeq: 6, ArgumentsSHA256: hex.EncodeToString(sum[:]), ArgumentsBytes: int64(len(args))},
		{Decision: gate.Deny, Rule: runner.RuleBadRequest, Reason: "not a request", ErrorKind: runner.ToolBadRequest, CallSeq: 7},
		{Decision: gate.Deny, Rule: runner.RuleMaxRefusals, Omitted: map[string]int{runner.RuleBadRequest: 900, runner.RuleMaxRefusals: 3}},
	}
	for i, rec := range recs {
		w := want[i]
		if rec.Kind != audit.KindCodeCall || rec.RunID != "run_1" || rec.QueryID != "q_1" || rec.ToolUseID != "toolu_1" || rec.PolicyHash != eff.Hash {
			t.Errorf("line %d names kind %q run %q query %q tool use %q policy %q", i, rec.Kind, rec.RunID, rec.QueryID, rec.ToolUseID, rec.PolicyHash)
		}
		got := fmt.Sprint(rec.Decision, rec.Rule, rec.ErrorKind, rec.Server, rec.Tool, rec.ServerSource, rec.CallSeq, rec.ArgumentsSHA256, rec.ArgumentsBytes, rec.Omitted)
		if exp := fmt.Sprint(w.Decision, w.Rule, w.ErrorKind, w.Server, w.Tool, w.ServerSource, w.CallSeq, w.ArgumentsSHA256, w.ArgumentsBytes, w.Omitted); got != exp {
			t.Errorf("line %d: %s; want %s", i, got, exp)
		}
		if w.Reason != "" && rec.Reason != w.Reason || rec.Reason == "" {
			t.Errorf("line %d's reason %q; want %q", i, rec.Reason, w.Reason)
		}
	}
	if !strings.Contains(recs[2].Reason, "903 more refused calls") || !strings.Contains(recs[2].Reason, "bridge closed") {
		t.Errorf("the closing line's reason %q; want the count and the closed bridge", recs[2].Reason)
	}
	if len(servers.called()) != 0 || len(servers.asked) != 0 {
		t.Errorf("servers saw %v, asked %v; want nothing", servers.called(), servers.asked)
	}
}

// heldServers holds every call until release is closed, counting the calls
// it holds at once.
type heldServers struct {
	nopServers
	release   chan struct{}
	mu        sync.Mutex
	cur, peak int
}

func (h *heldServers) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	h.mu.Lock()
	h.cur++
	h.peak = max(h.peak, h.cur)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.cur--
		h.mu.Unlock()
	}()
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.nopServers.CallTool(ctx, server, tool, args)
}

func (h *heldServers) held() (cur, peak int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur, h.peak
}

// TestCodeCallHoldsMaxInFlightAtTheServers: whatever in_flight a call
// claims, the gate lets at most max_in_flight of a run's calls reach the
// servers at once; a call past it waits for a slot and is then made,
// not refused.
func TestCodeCallHoldsMaxInFlightAtTheServers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, strings.Replace(codeCallPolicy, "timeout: 1s", "timeout: 60s", 1))
	eng := e.engine(t)
	q, err := eng.OpenQuery(t.Context(), "q_1", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	servers := &heldServers{release: make(chan struct{})}
	caller := gate.NewCodeCaller(gate.CodeCallerConfig{Effective: eff, RunID: "run_1", Servers: servers, Auditor: discardAuditor{}})
	const n = 5 // max_calls; max_in_flight is 4
	var wg sync.WaitGroup
	errs := make([]*runner.ToolError, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = caller.CallTool(t.Context(), runner.NestedCall{Server: "crm", Tool: "get_customer", Arguments: json.RawMessage(`{}`), Seq: i + 1, InFlight: 1}).Err
		})
	}
	for cur, _ := servers.held(); cur < 4; cur, _ = servers.held() {
		time.Sleep(time.Millisecond) // rendezvous: four calls are at the server
	}
	time.Sleep(100 * time.Millisecond) // room for a fifth to arrive, were it let through
	close(servers.release)
	wg.Wait()
	for i, e := range errs {
		if e != nil {
			t.Errorf("call %d: %+v; want a result", i+1, e)
		}
	}
	if _, peak := servers.held(); peak != 4 {
		t.Errorf("%d calls at the servers at once; want max_in_flight, 4", peak)
	}
}
