package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/artifacts"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

// openQuery opens a query unless a cap on open queries is hit. It runs on
// the reader goroutine, as closeQuery does, so the connection's count
// cannot change between the check and the insert; only a tool description
// that lists MCP servers is made, and the reply sent, off it.
func (c *conn) openQuery(r *wire.OpenQuery) {
	c.mu.Lock()
	open := len(c.queries)
	c.mu.Unlock()
	if open >= c.s.cfg.MaxQueriesPerConn {
		c.sendError(c.s.tooManyQueries(r.ID, true))
		return
	}
	var (
		q    *query
		werr *wire.Error
	)
	if r.ClaudeCodeSession != "" {
		q, werr = c.s.cli.attach(c.ctx, r.ClaudeCodeSession, c.client)
	} else {
		// MaxQueries counts the queries connections own; a Claude Code
		// session's query is the session's (see cliSessions).
		if !c.s.queries.take() {
			c.sendError(c.s.tooManyQueries(r.ID, false))
			return
		}
		q, werr = c.s.openQuery(c.ctx, c.client, "", r.SandboxPolicy)
		if werr != nil {
			c.s.queries.give(1)
		} else {
			c.s.metrics.queries.Inc()
		}
	}
	if werr != nil {
		werr.ID = r.ID
		c.sendError(werr)
		return
	}
	eff, err := q.q.Effective(c.ctx)
	if err != nil {
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInternal, Message: "open query: " + err.Error()})
		return
	}
	if len(r.SDKServers) > 0 {
		for i, srv := range r.SDKServers {
			if _, ok := eff.Policy.MCPServers[srv.Name]; ok {
				// Refused rather than namespaced: code_calls.callable names
				// a server by its name alone, and the operator's grant must
				// not reach a server the client brings under the same name.
				c.s.queriesClosed(1)
				c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInvalidField, Message: fmt.Sprintf("open_query: field \"sdk_servers[%d].name\": %q is one of the policy's mcp_servers; rename the in-process server", i, srv.Name)})
				return
			}
		}
		q.sdk = newSDKTools(c, q.q.ID, r.SDKServers)
	}
	q.approvals = r.Approvals
	c.mu.Lock()
	if r.ClaudeCodeSession != "" {
		c.attached = append(c.attached, q)
	}
	c.queries[q.q.ID] = q
	c.mu.Unlock()
	opened := func(desc string) {
		c.send(wire.QueryOpened{ID: r.ID, QueryID: q.q.ID, PolicyHash: eff.Hash, EffectivePolicy: eff.JSON, ToolDescription: desc})
	}
	servers, wrappers := c.tools(q, eff)
	if servers == nil || wrappers == nil || len(eff.Policy.CodeCalls.Callable) == 0 {
		opened(plainDescription(eff, runDescription(eff))) // its code may call no tool
		return
	}
	// The description lists the servers, which may wait up to
	// gate.DefaultListWait for one still connecting: off the reader, so
	// that no frame behind this one (another query's decide) waits for it.
	// The query is registered already, so whatever follows finds it.
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		opened(c.toolDescription(q, eff, wrappers))
	}()
}

// toolDescription is the query's QueryOpened.ToolDescription, for a query
// whose code may call tools: the run tool's description naming the
// servers, made by wrappers, or "" when none can be listed now (the model
// then reads the plain description, and its runs still get what is
// callable then); and for a query that keeps a session, the description
// followed by SessionDescription.
func (c *conn) toolDescription(q *query, eff *gate.Effective, wrappers *gate.Wrappers) string {
	// Wrappers bounds the listing (gate.DefaultListWait): a server still
	// connecting by then is described as unavailable.
	base := runDescription(eff)
	desc, err := wrappers.Description(c.ctx, eff, base)
	if err != nil {
		c.s.log.Warn("the query's tool description names no server", "query_id", q.q.ID, "err", err)
		desc = base
	}
	return plainDescription(eff, desc)
}

// runDescription is the run tool's description for a query under eff,
// naming only the languages its image has (every one for an image that
// is not one of the profiles).
func runDescription(eff *gate.Effective) string {
	return wire.SandboxDescriptionFor(profile.Languages(eff.Policy.Sandbox.FS.Image))
}

// plainDescription is desc followed by SessionDescription for a query
// that keeps a session, or "" when that is wire.SandboxDescription,
// which the clients show by themselves.
func plainDescription(eff *gate.Effective, desc string) string {
	if eff.Policy.Sandbox.Session.On() {
		desc += "\n\n" + wire.SessionDescription
	}
	if desc == wire.SandboxDescription {
		return ""
	}
	return desc
}

// approver relays the asks on nested calls of q's runs to this
// connection's client, which may answer them if it declared approvals.
func (c *conn) approver(q *query, servers gate.ToolServers) gate.Approver {
	a := &relayApprover{c: c, queryID: q.q.ID, declared: q.approvals}
	if s, ok := servers.(gate.ToolSources); ok {
		a.source = s.Source
	}
	return a
}

// tools are the MCP servers a run of q under eff may reach, and what
// makes its wrappers: the operator's, joined with the in-process servers
// its client declared.
func (c *conn) tools(q *query, eff *gate.Effective) (gate.ToolServers, *gate.Wrappers) {
	if q.sdk == nil {
		return c.s.cfg.ToolServers, c.s.wrappers
	}
	joined := newQueryTools(c.s.cfg.ToolServers, q.sdk, eff)
	return joined, c.s.anyWrappers.Over(joined)
}

// openQuery opens a query for client with a sandbox override (nil for
// none) and writes its audit line; session names the Claude Code session
// it serves, if any. The error has no ID: the caller sets it.
func (s *Server) openQuery(ctx context.Context, client, session string, override []byte) (*query, *wire.Error) {
	id := newID("q_")
	q, err := s.cfg.Engine.OpenQuery(ctx, id, override)
	rec := audit.Record{Kind: audit.KindQuery, QueryID: id, Client: client, Session: session, PolicyRevision: s.cfg.Engine.Revision()}
	if len(override) > 0 {
		rec.ToolInput = json.RawMessage(override)
	}
	if err != nil {
		var oe *gate.OverrideError
		if errors.As(err, &oe) {
			rec.Decision, rec.Rule, rec.Reason = gate.Deny, "override.rejected", oe.Error()+": "+fmt.Sprint(oe.Violations)
			_ = s.cfg.Auditor.Write(rec)
			return nil, &wire.Error{Code: wire.CodePolicyOverrideRejected, Message: oe.Error(), Violations: oe.Violations}
		}
		return nil, &wire.Error{Code: wire.CodeInternal, Message: "open query: " + err.Error()}
	}
	eff, err := q.Effective(ctx)
	if err != nil {
		return nil, &wire.Error{Code: wire.CodeInternal, Message: "open query: " + err.Error()}
	}
	rec.Decision, rec.PolicyHash = gate.Allow, eff.Hash
	if err := s.cfg.Auditor.Write(rec); err != nil {
		return nil, &wire.Error{Code: wire.CodeInternal, Message: "the audit log cannot be written, so no query is opened: " + err.Error()}
	}
	return &query{q: q, session: newQuerySession()}, nil
}

func (c *conn) closeQuery(r *wire.CloseQuery) {
	c.mu.Lock()
	q, ok := c.queries[r.QueryID]
	delete(c.queries, r.QueryID)
	session := false
	if i := slices.Index(c.attached, q); ok && i >= 0 {
		// A Claude Code session's query outlives the connection: closing
		// it here only detaches it (its workspace stays with it).
		c.attached = slices.Delete(c.attached, i, i+1)
		c.s.cli.detach(q)
		session = true
	}
	c.mu.Unlock()
	if !ok {
		c.sendError(unknownQuery(r.ID, r.QueryID))
		return
	}
	if session {
		c.send(wire.QueryClosed{ID: r.ID, QueryID: r.QueryID})
		return
	}
	c.s.removeWorkspace(r.QueryID)
	c.s.queriesClosed(1)
	// The session's sandbox is removed before query_closed is sent, off
	// the reader: the frames behind this one need not wait for it.
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		c.s.endSession(q)
		c.send(wire.QueryClosed{ID: r.ID, QueryID: r.QueryID})
	}()
}

// Call is the gate.Call a decide frame asks about. `gatekeeper decide`
// uses it too, so that a dry run judges the call the sidecar would.
func Call(r *wire.Decide) gate.Call {
	call := gate.Call{Event: r.Event, ToolName: r.ToolName, ToolInput: r.ToolInput, ToolUseID: r.ToolUseID, Cwd: r.Cwd, AgentID: r.AgentID, AgentType: r.AgentType}
	if r.MCPServer != nil {
		call.MCPServer = &gate.MCPServer{Name: r.MCPServer.Name, Source: r.MCPServer.Source}
	}
	return call
}

// HTTPInput is the request a decide frame of event http_request asks
// about, in query queryID. `gatekeeper decide` uses it too.
func HTTPInput(r *wire.Decide, queryID string) gate.HTTPInput {
	h := r.HTTP
	if h == nil {
		return gate.HTTPInput{QueryID: queryID}
	}
	return gate.HTTPInput{RunID: h.RunID, QueryID: queryID, Request: runner.HTTPRequest{
		Method: h.Method, Scheme: h.Scheme, Host: h.Host, Port: uint16(h.Port), Path: h.Path, Query: h.Query, Proto: h.Proto,
		Headers: h.Headers, BodyBytes: h.BodyBytes, Body: []byte(h.Body), Secrets: h.Secrets,
	}}
}

// decideHTTP decides a decide frame's request (event http_request) under
// the query's effective policy, as the run's judge would, and writes its
// audit line: an operator testing a request rule. No request is made.
func (s *Server) decideHTTP(ctx context.Context, q *query, client string, r *wire.Decide) (string, gate.Decision) {
	eff, err := q.q.Effective(ctx)
	var d gate.Decision
	if err != nil {
		d = gate.Decision{Decision: gate.Deny, Rule: gate.RuleError, Reason: fmt.Sprintf("gatekeeper could not decide this request (%v), so it is refused", err)}
	} else {
		d = eff.DecideHTTP(ctx, HTTPInput(r, q.q.ID), 0)
	}
	id := newID("d_")
	if err := s.cfg.Auditor.Write(audit.Record{
		Kind: audit.KindDecision, DecisionID: id, QueryID: q.q.ID, Tool: gate.EventHTTPRequest, Event: gate.EventHTTPRequest,
		Decision: d.Decision, Rule: d.Rule, Reason: d.Reason, PolicyRevision: d.Revision, PolicyHash: d.PolicyHash, Client: client,
	}); err != nil {
		s.log.Error("audit write failed; denying", "err", err)
		d.Decision, d.Rule = gate.Deny, gate.RuleError
		d.Reason = "gatekeeper could not write its audit log, so the request is refused"
	}
	s.metrics.decided(d.Decision, d.Rule, gate.EventHTTPRequest)
	return id, d
}

// decide decides r and writes the reply from the calling goroutine: the
// reader or a decision worker.
func (c *conn) decide(r *wire.Decide) {
	q := c.query(r.QueryID)
	if q == nil {
		c.reply(*unknownQuery(r.ID, r.QueryID))
		return
	}
	if r.Event == wire.EventHTTPRequest {
		id, d := c.s.decideHTTP(c.ctx, q, c.client, r)
		c.reply(wire.Decision{ID: r.ID, Decision: d.Decision, Reason: d.Reason, Rule: d.Rule, DecisionID: id, PolicyRevision: d.Revision})
		return
	}
	id, d := c.s.decide(c.ctx, q, c.client, Call(r))
	c.reply(wire.Decision{ID: r.ID, Decision: d.Decision, Reason: d.Reason, Rule: d.Rule, DecisionID: id, PolicyRevision: d.Revision, ToolUseID: r.ToolUseID})
}

// decide is the one decision path of the sidecar, for the WebSocket and
// the Claude Code hook endpoint alike: it decides call in query q, writes
// the audit line (an audit failure turns the decision into a deny),
// remembers an allowed sandbox tool use for its run, and counts it. It
// returns the decision's id and the decision.
func (s *Server) decide(ctx context.Context, q *query, client string, call gate.Call) (string, gate.Decision) {
	start := time.Now()
	var d gate.Decision
	var err error
	if rule, reason, held := s.hold(); held {
		d = gate.Decision{Decision: gate.Deny, Rule: rule, Reason: reason, Revision: s.cfg.Engine.Revision()}
	} else if d, err = q.q.Decide(ctx, call); err != nil {
		s.log.Warn("decision failed closed", "query_id", q.q.ID, "tool", call.ToolName, "err", err)
	}
	id := newID("d_")
	if err := s.cfg.Auditor.Write(audit.Record{
		Kind: audit.KindDecision, DecisionID: id, QueryID: q.q.ID, ToolUseID: call.ToolUseID,
		Tool: call.ToolName, Event: call.Event, Decision: d.Decision, Rule: d.Rule, Reason: d.Reason,
		PolicyRevision: d.Revision, PolicyHash: d.PolicyHash, Client: client, ToolInput: call.ToolInput,
		AgentID: call.AgentID, AgentType: call.AgentType,
	}); err != nil {
		s.log.Error("audit write failed; denying", "err", err)
		d.Decision, d.Rule = gate.Deny, gate.RuleError
		d.Reason = "gatekeeper could not write its audit log, so the call is denied"
	}
	if d.Decision == gate.Allow && call.ToolName == wire.SandboxTool && call.ToolUseID != "" {
		q.authorize(call.ToolUseID)
	}
	if call.ToolUseID != "" {
		q.decided(call.ToolUseID, id, d.Decision)
	}
	s.metrics.decided(d.Decision, d.Rule, call.Event)
	s.metrics.latency.Observe(time.Since(start).Seconds())
	return id, d
}

// hold asks Config.Hold.
func (s *Server) hold() (rule, reason string, held bool) {
	if s.cfg.Hold == nil {
		return "", "", false
	}
	return s.cfg.Hold()
}

// run re-decides a run itself, runs it, streams its output and reports it.
func (c *conn) run(r *wire.Run) {
	q := c.query(r.QueryID)
	if q == nil {
		c.sendError(unknownQuery(r.ID, r.QueryID))
		return
	}
	runID := newID("r_")
	rec := audit.Record{Kind: audit.KindRun, RunID: runID, QueryID: r.QueryID, ToolUseID: r.ToolUseID, Tool: wire.SandboxTool, Event: gate.EventRun, Client: c.client}
	deny := func(rule, reason string) {
		rec.Decision, rec.Rule, rec.Reason = gate.Deny, rule, reason
		_ = c.s.cfg.Auditor.Write(rec)
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeRunDenied, Rule: rule, Message: reason})
	}
	if !q.consume(r.ToolUseID) {
		deny("run.no_prior_allow", fmt.Sprintf("no allowed %s call with tool_use_id %q is waiting to run in this query", wire.SandboxTool, r.ToolUseID))
		return
	}
	call, err := RunCall(r)
	if err != nil {
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInternal, Message: err.Error()})
		return
	}
	d, _ := q.q.Decide(c.ctx, call)
	rec.PolicyRevision, rec.PolicyHash = d.Revision, d.PolicyHash
	if d.Decision != gate.Allow {
		deny(d.Rule, d.Reason)
		return
	}
	// The run runs under the policy that allowed it, even if a reload
	// came between the decision and here; its Spec is built as gatekeeper
	// run builds it (gate.Effective.RunSpec).
	eff := d.Effective
	files := make(map[string]string, len(r.Files))
	for p, f := range r.Files {
		files[p] = f.Data
	}
	servers, wrappers := c.tools(q, eff)
	spec, err := eff.RunSpec(c.ctx, gate.RunRequest{
		RunID: runID, QueryID: r.QueryID, ToolUseID: r.ToolUseID, Language: r.Language, Code: r.Code,
		Files: files, TimeoutMS: r.TimeoutMS, Outputs: r.Outputs,
		ToolServers: servers, Auditor: c.s.cfg.Auditor, Wrappers: wrappers,
		Approver:  c.approver(q, servers),
		SessionID: q.session.id, SessionEvents: c.s.sessionEvents(r.QueryID, c.client),
	})
	var refused *gate.RunRequestError
	if errors.As(err, &refused) {
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInvalidField, Message: refused.Message})
		return
	}
	if c.s.cfg.Runner == nil {
		c.runnerUnavailable(r.ID, &rec, errors.New("this gatekeeper has no sandbox runner configured"))
		return
	}
	if err != nil {
		deny(gate.RuleError, err.Error())
		return
	}
	if spec.Session != nil {
		if !q.session.begin() {
			// The query closed after this run was read: its session
			// ended, and no run may start it again.
			rec.Outcome, rec.Error = audit.OutcomeError, "the query was closed before the run started"
			_ = c.s.cfg.Auditor.Write(rec)
			c.sendError(unknownQuery(r.ID, r.QueryID))
			return
		}
		defer func() {
			if q.session.done() {
				c.s.removeSession(q.session.id)
			}
		}()
		rec.SessionID = spec.Session.ID
	}
	if ws := c.s.cfg.Workspaces; ws != nil {
		w, err := ws.Workspace(r.QueryID)
		if err != nil {
			c.runFailed(r.ID, &rec, fmt.Errorf("the query's workspace: %w", err))
			return
		}
		// Runs of one query take turns: each starts from what the one
		// before it left.
		unlock, err := w.Lock(c.ctx)
		if err != nil {
			c.runFailed(r.ID, &rec, err)
			return
		}
		defer unlock()
		spec.Workspace = w
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
	rec.Files, rec.Workspace = len(res.Files), string(res.Workspace)
	rec.ToolCalls = res.ToolCalls
	report := wire.NewRunReport(res)
	for _, f := range report.KeepForAgent(r.ToAgent) {
		rec.AgentFiles = append(rec.AgentFiles, audit.AgentFile{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
	}
	if report.Session != nil {
		rec.SessionRun = report.Session.Run
	}
	if l := report.StateLost; l != nil {
		rec.StateLost = &audit.StateLost{Reason: l.Reason, Lost: l.Lost, Fresh: l.Fresh}
	}
	if a := c.s.cfg.Artifacts; a != nil {
		name, sum, err := a.Write(artifacts.New(artifacts.Run{
			RunID: runID, QueryID: r.QueryID, ToolUseID: r.ToolUseID, Client: c.client, PolicyHash: d.PolicyHash,
			Language: r.Language, Code: r.Code, Files: files, Outputs: r.Outputs, Report: report,
		}, time.Now(), c.s.cfg.StoreCode))
		if err != nil {
			c.s.log.Warn("run artifact not written", "run_id", runID, "err", err)
		}
		rec.Artifact, rec.ArtifactSHA256 = name, sum
	}
	c.s.metrics.runs.WithLabelValues(string(res.Reason)).Inc()
	if err := c.s.cfg.Auditor.Write(rec); err != nil {
		c.sendError(&wire.Error{ID: r.ID, Code: wire.CodeInternal, Message: "the run finished but the audit log cannot be written: " + err.Error()})
		return
	}
	if o := c.s.cfg.RunObserver; o != nil {
		spec.OnOutput = nil
		o.ObserveRun(RunInfo{Spec: spec, Result: res, ToolUseID: r.ToolUseID, Policy: eff.JSON, PolicyHash: eff.Hash})
	}
	c.send(wire.RunResult{ID: r.ID, RunReport: report})
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
