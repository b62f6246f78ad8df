package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// openQuery opens a query unless a cap on open queries is hit. It runs on
// the reader goroutine, as closeQuery does, so the connection's count
// cannot change between the check and the insert.
func (c *conn) openQuery(r *wire.OpenQuery) {
	c.mu.Lock()
	open := len(c.queries)
	c.mu.Unlock()
	if open >= c.s.cfg.MaxQueriesPerConn {
		c.sendError(c.s.tooManyQueries(r.ID, true))
		return
	}
	if !c.s.queries.take() {
		c.sendError(c.s.tooManyQueries(r.ID, false))
		return
	}
	if !c.addQuery(r) {
		c.s.queries.give(1)
	}
}

// addQuery opens the query of r and answers r; false if it was refused.
func (c *conn) addQuery(r *wire.OpenQuery) bool {
	id := newID("q_")
	q, err := c.s.cfg.Engine.OpenQuery(c.ctx, id, r.SandboxPolicy)
	rec := audit.Record{Kind: audit.KindQuery, QueryID: id, Client: c.client, PolicyRevision: c.s.cfg.Engine.Revision()}
	if len(r.SandboxPolicy) > 0 {
		rec.ToolInput = r.SandboxPolicy
	}
	if err != nil {
		var oe *gate.OverrideError
		if errors.As(err, &oe) {
			rec.Decision, rec.Rule, rec.Reason = gate.Deny, "override.rejected", oe.Error()+": "+fmt.Sprint(oe.Violations)
			_ = c.s.cfg.Auditor.Write(rec)
			c.sendError(&wire.Error{ID: r.ID, Code: wire.CodePolicyOverrideRejected, Message: oe.Error(), Violations: oe.Violations})
			return false
		}
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInternal, Message: "open query: " + err.Error()})
		return false
	}
	eff, err := q.Effective(c.ctx)
	if err != nil {
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInternal, Message: "open query: " + err.Error()})
		return false
	}
	rec.Decision, rec.PolicyHash = gate.Allow, eff.Hash
	if err := c.s.cfg.Auditor.Write(rec); err != nil {
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInternal, Message: "the audit log cannot be written, so no query is opened: " + err.Error()})
		return false
	}
	c.mu.Lock()
	c.queries[id] = &query{q: q}
	c.mu.Unlock()
	c.s.metrics.queries.Inc()
	c.send(wire.QueryOpened{ID: r.ID, QueryID: id, PolicyHash: eff.Hash, EffectivePolicy: eff.JSON})
	return true
}

func (c *conn) closeQuery(r *wire.CloseQuery) {
	c.mu.Lock()
	_, ok := c.queries[r.QueryID]
	delete(c.queries, r.QueryID)
	c.mu.Unlock()
	if !ok {
		c.sendError(unknownQuery(r.ID, r.QueryID))
		return
	}
	c.s.queries.give(1)
	c.s.metrics.queries.Dec()
	c.send(wire.QueryClosed{ID: r.ID, QueryID: r.QueryID})
}

// Call is the gate.Call a decide frame asks about. `gatekeeper decide`
// uses it too, so that a dry run judges the call the sidecar would.
func Call(r *wire.Decide) gate.Call {
	call := gate.Call{Event: r.Event, ToolName: r.ToolName, ToolInput: r.ToolInput, ToolUseID: r.ToolUseID, Cwd: r.Cwd}
	if r.MCPServer != nil {
		call.MCPServer = &gate.MCPServer{Name: r.MCPServer.Name, Source: r.MCPServer.Source}
	}
	return call
}

func (c *conn) decide(r *wire.Decide) {
	start := time.Now()
	q := c.query(r.QueryID)
	if q == nil {
		c.sendError(unknownQuery(r.ID, r.QueryID))
		return
	}
	d, err := q.q.Decide(c.ctx, Call(r))
	if err != nil {
		c.s.log.Warn("decision failed closed", "query_id", r.QueryID, "tool", r.ToolName, "err", err)
	}
	id := newID("d_")
	if err := c.s.cfg.Auditor.Write(audit.Record{
		Kind: audit.KindDecision, DecisionID: id, QueryID: r.QueryID, ToolUseID: r.ToolUseID,
		Tool: r.ToolName, Event: r.Event, Decision: d.Decision, Rule: d.Rule, Reason: d.Reason,
		PolicyRevision: d.Revision, PolicyHash: d.PolicyHash, Client: c.client, ToolInput: r.ToolInput,
	}); err != nil {
		c.s.log.Error("audit write failed; denying", "err", err)
		d.Decision, d.Rule = gate.Deny, gate.RuleError
		d.Reason = "gatekeeper could not write its audit log, so the call is denied"
	}
	if d.Decision == gate.Allow && r.ToolName == gate.SandboxTool && r.ToolUseID != "" {
		q.authorize(r.ToolUseID)
	}
	c.s.metrics.decisions.WithLabelValues(d.Decision, d.Rule).Inc()
	c.s.metrics.latency.Observe(time.Since(start).Seconds())
	c.send(wire.Decision{ID: r.ID, Decision: d.Decision, Reason: d.Reason, Rule: d.Rule, DecisionID: id, PolicyRevision: d.Revision, ToolUseID: r.ToolUseID})
}

// run re-decides a run itself, runs it, streams its output and reports it.
func (c *conn) run(r *wire.Run) {
	q := c.query(r.QueryID)
	if q == nil {
		c.sendError(unknownQuery(r.ID, r.QueryID))
		return
	}
	runID := newID("r_")
	rec := audit.Record{Kind: audit.KindRun, RunID: runID, QueryID: r.QueryID, ToolUseID: r.ToolUseID, Tool: gate.SandboxTool, Event: gate.EventRun, Client: c.client}
	deny := func(rule, reason string) {
		rec.Decision, rec.Rule, rec.Reason = gate.Deny, rule, reason
		_ = c.s.cfg.Auditor.Write(rec)
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeRunDenied, Rule: rule, Message: reason})
	}
	if !q.consume(r.ToolUseID) {
		deny("run.no_prior_allow", fmt.Sprintf("no allowed %s call with tool_use_id %q is waiting to run in this query", gate.SandboxTool, r.ToolUseID))
		return
	}
	input := map[string]any{"language": r.Language, "code": r.Code}
	if r.Files != nil {
		input["files"] = r.Files
	}
	if r.TimeoutMS != nil {
		input["timeout_ms"] = *r.TimeoutMS
	}
	raw, err := json.Marshal(input)
	if err != nil {
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInternal, Message: err.Error()})
		return
	}
	d, _ := q.q.Decide(c.ctx, gate.Call{Event: gate.EventRun, ToolName: gate.SandboxTool, ToolInput: raw, ToolUseID: r.ToolUseID,
		MCPServer: &gate.MCPServer{Name: "sandboxed_code", Source: wire.SourceSDK}})
	rec.PolicyRevision, rec.PolicyHash = d.Revision, d.PolicyHash
	if d.Decision != gate.Allow {
		deny(d.Rule, d.Reason)
		return
	}
	// The run runs under the policy that allowed it, even if a reload
	// came between the decision and here.
	eff := d.Effective
	timeout := eff.Policy.Sandbox.Proc.Timeout.Std()
	if r.TimeoutMS != nil {
		asked := time.Duration(*r.TimeoutMS) * time.Millisecond
		if asked > timeout {
			c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInvalidField, Message: fmt.Sprintf("run: timeout_ms %d exceeds the query's sandbox.proc.timeout of %s", *r.TimeoutMS, timeout)})
			return
		}
		timeout = asked
	}
	if c.s.cfg.Runner == nil {
		c.runnerUnavailable(r.ID, &rec, errors.New("this gatekeeper has no sandbox runner configured"))
		return
	}
	spec := runner.Spec{
		RunID: runID, QueryID: r.QueryID, Language: runner.Language(r.Language), Code: r.Code, Files: r.Files,
		Timeout: timeout, Sandbox: eff.RunnerSandbox(c.s.cfg.DefaultImage),
		Labels: map[string]string{"gatekeeper.tool_use_id": r.ToolUseID},
	}
	flood := c.s.floodWatch()
	defer flood.done()
	spec.OnOutput = func(stream runner.Stream, data []byte) {
		flood.add(len(data))
		c.send(wire.Output{ID: r.ID, RunID: runID, Stream: string(stream), Data: string(data)})
	}
	res, err := c.s.cfg.Runner.Run(c.ctx, spec)
	if err != nil {
		c.runFailed(r.ID, &rec, err)
		return
	}
	exit := res.ExitCode
	rec.Decision, rec.Rule = gate.Allow, d.Rule
	rec.Outcome, rec.ExitCode = audit.Outcome(res.Reason), &exit
	rec.DurationMS, rec.PeakMemoryBytes = res.Duration.Milliseconds(), res.PeakMemoryBytes
	rec.StdoutBytes, rec.StderrBytes, rec.Truncated = int64(len(res.Stdout)), int64(len(res.Stderr)), res.Truncated
	rec.Image, rec.Runtime = res.Image, string(res.Runtime)
	c.s.metrics.runs.WithLabelValues(string(res.Reason)).Inc()
	if err := c.s.cfg.Auditor.Write(rec); err != nil {
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInternal, Message: "the run finished but the audit log cannot be written: " + err.Error()})
		return
	}
	if o := c.s.cfg.RunObserver; o != nil {
		spec.OnOutput = nil
		o.ObserveRun(RunInfo{Spec: spec, Result: res, ToolUseID: r.ToolUseID, Policy: eff.JSON, PolicyHash: eff.Hash})
	}
	c.send(wire.RunResult{
		ID: r.ID, RunID: runID, ExitCode: res.ExitCode, Reason: string(res.Reason), Stdout: res.Stdout, Stderr: res.Stderr,
		Truncated: res.Truncated, TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
		DurationMS: res.Duration.Milliseconds(), PeakMemoryBytes: res.PeakMemoryBytes, Image: res.Image, Runtime: string(res.Runtime),
	})
}

func (c *conn) runnerUnavailable(id string, rec *audit.Record, err error) {
	rec.Outcome, rec.Error = audit.OutcomeError, err.Error()
	c.s.metrics.runs.WithLabelValues("runner_unavailable").Inc()
	_ = c.s.cfg.Auditor.Write(*rec)
	c.sendError(&wire.Error{ID: id, Code: wire.CodeRunnerUnavailable, Message: "the sandbox runner is unavailable: " + err.Error()})
}

// runFailed maps a runner error to an error frame.
func (c *conn) runFailed(id string, rec *audit.Record, err error) {
	switch {
	case errors.Is(err, runner.ErrUnavailable), errors.Is(err, runner.ErrRuntimeUnavailable), errors.Is(err, runner.ErrNetworkUnsupported):
		c.runnerUnavailable(id, rec, err)
	case errors.Is(err, runner.ErrInvalidSpec), errors.Is(err, runner.ErrLanguageUnavailable):
		rec.Outcome, rec.Error = audit.OutcomeError, err.Error()
		_ = c.s.cfg.Auditor.Write(*rec)
		c.sendError(&wire.Error{ID: id, Code: wire.CodeInvalidField, Message: "run: " + err.Error()})
	case errors.Is(err, context.Canceled):
		rec.Outcome, rec.Error = audit.OutcomeCancelled, err.Error()
		_ = c.s.cfg.Auditor.Write(*rec)
	default:
		rec.Outcome, rec.Error = audit.OutcomeError, err.Error()
		_ = c.s.cfg.Auditor.Write(*rec)
		c.sendError(&wire.Error{ID: id, Code: wire.CodeInternal, Message: "run: " + err.Error()})
	}
}
