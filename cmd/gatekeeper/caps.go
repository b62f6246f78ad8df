package main

import (
	"flag"

	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

// capOptions are the serve flags bounding what clients can make the
// sidecar hold (docs/protocol.md, "Limits").
type capOptions struct {
	conns, queriesPerConn, queries, inFlight, runsPerConn int
}

// capFlags registers the caps' flags on fs.
func capFlags(fs *flag.FlagSet) *capOptions {
	o := &capOptions{}
	fs.IntVar(&o.conns, "max-conns", server.DefaultMaxConns, "WebSocket connections served at once; an upgrade past it gets HTTP 503")
	fs.IntVar(&o.queriesPerConn, "max-queries-per-conn", server.DefaultMaxQueriesPerConn, "queries open on one connection; an open_query past it gets too_many_queries")
	fs.IntVar(&o.queries, "max-queries", server.DefaultMaxQueries, "queries open on all connections together; an open_query past it gets too_many_queries")
	fs.IntVar(&o.inFlight, "max-requests-per-conn", server.DefaultMaxInFlight, "requests in flight on one connection; one past it gets too_many_requests")
	fs.IntVar(&o.runsPerConn, "max-runs-per-conn", server.DefaultMaxRunsPerConn, "runs in flight on one connection; one past it gets too_many_requests")
	return o
}

// apply sets the caps in cfg.
func (o *capOptions) apply(cfg *server.Config) {
	cfg.MaxConns, cfg.MaxQueriesPerConn, cfg.MaxQueries = o.conns, o.queriesPerConn, o.queries
	cfg.MaxInFlight, cfg.MaxRunsPerConn = o.inFlight, o.runsPerConn
}
