package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// EventCodeCall is the event of a nested call: a sandboxed program calling
// an MCP tool through the bridge (rego/code_calls.rego).
const EventCodeCall = "code_call"

// RuleUndescribed denies a nested call whose server could not describe
// the tool (down, or no answer to tools/list in time): without the tool's
// annotations the policy cannot be asked, so the call is refused before
// it reaches the server.
const RuleUndescribed = "code_calls.tool_undescribed"

// SourcePolicy is the MCPServer.Source of a nested call: the server is one
// of the policy's mcp_servers, and the sidecar is its client.
const SourcePolicy = "policy"

// ToolServers is the operator's MCP servers, as the gate needs them.
type ToolServers interface {
	// Tool returns what the server says about one tool (its annotations and schemas); ok is false
	// when the server has no such tool or is not configured.
	Tool(ctx context.Context, server, tool string) (info runner.ToolInfo, ok bool, err error)
	// CallTool calls the tool and returns the MCP CallToolResult as JSON.
	CallTool(ctx context.Context, server, tool string, arguments json.RawMessage) (json.RawMessage, error)
}

// ToolSources is an optional ability of a ToolServers: it says where a
// server's calls go, for the policy's input.mcp_server.source of a nested
// call (SourcePolicy when a ToolServers has no such method, or answers
// ""). The sidecar's servers of a query answer wire.SourceSDK for a
// server the client's own process runs.
type ToolSources interface {
	Source(server string) string
}

// Auditor writes one audit line; an error means the line is not written.
type Auditor interface {
	Write(audit.Record) error
}

// CodeCallerConfig is what a run's CodeCaller is made from.
type CodeCallerConfig struct {
	// Effective is the effective policy the run was allowed under: its
	// code_calls section and its revision's Rego decide every nested call
	// of the run, whatever reloads since (as the run's other limits do).
	Effective *Effective
	// RunID, QueryID and ToolUseID name the run; Language is its
	// program's.
	RunID, QueryID, ToolUseID, Language string
	// Approver answers the policy's asks on the run's calls; nil denies
	// each (AnsweredByNoHandler).
	Approver Approver
	// Servers are the operator's MCP servers.
	Servers ToolServers
	// Auditor receives one line per nested call.
	Auditor Auditor
	// DecisionTimeout bounds one evaluation; zero means the engine's
	// (Config.DecisionTimeout).
	DecisionTimeout time.Duration
}

// CodeCaller is the gate's runner.ToolCaller for one run: it decides each
// nested call with the Rego policy (rego/code_calls.rego), makes the
// allowed ones through ToolServers, and writes one audit line per call.
// Safe for concurrent use by the run's calls.
type CodeCaller struct {
	cfg CodeCallerConfig
	// unaudited is set once a call's audit line could not be written:
	// every later call of the run is refused before it reaches a server.
	unaudited atomic.Bool
	// slots holds one token per call of the run between the servers and
	// its end, at most code_calls.max_in_flight: the bridge queues the
	// calls past it, and the gate holds the bound too, so that no path
	// past the runner's queue lets more reach the servers at once.
	slots chan struct{}
}

var (
	_ runner.ToolCaller      = (*CodeCaller)(nil)
	_ runner.RefusalRecorder = (*CodeCaller)(nil)
)

// NewCodeCaller returns the ToolCaller of one run. Effective, Servers and
// Auditor are required; without one, every call is denied (and, without
// an Auditor, made nowhere).
func NewCodeCaller(cfg CodeCallerConfig) *CodeCaller {
	if cfg.DecisionTimeout <= 0 {
		cfg.DecisionTimeout = time.Second
		if cfg.Effective != nil && cfg.Effective.snap != nil && cfg.Effective.snap.decisionTimeout > 0 {
			cfg.DecisionTimeout = cfg.Effective.snap.decisionTimeout
		}
	}
	c := &CodeCaller{cfg: cfg}
	if cfg.Effective != nil {
		c.slots = make(chan struct{}, max(cfg.Effective.Policy.CodeCalls.MaxInFlight, 1))
	}
	return c
}

// CodeCaller returns the ToolCaller of one run of r under eff (what the
// sidecar's run path puts in runner.Spec.Caller), or nil, no bridge at
// all, when servers is nil or code_calls.callable names no server.
func (eff *Effective) CodeCaller(r RunRequest, servers ToolServers, a Auditor) runner.ToolCaller {
	if servers == nil || a == nil || len(eff.Policy.CodeCalls.Callable) == 0 {
		return nil
	}
	return NewCodeCaller(CodeCallerConfig{Effective: eff, RunID: r.RunID, QueryID: r.QueryID, ToolUseID: r.ToolUseID, Language: r.Language, Approver: r.Approver, Servers: servers, Auditor: a})
}

// CallTool decides call, makes it when allowed, and audits it. It fails
// closed: an error anywhere answers the program with a ToolError, and a
// result whose audit line cannot be written is withheld.
func (c *CodeCaller) CallTool(ctx context.Context, call runner.NestedCall) runner.ToolResult {
	start := time.Now()
	rec := c.record(call)
	res := c.call(ctx, call, &rec)
	if res.Err != nil {
		rec.ErrorKind = res.Err.Kind
		if rec.Error == "" && res.Err.Message != rec.Reason {
			rec.Error = res.Err.Message
		}
	} else {
		rec.ResultSHA256, rec.ResultBytes = digest.SHA256(res.Result), int64(len(res.Result))
		rec.ResultIsError = resultIsError(res.Result)
	}
	rec.DurationMS = time.Since(start).Milliseconds()
	if c.cfg.Auditor == nil {
		return res // a deny: call refuses every call without an Auditor
	}
	if err := c.write(rec); err != nil {
		return toolError(runner.ToolDenied, RuleError, "the call was made but the audit log cannot be written, so its result is withheld and no further call of this run is made: "+err.Error())
	}
	return res
}

// Refused writes the line of a call the bridge refused itself
// (runner.RefusalRecorder): a deny with the refusal's rule, its message
// as the reason and its kind; no server is asked anything. A line that
// cannot be written stops the run's later calls, as in CallTool.
func (c *CodeCaller) Refused(r runner.ToolRefusal) {
	rec := c.record(r.Call)
	if len(r.Call.Arguments) == 0 {
		rec.ArgumentsSHA256, rec.ArgumentsBytes = "", 0
	}
	rec.Decision, rec.Rule, rec.Reason, rec.ErrorKind = Deny, r.Err.Rule, r.Err.Message, r.Err.Kind
	_ = c.write(rec)
}

// Omitted writes the one line that counts the run's refusals past
// runner.MaxRefusalLines (runner.RefusalRecorder), by rule, with
// runner.RuleMaxRefusals when the bridge closed.
func (c *CodeCaller) Omitted(n runner.RefusalCounts) {
	rec := c.record(runner.NestedCall{})
	rec.ArgumentsSHA256, rec.ArgumentsBytes = "", 0
	total := 0
	for _, k := range n.ByRule {
		total += k
	}
	rec.Decision, rec.Omitted = Deny, n.ByRule
	rec.Reason = fmt.Sprintf("%d more refused calls of this run have no line of their own (a run's first %d refusals do); omitted counts them by rule", total, runner.MaxRefusalLines)
	if n.Closed {
		rec.Rule = runner.RuleMaxRefusals
		rec.Reason += fmt.Sprintf("; after %d refusals the bridge closed for the run (%s), refusing every later call", runner.MaxRefusals, runner.RuleMaxRefusals)
	}
	_ = c.write(rec)
}

// record is the start of call's line.
func (c *CodeCaller) record(call runner.NestedCall) audit.Record {
	rec := audit.Record{
		Kind: audit.KindCodeCall, Event: EventCodeCall,
		RunID: c.cfg.RunID, QueryID: c.cfg.QueryID, ToolUseID: c.cfg.ToolUseID,
		Server: call.Server, Tool: call.Tool, CallSeq: call.Seq,
		ArgumentsSHA256: digest.SHA256(call.Arguments), ArgumentsBytes: int64(len(call.Arguments)),
	}
	if call.Server != "" {
		rec.ServerSource = serverSource(c.cfg.Servers, call.Server)
	}
	if eff := c.cfg.Effective; eff != nil {
		rec.PolicyRevision, rec.PolicyHash = eff.Revision, eff.Hash
	}
	return rec
}

// write writes rec; after an error, the run makes no further call.
func (c *CodeCaller) write(rec audit.Record) error {
	if c.cfg.Auditor == nil {
		return errors.New("no audit log")
	}
	err := c.cfg.Auditor.Write(rec)
	if err != nil {
		c.unaudited.Store(true)
	}
	return err
}

// serverSource is the input.mcp_server.source of a call to server.
func serverSource(servers ToolServers, server string) string {
	if s, ok := servers.(ToolSources); ok && s.Source(server) != "" {
		return s.Source(server)
	}
	return SourcePolicy
}

// call does CallTool's work, filling in rec's decision.
func (c *CodeCaller) call(ctx context.Context, call runner.NestedCall, rec *audit.Record) runner.ToolResult {
	if c.unaudited.Load() {
		rec.Decision, rec.Rule = Deny, RuleError
		rec.Reason = "an earlier call's audit line could not be written, so this run makes no further call"
		return toolError(runner.ToolDenied, RuleError, rec.Reason)
	}
	eff := c.cfg.Effective
	if eff == nil || eff.snap == nil || c.cfg.Servers == nil || c.cfg.Auditor == nil {
		rec.Decision, rec.Rule, rec.Reason = Deny, RuleError, "gatekeeper has no effective policy, MCP servers or audit log for this run's calls, so the call is denied"
		return toolError(runner.ToolDenied, RuleError, rec.Reason)
	}
	// The runner enforces these bounds before it calls; the gate holds
	// them too, so that no path past the runner's checks reaches a server.
	// max_in_flight is not a refusal: past it, a call waits (below).
	lim := eff.Policy.CodeCalls
	switch {
	case call.Seq > lim.MaxCalls:
		return limit(rec, runner.RuleMaxCalls, fmt.Sprintf("this run has made its %d calls (%s)", lim.MaxCalls, runner.RuleMaxCalls))
	case int64(len(call.Arguments)) > int64(lim.MaxArgumentBytes):
		return limit(rec, runner.RuleMaxArgumentBytes, fmt.Sprintf("the arguments are %d bytes, more than %s (%s)", len(call.Arguments), runner.RuleMaxArgumentBytes, lim.MaxArgumentBytes))
	}
	if lim.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lim.Timeout.Std())
		defer cancel()
	}
	args, err := parseToolInput(call.Arguments)
	var forward json.RawMessage
	if err == nil {
		forward, err = canonicalJSON(args)
	}
	if err != nil {
		rec.Decision, rec.Rule, rec.Reason = Deny, runner.RuleBadRequest, fmt.Sprintf("the arguments are not a JSON object (%v), so the call is denied (%s)", err, runner.RuleBadRequest)
		return toolError(runner.ToolBadRequest, runner.RuleBadRequest, rec.Reason)
	}
	// The server gets the arguments the policy saw, not the program's
	// bytes: a repeated key (the last wins here, the first in some
	// parsers) or invalid UTF-8 cannot mean one thing to the policy and
	// another to the server.
	rec.ArgumentsSHA256, rec.ArgumentsBytes = digest.SHA256(forward), int64(len(forward))
	// From here the call may reach its server: it takes one of the run's
	// max_in_flight slots, waiting within its timeout for one.
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		res := ctxOr(ctx, runner.ToolTimeout, fmt.Sprintf("the call waited for one of the run's %d slots (%s)", lim.MaxInFlight, runner.RuleMaxInFlight))
		rec.Decision, rec.Rule, rec.Reason = Deny, res.Err.Rule, res.Err.Message
		return res
	}
	// A tool no callable glob names is denied whatever its server says:
	// the server is not asked about it.
	var info runner.ToolInfo
	var known bool
	if len(lim.Matching(call.Server, call.Tool)) > 0 {
		if info, known, err = c.cfg.Servers.Tool(ctx, call.Server, call.Tool); err != nil {
			res := ctxOr(ctx, runner.ToolServer, fmt.Sprintf("MCP server %q could not describe tool %q, so the call is denied: %v", call.Server, call.Tool, err))
			if res.Err.Rule == "" {
				res.Err.Rule = RuleUndescribed
			}
			rec.Decision, rec.Rule, rec.Reason, rec.Error = Deny, res.Err.Rule, res.Err.Message, runner.ServerErrorDetail(err)
			return res
		}
	}
	d, err := c.decide(ctx, eff, call, args, info, known)
	if err != nil {
		d = failClosed(eff.Revision, eff.Hash, err)
	}
	rec.Rule, rec.Reason = d.Rule, d.Reason
	switch d.Decision {
	case Allow:
		rec.Decision = Allow
	case Ask:
		// A human, reached through the query's client, may allow it
		// (approval.go); every other answer is a deny.
		if res := c.ask(ctx, call, forward, d, rec); res != nil {
			return *res
		}
	default:
		rec.Decision = Deny
		return toolError(runner.ToolDenied, d.Rule, d.Reason)
	}
	if reason, msg := badArguments(call.Server, call.Tool, info, forward); reason != "" {
		rec.Decision, rec.Rule, rec.Reason = Deny, RuleBadArguments, reason
		return toolError(runner.ToolBadRequest, RuleBadArguments, msg)
	}
	out, err := c.cfg.Servers.CallTool(ctx, call.Server, call.Tool, forward)
	if err != nil {
		// The program gets the error's own text, which a ServerError
		// words without the operator's command, URL or the server's
		// text; the audit line gets those too.
		rec.Error = runner.ServerErrorDetail(err)
		if errors.Is(err, runner.ErrResultTooLarge) {
			return toolError(runner.ToolLimit, runner.RuleMaxResultBytes, fmt.Sprintf("MCP server %q's result for tool %q is larger than %s (%s), so it was not read to its end", call.Server, call.Tool, runner.RuleMaxResultBytes, lim.MaxResultBytes))
		}
		return ctxOr(ctx, runner.ToolServer, fmt.Sprintf("MCP server %q failed to call tool %q: %v", call.Server, call.Tool, err))
	}
	if !json.Valid(out) {
		return toolError(runner.ToolServer, "", fmt.Sprintf("MCP server %q answered tool %q with something that is not JSON", call.Server, call.Tool))
	}
	if int64(len(out)) > int64(lim.MaxResultBytes) {
		// Withheld, but its size and hash are audited.
		rec.ResultSHA256, rec.ResultBytes = digest.SHA256(out), int64(len(out))
		return toolError(runner.ToolLimit, runner.RuleMaxResultBytes, fmt.Sprintf("the result is %d bytes, more than %s (%s)", len(out), runner.RuleMaxResultBytes, lim.MaxResultBytes))
	}
	return runner.ToolResult{Result: out}
}

// decide evaluates the policy for one nested call under eff's revision.
func (c *CodeCaller) decide(ctx context.Context, eff *Effective, call runner.NestedCall, args ast.Object, info runner.ToolInfo, known bool) (Decision, error) {
	in := codeCallInput(eff, c.cfg, call, args, info, known)
	v, err := evalDecision(ctx, eff.snap.decide, in, c.cfg.DecisionTimeout)
	if err != nil {
		return Decision{}, err
	}
	d, err := parseDecision(v)
	if err != nil {
		return Decision{}, err
	}
	d.Revision, d.PolicyHash, d.Effective = eff.Revision, eff.Hash, eff
	return d, nil
}

var (
	kCodeCall, kRunID, kQueryID, kServer, kTool                  = ast.StringTerm("code_call"), ast.StringTerm("run_id"), ast.StringTerm("query_id"), ast.StringTerm("server"), ast.StringTerm("tool")
	kArguments, kToolKnown, kAnnotations, kCounters, kCalls      = ast.StringTerm("arguments"), ast.StringTerm("tool_known"), ast.StringTerm("annotations"), ast.StringTerm("counters"), ast.StringTerm("calls")
	kInFlight, kCallableMatches, kReadOnly, kDestructive, kOpenW = ast.StringTerm("in_flight"), ast.StringTerm("callable_matches"), ast.StringTerm("readOnlyHint"), ast.StringTerm("destructiveHint"), ast.StringTerm("openWorldHint")
)

// codeCallInput builds the Rego input of a nested call (documented in
// rego/code_calls.rego).
func codeCallInput(eff *Effective, cfg CodeCallerConfig, call runner.NestedCall, args ast.Object, info runner.ToolInfo, known bool) ast.Value {
	argTerm := ast.NewTerm(args)
	// MCP's defaults where the server gives no hint; destructiveHint means
	// something only for a tool that is not read-only.
	readOnly := hint(info.ReadOnly, false)
	destructive := hint(info.Destructive, true) && !readOnly
	in := ast.NewObjectWithCapacity(14)
	in.Insert(kEvent, ast.StringTerm(EventCodeCall))
	in.Insert(kToolName, ast.StringTerm(mcpToolName(call.Server, call.Tool)))
	in.Insert(kToolKind, ast.StringTerm(EventCodeCall))
	in.Insert(kToolInput, argTerm)
	in.Insert(kToolUseID, ast.StringTerm(cfg.ToolUseID))
	in.Insert(kPolicy, eff.term)
	in.Insert(kWorkspaceRoot, eff.rootTerm)
	in.Insert(kRunLanguages, eff.runLanguages)
	in.Insert(kDenyGlobs, eff.globsTerms[0])
	in.Insert(kWriteProtectGlobs, eff.globsTerms[1])
	in.Insert(kPaths, ast.ArrayTerm())
	source := serverSource(cfg.Servers, call.Server)
	in.Insert(kMCPServer, ast.ObjectTerm(
		ast.Item(kName, ast.StringTerm(call.Server)),
		ast.Item(kSource, ast.StringTerm(source)),
	))
	in.Insert(kCodeCall, ast.ObjectTerm(
		ast.Item(kRunID, ast.StringTerm(cfg.RunID)),
		ast.Item(kQueryID, ast.StringTerm(cfg.QueryID)),
		ast.Item(kToolUseID, ast.StringTerm(cfg.ToolUseID)),
		ast.Item(kServer, ast.StringTerm(call.Server)),
		ast.Item(kTool, ast.StringTerm(call.Tool)),
		ast.Item(kArguments, argTerm),
		ast.Item(kToolKnown, ast.BooleanTerm(known)),
		ast.Item(kAnnotations, ast.ObjectTerm(
			ast.Item(kReadOnly, ast.BooleanTerm(readOnly)),
			ast.Item(kDestructive, ast.BooleanTerm(destructive)),
			ast.Item(kOpenW, ast.BooleanTerm(hint(info.OpenWorld, true))),
		)),
		ast.Item(kCounters, ast.ObjectTerm(
			ast.Item(kCalls, ast.IntNumberTerm(call.Seq)),
			ast.Item(kInFlight, ast.IntNumberTerm(call.InFlight)),
		)),
		ast.Item(kCallableMatches, ast.ArrayTerm(stringTerms(eff.Policy.CodeCalls.Matching(call.Server, call.Tool))...)),
	))
	return in
}

// mcpToolName is the name the model would call the tool by directly.
func mcpToolName(server, tool string) string { return "mcp__" + server + "__" + tool }

func hint(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

func toolError(kind, rule, msg string) runner.ToolResult {
	return runner.ToolResult{Err: &runner.ToolError{Kind: kind, Rule: rule, Message: msg}}
}

func limit(rec *audit.Record, rule, msg string) runner.ToolResult {
	rec.Decision, rec.Rule, rec.Reason = Deny, rule, msg
	return toolError(runner.ToolLimit, rule, msg)
}

// ctxOr answers a failed call: timeout or cancelled when ctx has ended,
// kind with msg otherwise.
func ctxOr(ctx context.Context, kind, msg string) runner.ToolResult {
	switch err := ctx.Err(); {
	case errors.Is(err, context.DeadlineExceeded):
		return toolError(runner.ToolTimeout, runner.RuleTimeout, "the call took longer than its timeout ("+runner.RuleTimeout+"): "+msg)
	case err != nil:
		return toolError(runner.ToolCancelled, "", "the call was cancelled: "+msg)
	}
	return toolError(kind, "", msg)
}

// canonicalJSON encodes the arguments as the policy saw them: keys sorted
// and once each, strings valid UTF-8, numbers as written.
func canonicalJSON(args ast.Object) (json.RawMessage, error) {
	v, err := ast.JSON(args)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// resultIsError reports an MCP CallToolResult's isError.
func resultIsError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}
