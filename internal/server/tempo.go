package server

// The Tempo HTTP API, as Grafana's Tempo data source calls it. Shapes follow
// grafana/tempo pkg/tempopb/tempo.proto as the Grafana plugin compiles it
// (tempopb of 2025-05-29): the plugin decodes search answers with a strict
// decoder, so no field beyond that set is sent. JSON follows gogo jsonpb's
// defaults: 64-bit integers as decimal strings, zero values and nil lists
// omitted, bytes in base64. Errors are plain text, as Tempo's are. Sources:
// ../../docs/grafana.md and the team's notes on Tempo's API.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// tempoVersion is the version /api/status/buildinfo reports: below 2.2.0, so
// that a Grafana that still reads it does not try Tempo's gRPC streaming,
// which Rastro does not serve.
const tempoVersion = "2.1.0"

// tempoRoutes are the Tempo query API's routes (docs/grafana.md).
func (s *Server) tempoRoutes() []route {
	t := s.withTempo
	return []route{
		{method: "GET", pattern: "/api/echo", access: accessPublic, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("echo\n"))
		}},
		{method: "GET", pattern: "/api/status/buildinfo", access: accessPublic, handler: s.handleTempoBuildInfo},
		{method: "GET", pattern: "/ready", access: accessPublic, handler: func(w http.ResponseWriter, r *http.Request) {
			if s.currentBackend() == nil {
				tempoError(w, http.StatusServiceUnavailable, "not ready: replaying the WAL")
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("ready\n"))
		}},
		{method: "GET", pattern: "/api/v2/traces/{trace_id}", access: accessRead, name: "tempo_trace_v2", handler: t(s.handleTempoTraceV2)},
		// GET /api/traces/{id} (v1) is shared with Jaeger's trace route (jaeger.go).
		{method: "GET", pattern: "/api/search", access: accessRead, name: "tempo_search", handler: t(s.handleTempoSearch)},
		{method: "GET", pattern: "/api/v2/search/tags", access: accessRead, name: "tempo_tags", handler: t(s.handleTempoTags(true))},
		{method: "GET", pattern: "/api/search/tags", access: accessRead, name: "tempo_tags_v1", handler: t(s.handleTempoTags(false))},
		{method: "GET", pattern: "/api/v2/search/tag/{tag}/values", access: accessRead, name: "tempo_tag_values", handler: t(s.handleTempoTagValues(true))},
		{method: "GET", pattern: "/api/search/tag/{tag}/values", access: accessRead, name: "tempo_tag_values_v1", handler: t(s.handleTempoTagValues(false))},
	}
}

// tempoError writes a plain-text error, as Tempo does.
func tempoError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write([]byte(msg + "\n"))
}

// withTempo is withBackend with Tempo's plain-text errors.
func (s *Server) withTempo(h queryHandler) http.HandlerFunc {
	return s.withBackendErrors(h, tempoError)
}

// tempoFailed answers a failed query in Tempo's manner: the status of
// failure, the message in plain text.
func (s *Server) tempoFailed(w http.ResponseWriter, err error) { s.failedWith(w, err, tempoError) }

func (s *Server) handleTempoBuildInfo(w http.ResponseWriter, r *http.Request) {
	// Tempo's key order: version, revision, branch, buildUser, buildDate, goVersion.
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"version":%q,"revision":"rastro","branch":"","buildUser":"","buildDate":"","goVersion":%q}`+"\n",
		tempoVersion, runtime.Version())
}

// parseTempoTraceID reads a trace id as Tempo does: hex in any case, odd
// lengths allowed, left-padded to 128 bits (Tempo lists 64-bit ids without
// their leading zeros).
func parseTempoTraceID(s string) (model.TraceID, error) {
	var id model.TraceID
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; !(s[i] >= '0' && s[i] <= '9' || c >= 'a' && c <= 'f') {
			return id, fmt.Errorf("trace IDs can only contain hex characters: invalid character '%c' at position %d", s[i], i+1)
		}
	}
	if len(s) > 32 {
		return id, fmt.Errorf("trace IDs can't be larger than 128 bits")
	}
	if len(s) == 0 {
		return id, fmt.Errorf("please provide a trace ID")
	}
	padded := strings.Repeat("0", 32-len(s)) + s
	if _, err := hex.Decode(id[:], []byte(padded)); err != nil {
		return id, fmt.Errorf("invalid trace ID %q: %v", s, err)
	}
	return id, nil
}

// tempoSeconds reads an optional start or end parameter in Unix seconds.
func tempoSeconds(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	// Tempo reads them as uint32 seconds: a millisecond or nanosecond value
	// sent by mistake is refused, not read as a date centuries ahead.
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid %s: %q is not a number of Unix seconds", name, v)
	}
	return int64(n), nil
}

// tempoWindow reads start and end (Unix seconds; 0 = unset) and checks that
// start is before end when both are set.
func tempoWindow(r *http.Request) (start, end int64, err error) {
	if start, err = tempoSeconds(r, "start"); err != nil {
		return 0, 0, err
	}
	if end, err = tempoSeconds(r, "end"); err != nil {
		return 0, 0, err
	}
	if start != 0 && end != 0 && start > end {
		return 0, 0, fmt.Errorf("http parameter start must be before end. received start=%d end=%d", start, end)
	}
	return start, end, nil
}

// tempoTrace reads a trace for the trace-by-id routes; ok is false when an
// error was written.
func (s *Server) tempoTrace(w http.ResponseWriter, r *http.Request, b store.Backend, project string) (*tracepb.TracesData, store.Result, bool) {
	id, err := parseTempoTraceID(r.PathValue("trace_id"))
	if err != nil {
		tempoError(w, http.StatusBadRequest, err.Error())
		return nil, store.Result{}, false
	}
	if _, _, err := tempoWindow(r); err != nil {
		tempoError(w, http.StatusBadRequest, err.Error())
		return nil, store.Result{}, false
	}
	spans, res, err := b.Trace(r.Context(), project, id)
	if err != nil {
		s.tempoFailed(w, err)
		return nil, res, false
	}
	td, err := tracesData(spans)
	if err != nil {
		s.tempoFailed(w, err)
		return nil, res, false
	}
	return td, res, true
}

// tracesData converts spans to OTLP's TracesData, with a resource, a scope
// and a status message on every resource, scope and span: Grafana's Tempo
// plugin reads them without checking for nil.
func tracesData(spans []model.Span) (*tracepb.TracesData, error) {
	td := &tracepb.TracesData{}
	if len(spans) == 0 {
		return td, nil
	}
	if err := proto.Unmarshal(otlp.EncodeProto(spans), td); err != nil {
		return nil, fmt.Errorf("encode trace: %w", err)
	}
	for _, rs := range td.ResourceSpans {
		if rs.Resource == nil {
			rs.Resource = &resourcepb.Resource{}
		}
		for _, ss := range rs.ScopeSpans {
			if ss.Scope == nil {
				ss.Scope = &commonpb.InstrumentationScope{}
			}
			for _, sp := range ss.Spans {
				if sp.Status == nil {
					sp.Status = &tracepb.Status{}
				}
			}
		}
	}
	return td, nil
}

// wantsProtobuf reports whether the client asked for protobuf, as Tempo
// decides: an Accept header containing application/protobuf.
func wantsProtobuf(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/protobuf")
}

// tempoJSON marshals a message as Tempo's gogo jsonpb does by default.
var tempoJSON = protojson.MarshalOptions{}

// handleTempoTraceV2 serves GET /api/v2/traces/{id}: a TraceByIDResponse
// (field 1 the trace, always present: an unknown trace is a 200 with an
// empty trace, as Tempo answers; field 3 PARTIAL and field 4 a message when
// damaged parts were skipped).
func (s *Server) handleTempoTraceV2(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	td, res, ok := s.tempoTrace(w, r, b, project)
	if !ok {
		return
	}
	msg := strings.Join(res.Warnings, "; ")
	if wantsProtobuf(r) {
		body, err := proto.Marshal(td)
		if err != nil {
			s.tempoFailed(w, err)
			return
		}
		out := protowire.AppendTag(nil, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, body)
		if msg != "" {
			out = protowire.AppendTag(out, 3, protowire.VarintType)
			out = protowire.AppendVarint(out, 1) // PARTIAL
			out = protowire.AppendTag(out, 4, protowire.BytesType)
			out = protowire.AppendString(out, msg)
		}
		w.Header().Set("Content-Type", "application/protobuf")
		w.Write(out)
		return
	}
	trace, err := tempoJSON.Marshal(td)
	if err != nil {
		s.tempoFailed(w, err)
		return
	}
	var buf bytes.Buffer
	buf.WriteString(`{"trace":`)
	buf.Write(trace)
	if msg != "" {
		buf.WriteString(`,"status":"PARTIAL","message":`)
		m, _ := json.Marshal(msg)
		buf.Write(m)
	}
	buf.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Write(buf.Bytes())
}

// handleTempoTraceV1 serves GET /api/traces/{id} with Accept:
// application/protobuf (the route is shared with Jaeger's, which answers
// JSON): the bare Trace (the wire format of OTLP's TracesData), or 404 with
// an empty body for an unknown trace, as Tempo answers. Grafana asks for it
// when v2 answers 404 (an older Tempo).
func (s *Server) handleTempoTraceV1(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	td, _, ok := s.tempoTrace(w, r, b, project)
	if !ok {
		return
	}
	if len(td.ResourceSpans) == 0 {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	body, err := proto.Marshal(td)
	if err != nil {
		s.tempoFailed(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/protobuf")
	w.Write(body)
}

// Search response shapes (tempopb SearchResponse and the messages in it).
type tempoSearchResponse struct {
	Traces  []tempoTrace `json:"traces"`
	Metrics struct {
		InspectedTraces uint32 `json:"inspectedTraces,omitempty"`
	} `json:"metrics"`
}

type tempoTrace struct {
	TraceID           string                       `json:"traceID,omitempty"`
	RootServiceName   string                       `json:"rootServiceName,omitempty"`
	RootTraceName     string                       `json:"rootTraceName,omitempty"`
	StartTimeUnixNano string                       `json:"startTimeUnixNano,omitempty"`
	DurationMs        uint32                       `json:"durationMs,omitempty"`
	SpanSet           *tempoSpanSet                `json:"spanSet,omitempty"`
	SpanSets          []tempoSpanSet               `json:"spanSets,omitempty"`
	ServiceStats      map[string]tempoServiceStats `json:"serviceStats,omitempty"`
}

type tempoSpanSet struct {
	Spans      []tempoSpan `json:"spans,omitempty"`
	Matched    uint32      `json:"matched,omitempty"`
	Attributes []tempoKV   `json:"attributes,omitempty"`
}

// tempoKV is tempopb's common.v1.KeyValue as jsonpb writes it.
type tempoKV struct {
	Key   string         `json:"key"`
	Value map[string]any `json:"value"`
}

func tempoValue(v model.Value) map[string]any {
	switch v.Type {
	case model.ValueString:
		return map[string]any{"stringValue": v.Str}
	case model.ValueInt:
		return map[string]any{"intValue": strconv.FormatInt(v.Int, 10)}
	case model.ValueDouble:
		return map[string]any{"doubleValue": v.Double}
	case model.ValueBool:
		return map[string]any{"boolValue": v.Bool()}
	case model.ValueEmpty:
		return map[string]any{}
	}
	return map[string]any{"stringValue": v.AsString()}
}

// tempoStructuralSearch serves /api/search for a whole TraceQL query
// (structural operators, pipelines): one spanSet per result spanset, with
// the by() and aggregate values as its attributes, as Tempo answers.
func (s *Server) tempoStructuralSearch(w http.ResponseWriter, r *http.Request, b store.Backend, project string, q *query.Query,
	limit, spss int, minDur, maxDur time.Duration) {
	start, end, err := tempoWindow(r)
	if err != nil {
		tempoError(w, http.StatusBadRequest, err.Error())
		return
	}
	f := &query.Filter{}
	if start > 0 {
		f.Start = uint64(start) * 1e9
	}
	if end > 0 {
		f.End = uint64(end+1) * 1e9
	}
	want := limit
	if minDur != 0 || maxDur != 0 {
		want = min(limit*5, 10000)
	}
	matches, stats, res, err := store.QueryTraces(r.Context(), b, project, q, f, want, store.QueryBudget{Time: s.structuralBudget()})
	if err != nil {
		s.tempoFailed(w, err)
		return
	}
	out := tempoSearchResponse{Traces: []tempoTrace{}}
	for _, m := range matches {
		d := time.Duration(m.Summary.End - m.Summary.Start)
		if d < minDur || maxDur != 0 && d > maxDur {
			continue
		}
		if len(out.Traces) == limit {
			break
		}
		t := tempoTraceOf(m.Summary, m.All, &query.Filter{Expr: noneExpr}, spss)
		t.SpanSet, t.SpanSets = nil, nil
		for _, ss := range m.Spansets {
			set := tempoSpanSet{Matched: uint32(len(ss.Spans))}
			for _, x := range ss.Spans[:min(len(ss.Spans), spss)] {
				sp := &m.All[x]
				ts := tempoSpan{SpanID: sp.SpanID.String(), Name: sp.Name,
					StartTimeUnixNano: u64(sp.StartTimeUnixNano), DurationNanos: u64(sp.Duration())}
				for _, a := range q.SelectValues(sp) {
					ts.Attributes = append(ts.Attributes, tempoKV{Key: a.Name, Value: tempoValue(a.Value)})
				}
				set.Spans = append(set.Spans, ts)
			}
			for _, a := range ss.Attrs {
				set.Attributes = append(set.Attributes, tempoKV{Key: a.Name, Value: tempoValue(a.Value)})
			}
			t.SpanSets = append(t.SpanSets, set)
		}
		if len(t.SpanSets) > 0 {
			t.SpanSet = &t.SpanSets[0]
		}
		out.Traces = append(out.Traces, t)
	}
	out.Metrics.InspectedTraces = uint32(stats.TracesInspected)
	if len(res.Warnings) > 0 {
		s.log.Warn("tempo search skipped damaged parts", "warnings", res.Warnings)
	}
	writeJSON(w, http.StatusOK, out)
}

// noneExpr matches no span (tempoTraceOf then counts services only).
var noneExpr = func() query.Expr {
	e, err := query.ParseTraceQL("{ false }")
	if err != nil {
		panic(err)
	}
	return e
}()

type tempoSpan struct {
	SpanID            string    `json:"spanID,omitempty"`
	Name              string    `json:"name,omitempty"`
	StartTimeUnixNano string    `json:"startTimeUnixNano,omitempty"`
	DurationNanos     string    `json:"durationNanos,omitempty"`
	Attributes        []tempoKV `json:"attributes,omitempty"`
}

type tempoServiceStats struct {
	SpanCount  uint32 `json:"spanCount,omitempty"`
	ErrorCount uint32 `json:"errorCount,omitempty"`
}

// u64 is a 64-bit integer as jsonpb writes it: a decimal string, omitted
// when zero.
func u64(v uint64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatUint(v, 10)
}

// traceQLError is Tempo's message for a query that does not parse.
func traceQLError(q string, err error) string {
	if se, ok := err.(*query.SyntaxError); ok {
		line, col := 1, 1
		for i := 0; i < se.Pos && i < len(q); i++ {
			if q[i] == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Sprintf("invalid TraceQL query: parse error at line %d, col %d: %s", line, col, se.Msg)
	}
	return "invalid TraceQL query: parse error : " + err.Error()
}

// tempoSearchFilter builds the filter of /api/search: q (TraceQL) or the
// legacy tags (logfmt), and the window.
func tempoSearchFilter(r *http.Request) (*query.Filter, error) {
	q := r.URL.Query()
	f := &query.Filter{}
	tq, tags := q.Get("q"), q.Get("tags")
	if tq != "" && tags != "" {
		return nil, fmt.Errorf("invalid request: can't specify tags and q in the same query")
	}
	if tags != "" {
		var err error
		if tq, err = tagsQuery(tags); err != nil {
			return nil, err
		}
	}
	if tq != "" {
		expr, err := query.ParseTraceQL(tq)
		if err != nil {
			if q.Get("q") == "" {
				return nil, fmt.Errorf("invalid tags: %v", err)
			}
			return nil, fmt.Errorf("%s", traceQLError(tq, err))
		}
		f.Expr = expr
	}
	start, end, err := tempoWindow(r)
	if err != nil {
		return nil, err
	}
	if start > 0 {
		f.Start = uint64(start) * 1e9
	}
	if end > 0 {
		f.End = uint64(end+1) * 1e9 // end is inclusive, to the second
	}
	return f, nil
}

// tagsQuery turns legacy logfmt tags (key=value key2="value 2") into a
// spanset filter on unscoped attributes; name and status are intrinsics.
// A value that reads as a number also matches the number.
func tagsQuery(tags string) (string, error) {
	var conds []string
	seen := map[string]bool{}
	for rest := strings.TrimSpace(tags); rest != ""; rest = strings.TrimSpace(rest) {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return "", fmt.Errorf("invalid tags: %q is not key=value", rest)
		}
		key := rest[:eq]
		rest = rest[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return "", fmt.Errorf("invalid tags: unterminated quote after %s=", key)
			}
			val, rest = rest[1:end+1], rest[end+2:]
		} else {
			sp := strings.IndexAny(rest, " \t")
			if sp < 0 {
				sp = len(rest)
			}
			val, rest = rest[:sp], rest[sp:]
		}
		if seen[key] {
			return "", fmt.Errorf("invalid tags: %s appears more than once", key)
		}
		seen[key] = true
		quoted := strconv.Quote(val)
		switch key {
		case "name":
			conds = append(conds, "name = "+quoted)
		case "status", "status.code":
			// The value becomes TraceQL as it is: only a status may.
			if _, ok := model.ParseStatusCode(val); !ok {
				return "", fmt.Errorf("invalid tags: %s=%q is not a status: want ok, error or unset", key, val)
			}
			conds = append(conds, "status = "+val)
		default:
			k := "." + strconv.Quote(key)
			c := k + " = " + quoted
			if f, err := strconv.ParseFloat(val, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				c = "(" + c + " || " + k + " = " + strconv.FormatFloat(f, 'g', -1, 64) + ")"
			}
			conds = append(conds, c)
		}
	}
	return "{ " + strings.Join(conds, " && ") + " }", nil
}

// handleTempoSearch serves GET /api/search.
func (s *Server) handleTempoSearch(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	q := r.URL.Query()
	limit, spss := 20, 3
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			tempoError(w, http.StatusBadRequest, "invalid limit: must be a positive number")
			return
		}
		limit = min(n, 10000)
	}
	if v := q.Get("spss"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			tempoError(w, http.StatusBadRequest, "invalid spss: must be a non-negative number")
			return
		}
		if n > 100 {
			tempoError(w, http.StatusBadRequest, fmt.Sprintf("spans per span set exceeds 100. received %d", n))
			return
		}
		spss = n
		if spss == 0 {
			spss = 100 // 0 means all; bounded like Tempo's cap
		}
	}
	var minDur, maxDur time.Duration
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{{"minDuration", &minDur}, {"maxDuration", &maxDur}} {
		if v := q.Get(p.name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				tempoError(w, http.StatusBadRequest, fmt.Sprintf("invalid %s: %q is not a duration such as 1.5s", p.name, v))
				return
			}
			*p.dst = d
		}
	}
	if maxDur != 0 && minDur > maxDur {
		tempoError(w, http.StatusBadRequest, "invalid maxDuration: must be greater than minDuration")
		return
	}
	if tq := q.Get("q"); tq != "" && q.Get("tags") == "" {
		if wq, err := query.ParseQuery(tq); err == nil {
			if wq.IsMetrics() {
				tempoError(w, http.StatusBadRequest, "invalid TraceQL query: a metrics query; use /api/metrics/query_range")
				return
			}
			if _, simple := wq.Simple(); !simple {
				s.tempoStructuralSearch(w, r, b, project, wq, limit, spss, minDur, maxDur)
				return
			}
		}
	}
	f, err := tempoSearchFilter(r)
	if err != nil {
		tempoError(w, http.StatusBadRequest, err.Error())
		return
	}
	// minDuration and maxDuration bound the trace's duration: ask for more
	// traces than the limit and keep those in bounds.
	want := limit
	if minDur != 0 || maxDur != 0 {
		want = min(limit*5, 10000)
	}
	sums, res, err := b.SearchTraces(r.Context(), project, f, want)
	if err != nil {
		s.tempoFailed(w, err)
		return
	}
	out := tempoSearchResponse{Traces: []tempoTrace{}}
	for _, sum := range sums {
		d := time.Duration(sum.End - sum.Start)
		if d < minDur || maxDur != 0 && d > maxDur {
			continue
		}
		if len(out.Traces) == limit {
			break
		}
		spans, r2, err := b.Trace(r.Context(), project, sum.TraceID)
		if err != nil {
			s.tempoFailed(w, err)
			return
		}
		res.Warnings = append(res.Warnings, r2.Warnings...)
		out.Traces = append(out.Traces, tempoTraceOf(sum, spans, f, spss))
	}
	out.Metrics.InspectedTraces = uint32(len(sums))
	if len(res.Warnings) > 0 {
		s.log.Warn("tempo search skipped damaged parts", "warnings", res.Warnings)
	}
	writeJSON(w, http.StatusOK, out)
}

// tempoTraceOf is a trace's search metadata: the spans f matches (the
// first spss by start time) as its span set, and per-service counts.
func tempoTraceOf(sum store.TraceSummary, spans []model.Span, f *query.Filter, spss int) tempoTrace {
	t := tempoTrace{
		TraceID:           strings.TrimLeft(sum.TraceID.String(), "0"),
		RootServiceName:   sum.RootService,
		RootTraceName:     sum.RootName,
		StartTimeUnixNano: u64(sum.Start),
		DurationMs:        uint32(min((sum.End-sum.Start)/1e6, 1<<32-1)),
		ServiceStats:      map[string]tempoServiceStats{},
	}
	if t.TraceID == "" {
		t.TraceID = "0"
	}
	if t.RootServiceName == "" {
		t.RootServiceName = "<root span not yet received>"
	}
	// Trace-level conditions read this trace.
	f = query.WithTraces(f, func(model.TraceID) (query.TraceInfo, bool) { return query.TraceInfoOf(spans), len(spans) > 0 })
	var set tempoSpanSet
	for i := range spans {
		sp := &spans[i]
		st := t.ServiceStats[sp.Service]
		st.SpanCount++
		if sp.StatusCode == model.StatusError {
			st.ErrorCount++
		}
		t.ServiceStats[sp.Service] = st
		if f.Match(sp) {
			set.Matched++
			if len(set.Spans) < spss {
				set.Spans = append(set.Spans, tempoSpan{SpanID: sp.SpanID.String(), Name: sp.Name,
					StartTimeUnixNano: u64(sp.StartTimeUnixNano), DurationNanos: u64(sp.Duration())})
			}
		}
	}
	if set.Matched > 0 {
		t.SpanSet = &set
		t.SpanSets = []tempoSpanSet{set}
	}
	return t
}

// tempoIntrinsics are the intrinsic tag names listed (scope intrinsic):
// those of Tempo's list that Rastro's TraceQL accepts, so that Grafana's
// autocompletion offers nothing a search would refuse.
var tempoIntrinsics = []string{"duration", "name", "status", "statusMessage", "kind",
	"rootServiceName", "rootName", "traceDuration", "trace:rootService", "trace:rootName", "trace:duration",
	"event:name", "event:timeSinceStart", "link:spanID", "link:traceID", "instrumentation:name",
	"instrumentation:version", "trace:id", "span:id", "span:parentID", "span:status", "span:statusMessage",
	"span:duration", "span:name", "span:kind"}

// tempoAllIntrinsics are the intrinsic names whose values are not listed:
// an empty list, as Tempo answers for duration.
var tempoAllIntrinsics = map[string]bool{"rootName": true, "traceDuration": true,
	"event:name": true, "event:timeSinceStart": true, "link:spanID": true, "link:traceID": true,
	"instrumentation:name": true, "instrumentation:version": true, "trace:id": true, "span:id": true,
	"span:parentID": true, "trace:rootName": true, "trace:rootService": true, "trace:duration": true}

// tempoTagWindow is the window of the tag routes: start and end in Unix
// seconds, or the last 24 hours (the discovery routes' default).
func tempoTagWindow(r *http.Request) (uint64, uint64, error) {
	start, end, err := tempoWindow(r)
	if err != nil {
		return 0, 0, err
	}
	e := uint64(time.Now().UnixNano())
	if end > 0 {
		e = uint64(end+1) * 1e9
	}
	st := e - min(e, uint64(24*time.Hour))
	if start > 0 {
		st = uint64(start) * 1e9
	}
	return st, e, nil
}

// handleTempoTags serves /api/v2/search/tags (v2: tags per scope) and
// /api/search/tags (v1: unscoped names).
func (s *Server) handleTempoTags(v2 bool) queryHandler {
	return func(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
		scope := r.URL.Query().Get("scope")
		switch scope {
		case "", "resource", "span", "intrinsic", "event", "link", "instrumentation":
		default:
			tempoError(w, http.StatusBadRequest, "invalid scope: "+scope)
			return
		}
		limit := 0
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				tempoError(w, http.StatusBadRequest, "invalid limit: must be a positive number")
				return
			}
			limit = n
		}
		start, end, err := tempoTagWindow(r)
		if err != nil {
			tempoError(w, http.StatusBadRequest, err.Error())
			return
		}
		keys, _, err := b.AttributeKeys(r.Context(), project, start, end)
		if err != nil {
			s.tempoFailed(w, err)
			return
		}
		byScope := map[string][]string{}
		for _, k := range keys {
			sc, name, _ := strings.Cut(k.Name, ".")
			if scope == "" || scope == sc {
				byScope[sc] = append(byScope[sc], name)
			}
		}
		if scope == "" || scope == "intrinsic" {
			byScope["intrinsic"] = slices.Clone(tempoIntrinsics)
		}
		capped := func(names []string) []string {
			sort.Strings(names)
			if limit > 0 && len(names) > limit {
				names = names[:limit]
			}
			return names
		}
		if !v2 {
			// v1 lists span and resource names together; intrinsics only
			// when asked for.
			var names []string
			for sc, ns := range byScope {
				if sc != "intrinsic" || scope == "intrinsic" {
					names = append(names, ns...)
				}
			}
			slices.Sort(names)
			writeJSON(w, http.StatusOK, map[string]any{"tagNames": capped(slices.Compact(names))})
			return
		}
		type scoped struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		}
		out := []scoped{}
		for _, sc := range []string{"resource", "span", "intrinsic"} {
			if ns, ok := byScope[sc]; ok {
				out = append(out, scoped{sc, capped(ns)})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"scopes": out, "metrics": struct{}{}})
	}
}

// tempoTagValue is one typed value (tempopb TagValue).
type tempoTagValue struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// keywords are the values of the enum intrinsics, typed keyword so that
// Grafana inserts them unquoted.
var tempoKeywords = map[string][]string{
	"status": {"error", "ok", "unset"},
	"kind":   {"client", "server", "producer", "consumer", "internal", "unspecified"},
}

// handleTempoTagValues serves /api/v2/search/tag/{tag}/values (typed values)
// and /api/search/tag/{tag}/values (strings).
func (s *Server) handleTempoTagValues(v2 bool) queryHandler {
	return func(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
		tag := r.PathValue("tag")
		limit := 1000
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				tempoError(w, http.StatusBadRequest, "invalid limit: must be a positive number")
				return
			}
			if n > 0 {
				limit = min(n, 10000)
			}
		}
		start, end, err := tempoTagWindow(r)
		if err != nil {
			tempoError(w, http.StatusBadRequest, err.Error())
			return
		}
		values, err := s.tempoValues(r, b, project, tag, start, end, limit)
		if err != nil {
			s.tempoFailed(w, err) // an invalid tag name is a 400
			return
		}
		if v2 {
			writeJSON(w, http.StatusOK, map[string]any{"tagValues": values, "metrics": struct{}{}})
			return
		}
		names := make([]string, len(values))
		for i, v := range values {
			names[i] = v.Value
		}
		writeJSON(w, http.StatusOK, map[string]any{"tagValues": names})
	}
}

// tempoValues lists the values of a tag: an intrinsic or a scoped
// (resource.x, span.x) or unscoped (.x, or x) attribute.
func (s *Server) tempoValues(r *http.Request, b store.Backend, project, tag string, start, end uint64, limit int) ([]tempoTagValue, error) {
	intrinsic := strings.TrimPrefix(strings.TrimPrefix(tag, "span:"), "trace:")
	out := []tempoTagValue{}
	if kw, ok := tempoKeywords[intrinsic]; ok {
		for _, k := range kw {
			out = append(out, tempoTagValue{"keyword", k})
		}
		return out, nil
	}
	switch {
	case tag == "rootServiceName" || tag == "trace:rootService":
		svcs, _, err := b.Services(r.Context(), project, start, end)
		if err != nil {
			return nil, err
		}
		for _, n := range svcs {
			if len(out) < limit {
				out = append(out, tempoTagValue{store.TypeString, n.Name})
			}
		}
		return out, nil
	case intrinsic == "name":
		ops, _, err := b.Operations(r.Context(), project, "", start, end) // every service's span names
		if err != nil {
			return nil, err
		}
		for _, n := range mergeKinds(ops) {
			if n.Name != "" && len(out) < limit {
				out = append(out, tempoTagValue{store.TypeString, n.Name})
			}
		}
		return out, nil
	case intrinsic == "duration" || intrinsic == "statusMessage" || tempoAllIntrinsics[tag]:
		return out, nil
	}
	key := tag
	switch {
	case strings.HasPrefix(tag, "resource.") || strings.HasPrefix(tag, "span."):
	case strings.HasPrefix(tag, "."):
		key = tag[1:]
	case strings.ContainsAny(tag, ":{} ") || tag == "":
		return nil, fmt.Errorf("please provide a valid tagName: %q is not a TraceQL attribute or intrinsic: %w", tag, store.ErrBadRequest)
	}
	vals, _, err := b.AttributeValues(r.Context(), project, key, start, end, limit)
	if err != nil {
		return nil, err
	}
	for _, v := range vals {
		if v.Name == "" {
			continue
		}
		typ := v.Type
		if typ == "" {
			typ = store.TypeString
		}
		out = append(out, tempoTagValue{typ, v.Name})
	}
	return out, nil
}
