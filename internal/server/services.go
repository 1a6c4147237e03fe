package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// serviceRoutes serve the service pages: RED, latency heatmap, error groups,
// the dependency graph, and journeys (one key's traces over days).
func (s *Server) serviceRoutes() []route {
	q := s.withBackend
	return []route{
		{method: "GET", pattern: "/api/v1/red", access: accessRead, name: "red", listing: &listing{"series", "spans"}, handler: q(s.handleRED), documented: true},
		{method: "GET", pattern: "/api/v1/heatmap", access: accessRead, name: "heatmap", listing: &listing{"cells", "spans"}, handler: q(s.handleHeatmap), documented: true},
		{method: "GET", pattern: "/api/v1/errors", access: accessRead, name: "errors", listing: &listing{"groups", "errors"}, handler: q(s.handleErrors), documented: true},
		{method: "GET", pattern: "/api/v1/dependencies", access: accessRead, name: "dependencies", listing: &listing{"edges", "dependencies"}, handler: q(s.handleDependencies), documented: true},
		{method: "GET", pattern: "/api/v1/journey", access: accessRead, name: "journey", listing: &listing{"traces", "traces"}, handler: q(s.handleJourney), documented: true},
	}
}

// closeWindow returns a window's end, now when it is open (end 0), or
// answers 400 when the window is empty.
func closeWindow(w http.ResponseWriter, start, end uint64) (uint64, bool) {
	if end == 0 {
		end = uint64(time.Now().UnixNano())
	}
	if start >= end {
		writeError(w, http.StatusBadRequest, "the window is empty: since must be before until (or before now)")
		return 0, false
	}
	return end, true
}

// maxOpsBuckets bounds the time buckets of RED and the heatmap.
const maxOpsBuckets = 10000

// opsQuery reads the parameters shared by the service routes: since and
// until (default: the last 24 hours), service, name, step (a whole number of
// minutes; default: the smallest nice step giving at most 120 buckets) and,
// for RED, group (service or operation).
func opsQuery(w http.ResponseWriter, r *http.Request) (*store.OpsQuery, bool) {
	start, end, ok := window(w, r)
	if !ok {
		return nil, false
	}
	v := r.URL.Query()
	q := &store.OpsQuery{Start: start, End: end, Service: v.Get("service"), Name: v.Get("name")}
	switch g := v.Get("group"); g {
	case "", "service":
	case "operation":
		q.ByOperation = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("group: %q is not one of service, operation", g))
		return nil, false
	}
	until, ok := closeWindow(w, start, end)
	if !ok {
		return nil, false
	}
	span := time.Duration(until - start)
	q.Step = autoStep(span)
	if st := v.Get("step"); st != "" {
		d, err := time.ParseDuration(st)
		if err != nil || d < time.Minute || d%time.Minute != 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("step: %q is not a whole number of minutes of at least 1m (e.g. 1m, 15m, 1h)", st))
			return nil, false
		}
		if span/d > maxOpsBuckets {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("step: %s gives more than %d buckets over the window; use a larger step", st, maxOpsBuckets))
			return nil, false
		}
		q.Step = d
	}
	return q, true
}

func windowJSON(q *store.OpsQuery) map[string]any {
	out := map[string]any{"since": rfc3339(q.Start)}
	if q.End != 0 {
		out["until"] = rfc3339(q.End)
	}
	return out
}

func (s *Server) handleRED(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	q, ok := opsQuery(w, r)
	if !ok {
		return
	}
	sr, ok := b.(store.ServiceReader)
	if !ok {
		notSupported(w, "RED metrics")
		return
	}
	series, res, err := sr.RED(r.Context(), project, q)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	until := q.End
	if until == 0 {
		until = uint64(time.Now().UnixNano())
	}
	seconds := float64(until-q.Start) / 1e9
	group := "service"
	if q.ByOperation {
		group = "operation"
	}
	// The envelope through encoding/json, the series (thousands of
	// buckets) appended by hand: reflection and json.Marshal's check of a
	// MarshalJSON result were most of a large answer's time.
	resp := windowJSON(q)
	resp["step_seconds"] = int64(q.Step / time.Second)
	resp["group"] = group
	resp["quantile_relative_error"] = quantileRelativeError
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	head, err := json.Marshal(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	buf := make([]byte, 0, len(head)+64+len(series)*(300+len(series)/4))
	buf = append(buf, head[:len(head)-1]...) // without its closing brace
	buf = append(buf, `,"series":[`...)
	for i := range series {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendREDSeries(buf, &series[i], seconds)
	}
	buf = append(buf, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(buf)
}

// appendREDSeries appends one series in the documented shape.
func appendREDSeries(b []byte, sr *store.REDSeries, seconds float64) []byte {
	errRate := 0.0
	if sr.Calls > 0 {
		errRate = float64(sr.Errors) / float64(sr.Calls)
	}
	b = append(b, `{"service":`...)
	b = appendJSONStr(b, sr.Service)
	if sr.Operation != "" {
		b = append(b, `,"operation":`...)
		b = appendJSONStr(b, sr.Operation)
	}
	b = append(b, `,"calls":`...)
	b = strconv.AppendInt(b, sr.Calls, 10)
	b = append(b, `,"errors":`...)
	b = strconv.AppendInt(b, sr.Errors, 10)
	b = appendNum(b, "error_rate", errRate)
	b = appendNum(b, "rate_per_second", float64(sr.Calls)/seconds)
	b = appendQuantiles(b, &sr.Latency)
	b = append(b, `,"buckets":[`...)
	for i, p := range sr.Buckets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"time_unix_nano":`...)
		b = strconv.AppendUint(b, p.Start, 10)
		b = append(b, `,"calls":`...)
		b = strconv.AppendInt(b, p.Calls, 10)
		b = append(b, `,"errors":`...)
		b = strconv.AppendInt(b, p.Errors, 10)
		b = appendQuantiles(b, &p.Latency)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendQuantiles(b []byte, q *store.Quantiles) []byte {
	b = appendNum(b, "p50_ns", q.P50)
	b = appendNum(b, "p95_ns", q.P95)
	b = appendNum(b, "p99_ns", q.P99)
	return appendNum(b, "max_ns", q.Max)
}

// appendNum appends ,"k":v for a finite v.
func appendNum(b []byte, k string, v float64) []byte {
	b = append(b, `,"`...)
	b = append(b, k...)
	b = append(b, `":`...)
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

// appendJSONStr appends s as a JSON string.
func appendJSONStr(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // strings only: cannot fail
	return append(b, q...)
}

// quantileRelativeError is the engine's sketch accuracy (sketch.Alpha),
// stated in the answers that carry percentiles.
const quantileRelativeError = 0.01

type heatCellJSON struct {
	TimeUnixNano uint64 `json:"time_unix_nano"`
	Bucket       int    `json:"bucket"`
	Count        int64  `json:"count"`
}

func (s *Server) handleHeatmap(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	q, ok := opsQuery(w, r)
	if !ok {
		return
	}
	sr, ok := b.(store.ServiceReader)
	if !ok {
		notSupported(w, "latency heatmaps")
		return
	}
	hm, res, err := sr.Heatmap(r.Context(), project, q)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	cells := make([]heatCellJSON, 0, len(hm.Cells))
	var maxCount int64
	top := 0
	for _, c := range hm.Cells {
		cells = append(cells, heatCellJSON{TimeUnixNano: c.Start, Bucket: c.Bucket, Count: c.Count})
		maxCount = max(maxCount, c.Count)
		top = max(top, c.Bucket)
	}
	// Bounds up to the highest bucket in use, plus its upper bound.
	bounds := hm.Bounds
	if top+2 <= len(bounds) {
		bounds = bounds[:top+2]
	}
	resp := windowJSON(q)
	resp["step_seconds"] = int64(q.Step / time.Second)
	resp["bounds_ns"] = bounds
	resp["cells"] = cells
	resp["max_count"] = maxCount
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	writeJSON(w, http.StatusOK, resp)
}

type errorGroupJSON struct {
	Service       string `json:"service"`
	Operation     string `json:"operation"`
	ExceptionType string `json:"exception_type"`
	Message       string `json:"message"`
	Count         int64  `json:"count"`
	FirstSeen     string `json:"first_seen"`
	FirstSeenNano uint64 `json:"first_seen_unix_nano"`
	LastSeen      string `json:"last_seen"`
	LastSeenNano  uint64 `json:"last_seen_unix_nano"`
	SampleTrace   string `json:"sample_trace_id"`
	SampleSpan    string `json:"sample_span_id"`
}

func (s *Server) handleErrors(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	q, ok := opsQuery(w, r)
	if !ok {
		return
	}
	limit, ok := intParam(w, r, "limit", 50, 1, 10000)
	if !ok {
		return
	}
	sr, ok := b.(store.ServiceReader)
	if !ok {
		notSupported(w, "error groups")
		return
	}
	groups, res, err := sr.ErrorGroups(r.Context(), project, q, limit)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	out := make([]errorGroupJSON, 0, len(groups))
	for _, g := range groups {
		out = append(out, errorGroupJSON{Service: g.Service, Operation: g.Operation, ExceptionType: g.Type, Message: g.Message,
			Count: g.Count, FirstSeen: rfc3339(g.First), FirstSeenNano: g.First, LastSeen: rfc3339(g.Last), LastSeenNano: g.Last,
			SampleTrace: g.Trace.String(), SampleSpan: g.Span.String()})
	}
	resp := windowJSON(q)
	resp["groups"] = out
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	writeJSON(w, http.StatusOK, resp)
}

type dependencyJSON struct {
	Parent string `json:"parent"`
	Child  string `json:"child"`
	Calls  int64  `json:"calls"`
	Errors int64  `json:"errors"`
}

func (s *Server) handleDependencies(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	start, end, ok := window(w, r)
	if !ok {
		return
	}
	dr, ok := b.(store.DependencyReader)
	if !ok {
		notSupported(w, "service dependencies")
		return
	}
	deps, res, err := dr.Dependencies(r.Context(), project, start, end)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	out := make([]dependencyJSON, 0, len(deps))
	for _, d := range deps {
		out = append(out, dependencyJSON{Parent: d.Parent, Child: d.Child, Calls: d.Calls, Errors: d.Errors})
	}
	resp := windowJSON(&store.OpsQuery{Start: start, End: end})
	resp["edges"] = out
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	writeJSON(w, http.StatusOK, resp)
}

// journeyKey is an attribute name a journey can follow.
var journeyKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.\-:/]{0,199}$`)

// traceQLString quotes s as a TraceQL string literal.
func traceQLString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s) + `"`
}

type journeyBucketJSON struct {
	TimeUnixNano uint64 `json:"time_unix_nano"`
	Traces       int    `json:"traces"`
	Errors       int    `json:"errors"`
}

// handleJourney serves GET /api/v1/journey: the traces that carry one
// attribute value (span or resource attribute: a user id, an order id, a
// session), newest first, with a per-bucket count of them.
func (s *Server) handleJourney(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	v := r.URL.Query()
	key, value := v.Get("key"), v.Get("value")
	if !journeyKey.MatchString(key) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("key: %q is not an attribute name (letters, digits, and _ . - : /; at most 200)", key))
		return
	}
	if value == "" {
		writeError(w, http.StatusBadRequest, "value: required (the attribute value to follow)")
		return
	}
	limit, ok := intParam(w, r, "limit", 500, 1, 10000)
	if !ok {
		return
	}
	// The value as a string; an integer value also as a number, since ids
	// are often sent as integers.
	cond := "." + key + " = " + traceQLString(value)
	if _, err := strconv.ParseInt(value, 10, 64); err == nil {
		cond += " || ." + key + " = " + value
	}
	// since and until come resolved by the window rule (window.go).
	fv := url.Values{"q": {"{ " + cond + " }"}, "since": {v.Get("since")}, "until": {v.Get("until")}, "limit": {strconv.Itoa(limit)}}
	f, err := query.FromValues(fv, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sums, res, err := b.SearchTraces(r.Context(), project, &f, limit)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	until := f.End
	if until == 0 {
		until = uint64(time.Now().UnixNano())
	}
	step := autoStep(time.Duration(until - f.Start))
	buckets := map[uint64]*journeyBucketJSON{}
	out := make([]traceSummaryJSON, 0, len(sums))
	for _, t := range sums {
		out = append(out, traceSummaryJSON{
			TraceID: t.TraceID.String(), RootService: t.RootService, RootName: t.RootName,
			StartTime: rfc3339(t.Start), StartUnixNano: t.Start, DurationNanos: t.End - t.Start,
			SpanCount: t.Spans, ErrorCount: t.Errors, MatchedSpans: t.Matched, Services: t.Services,
		})
		at := t.Start - t.Start%uint64(step)
		bk := buckets[at]
		if bk == nil {
			bk = &journeyBucketJSON{TimeUnixNano: at}
			buckets[at] = bk
		}
		bk.Traces++
		if t.Errors > 0 {
			bk.Errors++
		}
	}
	bl := make([]journeyBucketJSON, 0, len(buckets))
	for _, bk := range buckets {
		bl = append(bl, *bk)
	}
	slices.SortFunc(bl, func(x, y journeyBucketJSON) int { return cmp.Compare(x.TimeUnixNano, y.TimeUnixNano) })
	resp := map[string]any{"key": key, "value": value, "since": rfc3339(f.Start), "step_seconds": int64(step / time.Second),
		"buckets": bl, "traces": out, "truncated": len(sums) >= limit}
	if f.End != 0 {
		resp["until"] = rfc3339(f.End)
	}
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	writeJSON(w, http.StatusOK, resp)
}

// intParam reads an optional integer query parameter within [lo, hi].
func intParam(w http.ResponseWriter, r *http.Request, name string, def, lo, hi int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s: %q is not a whole number from %d to %d", name, v, lo, hi))
		return 0, false
	}
	return n, true
}
