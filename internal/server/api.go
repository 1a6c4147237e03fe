package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.handleOTLP)
	mux.HandleFunc("POST /v1/spans", s.handleNative)

	mux.HandleFunc("GET /api/v1/traces/{trace_id}", s.met.timed("trace", s.withEngine(s.handleTrace)))
	mux.HandleFunc("GET /api/v1/traces", s.met.timed("traces", s.withEngine(s.handleTraces)))
	mux.HandleFunc("GET /api/v1/spans", s.met.timed("spans", s.withEngine(s.handleSpans)))
	mux.HandleFunc("GET /api/v1/services", s.met.timed("services", s.withEngine(s.handleServices)))
	mux.HandleFunc("GET /api/v1/services/{service}/operations", s.met.timed("operations", s.withEngine(s.handleOperations)))
	mux.HandleFunc("GET /api/v1/attributes", s.met.timed("attributes", s.withEngine(s.handleAttributes)))
	mux.HandleFunc("GET /api/v1/attributes/{key}/values", s.met.timed("attribute_values", s.withEngine(s.handleAttributeValues)))
	mux.HandleFunc("GET /api/v1/llm/stats", s.met.timed("llm_stats", s.withEngine(s.handleLLMStats)))
	mux.HandleFunc("GET /api/v1/llm/timeseries", s.met.timed("llm_timeseries", s.withEngine(s.handleLLMTimeseries)))
	mux.HandleFunc("GET /api/v1/sessions", s.met.timed("sessions", s.withEngine(s.handleSessions)))
	mux.HandleFunc("GET /api/v1/sessions/{session_id}", s.met.timed("session", s.withEngine(s.handleSession)))
	mux.HandleFunc("GET /api/v1/tail", s.withEngine(s.handleTail)) // a stream: not in the latency histogram
	mux.HandleFunc("GET /api/v1/stats", s.met.timed("stats", s.withEngine(s.handleStats)))
	mux.HandleFunc("DELETE /api/v1/traces/{trace_id}", s.met.timed("erase_trace", s.withEngine(s.handleEraseTrace)))
	mux.HandleFunc("POST /api/v1/erase", s.met.timed("erase", s.withEngine(s.handleErase)))
	mux.HandleFunc("GET /api/v1/erasures", s.met.timed("erasures", s.withEngine(s.handleErasures)))
	mux.HandleFunc("GET /api/v1/erasures/{id}", s.met.timed("erasure", s.withEngine(s.handleErasure)))
	mux.HandleFunc("POST /api/v1/admin/compact", s.met.timed("compact", s.withEngine(s.handleCompact)))

	mux.Handle("GET /metrics", s.met.handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.eng.Load() == nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting", "reason": "replaying the WAL"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return mux
}

type engineHandler func(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string)

// withEngine resolves the engine and project for a query handler.
func (s *Server) withEngine(h engineHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e := s.eng.Load()
		if e == nil {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "server is starting: replaying the WAL")
			return
		}
		project, err := projectOf(r.Header.Get("X-Scope-OrgID"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		h(w, r, e, project)
	}
}

func (s *Server) queryFailed(w http.ResponseWriter, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		writeError(w, http.StatusServiceUnavailable, "query cancelled: "+err.Error())
		return
	}
	s.log.Error("query failed", "err", err)
	writeError(w, http.StatusInternalServerError, "query failed: "+err.Error())
}

func (s *Server) handleTrace(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	id, err := model.ParseTraceID(r.PathValue("trace_id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	otlpOut, err := wantsOTLP(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	spans, res, err := e.Trace(r.Context(), project, id)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	if len(spans) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("trace %s not found in project %q", id, project))
		return
	}
	if otlpOut {
		w.Header().Set("Content-Type", "application/json")
		w.Write(otlp.EncodeJSON(spans))
		return
	}
	buf := make([]byte, 0, 512*len(spans))
	buf = append(buf, `{"trace_id":"`...)
	buf = append(buf, id.String()...)
	buf = append(buf, `","spans":`...)
	buf = appendSpans(buf, spans)
	buf = appendWarnings(buf, res.Warnings)
	buf = append(buf, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Write(buf)
}

// wantsOTLP reports whether the client asked for OTLP JSON: format=otlp
// (any case) or an Accept header naming application/x-otlp+json.
func wantsOTLP(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); {
	case strings.EqualFold(f, "otlp"):
		return true, nil
	case f != "":
		return false, fmt.Errorf("format: unknown format %q: the one other than the default is otlp", f)
	}
	return strings.Contains(r.Header.Get("Accept"), "application/x-otlp+json"), nil
}

func appendSpans(buf []byte, spans []model.Span) []byte {
	buf = append(buf, '[')
	for i := range spans {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = otlp.AppendSpanJSON(buf, &spans[i])
	}
	return append(buf, ']')
}

func appendWarnings(buf []byte, warnings []string) []byte {
	if len(warnings) == 0 {
		return buf
	}
	b, _ := json.Marshal(warnings)
	buf = append(buf, `,"warnings":`...)
	return append(buf, b...)
}

// parseFilter reads the span filter parameters; on error it writes a 400.
func parseFilter(w http.ResponseWriter, r *http.Request) (query.Filter, bool) {
	f, err := query.FromValues(r.URL.Query(), time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return f, false
	}
	return f, true
}

func (s *Server) handleSpans(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	t0 := time.Now()
	f, ok := parseFilter(w, r)
	if !ok {
		return
	}
	var cur *engine.Cursor
	if c := r.URL.Query().Get("cursor"); c != "" {
		var err error
		if cur, err = decodeCursor(c); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	spans, next, res, err := e.SearchSpans(r.Context(), project, &f, f.Limit, cur)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	buf := make([]byte, 0, 512*len(spans)+64)
	buf = append(buf, `{"spans":`...)
	buf = appendSpans(buf, spans)
	if next != nil {
		buf = append(buf, `,"next_cursor":"`...)
		buf = append(buf, encodeCursor(next)...)
		buf = append(buf, '"')
	}
	buf = appendWarnings(buf, res.Warnings)
	buf = append(buf, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	setServerTiming(w, t0)
	w.Write(buf)
}

// setServerTiming reports the time since t0 (the handler's start: parsing
// the query, searching, encoding the answer) as a Server-Timing header,
// which browser developer tools show and the benchmark harness reads to
// tell the server's share of a request from the network's.
func setServerTiming(w http.ResponseWriter, t0 time.Time) {
	w.Header().Set("Server-Timing", "handler;dur="+strconv.FormatFloat(float64(time.Since(t0).Nanoseconds())/1e6, 'f', 3, 64))
}

func encodeCursor(c *engine.Cursor) string {
	var b [32]byte
	binary.BigEndian.PutUint64(b[:8], c.Start)
	copy(b[8:24], c.Trace[:])
	copy(b[24:], c.Span[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func decodeCursor(s string) (*engine.Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("cursor %q is not a cursor returned by this API", s)
	}
	c := &engine.Cursor{Start: binary.BigEndian.Uint64(b[:8])}
	copy(c.Trace[:], b[8:24])
	copy(c.Span[:], b[24:])
	return c, nil
}

// traceSummaryJSON is the API shape of a trace search result.
type traceSummaryJSON struct {
	TraceID       string   `json:"trace_id"`
	RootService   string   `json:"root_service"`
	RootName      string   `json:"root_name"`
	StartTime     string   `json:"start_time"`
	StartUnixNano uint64   `json:"start_time_unix_nano"`
	DurationNanos uint64   `json:"duration_ns"`
	SpanCount     int      `json:"span_count"`
	ErrorCount    int      `json:"error_count"`
	MatchedSpans  int      `json:"matched_spans"`
	Services      []string `json:"services"`
}

func (s *Server) handleTraces(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	t0 := time.Now()
	f, ok := parseFilter(w, r)
	if !ok {
		return
	}
	sums, res, err := e.SearchTraces(r.Context(), project, &f, f.Limit)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	out := make([]traceSummaryJSON, 0, len(sums))
	for _, t := range sums {
		out = append(out, traceSummaryJSON{
			TraceID: t.TraceID.String(), RootService: t.RootService, RootName: t.RootName,
			StartTime:     time.Unix(0, int64(t.Start)).UTC().Format(time.RFC3339Nano),
			StartUnixNano: t.Start, DurationNanos: t.End - t.Start,
			SpanCount: t.Spans, ErrorCount: t.Errors, MatchedSpans: t.Matched, Services: t.Services,
		})
	}
	resp := map[string]any{"traces": out}
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	setServerTiming(w, t0) // the encoding that follows is not counted
	writeJSON(w, http.StatusOK, resp)
}

// window reads since/until for discovery routes (default: the 24 hours
// before until, or before now), with the checks of the search routes: both
// within 1970..2261, since before until.
func window(w http.ResponseWriter, r *http.Request) (start, end uint64, ok bool) {
	q := r.URL.Query()
	v := url.Values{"since": {q.Get("since")}, "until": {q.Get("until")}}
	defaulted := defaultSince(v, time.Now())
	f, err := query.FromValues(v, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, sinceDefaultHint(err.Error(), defaulted))
		return 0, 0, false
	}
	return f.Start, f.End, true
}

// defaultSince fills in a missing since: 24 hours before until (when until
// is a valid time) or before now. It reports whether it did.
func defaultSince(v url.Values, now time.Time) bool {
	if v.Get("since") != "" {
		return false
	}
	since := "24h"
	if u := v.Get("until"); u != "" {
		if t, err := query.ParseTime(u, now); err == nil && t.Year() >= 1970 && t.Year() <= 2261 {
			since = t.Add(-24 * time.Hour).UTC().Format(time.RFC3339Nano)
		}
	}
	v.Set("since", since)
	return true
}

// sinceDefaultHint says, in an error about since, that the user did not
// give it: routes with a default window fill it in.
func sinceDefaultHint(msg string, defaulted bool) string {
	if defaulted && strings.HasPrefix(msg, "since:") {
		return msg + " (since was not given; on this route it defaults to 24h before until)"
	}
	return msg
}

func (s *Server) handleServices(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	start, end, ok := window(w, r)
	if !ok {
		return
	}
	out, res, err := e.Services(r.Context(), project, start, end)
	s.discoveryResponse(w, "services", out, res, err)
}

func (s *Server) handleOperations(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	start, end, ok := window(w, r)
	if !ok {
		return
	}
	out, res, err := e.Operations(r.Context(), project, r.PathValue("service"), start, end)
	s.discoveryResponse(w, "operations", out, res, err)
}

func (s *Server) handleAttributes(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	start, end, ok := window(w, r)
	if !ok {
		return
	}
	out, res, err := e.AttributeKeys(r.Context(), project, start, end)
	s.discoveryResponse(w, "attributes", out, res, err)
}

func (s *Server) handleAttributeValues(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	start, end, ok := window(w, r)
	if !ok {
		return
	}
	limit := 100
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit: %q is not a whole number from 1 to 10000", l))
			return
		}
		limit = n
	}
	out, res, err := e.AttributeValues(r.Context(), project, r.PathValue("key"), start, end, limit)
	s.discoveryResponse(w, "values", out, res, err)
}

func (s *Server) discoveryResponse(w http.ResponseWriter, field string, out []engine.NameCount, res engine.Result, err error) {
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	if out == nil {
		out = []engine.NameCount{}
	}
	resp := map[string]any{field: out}
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	writeJSON(w, http.StatusOK, e.Stats(project))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
