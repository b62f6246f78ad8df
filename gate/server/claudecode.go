package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// HookClient is the audit log's client name for the hook endpoint.
const HookClient = "claude-code"

// managedScope is the scope the CLI reports in a hook input's
// mcp_server.source for a server of managed-mcp.json.
const managedScope = "enterprise"

// ClaudeCodeConfig bounds the Claude Code CLI sessions the hook endpoint
// keeps. Each session is one gatekeeper query.
type ClaudeCodeConfig struct {
	// MaxSessions is how many sessions may be open at once (default 256);
	// a hook call of a new session beyond it is denied.
	MaxSessions int
	// SessionIdle closes a session no hook has called for this long and no
	// connection is attached to (default 1h).
	SessionIdle time.Duration
}

// HookHandler returns the handler of a listener that serves only the hook
// endpoint and /healthz, for the loopback TCP address Claude Code's HTTP
// hooks need.
func (s *Server) HookHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("POST "+wire.HookPath, s.authorized(http.HandlerFunc(s.hook)))
	return mux
}

// ServeHooks serves HookHandler on ln until ctx ends.
func (s *Server) ServeHooks(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.HookHandler())
}

// hook answers one Claude Code hook call. A tool event is decided in the
// session's query on the one decision path of the sidecar; whatever keeps
// it from being decided (an unreadable input, too many sessions, an audit
// failure) is a deny the model can read. An input whose event cannot be
// read at all gets 400, and a body over the frame limit 413: the CLI
// treats both as a failed hook, which onFailure "block" turns into a block.
func (s *Server) hook(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(10 * time.Second))
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxFrameBytes+1))
	switch {
	case err != nil:
		hookFailed(w, http.StatusBadRequest, "read hook input: "+err.Error())
		return
	case int64(len(body)) > s.cfg.MaxFrameBytes:
		hookFailed(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the hook input is larger than %d bytes", s.cfg.MaxFrameBytes))
		return
	}
	in, werr := wire.DecodeHook(body)
	event := in.Event
	if werr != nil {
		s.log.Warn("unreadable hook input", "event", event, "err", werr.Message)
		if event != wire.HookPreToolUse && event != wire.HookPermissionRequest {
			hookFailed(w, http.StatusBadRequest, werr.Message)
			return
		}
		s.answer(w, wire.HookAnswer{Event: event, Decision: gate.Deny, Reason: wire.WithRule(
			"gatekeeper could not read this hook input ("+werr.Message+"), so the call is denied", gate.RuleError)})
		return
	}
	switch event {
	case wire.HookSessionEnd:
		s.cli.end(in.SessionID)
		s.answer(w, wire.HookAnswer{Event: event})
		return
	case wire.HookPreToolUse, wire.HookPermissionRequest:
	case wire.HookPostToolUse, wire.HookPostToolUseFailure:
		s.toolEnded(w, r, in)
		return
	case wire.HookElicitation, wire.HookConfigChange:
		s.refuseEvent(w, r, in)
		return
	default:
		s.answer(w, wire.HookAnswer{Event: event})
		return
	}
	sess, werr := s.cli.get(r.Context(), in.SessionID)
	if werr != nil {
		s.answer(w, wire.HookAnswer{Event: event, Decision: gate.Deny, Reason: wire.WithRule(werr.Message+", so the call is denied", gate.RuleError)})
		return
	}
	call := gate.Call{Event: event, ToolName: in.ToolName, ToolInput: in.ToolInput, ToolUseID: in.ToolUseID, Cwd: in.Cwd,
		MCPServer: sess.provenance(in.MCPServer), AgentID: in.AgentID, AgentType: in.AgentType}
	_, d := s.decide(r.Context(), sess.q, HookClient, call)
	s.answer(w, wire.HookAnswer{Event: event, Decision: d.Decision, Reason: wire.WithRule(d.Reason, d.Rule)})
}

// Rules of the hook events gatekeeper refuses whatever they ask.
const (
	RuleElicitation  = "claude_code.elicitation"
	RuleConfigChange = "claude_code.config_change"
)

// maxErrorBytes bounds the tool error a tool_result audit line keeps.
const maxErrorBytes = 4096

// toolEnded writes the audit line of a tool call the CLI ran
// (PostToolUse) or that failed (PostToolUseFailure), tied to the latest
// decision of its tool_use_id in the session's query; an empty decision_id
// says that no decision of this query is known for it. The answer is no
// opinion. When the line cannot be written (or the session cannot be
// opened) the answer is an HTTP error, which the CLI's onFailure "block"
// reports to the model.
func (s *Server) toolEnded(w http.ResponseWriter, r *http.Request, in *wire.HookInput) {
	sess, werr := s.cli.get(r.Context(), in.SessionID)
	if werr != nil {
		hookFailed(w, http.StatusServiceUnavailable, werr.Message)
		return
	}
	rec := audit.Record{Kind: audit.KindToolResult, QueryID: sess.q.q.ID, ToolUseID: in.ToolUseID, Tool: in.ToolName, Event: in.Event,
		Client: HookClient, AgentID: in.AgentID, AgentType: in.AgentType, Error: truncateUTF8(in.Error, maxErrorBytes)}
	if d, ok := sess.q.decisionOf(in.ToolUseID); ok {
		rec.DecisionID, rec.Decision = d.id, d.decision
	} else {
		rec.Reason = "no decision of this session is known for this tool_use_id"
	}
	if err := s.cfg.Auditor.Write(rec); err != nil {
		s.log.Error("audit write failed", "err", err)
		hookFailed(w, http.StatusInternalServerError, "could not write the audit log")
		return
	}
	s.answer(w, wire.HookAnswer{Event: in.Event})
}

// refuseEvent answers an Elicitation (an MCP server asking the person for
// input: declined) or a ConfigChange (a settings file changed mid-session:
// blocked, so the session keeps the settings it started with) and audits
// it. The refusal does not depend on the audit write: it is the answer
// either way.
func (s *Server) refuseEvent(w http.ResponseWriter, r *http.Request, in *wire.HookInput) {
	rule, reason, detail := RuleElicitation, "gatekeeper declines every MCP server's request for input: the sandbox's server asks for none, and no other server may run", map[string]any{"mcp_server_name": in.ServerName}
	if in.Event == wire.HookConfigChange {
		rule, reason, detail = RuleConfigChange, "gatekeeper blocks settings changes during a session under its managed settings; restart the session to apply them", map[string]any{"source": in.ConfigSource, "file_path": in.FilePath}
	}
	if sess, werr := s.cli.get(r.Context(), in.SessionID); werr == nil {
		if err := s.cfg.Auditor.Write(audit.Record{Kind: audit.KindEvent, QueryID: sess.q.q.ID, Event: in.Event, Decision: gate.Deny, Rule: rule, Reason: reason,
			Client: HookClient, AgentID: in.AgentID, AgentType: in.AgentType, ToolInput: detail}); err != nil {
			s.log.Error("audit write failed", "err", err)
		}
	}
	s.answer(w, wire.HookAnswer{Event: in.Event, Decision: gate.Deny, Reason: wire.WithRule(reason, rule)})
}

// truncateUTF8 cuts s to at most n bytes on a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (s *Server) answer(w http.ResponseWriter, a wire.HookAnswer) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(wire.EncodeHookAnswer(a))
}

// hookFailed answers a hook call gatekeeper cannot read with an HTTP error.
func hookFailed(w http.ResponseWriter, status int, msg string) {
	http.Error(w, "gatekeeper: "+msg, status)
}

// cliSessions maps Claude Code session ids onto queries. A session's query
// is opened with the operator's base policy on first use, by a hook call
// or by `gatekeeper mcp` attaching to it, and closed at SessionEnd or
// when it has been idle for SessionIdle with nothing attached; its
// workspace (the runs of `gatekeeper mcp`) goes with it.
type cliSessions struct {
	s    *Server
	max  int
	idle time.Duration

	mu   sync.Mutex
	byID map[string]*cliSession
}

// cliSession is one session; its fields are guarded by cliSessions.mu.
type cliSession struct {
	q *query
	// attested is set once a connection attached to the session: that is
	// `gatekeeper mcp`, the sandboxed_code server Claude Code started for
	// this session, proving with the token that it is gatekeeper's own.
	attested bool
	attached int
	last     time.Time
}

// sessionView is what a hook call needs of a session, copied under the lock.
type sessionView struct {
	q        *query
	attested bool
}

func newCLISessions(s *Server, cfg ClaudeCodeConfig) *cliSessions {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 256
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = time.Hour
	}
	return &cliSessions{s: s, max: cfg.MaxSessions, idle: cfg.SessionIdle, byID: map[string]*cliSession{}}
}

// get returns the session id, opening its query if it is new.
func (c *cliSessions) get(ctx context.Context, id string) (sessionView, *wire.Error) {
	c.sweep(time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	sess, werr := c.lockedGet(ctx, id, HookClient)
	if werr != nil {
		return sessionView{}, werr
	}
	return sessionView{q: sess.q, attested: sess.attested}, nil
}

// attach attaches a connection of client to session id, opening its query
// if it is new, and marks the session attested. The connection must call
// detach when it ends.
func (c *cliSessions) attach(ctx context.Context, id, client string) (*query, *wire.Error) {
	c.sweep(time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	sess, werr := c.lockedGet(ctx, id, client)
	if werr != nil {
		return nil, werr
	}
	sess.attested = true
	sess.attached++
	return sess.q, nil
}

// detach undoes one attach of the query q.
func (c *cliSessions) detach(q *query) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sess := range c.byID {
		if sess.q == q && sess.attached > 0 {
			sess.attached--
			sess.last = time.Now()
		}
	}
}

// end closes session id (at the CLI's SessionEnd), and its query's
// sandbox session with it.
func (c *cliSessions) end(id string) {
	c.mu.Lock()
	sess, ok := c.byID[id]
	if ok {
		c.lockedClose(id, sess)
	}
	c.mu.Unlock()
	if ok {
		c.s.endSession(sess.q)
	}
}

// lockedClose closes session id's query: a connection attached to it
// then finds it unknown. The caller ends its sandbox session
// (Server.endSession) once it let go of c.mu.
func (c *cliSessions) lockedClose(id string, sess *cliSession) {
	sess.q.closed.Store(true)
	delete(c.byID, id)
	c.s.removeWorkspace(sess.q.q.ID)
}

// sweep closes the sessions idle for longer than c.idle with nothing
// attached, then ends their sandbox sessions once it let go of c.mu, so
// that other hook calls do not wait for the removal.
func (c *cliSessions) sweep(now time.Time) {
	var idle []*query
	c.mu.Lock()
	for sid, sess := range c.byID {
		if sess.attached == 0 && now.Sub(sess.last) > c.idle {
			c.lockedClose(sid, sess)
			idle = append(idle, sess.q)
		}
	}
	c.mu.Unlock()
	for _, q := range idle {
		c.s.endSession(q)
	}
}

func (c *cliSessions) lockedGet(ctx context.Context, id, client string) (*cliSession, *wire.Error) {
	now := time.Now()
	if sess, ok := c.byID[id]; ok {
		sess.last = now
		return sess, nil
	}
	if len(c.byID) >= c.max {
		return nil, &wire.Error{Code: wire.CodeTooManyRequests, Message: fmt.Sprintf("gatekeeper already serves its maximum of %d Claude Code sessions", c.max)}
	}
	q, werr := c.s.openQuery(ctx, client, id, nil)
	if werr != nil {
		return nil, werr
	}
	sess := &cliSession{q: q, last: now}
	c.byID[id] = sess
	return sess, nil
}

// provenance turns the CLI's mcp_server into the decision's. Only one value
// is trusted: the sandboxed_code server of managed-mcp.json ("enterprise")
// in a session `gatekeeper mcp` attested becomes gate.SourceGatekeeper.
// Every other scope the CLI reports, whatever it is, is passed on inside
// the CLI's own namespace (wire.SourceCLIPrefix + scope), so that a CLI
// reporting "sdk" (as it does for a server configured with type "sdk"),
// "gatekeeper" or any other word of the WebSocket's vocabulary cannot be
// taken for it.
func (v sessionView) provenance(srv *wire.MCPServer) *gate.MCPServer {
	if srv == nil {
		return nil
	}
	if srv.Source == managedScope && srv.Name == wire.SandboxServer && v.attested {
		return &gate.MCPServer{Name: srv.Name, Source: gate.SourceGatekeeper}
	}
	return &gate.MCPServer{Name: srv.Name, Source: wire.SourceCLIPrefix + srv.Source}
}
