package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	oparego "github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// This file is the decision contract: what a Call is, what a Decision is,
// and how one is made and read back from the policy. The Rego input a call
// becomes is built in input.go, from the facts read in pathfact.go and
// urlfact.go.

// Events a Call may come from.
const (
	EventPreToolUse = "PreToolUse"
	EventRun        = "run" // the sidecar re-deciding a sandboxed run itself
)

// SourceGatekeeper is the MCPServer.Source the sidecar itself gives
// gatekeeper's own `gatekeeper mcp` server of a Claude Code session (see
// gate/server's hook endpoint); no client can send it. The built-in policy
// trusts the sandbox tool from it and from an SDK client's in-process
// server ("sdk").
const SourceGatekeeper = "gatekeeper"

// Outcomes of a Decision.
const (
	Allow = "allow"
	Deny  = "deny"
	Ask   = "ask"
)

// RuleError is the rule of every decision that failed closed.
const RuleError = "gatekeeper.error"

// Call is one tool call to decide.
type Call struct {
	Event     string
	ToolName  string
	ToolInput json.RawMessage // a JSON object
	ToolUseID string
	MCPServer *MCPServer
	// Cwd is the agent's working directory, against which its tools resolve
	// relative paths; empty means the workspace root.
	Cwd string
	// AgentID and AgentType name the subagent making the call, as Claude
	// Code's hook input does (agent_id only inside a subagent); empty when
	// absent. They reach the policy as input.agent_id and input.agent_type,
	// present only when not empty.
	AgentID, AgentType string
}

// MCPServer is where an mcp__ tool comes from, as the client reports it.
type MCPServer struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

// Decision is the outcome of one call.
type Decision struct {
	Decision string // Allow, Deny or Ask
	Reason   string // a sentence for the model
	Rule     string // the rule that decided
	// Revision and PolicyHash identify the policy that decided.
	Revision   string
	PolicyHash string
	// Effective is the query's effective policy the decision was made
	// under (nil when it could not be computed): what a run it allows must
	// run with, whatever reloads since.
	Effective *Effective
}

func failClosed(rev, hash string, err error) Decision {
	return Decision{
		Decision:   Deny,
		Rule:       RuleError,
		Reason:     fmt.Sprintf("gatekeeper could not decide this call (%v), so it is denied", err),
		Revision:   rev,
		PolicyHash: hash,
	}
}

// Decide evaluates the policy for call. It always returns a usable
// Decision: when anything goes wrong it is a deny with rule
// "gatekeeper.error", and the error says what went wrong.
func (q *Query) Decide(ctx context.Context, call Call) (Decision, error) {
	snap := q.engine.cur.Load() // one revision decides, whatever reloads meanwhile
	eff, err := q.effective(ctx, snap)
	if err != nil {
		return failClosed(snap.revision, "", err), err
	}
	d, err := decide(ctx, snap, eff, call, q.engine.cfg)
	if err != nil {
		d = failClosed(eff.Revision, eff.Hash, err)
	}
	d.Effective = eff
	return d, err
}

func decide(ctx context.Context, snap *snapshot, eff *Effective, call Call, cfg Config) (Decision, error) {
	in, err := buildInput(eff, call)
	if err != nil {
		return Decision{}, err
	}
	v, err := evalDecision(ctx, snap.decide, in, cfg.DecisionTimeout)
	if err != nil {
		return Decision{}, err
	}
	d, err := parseDecision(v)
	if err != nil {
		return Decision{}, err
	}
	d.Revision, d.PolicyHash = eff.Revision, eff.Hash
	return d, nil
}

// evalDecision evaluates the prepared decision query over in, cancelled
// after timeout or when ctx ends, and returns its one value, unconverted.
//
// The cancellation is a flag the evaluator polls, raised by a timer: left
// to itself, OPA would start a goroutine per evaluation to watch ctx, and
// waking it (and a thread for it) costs more than the rest of a small
// decision's bookkeeping. The result stays an ast.Value: parseDecision
// reads it without converting it to Go maps first.
func evalDecision(ctx context.Context, pq oparego.PreparedEvalQuery, in ast.Value, timeout time.Duration) (ast.Value, error) {
	cancel := topdown.NewCancel()
	timer := time.AfterFunc(timeout, cancel.Cancel)
	stop := context.AfterFunc(ctx, cancel.Cancel)
	defer func() {
		timer.Stop()
		stop()
	}()
	rs, err := pq.Eval(ctx, oparegoInput(in), oparego.EvalExternalCancel(cancel), oparego.EvalGenerateJSON(keepTerm))
	if err != nil {
		return nil, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, fmt.Errorf("%w: data.gatekeeper.decision is undefined", ErrBadDecision)
	}
	v, ok := rs[0].Expressions[0].Value.(ast.Value)
	if !ok {
		return nil, fmt.Errorf("%w: decision is %T, not a Rego value", ErrBadDecision, rs[0].Expressions[0].Value)
	}
	return v, nil
}

// keepTerm is an EvalGenerateJSON function that keeps a result as the
// ast.Value it is.
func keepTerm(t *ast.Term, _ *oparego.EvalContext) (any, error) { return t.Value, nil }

func oparegoInput(v ast.Value) oparego.EvalOption { return oparego.EvalParsedInput(v) }

// Keys of the decision object.
var (
	keyDecision = ast.StringTerm("decision")
	keyReason   = ast.StringTerm("reason")
	keyRule     = ast.StringTerm("rule")
)

// parseDecision accepts exactly {"decision", "reason", "rule"} with a known
// decision and non-empty strings; anything else is an error.
func parseDecision(v ast.Value) (Decision, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return Decision{}, fmt.Errorf("%w: decision is %s, not an object", ErrBadDecision, ast.ValueName(v))
	}
	if obj.Len() != 3 {
		return Decision{}, fmt.Errorf("%w: decision has %d keys, want decision, reason, rule", ErrBadDecision, obj.Len())
	}
	var d Decision
	for _, f := range []struct {
		key *ast.Term
		dst *string
	}{{keyDecision, &d.Decision}, {keyReason, &d.Reason}, {keyRule, &d.Rule}} {
		var s ast.String
		if t := obj.Get(f.key); t != nil {
			s, _ = t.Value.(ast.String)
		}
		if s == "" {
			return Decision{}, fmt.Errorf("%w: %q is missing or not a non-empty string", ErrBadDecision, string(f.key.Value.(ast.String)))
		}
		*f.dst = string(s)
	}
	switch d.Decision {
	case Allow, Deny, Ask:
		return d, nil
	}
	return Decision{}, fmt.Errorf("%w: decision %q is not allow, deny or ask", ErrBadDecision, d.Decision)
}
