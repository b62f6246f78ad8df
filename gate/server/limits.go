package server

import (
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// Defaults of the caps in Config, used where a field is zero. Each bounds
// what a client, however it behaves, can make the sidecar hold; every cap
// hit is answered at once with a clear error and nothing else changes.
const (
	// DefaultMaxConns bounds the WebSocket connections served at once.
	DefaultMaxConns = 1024
	// DefaultMaxQueriesPerConn bounds the queries open on one connection.
	DefaultMaxQueriesPerConn = 1024
	// DefaultMaxQueries bounds the queries open on all connections together.
	DefaultMaxQueries = 16384
	// DefaultMaxInFlight bounds the requests in flight on one connection.
	DefaultMaxInFlight = 64
	// DefaultMaxRunsPerConn bounds the runs in flight on one connection.
	DefaultMaxRunsPerConn = 4
)

// Limit names, as the label of gatekeeper_limit_refusals_total and in the
// messages of the refusals.
const (
	limitConns          = "conns"
	limitQueriesPerConn = "queries_per_conn"
	limitQueries        = "queries"
	limitInFlight       = "requests_per_conn"
	limitRunsPerConn    = "runs_per_conn"
)

// capped is a count that may not pass max, shared by every connection.
type capped struct {
	n   atomic.Int64
	max int64
}

// take counts one more and reports true, unless that would pass the cap.
func (c *capped) take() bool {
	if c.n.Add(1) > c.max {
		c.n.Add(-1)
		return false
	}
	return true
}

// give returns n taken.
func (c *capped) give(n int) { c.n.Add(-int64(n)) }

// applyLimitDefaults fills the zero caps of cfg with their defaults.
func applyLimitDefaults(cfg *Config) {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxConns, DefaultMaxConns)
	def(&cfg.MaxQueriesPerConn, DefaultMaxQueriesPerConn)
	def(&cfg.MaxQueries, DefaultMaxQueries)
	def(&cfg.MaxInFlight, DefaultMaxInFlight)
	def(&cfg.MaxRunsPerConn, DefaultMaxRunsPerConn)
}

// refuseConn answers an upgrade past MaxConns: HTTP 503, with Retry-After,
// and a body saying which cap was hit.
func (s *Server) refuseConn(w http.ResponseWriter) {
	s.metrics.refusals.WithLabelValues(limitConns).Inc()
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("gatekeeper: the sidecar already serves its maximum of %d connections (--max-conns); close one or try again later", s.cfg.MaxConns), http.StatusServiceUnavailable)
}

// tooManyQueries is the error frame for an open_query past a cap: the
// connection's own (perConn) or the sidecar's across all connections.
func (s *Server) tooManyQueries(id string, perConn bool) *wire.Error {
	if perConn {
		return s.refusal(id, wire.CodeTooManyQueries, limitQueriesPerConn, "open_query: this connection already has its maximum of "+
			strconv.Itoa(s.cfg.MaxQueriesPerConn)+" open queries (--max-queries-per-conn); close one with close_query first")
	}
	return s.refusal(id, wire.CodeTooManyQueries, limitQueries, "open_query: the sidecar already has its maximum of "+
		strconv.Itoa(s.cfg.MaxQueries)+" open queries across all connections (--max-queries); close one with close_query or try again later")
}

// tooManyRequests is the error frame for a request past the connection's
// cap on requests (runs false) or runs (runs true) in flight.
func (s *Server) tooManyRequests(id string, runs bool) *wire.Error {
	if runs {
		return s.refusal(id, wire.CodeTooManyRequests, limitRunsPerConn, "this connection already has its maximum of "+
			strconv.Itoa(s.cfg.MaxRunsPerConn)+" runs in flight (--max-runs-per-conn); wait for one to end")
	}
	return s.refusal(id, wire.CodeTooManyRequests, limitInFlight, "this connection already has its maximum of "+
		strconv.Itoa(s.cfg.MaxInFlight)+" requests in flight (--max-requests-per-conn); wait for replies")
}

// refusal counts a refusal by limit and returns its error frame.
func (s *Server) refusal(id, code, limit, message string) *wire.Error {
	s.metrics.refusals.WithLabelValues(limit).Inc()
	return &wire.Error{ID: id, Code: code, Message: message}
}
