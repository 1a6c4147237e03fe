package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// route is one entry of the server's route table. The mux is built from the
// table, and the OpenAPI consistency test reads the same table, so a route
// family can live in a file of its own and still be checked.
type route struct {
	method  string // "GET", "POST", ...; "" for a catch-all that answers every method
	pattern string // a net/http.ServeMux path pattern, e.g. /api/v1/traces/{trace_id}
	// name labels the route in rastro_query_duration_seconds; "" leaves the
	// route out of the histogram (ingest, streams, operations).
	name    string
	handler http.HandlerFunc
	// documented: the route is an operation of docs/openapi.json. Catch-alls
	// and API families documented elsewhere (Tempo, Jaeger) are not.
	documented bool
	// access is who may call the route (auth.go); mux refuses a route
	// without one.
	access access
	// stream: a long-lived answer (live tail), exempt from the query cap
	// and time budget and from the server's read and write timeouts; it
	// sets its own deadline per write (limits.go).
	stream bool
	// listing: the route lists what a time window holds and follows the
	// window rule (window.go): one default window, the window in the
	// answer, a hint when nothing matched.
	listing *listing
}

// isQuery reports whether a route is a query, run under the query cap
// and time budget (limits.go): every read route but streams. Ingest,
// health, metrics, the UI and admin operations are not queries.
func (rt *route) isQuery() bool { return rt.access == accessRead && !rt.stream }

// routeTable lists every route the server answers, family by family.
func (s *Server) routeTable() []route {
	var t []route
	t = append(t, s.ingestRoutes()...)
	t = append(t, s.logRoutes()...)
	t = append(t, s.metricRoutes()...)
	t = append(t, s.queryRoutes()...)
	t = append(t, s.statusRoutes()...)
	t = append(t, s.serviceRoutes()...)
	t = append(t, s.insightRoutes()...)
	t = append(t, s.sqlRoutes()...)
	// MCP's streamable HTTP transport (docs/agents.md): POST, and GET and
	// DELETE answered by the SDK (405, the server keeps no session).
	// The route itself needs only the read role: each tool call goes
	// through this table again with the same token and project header.
	t = append(t, route{pattern: "/mcp", access: accessReadServer, handler: func(w http.ResponseWriter, r *http.Request) {
		if s.mcp == nil {
			writeError(w, http.StatusNotFound, "the MCP server is turned off (rastro serve --mcp=false)")
			return
		}
		s.mcp.ServeHTTP(w, r)
	}})
	t = append(t, s.opsRoutes()...)
	t = append(t, s.tempoRoutes()...)
	t = append(t, s.traceQLMetricsRoutes()...)
	t = append(t, s.jaegerRoutes()...)
	// Unknown paths under the API and OTLP prefixes get a JSON 404 (and a
	// known path with another method too: the mux prefers a pattern that
	// matches the method). Everything else is left to later families (the
	// web UI at /).
	// The operational paths answer another method the same way (the mux
	// would say 405 in plain text).
	for _, prefix := range []string{"/api/", "/v1/", "/metrics", "/healthz", "/readyz"} {
		t = append(t, route{pattern: prefix, access: accessPublic, handler: func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
		}})
	}
	// Every other path is the web UI's (its pages are client-side routes:
	// /traces/{id}, /sessions/{id}, ...). Its files are public: they hold
	// no data, and the API calls the pages make carry the token the UI
	// asks for (docs/security.md).
	if ui := s.opts.UI; ui != nil {
		t = append(t, route{pattern: "/", access: accessPublic, handler: ui.ServeHTTP})
	} else {
		t = append(t, route{pattern: "/", access: accessPublic, handler: func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s (the web UI is turned off)", r.Method, r.URL.Path))
		}})
	}
	return t
}

// mux builds the handler of a route table. Every handler is wrapped in its
// route's access rule here, the one place requests enter: a route without
// a rule is a programming error and panics. Query routes are wrapped in
// the query cap and time budget here too.
func (s *Server) mux(table []route) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range table {
		pattern := rt.pattern
		if rt.method != "" {
			pattern = rt.method + " " + pattern
		}
		if rt.access == accessUnset {
			panic(fmt.Sprintf("server: route %q declares no access rule (every route must: see auth.go)", pattern))
		}
		h := rt.handler
		if rt.listing != nil {
			h = withWindow(*rt.listing, h)
		}
		if rt.isQuery() {
			// Inside the guard: a refused request takes no query slot.
			h = s.limitQuery(rt.name, h)
		}
		h = s.guard(rt.access, h)
		if rt.name != "" {
			h = s.met.timed(rt.name, h)
		}
		mux.HandleFunc(pattern, h)
	}
	return mux
}

// opsRoutes are the operational endpoints: metrics, liveness, readiness.
func (s *Server) opsRoutes() []route {
	return []route{
		// The metrics are server-wide counters and latencies with no span
		// data or project names: any read token may scrape them.
		{method: "GET", pattern: "/metrics", access: accessReadServer, handler: s.met.handler().ServeHTTP, documented: true},
		// RED metrics derived from the project's spans, in Tempo's
		// span-metrics names, for a Prometheus to scrape (spanmetrics).
		{method: "GET", pattern: "/spanmetrics", access: accessRead, documented: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			s.spanMetrics.WriteText(w, projectFrom(r.Context()))
		}},
		{method: "GET", pattern: "/healthz", access: accessPublic, documented: true, handler: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}},
		{method: "GET", pattern: "/readyz", access: accessPublic, documented: true, handler: func(w http.ResponseWriter, r *http.Request) {
			if s.currentBackend() == nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting", "reason": "replaying the WAL"})
				return
			}
			writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		}},
	}
}

// queryHandler serves a request against the attached backend for the
// request's project.
type queryHandler func(w http.ResponseWriter, r *http.Request, b store.Backend, project string)

// withBackend resolves the backend and the project (X-Scope-OrgID) for a
// query handler: 503 before the backend is attached, 400 for a bad project,
// as JSON errors.
func (s *Server) withBackend(h queryHandler) http.HandlerFunc {
	return s.withBackendErrors(h, writeError)
}

// withBackendErrors is withBackend for an API family with an error format
// of its own (Tempo's plain text, Jaeger's envelope).
func (s *Server) withBackendErrors(h queryHandler, fail func(w http.ResponseWriter, code int, msg string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b := s.currentBackend()
		if b == nil {
			w.Header().Set("Retry-After", "1")
			fail(w, http.StatusServiceUnavailable, "server is starting: replaying the WAL")
			return
		}
		h(&timingWriter{ResponseWriter: w, t0: time.Now()}, r, b, projectFrom(r.Context()))
	}
}

// timingWriter gives every query route a Server-Timing header (the time
// from the handler's start to the response's first byte: Tempo's and
// Jaeger's routes too) unless the handler set its own.
type timingWriter struct {
	http.ResponseWriter
	t0      time.Time
	started bool
}

func (t *timingWriter) WriteHeader(code int) {
	if !t.started {
		t.started = true
		if t.Header().Get("Server-Timing") == "" {
			setServerTiming(t.ResponseWriter, t.t0)
		}
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *timingWriter) Write(b []byte) (int, error) {
	if !t.started {
		t.WriteHeader(http.StatusOK)
	}
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (t *timingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// notSupported answers a route whose optional capability the backend lacks.
func notSupported(w http.ResponseWriter, what string) {
	writeError(w, http.StatusNotImplemented, "this storage backend does not support "+what)
}
