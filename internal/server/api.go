package server

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// queryRoutes are Rastro's own query API (docs/api.md).
func (s *Server) queryRoutes() []route {
	q := s.withBackend
	return []route{
		{method: "GET", pattern: "/api/v1/traces/{trace_id}", access: accessRead, name: "trace", handler: q(s.handleTrace), documented: true},
		{method: "GET", pattern: "/api/v1/traces", access: accessRead, name: "traces", listing: &listing{"traces", "traces"}, handler: q(s.handleTraces), documented: true},
		{method: "GET", pattern: "/api/v1/spans", access: accessRead, name: "spans", listing: &listing{"spans", "spans"}, handler: q(s.handleSpans), documented: true},
		{method: "GET", pattern: "/api/v1/services", access: accessRead, name: "services", listing: &listing{"services", "services"}, handler: q(s.handleServices), documented: true},
		{method: "GET", pattern: "/api/v1/services/{service}/operations", access: accessRead, name: "operations", listing: &listing{"operations", "operations"}, handler: q(s.handleOperations), documented: true},
		{method: "GET", pattern: "/api/v1/attributes", access: accessRead, name: "attributes", listing: &listing{"attributes", "attribute keys"}, handler: q(s.handleAttributes), documented: true},
		{method: "GET", pattern: "/api/v1/attributes/{key}/values", access: accessRead, name: "attribute_values", listing: &listing{"values", "values"}, handler: q(s.handleAttributeValues), documented: true},
		{method: "GET", pattern: "/api/v1/llm/stats", access: accessRead, name: "llm_stats", listing: &listing{"groups", "spans"}, handler: q(s.handleLLMStats), documented: true},
		{method: "GET", pattern: "/api/v1/llm/timeseries", access: accessRead, name: "llm_timeseries", listing: &listing{"points", "spans"}, handler: q(s.handleLLMTimeseries), documented: true},
		{method: "GET", pattern: "/api/v1/llm/prices", access: accessReadServer, name: "llm_prices", handler: s.handlePrices, documented: true},
		{method: "GET", pattern: "/api/v1/sessions", access: accessRead, name: "sessions", listing: &listing{"sessions", "sessions"}, handler: q(s.handleSessions), documented: true},
		{method: "GET", pattern: "/api/v1/sessions/{session_id}", access: accessRead, name: "session", handler: q(s.handleSession), documented: true},
		// A stream: not in the latency histogram.
		{method: "GET", pattern: "/api/v1/tail", access: accessRead, handler: q(s.handleTail), documented: true, stream: true},
		{method: "GET", pattern: "/api/v1/stats", access: accessRead, name: "stats", handler: q(s.handleStats), documented: true},
		{method: "DELETE", pattern: "/api/v1/traces/{trace_id}", access: accessAdmin, name: "erase_trace", handler: q(s.handleEraseTrace), documented: true},
		{method: "POST", pattern: "/api/v1/erase", access: accessAdmin, name: "erase", handler: q(s.handleErase), documented: true},
		{method: "GET", pattern: "/api/v1/erasures", access: accessAdmin, name: "erasures", handler: q(s.handleErasures), documented: true},
		{method: "GET", pattern: "/api/v1/erasures/{id}", access: accessAdmin, name: "erasure", handler: q(s.handleErasure), documented: true},
		{method: "POST", pattern: "/api/v1/admin/compact", access: accessAdmin, name: "compact", handler: q(s.handleCompact), documented: true},
	}
}

// failure chooses the answer to a failed query: a request the backend
// refused as malformed is a 400; a query past its time budget, a cancelled
// query or a closing backend a 503 (the last with Retry-After); anything
// else (an I/O error, a bug) a 500 that is logged.
func (s *Server) failure(err error) (code int, msg string, retry bool) {
	switch {
	case errors.Is(err, store.ErrBadRequest):
		return http.StatusBadRequest, err.Error(), false
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, s.overBudget(), false
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "query cancelled: " + err.Error(), false
	case errors.Is(err, store.ErrClosed):
		return http.StatusServiceUnavailable, "the store is closing: " + err.Error(), true
	case errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable, "the store cannot serve this now; retry later: " + err.Error(), true
	}
	s.log.Error("query failed", "err", err)
	return http.StatusInternalServerError, "query failed: " + err.Error(), false
}

// failedWith answers a failed store query with an API family's error
// writer (see failure).
func (s *Server) failedWith(w http.ResponseWriter, err error, fail func(w http.ResponseWriter, code int, msg string)) {
	code, msg, retry := s.failure(err)
	if retry {
		w.Header().Set("Retry-After", "1")
	}
	fail(w, code, msg)
}

// queryFailed answers a failed query with a JSON error (see failure).
func (s *Server) queryFailed(w http.ResponseWriter, err error) { s.failedWith(w, err, writeError) }

func (s *Server) handleTrace(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	t0 := time.Now()
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
	spans, res, err := b.Trace(r.Context(), project, id)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	if len(spans) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("trace %s not found in project %q", id, project))
		return
	}
	if otlpOut {
		body := otlp.EncodeJSON(spans)
		w.Header().Set("Content-Type", "application/json")
		setServerTiming(w, t0)
		w.Write(body)
		return
	}
	pb := getRespBuf(512 * len(spans))
	defer putRespBuf(pb)
	buf := append(*pb, `{"trace_id":"`...)
	buf = append(buf, id.String()...)
	buf = append(buf, `","spans":`...)
	buf = appendSpans(buf, spans)
	buf = appendWarnings(buf, res.Warnings)
	buf = append(buf, "}\n"...)
	*pb = buf
	w.Header().Set("Content-Type", "application/json")
	setServerTiming(w, t0)
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

// wholeQuery reads q when it is a whole TraceQL query (structural
// operators, pipelines) rather than one spanset filter, with the window and
// limit of the other parameters. A q that does not parse as a whole query
// is left to parseFilter, whose messages name the filter's errors.
func wholeQuery(w http.ResponseWriter, r *http.Request) (q *query.Query, f query.Filter, whole, ok bool) {
	v := r.URL.Query()
	src := v.Get("q")
	if strings.TrimSpace(src) == "" {
		return nil, f, false, true
	}
	q, err := query.ParseQuery(src)
	if err != nil {
		return nil, f, false, true
	}
	if e, simple := q.Simple(); simple {
		if strings.Contains(src, "with") {
			// Query hints (with (...)) are accepted and ignored: the
			// filter search reads the filter alone.
			v.Set("q", e.String())
			r.URL.RawQuery = v.Encode()
		}
		return nil, f, false, true
	}
	if q.IsMetrics() {
		writeError(w, http.StatusBadRequest, "q: a TraceQL metrics query; ask /api/v1/traceql/metrics (or Tempo's /api/metrics/query_range) for it")
		return nil, f, false, false
	}
	v.Del("q")
	if f, err = query.FromValues(v, time.Now()); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, f, false, false
	}
	return q, f, true, true
}

// queryTraces runs a whole TraceQL query (see store.QueryTraces).
func (s *Server) queryTraces(w http.ResponseWriter, r *http.Request, b store.Backend, project string, q *query.Query, f *query.Filter, limit int) ([]store.TraceMatch, map[string]any, bool) {
	matches, stats, res, err := store.QueryTraces(r.Context(), b, project, q, f, limit, store.QueryBudget{Time: s.structuralBudget()})
	if err != nil {
		s.queryFailed(w, err)
		return nil, nil, false
	}
	m := map[string]any{"candidate_filter": stats.Candidate, "candidate_spans": stats.CandidateSpans,
		"inspected_traces": stats.TracesInspected, "partial": stats.Partial}
	if stats.Partial {
		m["partial_reason"] = stats.Reason
	}
	if len(res.Warnings) > 0 {
		m["warnings"] = res.Warnings
	}
	return matches, m, true
}

func (s *Server) handleSpans(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	t0 := time.Now()
	if q, f, whole, ok := wholeQuery(w, r); !ok {
		return
	} else if whole {
		if r.URL.Query().Get("cursor") != "" {
			writeError(w, http.StatusBadRequest, "cursor: paging is not available for structural and pipeline queries; narrow the window or raise limit")
			return
		}
		matches, metrics, ok := s.queryTraces(w, r, b, project, q, &f, f.Limit)
		if !ok {
			return
		}
		var spans []model.Span
		for _, m := range matches {
			spans = append(spans, m.Spans...)
		}
		// Newest first, as the filter search answers.
		slices.SortStableFunc(spans, func(a, b model.Span) int { return cmp.Compare(b.StartTimeUnixNano, a.StartTimeUnixNano) })
		if limit := cmp.Or(f.Limit, 20); len(spans) > limit {
			spans = spans[:limit]
		}
		buf := append([]byte(`{"spans":`), appendSpans(nil, spans)...)
		mj, _ := json.Marshal(metrics)
		buf = append(append(append(buf, `,"metrics":`...), mj...), "}\n"...)
		w.Header().Set("Content-Type", "application/json")
		setServerTiming(w, t0)
		w.Write(buf)
		return
	}
	f, ok := parseFilter(w, r)
	if !ok {
		return
	}
	var cur *store.Cursor
	if c := r.URL.Query().Get("cursor"); c != "" {
		var err error
		if cur, err = decodeCursor(c); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	spans, next, res, err := b.SearchSpans(r.Context(), project, &f, f.Limit, cur)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	pb := getRespBuf(512*len(spans) + 64)
	defer putRespBuf(pb)
	buf := append(*pb, `{"spans":`...)
	if f.Content != nil {
		buf = appendSpansSnippets(buf, spans, f.Content)
	} else {
		buf = appendSpans(buf, spans)
	}
	if next != nil {
		buf = append(buf, `,"next_cursor":"`...)
		buf = append(buf, encodeCursor(next)...)
		buf = append(buf, '"')
	}
	buf = appendWarnings(buf, res.Warnings)
	buf = append(buf, "}\n"...)
	*pb = buf
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

func encodeCursor(c *store.Cursor) string {
	var b [32]byte
	binary.BigEndian.PutUint64(b[:8], c.Start)
	copy(b[8:24], c.Trace[:])
	copy(b[24:], c.Span[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func decodeCursor(s string) (*store.Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("cursor %q is not a cursor returned by this API", s)
	}
	c := &store.Cursor{Start: binary.BigEndian.Uint64(b[:8])}
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

func (s *Server) handleTraces(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	t0 := time.Now()
	var (
		sums    []store.TraceSummary
		res     store.Result
		metrics map[string]any
	)
	if q, f, whole, ok := wholeQuery(w, r); !ok {
		return
	} else if whole {
		matches, m, ok := s.queryTraces(w, r, b, project, q, &f, f.Limit)
		if !ok {
			return
		}
		for _, t := range matches {
			sums = append(sums, t.Summary)
		}
		metrics = m
	} else {
		f, ok := parseFilter(w, r)
		if !ok {
			return
		}
		var err error
		if sums, res, err = b.SearchTraces(r.Context(), project, &f, f.Limit); err != nil {
			s.queryFailed(w, err)
			return
		}
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
	if metrics != nil {
		resp["metrics"] = metrics
	}
	setServerTiming(w, t0) // the encoding that follows is not counted
	writeJSON(w, http.StatusOK, resp)
}

// window reads since/until for discovery routes (default: query.DefaultWindow
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

// defaultSince fills in a missing since: query.DefaultWindow before until
// (when until is a valid time) or before now. It reports whether it did.
func defaultSince(v url.Values, now time.Time) bool {
	if v.Get("since") != "" {
		return false
	}
	since := now.Add(-query.DefaultWindow).UTC().Format(time.RFC3339Nano)
	if u := v.Get("until"); u != "" {
		if t, err := query.ParseTime(u, now); err == nil && t.Year() >= 1970 && t.Year() <= 2261 {
			since = t.Add(-query.DefaultWindow).UTC().Format(time.RFC3339Nano)
		}
	}
	v.Set("since", since)
	return true
}

// sinceDefaultHint says, in an error about since, that the user did not
// give it: routes with a default window fill it in.
func sinceDefaultHint(msg string, defaulted bool) string {
	if defaulted && strings.HasPrefix(msg, "since:") {
		return msg + " (since was not given; it defaults to " + fmtWindow(query.DefaultWindow) + " before until)"
	}
	return msg
}

func (s *Server) handleServices(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	start, end, ok := window(w, r)
	if !ok {
		return
	}
	out, res, err := b.Services(r.Context(), project, start, end)
	s.discoveryResponse(w, "services", out, res, err)
}

func (s *Server) handleOperations(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	start, end, ok := window(w, r)
	if !ok {
		return
	}
	out, res, err := b.Operations(r.Context(), project, r.PathValue("service"), start, end)
	s.discoveryResponse(w, "operations", mergeKinds(out), res, err)
}

func (s *Server) handleAttributes(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	start, end, ok := window(w, r)
	if !ok {
		return
	}
	out, res, err := b.AttributeKeys(r.Context(), project, start, end)
	s.discoveryResponse(w, "attributes", out, res, err)
}

func (s *Server) handleAttributeValues(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
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
	out, res, err := b.AttributeValues(r.Context(), project, r.PathValue("key"), start, end, limit)
	s.discoveryResponse(w, "values", out, res, err)
}

// mergeKinds merges the (name, kind) entries of Operations by name, keeping
// the order by name.
func mergeKinds(ops []store.NameCount) []store.NameCount {
	var out []store.NameCount
	for _, op := range ops {
		if n := len(out); n > 0 && out[n-1].Name == op.Name {
			out[n-1].Count += op.Count
			continue
		}
		out = append(out, store.NameCount{Name: op.Name, Count: op.Count})
	}
	return out
}

// nameCountJSON is the API shape of a discovered name.
type nameCountJSON struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func (s *Server) discoveryResponse(w http.ResponseWriter, field string, names []store.NameCount, res store.Result, err error) {
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	out := make([]nameCountJSON, len(names))
	for i, n := range names {
		out[i] = nameCountJSON{n.Name, n.Count}
	}
	resp := map[string]any{field: out}
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	writeJSON(w, http.StatusOK, resp)
}

// statsJSON is the API shape of /api/v1/stats.
type statsJSON struct {
	Spans        int64    `json:"spans"`
	Traces       int64    `json:"traces"`
	Segments     int      `json:"segments"`
	DiskBytes    int64    `json:"disk_bytes"`
	SegmentBytes int64    `json:"segment_bytes"`
	BufferSpans  int64    `json:"buffer_spans"`
	BufferBytes  int64    `json:"buffer_bytes"`
	WALBytes     int64    `json:"wal_bytes"`
	ValueBytes   int64    `json:"value_bytes"`
	Values       int64    `json:"values"`
	Quarantined  []string `json:"quarantined,omitempty"`
	SealError    string   `json:"seal_error,omitempty"`
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	sr, ok := b.(store.StatsReporter)
	if !ok {
		notSupported(w, "store statistics")
		return
	}
	st, err := sr.Stats(r.Context(), project)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, statsJSON(st))
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
