package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// codeCallLog writes, with the real audit writer, one run whose program
// made three nested calls (allowed, denied by an operator rule on an
// argument, failed at the server), between the run's decision line and its
// run line, as the sidecar writes them.
func codeCallLog(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	at := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	log, err := audit.Open(path, audit.Options{Now: func() time.Time { at = at.Add(7 * time.Millisecond); return at }})
	if err != nil {
		t.Fatal(err)
	}
	q, tu, run := "q_5f3dcca8-5d76", "toolu_cc_1", "r_0b1c2d3e"
	zero := 0
	for _, rec := range []audit.Record{
		{Kind: audit.KindQuery, QueryID: q, Decision: gate.Allow},
		{Kind: audit.KindDecision, QueryID: q, ToolUseID: tu, Tool: wire.SandboxTool, Event: "PreToolUse", Decision: gate.Allow, Rule: "tools.allow_list", Reason: "allowlisted"},
		{Kind: audit.KindCodeCall, Event: gate.EventCodeCall, QueryID: q, ToolUseID: tu, RunID: run, Server: "crm", Tool: "get_customer", CallSeq: 1, Decision: gate.Allow, Rule: "code_calls.callable",
			Reason: "callable", ArgumentsSHA256: strings.Repeat("a", 64), ArgumentsBytes: 24, ResultSHA256: strings.Repeat("b", 64), ResultBytes: 3100, DurationMS: 3},
		{Kind: audit.KindCodeCall, Event: gate.EventCodeCall, QueryID: q, ToolUseID: tu, RunID: run, Server: "crm", Tool: "get_customer", CallSeq: 2, Decision: gate.Deny, Rule: "ops.no_vip",
			Reason: "customer c-vip may not be read from code", ArgumentsSHA256: strings.Repeat("c", 64), ArgumentsBytes: 26, ErrorKind: runner.ToolDenied, DurationMS: 1},
		{Kind: audit.KindCodeCall, Event: gate.EventCodeCall, QueryID: q, ToolUseID: tu, RunID: run, Server: "billing", Tool: "get_invoice", CallSeq: 3, Decision: gate.Allow, Rule: "code_calls.callable",
			Reason: "callable", ArgumentsSHA256: strings.Repeat("d", 64), ArgumentsBytes: 2, ErrorKind: runner.ToolServer, Error: "MCP server \"billing\" failed", DurationMS: 12},
		{Kind: audit.KindRun, QueryID: q, ToolUseID: tu, RunID: run, Tool: wire.SandboxTool, Decision: gate.Allow, Rule: "tools.allow_list", Outcome: audit.OutcomeExited, ExitCode: &zero, DurationMS: 140, Runtime: "runc", Image: "gatekeeper-sandbox:python", ToolCalls: 3},
	} {
		if err := log.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTailShowsNestedCallsUnderTheirRun: gatekeeper tail prints a run's
// nested calls indented between its decision and its run line, and
// gatekeeper audit verify verifies them as part of the chain.
func TestTailShowsNestedCallsUnderTheirRun(t *testing.T) {
	t.Parallel()
	path := codeCallLog(t)
	if out, err := cli(t, "", "audit", "verify", path); err != nil || !strings.Contains(out, "6 lines") {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
	url, tokenFile := consoleOn(t, path)
	out, err := cli(t, "", "tail", "--url", url, "--token-file", tokenFile, "--no-follow", "--backfill", "100", "--color", "never", "--utc")
	if err != nil {
		t.Fatalf("tail: %v\n%s", err, out)
	}
	golden(t, "tail/code_calls", t.TempDir(), out)
	out, err = cli(t, "", "tail", "--url", url, "--token-file", tokenFile, "--no-follow", "--backfill", "100", "--color", "never", "--kind", "code_call")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "↳"); n != 3 || strings.Count(out, "\n") != 3 {
		t.Errorf("tail --kind code_call printed %d nested lines:\n%s", n, out)
	}
}
