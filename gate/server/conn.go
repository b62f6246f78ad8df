package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// maxAuthorized bounds the sandbox tool uses a query remembers as allowed
// but not yet run.
const maxAuthorized = 1024

// decisionWorkers is how many decisions one connection evaluates at once.
const decisionWorkers = 2

// conn is one WebSocket connection. Its reader goroutine (serve) decodes
// frames and dispatches them; its writer goroutine owns every write;
// decisions run on the connection's workers (queued in jobs) and runs in
// goroutines bounded by runs, all sending through out.
type conn struct {
	s      *Server
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	out    chan []byte

	// jobs queues decisions for the connection's workers; its capacity
	// bounds the decisions in flight. Workers start with the first job
	// queued (at most decisionWorkers) and end after DecisionWorkerIdle
	// without one: an idle connection holds none.
	jobs      chan func()
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

	mu      sync.Mutex
	queries map[string]*query
}

// query is one open query of a connection.
type query struct {
	q *gate.Query
	// authorized holds tool_use_ids allowed for the sandbox tool and not yet
	// run, in the order they were allowed, as useKeys: a query remembers
	// at most 2*maxAuthorized of them, 16 bytes each however long the ids.
	mu         sync.Mutex
	authorized []useKey
	consumed   []useKey // ids that ran, most recent last
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
		out:     make(chan []byte, 64),
		jobs:    make(chan func(), s.cfg.MaxInFlight),
		runs:    make(chan struct{}, s.cfg.MaxRunsPerConn),
		queries: map[string]*query{},
	}
}

// serve runs the reader loop until the connection ends, then stops the
// handlers and the writer.
func (c *conn) serve() {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writer()
	}()
	c.ws.SetReadLimit(c.s.cfg.MaxFrameBytes)
	_ = c.ws.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
	c.ws.SetPongHandler(func(string) error {
		return c.ws.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
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
	c.cancel()
	close(c.jobs)
	c.handlers.Wait()
	c.mu.Lock()
	c.s.queries.give(len(c.queries))
	c.s.metrics.queries.Sub(float64(len(c.queries)))
	clear(c.queries)
	c.mu.Unlock()
	close(c.out)
	<-writerDone
	_ = c.ws.Close()
}

// writer writes queued frames and pings until out is closed or a write fails.
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
			_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				c.fail()
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(5*time.Second)); err != nil {
				c.fail()
				return
			}
		}
	}
}

// fail ends the connection after a write error; the reader then unwinds.
func (c *conn) fail() {
	c.cancel()
	_ = c.ws.Close()
	for range c.out { // drain so senders never block
	}
}

// send queues a reply; it gives up when the connection is ending.
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
		if !c.enqueue(func() { c.decide(r) }) {
			c.sendError(c.s.tooManyRequests(r.ID, false))
		}
	case *wire.Run:
		c.startRun(r)
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

// stackBallast is sized for the stack one decision grows to.
const stackBallast = 24 << 10

func (c *conn) query(id string) *query {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queries[id]
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
