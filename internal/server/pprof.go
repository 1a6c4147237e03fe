package server

import (
	"net/http"
	"net/http/pprof"
)

// pprofMux serves Go's runtime profiles under /debug/pprof/, as
// net/http/pprof registers them on the default mux (which Rastro does not
// serve): `go tool pprof http://ADDR/debug/pprof/profile?seconds=30`.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
