package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// ContentSecurityPolicy is sent with every console response: scripts,
// styles and connections from the console itself only, no inline script
// or style, no frames, no forms, and Trusted Types required so that no
// string can become HTML through innerHTML and the like.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

const (
	// defaultBackfill and maxBackfill bound the history a new stream gets.
	defaultBackfill = 500
	maxBackfill     = 20000
	// keepAlive is how often an idle stream sends a comment (and checks
	// that its session still holds).
	keepAlive = 15 * time.Second
	// writeTimeout bounds one write of a stream to a reader.
	writeTimeout = 30 * time.Second
	// maxLoginBody bounds a login request.
	maxLoginBody = 4 << 10
)

// Handler returns the console's HTTP handler, for the paths under /ui/.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(webFiles, "web")
	assets := http.StripPrefix("/ui/", http.FileServerFS(static))
	mux.Handle("GET /ui/{$}", assets)
	mux.Handle("GET /ui/assets/", assets)
	mux.HandleFunc("GET /ui/login", c.loginWithCode)
	mux.HandleFunc("POST /ui/api/login", c.loginWithToken)
	mux.HandleFunc("POST /ui/api/logout", c.logout)
	mux.HandleFunc("GET /ui/api/session", c.session)
	mux.Handle("GET /ui/api/stream", c.data(c.stream))
	mux.Handle("GET /ui/api/records", c.data(c.records))
	mux.Handle("GET /ui/api/runs/{id}", c.data(c.runDetail))
	mux.Handle("GET /ui/api/queries/{id}", c.data(c.queryDetail))
	mux.Handle("GET /ui/api/overview", c.data(c.overview))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !c.cfg.AllowRemote && foreignHost(r) {
			apiError(w, http.StatusMisdirectedRequest, "this console answers to loopback names only (Host "+r.Host+")")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// data guards a data endpoint: same origin only (403), then a session or
// the bearer token (401).
func (c *Console) data(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := crossOrigin(r); why != "" {
			apiError(w, http.StatusForbidden, "cross-origin request refused: "+why)
			return
		}
		if !c.auth.valid(r) {
			apiError(w, http.StatusUnauthorized, "log in to the console first (or send the sidecar's bearer token)")
			return
		}
		// Answer from the whole history, not the part read so far.
		if c.hub.waitLoaded(r.Context()) != nil {
			return
		}
		next(w, r)
	})
}

func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// refuseLogin answers a refused login: 429 with Retry-After when the
// failed-login budget is spent, else 401.
func refuseLogin(w http.ResponseWriter, limited bool, retry time.Duration) {
	if limited {
		w.Header().Set("Retry-After", strconv.Itoa(int(retry.Seconds())+1))
		apiError(w, http.StatusTooManyRequests, "too many failed logins; try again later")
		return
	}
	apiError(w, http.StatusUnauthorized, "wrong token")
}

// loginWithToken exchanges the sidecar's token, sent as JSON
// {"token": "..."}, for a session cookie.
func (c *Console) loginWithToken(w http.ResponseWriter, r *http.Request) {
	if why := crossOrigin(r); why != "" {
		apiError(w, http.StatusForbidden, "cross-origin login refused: "+why)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		apiError(w, http.StatusUnsupportedMediaType, "send the token as JSON")
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxLoginBody)).Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, "send {\"token\": \"…\"}")
		return
	}
	id, limited, retry := c.auth.loginToken(strings.TrimSpace(body.Token))
	if id == "" {
		c.log.Warn("console login refused", "remote", r.RemoteAddr, "rate_limited", limited)
		refuseLogin(w, limited, retry)
		return
	}
	http.SetCookie(w, sessionCookie(r, id, int(sessionTTL.Seconds())))
	w.WriteHeader(http.StatusNoContent)
}

// loginWithCode exchanges a one-time code for a session cookie and sends
// the browser on to the console.
func (c *Console) loginWithCode(w http.ResponseWriter, r *http.Request) {
	if why := crossOrigin(r); why != "" {
		apiError(w, http.StatusForbidden, "cross-origin login refused: "+why)
		return
	}
	id, limited, retry := c.auth.loginCode(r.URL.Query().Get("code"))
	if id == "" {
		c.log.Warn("console one-time login refused", "remote", r.RemoteAddr, "rate_limited", limited)
		refuseLogin(w, limited, retry)
		return
	}
	http.SetCookie(w, sessionCookie(r, id, int(sessionTTL.Seconds())))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if why := crossOrigin(r); why != "" {
		apiError(w, http.StatusForbidden, "cross-origin request refused: "+why)
		return
	}
	if ck, err := r.Cookie(cookieName); err == nil {
		c.auth.logout(ck.Value)
	}
	http.SetCookie(w, sessionCookie(r, "", -1))
	w.WriteHeader(http.StatusNoContent)
}

// session tells the page whether it is logged in. It answers 200 either
// way, so that a page showing the login form logs no error.
func (c *Console) session(w http.ResponseWriter, r *http.Request) {
	if why := crossOrigin(r); why != "" {
		apiError(w, http.StatusForbidden, "cross-origin request refused: "+why)
		return
	}
	writeJSON(w, map[string]bool{"authenticated": c.auth.valid(r)})
}

// eventID is an SSE event id, "epoch.seq".
type eventID struct {
	epoch int
	seq   int64
}

func (e eventID) String() string { return fmt.Sprintf("%d.%d", e.epoch, e.seq) }

func parseEventID(s string) *eventID {
	a, b, ok := strings.Cut(s, ".")
	ep, err1 := strconv.Atoi(a)
	seq, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return nil
	}
	return &eventID{ep, seq}
}

func backfillLimit(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n < 0 {
		return defaultBackfill
	}
	return min(n, maxBackfill)
}

// stream serves the live stream as server-sent events: "record" events
// (data: {"v": the Verdict, "line": the audit line as written}; id:
// epoch.seq) for the history asked
// for, then "ready", then each new matching record. A subscriber that
// falls behind gets "lagged" and is dropped; its EventSource reconnects
// with Last-Event-ID and resumes from the history.
func (c *Console) stream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	f := ParseFilter(r.URL.Query())
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("after")
	}
	backfill, s, gap := c.hub.subscribe(f, parseEventID(last), backfillLimit(r))
	defer c.hub.unsubscribe(s)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A reader that stops reading is cut off after writeTimeout, rather
	// than holding this goroutine until TCP gives up.
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) }
	deadline()
	var buf []byte
	send := func(e *entry) error {
		buf = append(buf[:0], "id: "...)
		buf = append(buf, eventID{e.epoch, e.rec.Seq}.String()...)
		buf = append(buf, "\nevent: record\ndata: "...)
		buf = append(buf, e.event...)
		buf = append(buf, "\n\n"...)
		_, err := w.Write(buf)
		return err
	}
	if _, err := io.WriteString(w, "retry: 2000\n\n"); err != nil {
		return
	}
	for _, e := range backfill {
		if send(e) != nil {
			return
		}
	}
	hs, _ := c.hub.status()
	ready, _ := json.Marshal(map[string]any{"backfilled": len(backfill), "gap": gap, "history_first_seq": hs.FirstSeq, "history_records": hs.Records})
	fmt.Fprintf(w, "event: ready\ndata: %s\n\n", ready)
	// The calls waiting for approval now, whatever the filter, and again
	// on each change.
	pending, changed := c.pending.snapshot(time.Now()) // the server's clock, as AskedAt
	fmt.Fprintf(w, "event: pending\ndata: %s\n\n", pending)
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case e, ok := <-s.ch:
			if !ok {
				if s.lagged {
					io.WriteString(w, "event: lagged\ndata: {}\n\n")
					rc.Flush()
				}
				return
			}
			deadline()
			if send(e) != nil {
				return
			}
			// Send what else is queued before flushing.
			for more := true; more; {
				select {
				case e, ok := <-s.ch:
					if !ok {
						more = false
						break
					}
					if send(e) != nil {
						return
					}
				default:
					more = false
				}
			}
			if rc.Flush() != nil {
				return
			}
		case <-changed:
			pending, changed = c.pending.snapshot(time.Now()) // the server's clock, as AskedAt
			deadline()
			if _, err := fmt.Fprintf(w, "event: pending\ndata: %s\n\n", pending); err != nil || rc.Flush() != nil {
				return
			}
		case <-tick.C:
			if !c.auth.valid(r) {
				io.WriteString(w, "event: logout\ndata: {}\n\n")
				rc.Flush()
				return
			}
			deadline()
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// rawLines is a JSON array of events ({"v", "line"}) of entries.
func rawLines(es []*entry) []json.RawMessage {
	out := make([]json.RawMessage, len(es))
	for i, e := range es {
		out[i] = e.event
	}
	return out
}

// records answers the held records matching the filter, oldest first, at
// most limit (the newest).
func (c *Console) records(w http.ResponseWriter, r *http.Request) {
	f := ParseFilter(r.URL.Query())
	es := c.hub.find(func(*audit.Record) bool { return true })
	var out []*entry
	for _, e := range es {
		if f.match(e) {
			out = append(out, e)
		}
	}
	if n := backfillLimit(r); len(out) > n {
		out = out[len(out)-n:]
	}
	writeJSON(w, map[string]any{"records": rawLines(out)})
}

// runDetail answers one run: its audit lines (the decisions of its tool
// use, the run line, its egress) and, while the console still holds it,
// its code, output and policy.
func (c *Console) runDetail(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var run *audit.Record
	for _, e := range c.hub.find(func(rec *audit.Record) bool { return rec.Kind == audit.KindRun && rec.RunID == id }) {
		run = &e.rec
	}
	detail := c.runs.get(id)
	if run == nil && detail == nil {
		apiError(w, http.StatusNotFound, "no run "+id+" in the console's history")
		return
	}
	query, toolUse := "", ""
	if run != nil {
		query, toolUse = run.QueryID, run.ToolUseID
	} else {
		query, toolUse = detail.QueryID, detail.ToolUseID
	}
	es := c.hub.find(func(rec *audit.Record) bool {
		return rec.RunID == id || (toolUse != "" && rec.ToolUseID == toolUse && rec.QueryID == query && rec.Kind == audit.KindDecision)
	})
	maxRuns, maxBytes := c.cfg.MaxRuns, c.cfg.MaxRunBytes
	writeJSON(w, map[string]any{
		"run_id": id, "query_id": query, "tool_use_id": toolUse, "records": rawLines(es),
		"held": detail != nil, "detail": detail, "store": map[string]any{"max_runs": maxRuns, "max_bytes": maxBytes},
	})
}

// queryDetail answers one query: its records in order, its session (age,
// idle time, memory, restarts; sessionOf) when it had one, its override
// and its effective policy, computed now under the current revision (exact
// when the hash matches the one the query was opened with).
func (c *Console) queryDetail(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	es := c.hub.find(func(rec *audit.Record) bool { return rec.QueryID == id })
	if len(es) == 0 {
		apiError(w, http.StatusNotFound, "no query "+id+" in the console's history")
		return
	}
	out := map[string]any{"query_id": id, "records": rawLines(es)}
	if sess := sessionOf(es, c.cfg.Now()); sess != nil {
		out["session"] = sess
	}
	var opened *audit.Record
	for _, e := range es {
		if e.rec.Kind == audit.KindQuery {
			opened = &e.rec
			break
		}
	}
	if opened == nil {
		out["note"] = "the line that opened this query is older than the console's history"
		writeJSON(w, out)
		return
	}
	out["opened"] = opened.Seq
	out["override"] = opened.ToolInput
	if opened.Decision != gate.Allow {
		out["note"] = "the query's override was refused, so it never ran: " + opened.Reason
		writeJSON(w, out)
		return
	}
	var override []byte
	if opened.ToolInput != nil {
		override, _ = json.Marshal(opened.ToolInput)
	}
	eff := map[string]any{"revision": c.cfg.Engine.Revision(), "opened_with": opened.PolicyHash}
	q, err := c.cfg.Engine.OpenQuery(r.Context(), id, override)
	var e *gate.Effective
	if err == nil {
		e, err = q.Effective(r.Context())
	}
	if err != nil {
		eff["error"] = "under the current policy: " + err.Error()
	} else {
		p, _ := audit.Mask(e.JSON)
		eff["policy"], eff["hash"], eff["exact"] = p, e.Hash, e.Hash == opened.PolicyHash
	}
	out["effective"] = eff
	writeJSON(w, out)
}

// statusCache keeps the runner's status a few seconds, so that a page
// polling the overview does not ask the engine each time.
type statusCache struct {
	mu sync.Mutex
	at time.Time
	st *RunnerStatus
}

func (sc *statusCache) get(ctx context.Context, now time.Time, ask func(context.Context) RunnerStatus) *RunnerStatus {
	if ask == nil {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.st == nil || now.Sub(sc.at) > 5*time.Second {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st := ask(ctx)
		sc.st, sc.at = &st, now
	}
	return sc.st
}

// overview answers the sidecar's state: the policy revision and reload
// history, the audit chain, the history held, the runner, and the
// gatekeeper metrics of /metrics.
func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	hs, cs := c.hub.status()
	runs, runBytes := c.runs.stats()
	fams, err := gatherMetrics(c.cfg.Gatherer)
	out := map[string]any{
		"version": c.cfg.Version, "started": c.started, "now": c.cfg.Now(),
		"revision": c.cfg.Engine.Revision(), "reloads": reloads(c.cfg.Engine.Reloads()),
		"chain": cs, "history": hs, "runs_held": map[string]any{"runs": runs, "bytes": runBytes, "max_runs": c.cfg.MaxRuns, "max_bytes": c.cfg.MaxRunBytes},
		"runner": c.status.get(r.Context(), c.cfg.Now(), c.cfg.Runner), "metrics": fams, "audit_log": c.cfg.AuditPath,
	}
	if err != nil {
		out["metrics_error"] = err.Error()
	}
	writeJSON(w, out)
}

func reloads(evs []gate.ReloadEvent) []map[string]any {
	out := make([]map[string]any, len(evs))
	for i, ev := range evs {
		out[i] = map[string]any{"time": ev.Time, "revision": ev.Revision, "previous": ev.Previous, "error": ev.Err}
	}
	return out
}
