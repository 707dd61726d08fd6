package main

import (
	"net/http"
	"net/http/pprof"
)

// withProfiling serves Go's runtime profiles under /debug/pprof/ (--profiling)
// and everything else from h. The profiles name kg's own functions and
// nothing of the cluster; like the rest of the HTTP server they have no
// authentication, and a CPU profile costs CPU while it runs, so the flag is
// off by default.
func withProfiling(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}
