package server

// The Jaeger query API, as the Jaeger UI and Grafana's Jaeger data source
// call it: the v1 JSON routes (envelope {data, total, limit, offset,
// errors}; microsecond times; the UI trace model) and api_v3's JSON gateway
// (OTLP/JSON traces, trace summaries). Shapes follow jaegertracing/jaeger
// cmd/jaeger/internal/extension/jaegerquery (v2.20.0 for the v1 routes that
// later releases dropped but Grafana still calls); see docs/grafana.md.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// jaegerRoutes are the Jaeger query API's routes. GET /api/traces/{id} is
// shared with Tempo's v1 trace route: it answers Tempo's protobuf when the
// request asks for application/protobuf, Jaeger's JSON otherwise.
func (s *Server) jaegerRoutes() []route {
	q := func(h queryHandler) http.HandlerFunc { return s.withBackendErrors(h, jaegerFail) }
	q3 := func(h queryHandler) http.HandlerFunc { return s.withBackendErrors(h, jaeger3Fail) }
	return []route{
		{method: "GET", pattern: "/api/services", access: accessRead, name: "jaeger_services", handler: q(s.handleJaegerServices)},
		{method: "GET", pattern: "/api/services/{service}/operations", access: accessRead, name: "jaeger_service_operations", handler: q(s.handleJaegerServiceOperations)},
		{method: "GET", pattern: "/api/operations", access: accessRead, name: "jaeger_operations", handler: q(s.handleJaegerOperations(false))},
		{method: "GET", pattern: "/api/traces", access: accessRead, name: "jaeger_search", handler: q(s.handleJaegerSearch)},
		{method: "GET", pattern: "/api/traces/{trace_id}", access: accessRead, name: "jaeger_trace", handler: q(s.handleTraceByIDShared)},
		{method: "GET", pattern: "/api/dependencies", access: accessRead, name: "jaeger_dependencies", handler: q(s.handleJaegerDependencies)},
		{method: "GET", pattern: "/api/v3/services", access: accessRead, name: "jaeger3_services", handler: q3(s.handleJaeger3Services)},
		{method: "GET", pattern: "/api/v3/operations", access: accessRead, name: "jaeger3_operations", handler: q3(s.handleJaegerOperations(true))},
		{method: "GET", pattern: "/api/v3/traces/{trace_id}", access: accessRead, name: "jaeger3_trace", handler: q3(s.handleJaeger3Trace)},
		{method: "GET", pattern: "/api/v3/traces", access: accessRead, name: "jaeger3_search", handler: q3(s.handleJaeger3Search)},
		{method: "GET", pattern: "/api/v3/trace-summaries", access: accessRead, name: "jaeger3_summaries", handler: q3(s.handleJaeger3Summaries)},
	}
}

// jaegerLookback is the window of the service and operation lists.
const jaegerLookback = 7 * 24 * time.Hour

// jaegerEnvelope is the v1 answer: keys in Jaeger's order.
type jaegerEnvelope struct {
	Data   any           `json:"data"`
	Total  int           `json:"total"`
	Limit  int           `json:"limit"`
	Offset int           `json:"offset"`
	Errors []jaegerError `json:"errors"`
}

type jaegerError struct {
	Code    int    `json:"code,omitempty"`
	Msg     string `json:"msg"`
	TraceID string `json:"traceID,omitempty"`
}

func jaegerOK(w http.ResponseWriter, data any, total int) {
	writeJSON(w, http.StatusOK, jaegerEnvelope{Data: data, Total: total})
}

// jaegerFail writes a v1 error as Jaeger does (http.Error: the envelope as
// text/plain).
func jaegerFail(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(jaegerEnvelope{Errors: []jaegerError{{Code: code, Msg: msg}}})
	http.Error(w, string(b), code)
}

// jaegerQueryFailed answers a failed store query on a v1 route.
func (s *Server) jaegerQueryFailed(w http.ResponseWriter, err error) {
	s.failedWith(w, err, jaegerFail)
}

// jaegerTraceByID reads the trace of the request's {trace_id}; ok is false
// when an error (notFound for an unknown trace) was written with fail.
func (s *Server) jaegerTraceByID(w http.ResponseWriter, r *http.Request, b store.Backend, project, notFound string,
	fail func(w http.ResponseWriter, code int, msg string)) ([]model.Span, bool) {
	id, err := parseJaegerTraceID(r.PathValue("trace_id"))
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return nil, false
	}
	spans, _, err := b.Trace(r.Context(), project, id)
	if err != nil {
		s.failedWith(w, err, fail)
		return nil, false
	}
	if len(spans) == 0 {
		fail(w, http.StatusNotFound, notFound)
		return nil, false
	}
	return spans, true
}

// jaegerTraceID formats a trace id as Jaeger does: 16 hex digits when the
// high 64 bits are zero, 32 otherwise.
func jaegerTraceID(id model.TraceID) string {
	s := id.String()
	if strings.HasPrefix(s, "0000000000000000") {
		return s[16:]
	}
	return s
}

// parseJaegerTraceID reads hex of up to 32 digits (left-padded) or the
// base64 of 8 or 16 bytes.
func parseJaegerTraceID(s string) (model.TraceID, error) {
	var id model.TraceID
	if s != "" && len(s) <= 32 {
		if _, err := hex.DecodeString(strings.Repeat("0", len(s)%2) + s); err == nil {
			padded := strings.Repeat("0", 32-len(s)) + s
			hex.Decode(id[:], []byte(padded))
			return id, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && (len(b) == 8 || len(b) == 16) {
			copy(id[16-len(b):], b)
			return id, nil
		}
	}
	return id, fmt.Errorf("cannot parse traceID param: %q is neither hex of up to 32 digits nor base64 of 8 or 16 bytes", s)
}

func (s *Server) handleJaegerServices(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	names, err := s.jaegerServiceNames(r, b, project)
	if err != nil {
		s.jaegerQueryFailed(w, err)
		return
	}
	jaegerOK(w, names, len(names))
}

func (s *Server) jaegerServiceNames(r *http.Request, b store.Backend, project string) ([]string, error) {
	end := uint64(time.Now().UnixNano())
	svcs, _, err := b.Services(r.Context(), project, end-uint64(jaegerLookback), end)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(svcs))
	for _, sv := range svcs {
		names = append(names, sv.Name)
	}
	return names, nil
}

func (s *Server) handleJaegerServiceOperations(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	end := uint64(time.Now().UnixNano())
	ops, _, err := b.Operations(r.Context(), project, r.PathValue("service"), end-uint64(jaegerLookback), end)
	if err != nil {
		s.jaegerQueryFailed(w, err)
		return
	}
	var names []string // null when none, as Jaeger's nil slice
	for _, op := range mergeKinds(ops) {
		names = append(names, op.Name)
	}
	jaegerOK(w, names, len(names))
}

// jaegerOperation is an operation with the kind of its spans.
type jaegerOperation struct {
	Name     string `json:"name"`
	SpanKind string `json:"spanKind"`
}

// jaegerOperations lists the operations of a service, one per (name,
// kind), as Jaeger does ("" for an unspecified kind); spanKind, when set,
// keeps only that kind.
func (s *Server) jaegerOperations(r *http.Request, b store.Backend, project, service, spanKind string) ([]jaegerOperation, error) {
	end := uint64(time.Now().UnixNano())
	ops, _, err := b.Operations(r.Context(), project, service, end-uint64(jaegerLookback), end)
	if err != nil {
		return nil, err
	}
	out := []jaegerOperation{}
	for _, op := range ops {
		kind := op.Type
		if kind == "unspecified" {
			kind = ""
		}
		if spanKind == "" || spanKind == kind {
			out = append(out, jaegerOperation{op.Name, kind})
		}
	}
	return out, nil
}

// jaegerKinds are Jaeger's span kind names.
var jaegerKinds = map[model.SpanKind]string{model.KindServer: "server", model.KindClient: "client",
	model.KindProducer: "producer", model.KindConsumer: "consumer", model.KindInternal: "internal"}

// handleJaegerOperations serves GET /api/operations (v1 envelope) and
// GET /api/v3/operations ({"operations": [...]}; an unknown kind reads
// "internal").
func (s *Server) handleJaegerOperations(v3 bool) queryHandler {
	return func(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
		q := r.URL.Query()
		service := firstParam(q, "service", "query.service_name", "query.serviceName")
		if service == "" {
			if v3 {
				jaeger3Fail(w, http.StatusBadRequest, "parameter 'service' is required")
			} else {
				jaegerFail(w, http.StatusBadRequest, "parameter 'service' is required")
			}
			return
		}
		ops, err := s.jaegerOperations(r, b, project, service, firstParam(q, "spanKind", "span_kind"))
		if err != nil {
			if v3 {
				s.jaeger3QueryFailed(w, err)
			} else {
				s.jaegerQueryFailed(w, err)
			}
			return
		}
		if !v3 {
			jaegerOK(w, ops, len(ops))
			return
		}
		for i := range ops {
			if ops[i].SpanKind == "" {
				ops[i].SpanKind = "internal"
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"operations": ops})
	}
}

// firstParam is the first non-empty of the named parameters (Jaeger takes
// camelCase and snake_case spellings).
func firstParam(q url.Values, names ...string) string {
	for _, n := range names {
		if v := q.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// attributeConds turns tag filters (key -> value, both strings) into a
// spanset filter; "error=true" is status = error, and a value that reads as
// a number or boolean also matches one.
func attributeConds(tags map[string]string) (query.Expr, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var conds []string
	for _, k := range keys {
		v := tags[k]
		if k == "error" && v == "true" {
			conds = append(conds, "status = error")
			continue
		}
		key := "." + strconv.Quote(k) // any key, spaces and quotes included
		alts := []string{key + " = " + strconv.Quote(v)}
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			alts = append(alts, key+" = "+strconv.FormatFloat(f, 'g', -1, 64))
		} else if v == "true" || v == "false" {
			alts = append(alts, key+" = "+v)
		}
		conds = append(conds, "("+strings.Join(alts, " || ")+")")
	}
	return query.ParseTraceQL("{ " + strings.Join(conds, " && ") + " }")
}

// jaegerSearch is a parsed v1 or v3 search.
type jaegerSearch struct {
	f     query.Filter
	limit int
}

// parseJaegerSearchV1 reads GET /api/traces's parameters (jaeger v2.20.0
// query_parser.go parseTraceQueryParams).
func parseJaegerSearchV1(q url.Values, now time.Time) (*jaegerSearch, error) {
	js := &jaegerSearch{limit: 100}
	js.f.Service, js.f.Name = q.Get("service"), q.Get("operation")
	if js.f.Service == "" {
		return nil, fmt.Errorf("parameter 'service' is required")
	}
	micros := func(name string, def time.Time) (uint64, error) {
		v := q.Get(name)
		if v == "" {
			return uint64(def.UnixNano()), nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/1000 {
			return 0, fmt.Errorf("unable to parse param '%s': %q is not unix microseconds", name, v)
		}
		return uint64(n) * 1000, nil
	}
	var err error
	if js.f.End, err = micros("end", now); err != nil {
		return nil, err
	}
	if js.f.Start, err = micros("start", now.Add(-48*time.Hour)); err != nil {
		return nil, err
	}
	js.f.End++ // inclusive
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("unable to parse param 'limit': %q is not a whole number", v)
		}
		if n > 0 {
			js.limit = min(n, 10000)
		}
	}
	if err := js.durations(q.Get("minDuration"), q.Get("maxDuration"), "minDuration", "maxDuration"); err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for _, t := range q["tags"] {
		m := map[string]string{}
		if err := json.Unmarshal([]byte(t), &m); err != nil {
			return nil, fmt.Errorf("malformed 'tags' parameter, cannot unmarshal JSON: %v", err)
		}
		for k, v := range m {
			tags[k] = v
		}
	}
	for _, t := range q["tag"] {
		k, v, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("malformed 'tag' parameter %q: want key:value", t)
		}
		tags[k] = v
	}
	if js.f.Expr, err = attributeConds(tags); err != nil {
		return nil, fmt.Errorf("malformed tags: %v", err)
	}
	return js, nil
}

func (js *jaegerSearch) durations(minV, maxV, minName, maxName string) error {
	for _, d := range []struct {
		v, name string
		dst     *uint64
	}{{minV, minName, &js.f.MinDuration}, {maxV, maxName, &js.f.MaxDuration}} {
		if d.v == "" {
			continue
		}
		dur, err := time.ParseDuration(d.v)
		if err != nil || dur < 0 {
			return fmt.Errorf("unable to parse param '%s': %q is not a duration such as 1.2ms", d.name, d.v)
		}
		*d.dst = uint64(dur)
	}
	if js.f.MaxDuration != 0 && js.f.MaxDuration < js.f.MinDuration {
		return fmt.Errorf("'%s' should be greater than '%s'", maxName, minName)
	}
	return nil
}

// jaegerTraces runs a search and reads every trace it finds.
func (s *Server) jaegerTraces(r *http.Request, b store.Backend, project string, js *jaegerSearch) ([][]model.Span, error) {
	sums, _, err := b.SearchTraces(r.Context(), project, &js.f, js.limit)
	if err != nil {
		return nil, err
	}
	out := make([][]model.Span, 0, len(sums))
	for _, sum := range sums {
		spans, _, err := b.Trace(r.Context(), project, sum.TraceID)
		if err != nil {
			return nil, err
		}
		if len(spans) > 0 {
			out = append(out, spans)
		}
	}
	return out, nil
}

// handleJaegerSearch serves GET /api/traces (v1 search, or traceID=...).
func (s *Server) handleJaegerSearch(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	q := r.URL.Query()
	if ids := q["traceID"]; len(ids) > 0 {
		data := []jaegerTrace{}
		var errs []jaegerError
		for _, raw := range ids {
			id, err := parseJaegerTraceID(raw)
			if err != nil {
				jaegerFail(w, http.StatusBadRequest, err.Error())
				return
			}
			spans, _, err := b.Trace(r.Context(), project, id)
			if err != nil {
				s.jaegerQueryFailed(w, err)
				return
			}
			if len(spans) == 0 {
				errs = append(errs, jaegerError{Msg: "trace not found", TraceID: jaegerTraceID(id)})
				continue
			}
			data = append(data, uiTrace(spans))
		}
		writeJSON(w, http.StatusOK, jaegerEnvelope{Data: data, Errors: errs})
		return
	}
	js, err := parseJaegerSearchV1(q, time.Now())
	if err != nil {
		jaegerFail(w, http.StatusBadRequest, err.Error())
		return
	}
	traces, err := s.jaegerTraces(r, b, project, js)
	if err != nil {
		s.jaegerQueryFailed(w, err)
		return
	}
	data := make([]jaegerTrace, 0, len(traces))
	for _, t := range traces {
		data = append(data, uiTrace(t))
	}
	jaegerOK(w, data, 0)
}

// handleTraceByIDShared serves GET /api/traces/{id}: Tempo's v1 trace when
// the request asks for protobuf (Grafana's Tempo data source), Jaeger's
// otherwise.
func (s *Server) handleTraceByIDShared(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	if wantsProtobuf(r) {
		s.handleTempoTraceV1(w, r, b, project)
		return
	}
	if spans, ok := s.jaegerTraceByID(w, r, b, project, "trace not found", jaegerFail); ok {
		jaegerOK(w, []jaegerTrace{uiTrace(spans)}, 0)
	}
}

// The Jaeger UI's trace model (jaeger internal/uimodel/model.go).
type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
	Warnings  []string                 `json:"warnings"`
}

type jaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	Flags         uint32      `json:"flags,omitempty"`
	OperationName string      `json:"operationName"`
	References    []jaegerRef `json:"references"`
	StartTime     uint64      `json:"startTime"`
	Duration      uint64      `json:"duration"`
	Tags          []jaegerKV  `json:"tags"`
	Logs          []jaegerLog `json:"logs"`
	ProcessID     string      `json:"processID"`
	Warnings      []string    `json:"warnings"`
}

type jaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type jaegerLog struct {
	Timestamp uint64     `json:"timestamp"`
	Fields    []jaegerKV `json:"fields"`
}

type jaegerProcess struct {
	ServiceName string     `json:"serviceName"`
	Tags        []jaegerKV `json:"tags"`
}

// jaegerKVOf converts an attribute as Jaeger's OTLP translator does: typed
// scalars; arrays and maps as JSON strings; an int64 beyond 2^53 as a
// decimal string.
func jaegerKVOf(key string, v *model.Value) jaegerKV {
	switch v.Type {
	case model.ValueBool:
		return jaegerKV{key, "bool", v.Bool()}
	case model.ValueInt:
		n := v.Int
		if n > 1<<53-1 || n < -(1<<53-1) {
			return jaegerKV{key, "int64", strconv.FormatInt(n, 10)}
		}
		return jaegerKV{key, "int64", n}
	case model.ValueDouble:
		f, _ := v.AsFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			// encoding/json cannot write them; one span must not fail a search.
			return jaegerKV{key, "float64", strconv.FormatFloat(f, 'g', -1, 64)}
		}
		return jaegerKV{key, "float64", f}
	case model.ValueBytes:
		return jaegerKV{key, "binary", base64.StdEncoding.EncodeToString(v.Bytes())}
	}
	return jaegerKV{key, "string", v.AsString()}
}

func jaegerKVs(kvs []model.KeyValue, skip string) []jaegerKV {
	out := make([]jaegerKV, 0, len(kvs))
	for i := range kvs {
		if kvs[i].Key != skip {
			out = append(out, jaegerKVOf(kvs[i].Key, &kvs[i].Value))
		}
	}
	return out
}

// uiTrace converts a trace's spans (ordered by start) to the UI model, as
// Jaeger v2 converts OTLP (opentelemetry-collector-contrib
// pkg/translator/jaeger): parent -> CHILD_OF, links -> FOLLOWS_FROM, kind,
// status and scope -> tags, events -> logs, resources -> processes.
func uiTrace(spans []model.Span) jaegerTrace {
	t := jaegerTrace{TraceID: jaegerTraceID(spans[0].TraceID), Spans: make([]jaegerSpan, 0, len(spans)),
		Processes: map[string]jaegerProcess{}}
	procKeys := map[string]string{} // process fingerprint -> p1, p2, ...
	for i := range spans {
		sp := &spans[i]
		js := jaegerSpan{TraceID: jaegerTraceID(sp.TraceID), SpanID: sp.SpanID.String(), OperationName: sp.Name,
			References: []jaegerRef{}, StartTime: sp.StartTimeUnixNano / 1000, Duration: sp.Duration() / 1000,
			Flags: sp.Flags & 0xff}
		if !sp.ParentSpanID.IsZero() {
			js.References = append(js.References, jaegerRef{"CHILD_OF", js.TraceID, sp.ParentSpanID.String()})
		}
		for _, l := range sp.Links {
			ref := "FOLLOWS_FROM"
			for _, a := range l.Attributes {
				if a.Key == "opentracing.ref_type" && a.Value.AsString() == "child_of" {
					ref = "CHILD_OF"
				}
			}
			js.References = append(js.References, jaegerRef{ref, jaegerTraceID(l.TraceID), l.SpanID.String()})
		}
		js.Tags = jaegerKVs(sp.Attributes, "")
		if k := jaegerKinds[sp.Kind]; k != "" {
			js.Tags = append(js.Tags, jaegerKV{"span.kind", "string", k})
		}
		switch sp.StatusCode {
		case model.StatusError:
			js.Tags = append(js.Tags, jaegerKV{"otel.status_code", "string", "ERROR"}, jaegerKV{"error", "bool", true})
		case model.StatusOK:
			js.Tags = append(js.Tags, jaegerKV{"otel.status_code", "string", "OK"})
		}
		if sp.StatusMessage != "" {
			js.Tags = append(js.Tags, jaegerKV{"otel.status_description", "string", sp.StatusMessage})
		}
		if sc := sp.Scope; sc != nil {
			if sc.Name != "" {
				js.Tags = append(js.Tags, jaegerKV{"otel.scope.name", "string", sc.Name})
			}
			if sc.Version != "" {
				js.Tags = append(js.Tags, jaegerKV{"otel.scope.version", "string", sc.Version})
			}
		}
		if sp.TraceState != "" {
			js.Tags = append(js.Tags, jaegerKV{"w3c.tracestate", "string", sp.TraceState})
		}
		js.Logs = make([]jaegerLog, 0, len(sp.Events))
		for _, e := range sp.Events {
			fields := append([]jaegerKV{{"event", "string", e.Name}}, jaegerKVs(e.Attributes, "")...)
			js.Logs = append(js.Logs, jaegerLog{Timestamp: e.TimeUnixNano / 1000, Fields: fields})
		}
		var resAttrs []model.KeyValue
		if sp.Resource != nil {
			resAttrs = sp.Resource.Attributes
		}
		proc := jaegerProcess{ServiceName: sp.Service, Tags: jaegerKVs(resAttrs, "service.name")}
		fp, _ := json.Marshal(proc)
		pid, ok := procKeys[string(fp)]
		if !ok {
			pid = "p" + strconv.Itoa(len(procKeys)+1)
			procKeys[string(fp)] = pid
			t.Processes[pid] = proc
		}
		js.ProcessID = pid
		t.Spans = append(t.Spans, js)
	}
	return t
}

// handleJaegerDependencies serves GET /api/dependencies: the calls between
// services (a span whose parent belongs to another service), in the window
// endTs - lookback .. endTs (milliseconds).
func (s *Server) handleJaegerDependencies(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	q := r.URL.Query()
	end := time.Now()
	if v := q.Get("endTs"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			jaegerFail(w, http.StatusBadRequest, fmt.Sprintf("unable to parse param 'endTs': %q is not unix milliseconds", v))
			return
		}
		end = time.UnixMilli(n)
	}
	lookback := 24 * time.Hour
	if v := q.Get("lookback"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			jaegerFail(w, http.StatusBadRequest, fmt.Sprintf("unable to parse param 'lookback': %q is not milliseconds", v))
			return
		}
		lookback = time.Duration(n) * time.Millisecond
	}
	dr, ok := b.(store.DependencyReader)
	if !ok {
		jaegerFail(w, http.StatusNotImplemented, "this storage backend does not compute service dependencies")
		return
	}
	deps, res, err := dr.Dependencies(r.Context(), project, uint64(end.Add(-lookback).UnixNano()), uint64(end.UnixNano())+1)
	if err != nil {
		s.jaegerQueryFailed(w, err)
		return
	}
	if len(res.Warnings) > 0 {
		s.log.Warn("dependencies are partial", "warnings", res.Warnings)
	}
	type link struct {
		Parent    string `json:"parent"`
		Child     string `json:"child"`
		CallCount int64  `json:"callCount"`
	}
	out := []link{}
	svc := q.Get("service")
	for _, d := range deps {
		if svc == "" || d.Parent == svc || d.Child == svc {
			out = append(out, link{d.Parent, d.Child, d.Calls})
		}
	}
	jaegerOK(w, out, 0)
}

// api_v3.

// jaeger3Fail writes api_v3's error shape (http.Error: text/plain).
func jaeger3Fail(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"httpCode": code, "message": msg}})
	http.Error(w, string(b), code)
}

func (s *Server) jaeger3QueryFailed(w http.ResponseWriter, err error) {
	s.failedWith(w, err, jaeger3Fail)
}

func (s *Server) handleJaeger3Services(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	names, err := s.jaegerServiceNames(r, b, project)
	if err != nil {
		s.jaeger3QueryFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"services": names})
}

// writeOTLPResult writes api_v3's {"result": <OTLP/JSON>} (hex ids, integer
// enums, as the collector's JSON marshaler writes them).
func writeOTLPResult(w http.ResponseWriter, spans []model.Span) {
	var buf bytes.Buffer
	buf.WriteString(`{"result":`)
	buf.Write(otlp.EncodeJSON(spans))
	buf.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Write(buf.Bytes())
}

func (s *Server) handleJaeger3Trace(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	if spans, ok := s.jaegerTraceByID(w, r, b, project, "No traces found", jaeger3Fail); ok {
		writeOTLPResult(w, spans)
	}
}

// parseJaeger3Search reads api_v3's query.* parameters (camelCase, with the
// snake_case aliases): service, operation, the required start window
// (RFC 3339), the search depth (default 100), durations and attributes.
func parseJaeger3Search(q url.Values) (*jaegerSearch, error) {
	js := &jaegerSearch{limit: 100}
	js.f.Service = firstParam(q, "query.serviceName", "query.service_name")
	js.f.Name = firstParam(q, "query.operationName", "query.operation_name")
	minS := firstParam(q, "query.startTimeMin", "query.start_time_min")
	maxS := firstParam(q, "query.startTimeMax", "query.start_time_max")
	if minS == "" || maxS == "" {
		return nil, fmt.Errorf("query.startTimeMin and query.startTimeMax are required")
	}
	minT, err := time.Parse(time.RFC3339Nano, minS)
	if err != nil {
		return nil, fmt.Errorf("malformed parameter query.startTimeMin: %v", err)
	}
	maxT, err := time.Parse(time.RFC3339Nano, maxS)
	if err != nil {
		return nil, fmt.Errorf("malformed parameter query.startTimeMax: %v", err)
	}
	if !minT.Before(maxT) {
		return nil, fmt.Errorf("query.startTimeMin must be before query.startTimeMax")
	}
	js.f.Start, js.f.End = uint64(max(minT.UnixNano(), 1)), uint64(maxT.UnixNano())+1
	if v := firstParam(q, "query.searchDepth", "query.search_depth", "query.numTraces", "query.num_traces"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("malformed parameter query.searchDepth: %q is not a whole number", v)
		}
		if n > 0 {
			js.limit = min(n, 10000)
		}
	}
	if err := js.durations(firstParam(q, "query.durationMin", "query.duration_min"), firstParam(q, "query.durationMax", "query.duration_max"),
		"query.durationMin", "query.durationMax"); err != nil {
		return nil, fmt.Errorf("malformed parameter %v", err)
	}
	if v := q.Get("query.attributes"); v != "" {
		tags := map[string]string{}
		if err := json.Unmarshal([]byte(v), &tags); err != nil {
			return nil, fmt.Errorf("malformed parameter query.attributes: %v", err)
		}
		if js.f.Expr, err = attributeConds(tags); err != nil {
			return nil, fmt.Errorf("malformed parameter query.attributes: %v", err)
		}
	}
	return js, nil
}

func (s *Server) handleJaeger3Search(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	js, err := parseJaeger3Search(r.URL.Query())
	if err != nil {
		jaeger3Fail(w, http.StatusBadRequest, err.Error())
		return
	}
	traces, err := s.jaegerTraces(r, b, project, js)
	if err != nil {
		s.jaeger3QueryFailed(w, err)
		return
	}
	if len(traces) == 0 {
		jaeger3Fail(w, http.StatusNotFound, "No traces found")
		return
	}
	var all []model.Span
	for _, t := range traces {
		all = append(all, t...)
	}
	writeOTLPResult(w, all)
}

// traceSummary is api_v3's TraceSummary (zero counts omitted, as jsonpb).
type traceSummary struct {
	TraceID              string           `json:"traceId"`
	RootServiceName      string           `json:"rootServiceName,omitempty"`
	RootOperationName    string           `json:"rootOperationName,omitempty"`
	MinStartTimeUnixNano string           `json:"minStartTimeUnixNano,omitempty"`
	MaxEndTimeUnixNano   string           `json:"maxEndTimeUnixNano,omitempty"`
	SpanCount            int              `json:"spanCount,omitempty"`
	ErrorSpanCount       int              `json:"errorSpanCount,omitempty"`
	OrphanSpanCount      int              `json:"orphanSpanCount,omitempty"`
	Services             []serviceSummary `json:"services"`
}

type serviceSummary struct {
	Name           string `json:"name"`
	SpanCount      int    `json:"spanCount,omitempty"`
	ErrorSpanCount int    `json:"errorSpanCount,omitempty"`
}

// summarizeTrace is a trace's summary: the root is the earliest span
// without a parent; orphans are spans whose parent is not in the trace.
func summarizeTrace(spans []model.Span) traceSummary {
	ts := traceSummary{TraceID: spans[0].TraceID.String(), SpanCount: len(spans)}
	ids := make(map[model.SpanID]bool, len(spans))
	for i := range spans {
		ids[spans[i].SpanID] = true
	}
	var minStart, maxEnd uint64
	bySvc := map[string]*serviceSummary{}
	rootStart := uint64(0)
	for i := range spans {
		sp := &spans[i]
		if i == 0 || sp.StartTimeUnixNano < minStart {
			minStart = sp.StartTimeUnixNano
		}
		maxEnd = max(maxEnd, sp.EndTimeUnixNano)
		ss := bySvc[sp.Service]
		if ss == nil {
			ss = &serviceSummary{Name: sp.Service}
			bySvc[sp.Service] = ss
		}
		ss.SpanCount++
		if sp.StatusCode == model.StatusError {
			ts.ErrorSpanCount++
			ss.ErrorSpanCount++
		}
		if sp.ParentSpanID.IsZero() {
			if ts.RootOperationName == "" && ts.RootServiceName == "" || sp.StartTimeUnixNano < rootStart {
				ts.RootServiceName, ts.RootOperationName, rootStart = sp.Service, sp.Name, sp.StartTimeUnixNano
			}
		} else if !ids[sp.ParentSpanID] {
			ts.OrphanSpanCount++
		}
	}
	ts.MinStartTimeUnixNano, ts.MaxEndTimeUnixNano = u64(minStart), u64(maxEnd)
	ts.Services = []serviceSummary{}
	for _, ss := range bySvc {
		ts.Services = append(ts.Services, *ss)
	}
	slices.SortFunc(ts.Services, func(a, b serviceSummary) int { return strings.Compare(a.Name, b.Name) })
	return ts
}

func (s *Server) handleJaeger3Summaries(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	js, err := parseJaeger3Search(r.URL.Query())
	if err != nil {
		jaeger3Fail(w, http.StatusBadRequest, err.Error())
		return
	}
	traces, err := s.jaegerTraces(r, b, project, js)
	if err != nil {
		s.jaeger3QueryFailed(w, err)
		return
	}
	out := make([]traceSummary, 0, len(traces))
	for _, t := range traces {
		out = append(out, summarizeTrace(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"summaries": out})
}
