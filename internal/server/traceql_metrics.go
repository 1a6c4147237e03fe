package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// traceQLMetricsRoutes serve TraceQL metrics: Tempo's query_range and
// instant routes (for Grafana and its Traces Drilldown app) and Rastro's own.
func (s *Server) traceQLMetricsRoutes() []route {
	t := s.withTempo
	return []route{
		{method: "GET", pattern: "/api/metrics/query_range", access: accessRead, name: "tempo_metrics_range", handler: t(s.handleTempoMetrics(false))},
		{method: "GET", pattern: "/api/metrics/query", access: accessRead, name: "tempo_metrics_instant", handler: t(s.handleTempoMetrics(true))},
		{method: "GET", pattern: "/api/v1/traceql/metrics", access: accessRead, name: "traceql_metrics", handler: s.withBackend(s.handleTraceQLMetrics), documented: true},
	}
}

// parseMetricsQuery parses a metrics query, refusing a search query.
func parseMetricsQuery(src string) (*query.Query, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("q is required: a TraceQL metrics query such as { } | rate() by (resource.service.name)")
	}
	q, err := query.ParseQuery(src)
	if err != nil {
		return nil, fmt.Errorf("q: %w", err)
	}
	if !q.IsMetrics() {
		return nil, fmt.Errorf("q: not a metrics query: end it with a metrics function (| rate(), | count_over_time(), | quantile_over_time(duration, .95), ...)")
	}
	return q, nil
}

// tempoTimestamp reads Tempo's start/end forms: Unix seconds (10 digits at
// most), Unix nanoseconds (longer), fractional seconds, or RFC 3339.
func tempoTimestamp(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if len(strings.TrimPrefix(s, "-")) <= 10 {
			return time.Unix(i, 0), nil
		}
		return time.Unix(0, i), nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Unix(0, int64(f*1e9)), nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

// tempoDefaultStep is Tempo's default step: about 240 points, rounded down
// to 1h, 5m, 1m, 15s, 5s or 1s (50 ms multiples under a minute).
func tempoDefaultStep(d time.Duration) time.Duration {
	base := d / 240
	if d < time.Minute {
		g := 50 * time.Millisecond
		return max(base/g*g, g)
	}
	for _, g := range []time.Duration{time.Hour, 5 * time.Minute, time.Minute, 15 * time.Second, 5 * time.Second, time.Second} {
		if base >= g {
			return g
		}
	}
	return time.Second
}

// handleTempoMetrics serves GET /api/metrics/query_range (instant false)
// and GET /api/metrics/query, in Tempo's shapes.
func (s *Server) handleTempoMetrics(instant bool) queryHandler {
	return func(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
		v := r.URL.Query()
		src := v.Get("q")
		if src == "" {
			src = v.Get("query")
		}
		q, err := parseMetricsQuery(src)
		if err != nil {
			tempoError(w, http.StatusBadRequest, "invalid TraceQL query: "+err.Error())
			return
		}
		end := time.Now()
		if e := v.Get("end"); e != "" {
			if end, err = tempoTimestamp(e); err != nil {
				tempoError(w, http.StatusBadRequest, err.Error())
				return
			}
		}
		since := time.Hour
		if sv := v.Get("since"); sv != "" {
			if since, err = time.ParseDuration(sv); err != nil || since <= 0 {
				tempoError(w, http.StatusBadRequest, fmt.Sprintf("invalid since: %q is not a positive duration", sv))
				return
			}
		}
		start := end.Add(-since)
		if st := v.Get("start"); st != "" {
			if start, err = tempoTimestamp(st); err != nil {
				tempoError(w, http.StatusBadRequest, err.Error())
				return
			}
		}
		if !end.After(start) {
			tempoError(w, http.StatusBadRequest, "end must be greater than start")
			return
		}
		step := tempoDefaultStep(end.Sub(start))
		if instant {
			step = end.Sub(start)
		} else if sv := v.Get("step"); sv != "" {
			if f, err := strconv.ParseFloat(sv, 64); err == nil {
				step = time.Duration(f * float64(time.Second))
			} else if step, err = time.ParseDuration(sv); err != nil {
				tempoError(w, http.StatusBadRequest, fmt.Sprintf("invalid step: %q is not seconds or a duration", sv))
				return
			}
			if step <= 0 {
				tempoError(w, http.StatusBadRequest, "step must be positive")
				return
			}
		}
		exemplars := 100
		if ev := v.Get("exemplars"); ev != "" {
			n, err := strconv.Atoi(ev)
			if err != nil || n < 0 {
				tempoError(w, http.StatusBadRequest, fmt.Sprintf("invalid exemplars: %q", ev))
				return
			}
			exemplars = min(n, 100)
		}
		req := store.MetricsRequest{Start: uint64(start.UnixNano()), End: uint64(end.UnixNano()), Step: step, Exemplars: exemplars, MaxTime: s.structuralBudget()}
		if instant {
			// One bucket: the whole range.
			req.Origin, req.Exemplars = req.Start, 0
		}
		ans, res, err := store.QueryMetrics(r.Context(), b, project, q, req)
		if err != nil {
			s.tempoFailed(w, err)
			return
		}
		if len(res.Warnings) > 0 {
			s.log.Warn("metrics query skipped damaged parts", "warnings", res.Warnings)
		}
		metrics := map[string]any{"inspectedSpans": strconv.Itoa(ans.SpansRead)}
		if ans.TracesInspected > 0 {
			metrics["inspectedTraces"] = ans.TracesInspected
		}
		out := map[string]any{"metrics": metrics}
		if ans.Partial {
			out["status"], out["message"] = "PARTIAL", ans.Reason
		}
		if instant {
			series := []map[string]any{}
			for _, sr := range ans.Series {
				var val float64
				for _, p := range sr.Samples {
					val += p.Value // one bucket
				}
				series = append(series, map[string]any{"labels": tempoLabels(sr.Labels), "value": val})
			}
			out["series"] = series
		} else {
			series := []map[string]any{}
			for _, sr := range ans.Series {
				samples := make([]map[string]any, len(sr.Samples))
				for i, p := range sr.Samples {
					samples[i] = map[string]any{"timestampMs": strconv.FormatInt(p.TimeMs, 10), "value": p.Value}
				}
				one := map[string]any{"labels": tempoLabels(sr.Labels), "samples": samples}
				if len(sr.Exemplars) > 0 {
					ex := make([]map[string]any, len(sr.Exemplars))
					for i, e := range sr.Exemplars {
						ex[i] = map[string]any{"labels": []tempoKV{{Key: "trace:id", Value: map[string]any{"stringValue": e.TraceID}},
							{Key: "span:id", Value: map[string]any{"stringValue": e.SpanID}}},
							"value": e.Value, "timestampMs": strconv.FormatInt(e.TimeMs, 10)}
					}
					one["exemplars"] = ex
				}
				series = append(series, one)
			}
			out["series"] = series
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func tempoLabels(ls []query.GroupAttr) []tempoKV {
	out := make([]tempoKV, len(ls))
	for i, l := range ls {
		out[i] = tempoKV{Key: l.Name, Value: tempoValue(l.Value)}
	}
	return out
}

// handleTraceQLMetrics serves GET /api/v1/traceql/metrics: a metrics query
// over since/until (default the last hour) with step (default: the smallest
// of 1m, 5m, 15m, ... giving at most 120 points, so that service
// aggregates can answer).
func (s *Server) handleTraceQLMetrics(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	v := r.URL.Query()
	q, err := parseMetricsQuery(v.Get("q"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	tv := url.Values{"since": {v.Get("since")}, "until": {v.Get("until")}}
	if tv.Get("since") == "" {
		tv.Set("since", "1h")
	}
	f, err := query.FromValues(tv, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	end, ok := closeWindow(w, f.Start, f.End)
	if !ok {
		return
	}
	step := autoStep(time.Duration(end - f.Start))
	if sv := v.Get("step"); sv != "" {
		if step, err = time.ParseDuration(sv); err != nil || step <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("step: %q is not a positive duration (e.g. 1m, 15s)", sv))
			return
		}
	}
	exemplars, ok := intParam(w, r, "exemplars", 0, 0, 100)
	if !ok {
		return
	}
	ans, res, err := store.QueryMetrics(r.Context(), b, project, q, store.MetricsRequest{Start: f.Start, End: end, Step: step, Exemplars: exemplars, MaxTime: s.structuralBudget()})
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	type sample struct {
		Time   string  `json:"time"`
		TimeMs int64   `json:"time_unix_ms"`
		Value  float64 `json:"value"`
	}
	type exemplar struct {
		TraceID string  `json:"trace_id"`
		SpanID  string  `json:"span_id"`
		Value   float64 `json:"value"`
		TimeMs  int64   `json:"time_unix_ms"`
	}
	type series struct {
		Labels    map[string]any `json:"labels"`
		Samples   []sample       `json:"samples"`
		Exemplars []exemplar     `json:"exemplars,omitempty"`
	}
	out := struct {
		Query       string   `json:"query"`
		Since       string   `json:"since"`
		Until       string   `json:"until"`
		StepSeconds float64  `json:"step_seconds"`
		Path        string   `json:"path"`
		SpansRead   int      `json:"spans_read"`
		Partial     bool     `json:"partial"`
		Reason      string   `json:"partial_reason,omitempty"`
		Series      []series `json:"series"`
		Warnings    []string `json:"warnings,omitempty"`
	}{Query: q.String(), Since: rfc3339(f.Start), Until: rfc3339(end), StepSeconds: step.Seconds(), Path: ans.Path,
		SpansRead: ans.SpansRead, Partial: ans.Partial, Reason: ans.Reason, Series: []series{}, Warnings: res.Warnings}
	for _, sr := range ans.Series {
		one := series{Labels: map[string]any{}}
		for _, l := range sr.Labels {
			one.Labels[l.Name] = labelValue(l.Value)
		}
		for _, p := range sr.Samples {
			one.Samples = append(one.Samples, sample{Time: time.UnixMilli(p.TimeMs).UTC().Format(time.RFC3339), TimeMs: p.TimeMs, Value: p.Value})
		}
		for _, e := range sr.Exemplars {
			one.Exemplars = append(one.Exemplars, exemplar{TraceID: e.TraceID, SpanID: e.SpanID, Value: e.Value, TimeMs: e.TimeMs})
		}
		out.Series = append(out.Series, one)
	}
	writeJSON(w, http.StatusOK, out)
}

// labelValue is a label's value in JSON: nil for a missing attribute.
func labelValue(v model.Value) any {
	switch v.Type {
	case model.ValueEmpty:
		return nil
	case model.ValueInt:
		return v.Int
	case model.ValueDouble:
		return v.Double
	case model.ValueBool:
		return v.Bool()
	}
	return v.AsString()
}
