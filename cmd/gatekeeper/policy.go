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
decide report for the same flags. FILE, when given, is the policy file.`, stderr)
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
	req, werr := wire.DecodeDryRun(data, wire.EventPreToolUse, wire.EventCanUseTool, gate.EventRun)
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
	d, err := q.Decide(ctx, server.Call(&req.Decide))
	res := decideResult{Decision: d.Decision, Reason: d.Reason, Rule: d.Rule, PolicyRevision: d.Revision, PolicyHash: d.PolicyHash}
	if err != nil {
		res.Error = err.Error()
	}
	if err := writeJSON(stdout, res); err != nil {
		return err
	}
	switch d.Decision {
	case gate.Allow:
		return nil
	case gate.Ask:
		return exitError(3)
	}
	return exitError(1)
}
