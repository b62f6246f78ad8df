package server

import (
	"net/http"
	"net/http/pprof"
)

// debugHandler serves Go's runtime profiles (net/http/pprof) under
// /debug/pprof/: goroutine dumps, heap profiles (?gc=1 collects first),
// CPU profiles. It is mounted only with Config.Debug, behind the token.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}
