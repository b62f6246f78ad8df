package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// maxAuthorized bounds the sandbox tool uses a query remembers as allowed
// but not yet run.
const maxAuthorized = 1024

// decisionWorkers is how many decisions one connection evaluates at once
// beside the one its reader may be deciding.
const decisionWorkers = 2

// closeGrace is how long a connection closed by the server's shutdown
// waits for the client to answer its close frame before the socket is
// closed anyway.
const closeGrace = time.Second

// conn is one WebSocket connection. Its goroutines, and what each owns:
//
//   - The reader (serve) reads frames and dispatches them. A decide that
//     arrives while no other decision of the connection is in flight is
//     decided on the reader itself, which then writes the reply: the
//     common case (one call at a time) crosses no goroutine. A decide that
//     arrives while one is in flight, or one of a tool whose decision may
//     walk a directory tree (gate.Walks), is queued on jobs for the
//     connection's decision workers, started at the first such decide, so
//     that a slow decision does not hold up the frames behind it; while
//     the reader decides, the frames behind it wait in the socket.
//   - The workers (at most decisionWorkers) decide queued decides and
//     write their replies themselves.
//   - Runs run in goroutines of their own, bounded by runs. Their frames,
//     and every reply that is not a decision, go through out to the
//     writer goroutine, which also sends the pings.
//
// gorilla/websocket allows one writer at a time: every data frame is
// written by write, under wmu, whichever goroutine writes it. Pings use
// WriteControl, which may run beside it. The reader's and the workers'
// replies therefore need no hand-off, and replies on one connection come
// in no particular order (docs/protocol.md, "Ordering and concurrency").
type conn struct {
	s      *Server
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	out    chan []byte
	// writerDone is closed when the writer goroutine has returned.
	writerDone chan struct{}

	// stop is closed by shutdown: the writer then sends a close frame and
	// closes the socket, which ends the reader. readDone is closed when the
	// reader has ended.
	stop     chan struct{}
	stopOnce sync.Once
	readDone chan struct{}

	// wmu is held while a data frame is written; dead is set, under it,
	// once a write failed (the connection is then ending).
	wmu  sync.Mutex
	dead bool

	// jobs queues decisions for the connection's workers; its capacity
	// bounds the decisions queued. inflight counts the decisions queued or
	// being decided by the workers: the reader decides inline only when it
	// is zero. Workers start with the first job queued (at most
	// decisionWorkers) and end after DecisionWorkerIdle without one: an
	// idle connection holds none.
	jobs      chan func()
	inflight  atomic.Int32
	workersMu sync.Mutex
	workers   int
	runs      chan struct{}
	handlers  sync.WaitGroup

	// Set once, by the reader goroutine, on the first hello: before it no
	// other frame is served, so no job or run exists yet, and later hellos
	// are refused. Handlers read client without a lock: every job and run
	// starts after the write (sending on jobs, or starting the goroutine,
	// orders it before their reads).
	helloed bool
	client  string

	// toolCalls are the tool_call frames of the connection's queries
	// waiting for the client's tool_result (sdkTools).
	toolCalls waiters[*wire.ToolResult]
	// approvals are the approval_request frames waiting for the client's
	// approval (relayApprover).
	approvals waiters[*wire.Approval]

	mu      sync.Mutex
	queries map[string]*query
	// attached are the Claude Code session queries this connection
	// attached to and has not closed; it detaches them when it ends.
	attached []*query
}

// query is one open query: of a connection, or of a Claude Code session
// (then shared by the hook endpoint and the connections attached to it).
type query struct {
	q *gate.Query
	// session is the query's session, for its runs when its effective
	// policy turns sessions on; ended when the query closes.
	session *querySession
	// sdk are the in-process servers the client declared for the query
	// (open_query's sdk_servers); nil when it declared none. Set before
	// the query is published.
	sdk *sdkTools
	// approvals is open_query's: the client answers asks on the nested
	// calls of the query's runs. Set before the query is published.
	approvals bool
	// closed is set when a session's query is closed under its attached
	// connections; they then treat its id as unknown.
	closed atomic.Bool
	// authorized holds tool_use_ids allowed for the sandbox tool and not yet
	// run, in the order they were allowed, as useKeys: a query remembers
	// at most 2*maxAuthorized of them, 16 bytes each however long the ids.
	mu         sync.Mutex
	authorized []useKey
	consumed   []useKey // ids that ran, most recent last
	// lastDecision holds the latest decision of each of the last
	// maxAuthorized tool_use_ids decided, decisionOrder those keys oldest
	// first: what a Claude Code PostToolUse line ties the call's end to.
	lastDecision  map[useKey]useDecision
	decisionOrder []useKey
}

// useDecision is the latest decision of one tool_use_id in a query.
type useDecision struct {
	id       string // the decision's audit decision_id
	decision string
}

// useKey stands for a tool_use_id in a query's memory: the first 16 bytes
// of its SHA-256. A tool_use_id may be as long as a frame; a query keeps
// thousands of them.
type useKey [16]byte

func keyOf(toolUseID string) useKey {
	sum := sha256.Sum256([]byte(toolUseID))
	return useKey(sum[:16])
}

func newConn(s *Server, ws *websocket.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		s: s, ws: ws, ctx: ctx, cancel: cancel,
		out:        make(chan []byte, 64),
		writerDone: make(chan struct{}),
		stop:       make(chan struct{}),
		readDone:   make(chan struct{}),
		jobs:       make(chan func(), s.cfg.MaxInFlight),
		runs:       make(chan struct{}, s.cfg.MaxRunsPerConn),
		queries:    map[string]*query{},
	}
}

// serve runs the reader loop until the connection ends, then stops the
// handlers and the writer. Unlike the decision workers' (see
// decisionWorker), the reader's frame holds no stack ballast although it
// decides too: every connection has a reader, and an idle one would keep
// the ballast's stack (64 KiB) for as long as it stays open; the soak's
// 1,000 idle connections doubled the sidecar's memory with it. A busy
// reader regrows its stack after a collection shrank it, a copy of at
// most 32 KiB per collection.
func (c *conn) serve() {
	c.read()
	close(c.readDone)
	c.cancel()
	close(c.jobs)
	c.handlers.Wait()
	c.releaseQueries()
	c.mu.Lock()
	for _, q := range c.attached {
		c.s.cli.detach(q)
	}
	c.attached = nil
	c.mu.Unlock()
	close(c.out)
	<-c.writerDone
	_ = c.ws.Close()
}

// read starts the writer and reads frames until the connection ends.
func (c *conn) read() {
	go func() {
		defer close(c.writerDone)
		c.writer()
	}()
	c.ws.SetReadLimit(c.s.cfg.MaxFrameBytes)
	_ = c.ws.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
	c.ws.SetPongHandler(func(string) error {
		return c.ws.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
	})
	c.ws.SetCloseHandler(func(code int, _ string) error {
		select {
		case <-c.stop: // the client answers the server's close frame
		default: // the client closes: answer, as the default handler does
			_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
		}
		return nil
	})
	for {
		kind, data, err := c.ws.ReadMessage()
		if err != nil {
			if !errors.Is(err, websocket.ErrReadLimit) {
				c.s.log.Debug("connection read ended", "err", err)
			}
			break
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
		if kind != websocket.TextMessage {
			c.sendError(&wire.Error{Code: wire.CodeMalformedFrame, Message: "frames must be WebSocket text messages holding one JSON object"})
			continue
		}
		c.dispatch(data)
	}
}

// writer writes queued frames and pings until out is closed, a write
// fails or the server shuts the connection down.
func (c *conn) writer() {
	ping := time.NewTicker(c.s.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case b, ok := <-c.out:
			if !ok {
				_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				return
			}
			if !c.write(b) {
				c.drain()
				return
			}
		case <-c.stop:
			// No data frame may follow the close frame: mark the
			// connection dead for the reader's and the workers' writes.
			c.wmu.Lock()
			c.dead = true
			c.wmu.Unlock()
			_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "gatekeeper is shutting down"), time.Now().Add(time.Second))
			t := time.NewTimer(closeGrace)
			select {
			case <-c.readDone: // the client answered the close
			case <-t.C:
			}
			t.Stop()
			c.fail()
			c.drain()
			return
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(5*time.Second)); err != nil {
				c.fail()
				c.drain()
				return
			}
		}
	}
}

// write writes one data frame, holding wmu; false when the connection is
// dead. A failed write ends the connection: the reader then unwinds.
func (c *conn) write(b []byte) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.dead {
		return false
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.dead = true
		c.fail()
		return false
	}
	return true
}

// shutdown ends the connection for the server's shutdown, promptly
// whatever the client does: its decisions and runs are cancelled (a run
// ends as cancelled, and is audited so), the client gets a close frame
// (1001, going away), and the socket is closed once the client has
// answered it, or after closeGrace.
func (c *conn) shutdown() {
	c.cancel()
	c.stopOnce.Do(func() { close(c.stop) })
}

// fail ends the connection after a write error (or a shutdown); the
// reader then unwinds.
func (c *conn) fail() {
	c.cancel()
	_ = c.ws.Close()
}

// drain empties out until it is closed, so that senders never block on a
// connection whose writer has stopped.
func (c *conn) drain() {
	for range c.out {
	}
}

// reply writes r from the calling goroutine (the reader or a decision
// worker), without a hand-off to the writer.
func (c *conn) reply(r wire.Reply) {
	b, err := wire.Encode(r)
	if err != nil {
		c.s.log.Error("encode reply", "type", r.Type(), "err", err)
		return
	}
	c.write(b)
}

// send queues a reply for the writer; it gives up when the connection is
// ending.
func (c *conn) send(r wire.Reply) {
	b, err := wire.Encode(r)
	if err != nil {
		c.s.log.Error("encode reply", "type", r.Type(), "err", err)
		return
	}
	select {
	case c.out <- b:
	case <-c.ctx.Done():
	}
}

func (c *conn) sendError(e *wire.Error) { c.send(*e) }

func (c *conn) dispatch(data []byte) {
	req, werr := wire.Decode(data)
	if werr != nil {
		c.sendError(werr)
		return
	}
	if h, ok := req.(*wire.Hello); ok {
		if c.helloed {
			// The client name is the connection's identity in the audit log;
			// a second hello must not change it while requests are served.
			c.sendError(&wire.Error{ID: h.ID, Code: wire.CodeHelloRepeated, Message: "hello: this connection already said hello; its client name is fixed for its lifetime (open a new connection to change it)"})
			return
		}
		c.helloed, c.client = true, h.Client
		c.send(wire.Welcome{ID: h.ID, V: 1, Server: "gatekeeper/" + c.s.cfg.Version, PolicyRevision: c.s.cfg.Engine.Revision()})
		return
	}
	if !c.helloed {
		c.sendError(&wire.Error{ID: req.RequestID(), Code: wire.CodeHelloRequired, Message: "the first frame of a connection must be hello"})
		return
	}
	switch r := req.(type) {
	case *wire.OpenQuery:
		c.openQuery(r) // in order: a decide right behind it finds the query
	case *wire.CloseQuery:
		c.closeQuery(r)
	case *wire.Decide:
		if c.inflight.Load() == 0 && !gate.Walks(r.ToolName) {
			c.decide(r)
			return
		}
		c.inflight.Add(1)
		if !c.enqueue(func() { defer c.inflight.Add(-1); c.decide(r) }) {
			c.inflight.Add(-1)
			c.sendError(c.s.tooManyRequests(r.ID, false))
		}
	case *wire.Run:
		c.startRun(r)
	case *wire.ToolResult:
		c.toolResult(r)
	case *wire.Approval:
		c.approval(r)
	}
}

// startRun runs r in a goroutine of its own if the connection has room for
// one more run; otherwise it answers too_many_requests at once.
func (c *conn) startRun(r *wire.Run) {
	select {
	case c.runs <- struct{}{}:
	default:
		c.sendError(c.s.tooManyRequests(r.ID, true))
		return
	}
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		defer func() { <-c.runs }()
		c.run(r)
	}()
}

// enqueue queues a decision, starting a worker if fewer than
// decisionWorkers run; false when the connection has its maximum in
// flight. Only the reader goroutine calls it, before it closes jobs.
func (c *conn) enqueue(job func()) bool {
	select {
	case c.jobs <- job:
	default:
		return false
	}
	c.workersMu.Lock()
	defer c.workersMu.Unlock()
	if c.workers < decisionWorkers {
		c.workers++
		c.handlers.Add(1)
		go c.decisionWorker()
	}
	return true
}

// decisionWorker runs jobs until jobs is closed, or until none came for
// DecisionWorkerIdle. Long-lived workers decide because Rego evaluation
// recurses deeply, and a goroutine per decision would grow a fresh stack
// every time. Its frame holds a stack ballast: the garbage collector
// shrinks a goroutine's stack when less than a quarter of it is in use,
// which a waiting worker's would be, and Rego's recursion then grows it
// again (copying it) on the next decision. The ballast keeps enough of the
// stack in use that it stays grown while the connection is busy; an idle
// one gives the whole stack back when its workers end.
func (c *conn) decisionWorker() {
	defer c.handlers.Done()
	c.s.metrics.workers.Inc()
	defer c.s.metrics.workers.Dec()
	var ballast [stackBallast]byte
	defer runtime.KeepAlive(&ballast)
	idle := time.NewTimer(c.s.cfg.DecisionWorkerIdle)
	defer idle.Stop()
	for {
		select {
		case job, ok := <-c.jobs:
			if !ok {
				return
			}
			job()
			idle.Reset(c.s.cfg.DecisionWorkerIdle)
		case <-idle.C:
			// A job queued before this check is seen here; one queued
			// after it finds the count lowered and starts a worker.
			c.workersMu.Lock()
			if len(c.jobs) > 0 {
				c.workersMu.Unlock()
				idle.Reset(c.s.cfg.DecisionWorkerIdle)
				continue
			}
			c.workers--
			c.workersMu.Unlock()
			return
		}
	}
}

// stackBallast keeps a deciding goroutine's stack from shrinking. One
// decision of the built-in policy grows a stack to 64 KiB and some to
// 128 KiB; the collector shrinks a 128 KiB stack when less than 32 KiB of
// it is in use, so the ballast is more than that.
const stackBallast = 40 << 10

func (c *conn) query(id string) *query {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queries[id]
	if q != nil && q.closed.Load() {
		delete(c.queries, id)
		return nil
	}
	return q
}

func unknownQuery(reqID, queryID string) *wire.Error {
	return &wire.Error{ID: reqID, Code: wire.CodeUnknownQuery, Message: "query_id " + queryID + " is not open on this connection"}
}

func newID(prefix string) string { return prefix + uuid.NewString() }

// authorize records an allow of the sandbox tool for toolUseID. The SDK
// asks twice for one call (PreToolUse, then canUseTool): that is still one
// run, and an id that already ran is never authorized again.
func (q *query) authorize(toolUseID string) {
	k := keyOf(toolUseID)
	q.mu.Lock()
	defer q.mu.Unlock()
	if slices.Contains(q.authorized, k) || slices.Contains(q.consumed, k) {
		return
	}
	if len(q.authorized) >= maxAuthorized {
		q.authorized = q.authorized[1:]
	}
	q.authorized = append(q.authorized, k)
}

// decided records that decision id (allow, deny or ask) was the latest on
// toolUseID.
func (q *query) decided(toolUseID, id, decision string) {
	k := keyOf(toolUseID)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lastDecision == nil {
		q.lastDecision = map[useKey]useDecision{}
	}
	if _, ok := q.lastDecision[k]; !ok {
		if len(q.decisionOrder) >= maxAuthorized {
			delete(q.lastDecision, q.decisionOrder[0])
			q.decisionOrder = q.decisionOrder[1:]
		}
		q.decisionOrder = append(q.decisionOrder, k)
	}
	q.lastDecision[k] = useDecision{id: id, decision: decision}
}

// decisionOf returns the latest decision recorded for toolUseID by
// decided, or false when there is none (never decided, or forgotten).
func (q *query) decisionOf(toolUseID string) (useDecision, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	u, ok := q.lastDecision[keyOf(toolUseID)]
	return u, ok
}

// consume removes toolUseID from the authorized list; false if absent.
func (q *query) consume(toolUseID string) bool {
	k := keyOf(toolUseID)
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.authorized, k)
	if i < 0 {
		return false
	}
	q.authorized = slices.Delete(q.authorized, i, i+1)
	if len(q.consumed) >= maxAuthorized {
		q.consumed = q.consumed[1:]
	}
	q.consumed = append(q.consumed, k)
	return true
}

// releaseQueries lets go of the connection's own queries once it ended
// (its runs are done by then): their sessions end, their workspaces are
// removed and they leave the open-query count. A
// Claude Code session's query it attached to outlives it, and so does its
// workspace.
func (c *conn) releaseQueries() {
	c.mu.Lock()
	ids := make([]string, 0, len(c.queries))
	for id, q := range c.queries {
		if !slices.Contains(c.attached, q) {
			ids = append(ids, id)
		}
	}
	ended := make([]*query, 0, len(ids))
	for _, id := range ids {
		ended = append(ended, c.queries[id])
	}
	clear(c.queries)
	c.mu.Unlock()
	c.s.queriesClosed(len(ids))
	for _, q := range ended {
		c.s.endSession(q)
		c.s.removeWorkspace(q.q.ID)
	}
}

// queriesClosed takes n closed queries out of the open-query gauge, then
// gives their slots back under --max-queries: in that order, a query
// another connection opens with the slots is never counted twice.
func (s *Server) queriesClosed(n int) {
	s.metrics.queries.Sub(float64(n))
	s.queries.give(n)
}
