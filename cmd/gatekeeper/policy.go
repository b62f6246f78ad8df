package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
)

func cmdPolicyCheck(ctx context.Context, args []string, env envLookup, stdout, stderr io.Writer) error {
	fs := newFlags("policy check", `policy check [--rego-dir DIR] [--claude-code-dir DIR] [--policy FILE | FILE]

Loads the policy as serve loads it (the same flags, the same modules) and
prints every problem with its location, or the revision serve, run and
decide report for the same flags. FILE, when given, is the policy file.
A valid policy may also get warnings, each with its location: a
code_calls.callable server that is not one of mcp_servers (fine for an
in-process SDK server a client brings; otherwise a misspelt name). They
do not change the exit status.`, stderr)
	engineOpts := engineFlags(fs, false)
	if err := parse(fs, args, env); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
	case 1:
		engineOpts.in.PolicyFile = fs.Arg(0)
	default:
		fs.Usage()
		return exitError(2)
	}
	eng, err := engineOpts.open(ctx, quietLogger())
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), gate.ErrPolicy.Error()+": ")
		fmt.Fprintln(stdout, msg)
		return exitError(1)
	}
	fmt.Fprintf(stdout, "%s: ok (revision %s)\n", engineOpts.in.PolicyFile, eng.Revision())
	eff, err := baseEffective(ctx, eng)
	if err != nil {
		return err
	}
	for _, w := range eff.Policy.Warnings() {
		fmt.Fprintln(stdout, w)
	}
	return nil
}

type decideResult struct {
	Decision       string   `json:"decision"`
	Reason         string   `json:"reason"`
	Rule           string   `json:"rule"`
	PolicyRevision string   `json:"policy_revision"`
	PolicyHash     string   `json:"policy_hash,omitempty"`
	Error          string   `json:"error,omitempty"`
	Violations     []string `json:"violations,omitempty"`
}

func cmdDecide(ctx context.Context, args []string, env envLookup, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("decide", `decide [--policy FILE] [--rego-dir DIR] [--claude-code-dir DIR] < call.json

Reads one call as JSON, e.g.
  {"tool_name": "Read", "tool_input": {"file_path": "/srv/app/x"}, "event": "PreToolUse",
   "mcp_server": {"name": "sandboxed_code", "source": "sdk"}, "sandbox_policy": {"proc": {"timeout": "30s"}}}
and prints the decision as JSON. The call is a decide frame of the wire
protocol (docs/protocol.md) without type, id and query_id, read by the
sidecar's own strict decoder; event (default PreToolUse, or canUseTool, or
run for the sidecar's re-decision of a run) and tool_use_id are optional,
and sandbox_policy is an open_query override. The policy is loaded as
serve loads it, from the same flags.

With "event": "http_request" it decides a sandboxed program's request to
an intercepted host (net.inspect, a secret's hosts) as the egress proxy's
judge does, e.g.
  {"event": "http_request", "http": {"method": "DELETE", "host": "api.github.com", "path": "/repos/our-org/x"}}

With "event": "code_call" it reads a program's nested call instead, e.g.
  {"event": "code_call", "server": "crm", "tool": "delete_customer", "arguments": {"id": 7},
   "annotations": {"readOnlyHint": false, "destructiveHint": true}}
and decides it as the sidecar decides a call through code mode's bridge
(code_calls, the Rego policy, the run's bounds; an ask is a deny, as in a
run). A hint left out takes MCP's default, as a server's silence does;
optional: "tool_known": false (the server does not list the tool),
"source": "sdk" (an in-process server; default "policy"), "calls": N (the
call's number in its run, default 1) and sandbox_policy.
Exit status: 0 allow, 1 deny, 3 ask, 2 bad input.`, stderr)
	engineOpts := engineFlags(fs, true)
	if err := parse(fs, args, env); err != nil {
		return err
	}
	// The sidecar's own frame limit bounds a call.
	data, err := io.ReadAll(io.LimitReader(stdin, server.DefaultMaxFrameBytes+1))
	if err != nil {
		return fmt.Errorf("decide: read the call from stdin: %w", err)
	}
	if len(data) > server.DefaultMaxFrameBytes {
		fmt.Fprintf(stderr, "gatekeeper decide: the call is larger than %d bytes\n", server.DefaultMaxFrameBytes)
		return exitError(2)
	}
	if isCodeCall(data) {
		return decideNested(ctx, engineOpts, data, stdout, stderr)
	}
	req, werr := wire.DecodeDryRun(data, wire.EventPreToolUse, wire.EventCanUseTool, gate.EventRun, gate.EventHTTPRequest)
	if werr != nil {
		fmt.Fprintf(stderr, "gatekeeper decide: %s: %s\n", werr.Code, untrusted.Terminal(werr.Message))
		return exitError(2)
	}
	eng, err := engineOpts.open(ctx, quietLogger())
	if err != nil {
		return err
	}
	q, err := eng.OpenQuery(ctx, "cli", req.SandboxPolicy)
	if err != nil {
		var oe *gate.OverrideError
		if errors.As(err, &oe) {
			_ = writeJSON(stdout, decideResult{Decision: gate.Deny, Rule: "override.rejected", Reason: oe.Error(), PolicyRevision: eng.Revision(), Violations: oe.Violations})
			return exitError(1)
		}
		return err
	}
	if req.Decide.Event == gate.EventHTTPRequest {
		// A run's request to an intercepted host, decided as the proxy's
		// judge decides it (with the query's effective policy).
		eff, err := q.Effective(ctx)
		if err != nil {
			return err
		}
		d := eff.DecideHTTP(ctx, server.HTTPInput(&req.Decide, "cli"), 0)
		return writeDecision(stdout, decideResult{Decision: d.Decision, Reason: d.Reason, Rule: d.Rule, PolicyRevision: d.Revision, PolicyHash: d.PolicyHash})
	}
	d, err := q.Decide(ctx, server.Call(&req.Decide))
	res := decideResult{Decision: d.Decision, Reason: d.Reason, Rule: d.Rule, PolicyRevision: d.Revision, PolicyHash: d.PolicyHash}
	if err != nil {
		res.Error = err.Error()
	}
	return writeDecision(stdout, res)
}

// writeDecision prints res and returns decide's exit status for it.
func writeDecision(stdout io.Writer, res decideResult) error {
	if err := writeJSON(stdout, res); err != nil {
		return err
	}
	switch res.Decision {
	case gate.Allow:
		return nil
	case gate.Ask:
		return exitError(3)
	}
	return exitError(1)
}

// decideNested is decide for a program's nested call (event code_call).
func decideNested(ctx context.Context, engineOpts *engineOptions, data []byte, stdout, stderr io.Writer) error {
	in, err := decodeCodeCall(data)
	if err != nil {
		fmt.Fprintf(stderr, "gatekeeper decide: %s\n", untrusted.Terminal(err.Error()))
		return exitError(2)
	}
	eng, err := engineOpts.open(ctx, quietLogger())
	if err != nil {
		return err
	}
	q, err := eng.OpenQuery(ctx, "cli", in.SandboxPolicy)
	if err == nil {
		var eff *gate.Effective
		if eff, err = q.Effective(ctx); err == nil {
			return writeDecision(stdout, decideCodeCall(ctx, eff, in))
		}
	}
	var oe *gate.OverrideError
	if errors.As(err, &oe) {
		_ = writeJSON(stdout, decideResult{Decision: gate.Deny, Rule: "override.rejected", Reason: oe.Error(), PolicyRevision: eng.Revision(), Violations: oe.Violations})
		return exitError(1)
	}
	return err
}
