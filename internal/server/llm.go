package server

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// quantilesJSON are latency percentiles in milliseconds (with the relative
// error the response's percentile_relative_error gives).
type quantilesJSON struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func quantiles(q *store.Quantiles) *quantilesJSON {
	if q == nil {
		return nil
	}
	ms := func(ns float64) float64 { return float64(int64(ns/1e3)) / 1e3 } // µs precision
	return &quantilesJSON{P50: ms(q.P50), P95: ms(q.P95), P99: ms(q.P99), Max: ms(q.Max)}
}

// measuresJSON is the API shape of aggregated LLM measures.
type measuresJSON struct {
	Spans               int64               `json:"spans"`
	LLMCalls            int64               `json:"counted_spans"`
	Errors              int64               `json:"errors"`
	Traces              int64               `json:"traces"`
	InputTokens         int64               `json:"input_tokens"`
	OutputTokens        int64               `json:"output_tokens"`
	CacheReadTokens     int64               `json:"cache_read_tokens"`
	CacheCreationTokens int64               `json:"cache_creation_tokens"`
	ReasoningTokens     int64               `json:"reasoning_tokens"`
	CostUSD             float64             `json:"cost_usd"`
	FirstSeen           string              `json:"first_seen,omitempty"`
	LastSeen            string              `json:"last_seen,omitempty"`
	Latency             *quantilesJSON      `json:"latency_ms,omitempty"`
	TTFT                *quantilesJSON      `json:"time_to_first_token_ms,omitempty"`
	FromMetrics         *metricMeasuresJSON `json:"from_metrics,omitempty"`
}

// metricMeasuresJSON is the part of a group's measures that came from the
// GenAI client metrics (store.MetricMeasures): errors, tokens and cost are
// also in the group's own fields.
type metricMeasuresJSON struct {
	Calls          int64                `json:"calls"`
	Errors         int64                `json:"errors"`
	InputTokens    int64                `json:"input_tokens"`
	OutputTokens   int64                `json:"output_tokens"`
	CostUSD        float64              `json:"cost_usd"`
	DurationMeanMs *float64             `json:"duration_mean_ms,omitempty"`
	Duration       *metricQuantilesJSON `json:"duration_ms,omitempty"`
}

// metricQuantilesJSON are duration percentiles estimated from a histogram's
// buckets, in milliseconds (no max: a histogram does not keep it).
type metricQuantilesJSON struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

func metricMeasures(m *store.MetricMeasures) *metricMeasuresJSON {
	if *m == (store.MetricMeasures{}) {
		return nil
	}
	j := &metricMeasuresJSON{Calls: m.Calls, Errors: m.Errors, InputTokens: m.InputTokens, OutputTokens: m.OutputTokens,
		CostUSD: float64(m.CostNanoUSD) / 1e9}
	if mean, ok := meanMs(m); ok {
		j.DurationMeanMs = &mean
	}
	if q := quantiles(m.Duration); q != nil {
		j.Duration = &metricQuantilesJSON{P50: q.P50, P95: q.P95, P99: q.P99}
	}
	return j
}

// meanMs is the calls' mean duration in milliseconds (µs precision).
func meanMs(m *store.MetricMeasures) (float64, bool) {
	if m.Calls <= 0 {
		return 0, false
	}
	return float64(int64(m.DurationSeconds/float64(m.Calls)*1e6)) / 1e3, true
}

func rfc3339(ns uint64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)
}

func measures(m *store.Measures) measuresJSON {
	return measuresJSON{
		Spans: m.Spans, LLMCalls: m.Counted, Errors: m.Errors, Traces: m.Traces,
		InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, CacheReadTokens: m.CacheReadTokens,
		CacheCreationTokens: m.CacheCreationTokens, ReasoningTokens: m.ReasoningTokens,
		CostUSD:   float64(m.CostNanoUSD) / 1e9,
		FirstSeen: rfc3339(m.MinStart), LastSeen: rfc3339(m.MaxEnd),
		Latency: quantiles(m.Latency), TTFT: quantiles(m.TTFT), FromMetrics: metricMeasures(&m.Metrics),
	}
}

// groupBy reads group_by (comma-separated and/or repeated).
func groupBy(v url.Values) ([]string, error) {
	out := []string{}
	for _, g := range v["group_by"] {
		for _, k := range strings.Split(g, ",") {
			k = strings.TrimSpace(k)
			if k == "" {
				continue
			}
			if !store.ValidLLMGroupKey(k) {
				return nil, fmt.Errorf("group_by: unknown key %q; use one or more of %s", k, strings.Join(store.LLMGroupKeys, ", "))
			}
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

func (s *Server) handleLLMStats(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	f, ok := parseFilter(w, r)
	if !ok {
		return
	}
	gb, err := groupBy(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// A page of groups: top=N (default defaultTop) from offset in the order
	// of sort (cost unless given); total_groups, totals and others (what
	// the page leaves out) cover every group, exactly.
	top, ok := intParam(w, r, "top", defaultTop, 1, maxTop)
	if !ok {
		return
	}
	offset, ok := intParam(w, r, "offset", 0, 0, math.MaxInt32-maxTop)
	if !ok {
		return
	}
	by := cmp.Or(r.URL.Query().Get("sort"), "cost")
	rank, known := store.LLMSorts[by]
	if !known {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("sort: %q is not one of cost, tokens, calls, spans, errors", by))
		return
	}
	mu, warns, err := s.llmMetrics(r.Context(), b, project, &f, gb, 0)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	lq := &store.LLMQuery{Filter: f, GroupBy: gb, Top: offset + top, Sort: by}
	if len(mu.Groups) > 0 {
		lq.Top = 0 // every span group: a metric group may add to one beyond the page
	}
	st, err := b.LLMStats(r.Context(), project, lq)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	if len(mu.Groups) > 0 {
		st.Groups, st.TotalGroups = mergeLLMGroups(st.Groups, mu.Groups, gb, false), 0
	}
	st.Warnings = slices.Concat(st.Warnings, warns)
	groups, totalGroups, total := st.Groups, st.TotalGroups, st.Totals
	if totalGroups == 0 { // a backend that returns every group: rank and cut here
		total = store.Measures{} // percentiles are not additive: totals carry none
		for i := range groups {
			total.AddCounts(&groups[i].M)
		}
		totalGroups = len(groups)
		if by != "cost" {
			groups = slices.Clone(groups)
			slices.SortStableFunc(groups, func(a, b store.LLMGroup) int { return cmp.Compare(rank(&b.M), rank(&a.M)) })
		}
	}
	groups = groups[min(offset, len(groups)):]
	groups = groups[:min(top, len(groups))]
	// The keys in encoding/json's order (sorted), as writeJSON would write
	// a map of them; llm_json.go says why the groups are appended directly.
	out, err := appendJSONValue(openLLMAnswer(&mu), gb)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	out = appendGroups(append(out, `,"groups":`...), groups, false)
	if next := offset + len(groups); next < totalGroups && len(groups) > 0 {
		out = appendInt(out, `,"next_offset":`, int64(next))
	}
	if len(groups) < totalGroups {
		others := othersOf(&total, groups)
		out = appendMeasures(append(out, `,"others":`...), &others)
	}
	out = appendJSONFloat(append(out, `,"percentile_relative_error":`...), st.QuantileError)
	out = appendInt(out, `,"total_groups":`, int64(totalGroups))
	out = appendMeasures(append(out, `,"totals":`...), &total)
	if len(st.Warnings) > 0 {
		if out, err = appendJSONValue(append(out, `,"warnings":`...), st.Warnings); err != nil {
			writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
			return
		}
	}
	writeJSONBytes(w, http.StatusOK, append(out, '}'))
}

// The page of groups /api/v1/llm/stats returns: at most defaultTop unless
// top says otherwise, never more than maxTop. Grouping by session over a
// large store otherwise answers megabytes of every session's percentiles.
const (
	defaultTop = 1000
	maxTop     = 10000
)

// othersOf returns total less the groups of a page: the counts of the
// groups left out (no time bounds or percentiles: they do not subtract).
func othersOf(total *store.Measures, page []store.LLMGroup) store.Measures {
	o := *total
	o.MinStart, o.MaxEnd, o.Latency, o.TTFT, o.Metrics.Duration = 0, 0, nil, nil, nil
	for i := range page {
		m := &page[i].M
		o.Spans -= m.Spans
		o.Counted -= m.Counted
		o.Errors -= m.Errors
		o.Traces -= m.Traces
		o.InputTokens -= m.InputTokens
		o.OutputTokens -= m.OutputTokens
		o.CacheReadTokens -= m.CacheReadTokens
		o.CacheCreationTokens -= m.CacheCreationTokens
		o.ReasoningTokens -= m.ReasoningTokens
		o.CostNanoUSD -= m.CostNanoUSD
		o.Metrics.Calls -= m.Metrics.Calls
		o.Metrics.Errors -= m.Metrics.Errors
		o.Metrics.InputTokens -= m.Metrics.InputTokens
		o.Metrics.OutputTokens -= m.Metrics.OutputTokens
		o.Metrics.CostNanoUSD -= m.Metrics.CostNanoUSD
		o.Metrics.DurationSeconds -= m.Metrics.DurationSeconds
	}
	return o
}

// niceSteps are the automatic time-series steps, smallest first.
var niceSteps = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// autoStep picks the smallest nice step giving at most 120 buckets.
func autoStep(window time.Duration) time.Duration {
	for _, s := range niceSteps {
		if window/s <= 120 {
			return s
		}
	}
	return niceSteps[len(niceSteps)-1]
}

func (s *Server) handleLLMTimeseries(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	q := r.URL.Query()
	defaulted := defaultSince(q, time.Now())
	f, err := query.FromValues(q, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, sinceDefaultHint(err.Error(), defaulted))
		return
	}
	gb, err := groupBy(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	end, ok := closeWindow(w, f.Start, f.End)
	if !ok {
		return
	}
	step := autoStep(time.Duration(end - f.Start))
	if st := q.Get("step"); st != "" {
		d, err := time.ParseDuration(st)
		if err != nil || d < time.Second || d%time.Second != 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("step: %q is not a whole number of seconds of at least 1s (e.g. 1m, 1h)", st))
			return
		}
		if time.Duration(end-f.Start)/d > 10000 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("step: %s gives more than 10000 buckets over the window; use a larger step", st))
			return
		}
		step = d
	}
	mu, warns, err := s.llmMetrics(r.Context(), b, project, &f, gb, step)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	st, err := b.LLMTimeseries(r.Context(), project, &store.LLMQuery{Filter: f, GroupBy: gb}, step)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	if len(mu.Groups) > 0 {
		st.Groups = mergeLLMGroups(st.Groups, mu.Groups, gb, true)
	}
	st.Warnings = slices.Concat(st.Warnings, warns)
	out, err := appendJSONValue(openLLMAnswer(&mu), gb)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	out = appendJSONFloat(append(out, `,"percentile_relative_error":`...), st.QuantileError)
	out = appendGroups(append(out, `,"points":`...), st.Groups, true)
	out = appendInt(out, `,"step_seconds":`, int64(step/time.Second))
	if len(st.Warnings) > 0 {
		if out, err = appendJSONValue(append(out, `,"warnings":`...), st.Warnings); err != nil {
			writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
			return
		}
	}
	writeJSONBytes(w, http.StatusOK, append(out, '}'))
}

// bucketTime is a time-series point's "time".
func bucketTime(sec int64) string { return time.Unix(sec, 0).UTC().Format(time.RFC3339) }

type sessionJSON struct {
	SessionID string   `json:"session_id"`
	Users     []string `json:"users"`
	measuresJSON
}

var sessionSorts = map[string]func(a, b *store.SessionSummary) bool{
	"last_seen":  func(a, b *store.SessionSummary) bool { return a.M.MaxEnd > b.M.MaxEnd },
	"first_seen": func(a, b *store.SessionSummary) bool { return a.M.MinStart > b.M.MinStart },
	"cost":       func(a, b *store.SessionSummary) bool { return a.M.CostNanoUSD > b.M.CostNanoUSD },
	"tokens": func(a, b *store.SessionSummary) bool {
		return a.M.InputTokens+a.M.OutputTokens > b.M.InputTokens+b.M.OutputTokens
	},
	"spans":  func(a, b *store.SessionSummary) bool { return a.M.Spans > b.M.Spans },
	"errors": func(a, b *store.SessionSummary) bool { return a.M.Errors > b.M.Errors },
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	q := r.URL.Query()
	sortBy := q.Get("sort")
	if sortBy == "" {
		sortBy = "last_seen"
	}
	less, ok := sessionSorts[sortBy]
	if !ok {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("sort: %q is not one of last_seen, first_seen, cost, tokens, spans, errors", sortBy))
		return
	}
	limit, offset := 50, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit: %q is not a whole number from 1 to 1000", v))
			return
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("offset: %q is not a whole number >= 0", v))
			return
		}
		offset = n
	}
	q.Del("limit") // the span filter's limit does not apply here
	r.URL.RawQuery = q.Encode()
	f, ok := parseFilter(w, r)
	if !ok {
		return
	}
	all, res, err := b.Sessions(r.Context(), project, &f)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	// find keeps the sessions whose id or one of whose users contains the
	// text, case-insensitively: in a new slice (the backend's may be shared
	// with its cache, store.LLM.Sessions).
	if find := strings.ToLower(strings.TrimSpace(q.Get("find"))); find != "" {
		var found []store.SessionSummary
		for i := range all {
			ss := &all[i]
			if strings.Contains(strings.ToLower(ss.ID), find) ||
				slices.ContainsFunc(ss.Users, func(u string) bool { return strings.Contains(strings.ToLower(u), find) }) {
				found = append(found, *ss)
			}
		}
		all = found
	}
	// The page only: the first offset+limit positions in sort order, ties
	// in the engine's order (as a stable sort of all would give).
	order := store.FirstPositions(len(all), min(offset, len(all))+limit, func(i, j int32) bool {
		if less(&all[i], &all[j]) {
			return true
		}
		return !less(&all[j], &all[i]) && i < j
	})
	lo := min(offset, len(all))
	hi := lo + min(limit, len(all)-lo)
	out := make([]sessionJSON, 0, hi-lo)
	for _, i := range order[lo:] {
		ss := &all[i]
		users := ss.Users
		if users == nil {
			users = []string{}
		}
		out = append(out, sessionJSON{SessionID: ss.ID, Users: users, measuresJSON: measures(&ss.M)})
	}
	resp := map[string]any{"sessions": out, "total": len(all)}
	if hi < len(all) {
		resp["next_offset"] = hi
	}
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	writeJSON(w, http.StatusOK, resp)
}

type messageJSON struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolName   string `json:"tool_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

type llmCallJSON struct {
	SpanID              string        `json:"span_id"`
	Name                string        `json:"name"`
	Service             string        `json:"service"`
	StartTime           string        `json:"start_time"`
	DurationNanos       uint64        `json:"duration_ns"`
	Status              string        `json:"status"`
	Provider            string        `json:"provider,omitempty"`
	Model               string        `json:"model,omitempty"`
	Operation           string        `json:"operation,omitempty"`
	Agent               string        `json:"agent,omitempty"`
	Tool                string        `json:"tool,omitempty"`
	User                string        `json:"user,omitempty"`
	Counted             bool          `json:"counted"`
	InputTokens         int64         `json:"input_tokens"`
	OutputTokens        int64         `json:"output_tokens"`
	CacheReadTokens     int64         `json:"cache_read_tokens"`
	CacheCreationTokens int64         `json:"cache_creation_tokens"`
	ReasoningTokens     int64         `json:"reasoning_tokens"`
	CostUSD             float64       `json:"cost_usd"`
	CostSource          string        `json:"cost_source"`
	InputMessages       []messageJSON `json:"input_messages"`
	OutputMessages      []messageJSON `json:"output_messages"`
}

type sessionTraceJSON struct {
	TraceID     string        `json:"trace_id"`
	StartTime   string        `json:"start_time"`
	Duration    uint64        `json:"duration_ns"`
	RootService string        `json:"root_service"`
	RootName    string        `json:"root_name"`
	Spans       int           `json:"span_count"`
	Errors      int           `json:"error_count"`
	LLMSpans    []llmCallJSON `json:"llm_spans"`
}

var costSources = map[model.CostSource]string{model.CostNone: "none", model.CostClient: "client", model.CostComputed: "computed"}

func messages(ms []llm.Message) []messageJSON {
	out := make([]messageJSON, 0, len(ms))
	for _, m := range ms {
		out = append(out, messageJSON{Role: m.Role, Content: m.Content, ToolName: m.ToolName, ToolCallID: m.ToolCallID})
	}
	return out
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	id := r.PathValue("session_id")
	f, ok := parseFilter(w, r)
	if !ok {
		return
	}
	traces, res, err := b.SessionTraces(r.Context(), project, id, &f)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	if len(traces) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("session %q not found in project %q", id, project))
		return
	}
	out := make([]sessionTraceJSON, 0, len(traces))
	for _, spans := range traces {
		sum := store.Summarize(spans[0].TraceID, spans)
		t := sessionTraceJSON{TraceID: sum.TraceID.String(), StartTime: rfc3339(sum.Start), Duration: sum.End - sum.Start,
			RootService: sum.RootService, RootName: sum.RootName, Spans: sum.Spans, Errors: sum.Errors, LLMSpans: []llmCallJSON{}}
		for i := range spans {
			sp := &spans[i]
			l := sp.LLM
			if l == nil {
				continue
			}
			in, outMsgs := llm.Messages(sp)
			t.LLMSpans = append(t.LLMSpans, llmCallJSON{
				SpanID: sp.SpanID.String(), Name: sp.Name, Service: sp.Service, StartTime: rfc3339(sp.StartTimeUnixNano),
				DurationNanos: sp.Duration(), Status: sp.StatusCode.String(), Provider: l.Provider, Model: l.Model(),
				Operation: l.Operation, Agent: l.AgentName, Tool: l.ToolName, User: l.UserID, Counted: l.Counted,
				InputTokens: max(l.InputTokens, 0), OutputTokens: max(l.OutputTokens, 0), CacheReadTokens: max(l.CacheReadTokens, 0),
				CacheCreationTokens: max(l.CacheCreationTokens, 0), ReasoningTokens: max(l.ReasoningTokens, 0),
				CostUSD: float64(l.CostNanoUSD) / 1e9, CostSource: costSources[l.CostSource],
				InputMessages: messages(in), OutputMessages: messages(outMsgs),
			})
		}
		out = append(out, t)
	}
	resp := map[string]any{"session_id": id, "traces": out}
	if len(res.Warnings) > 0 {
		resp["warnings"] = res.Warnings
	}
	writeJSON(w, http.StatusOK, resp)
}

type pricePeriodJSON struct {
	From       string  `json:"from"`
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

type priceRowJSON struct {
	Match     string            `json:"match"`
	Text      string            `json:"text"`
	Providers []string          `json:"providers"`
	Note      string            `json:"note,omitempty"`
	User      bool              `json:"user,omitempty"`
	Prices    []pricePeriodJSON `json:"prices"`
}

// handlePrices serves GET /api/v1/llm/prices: the price table costs are
// computed with, its source and date.
func (s *Server) handlePrices(w http.ResponseWriter, r *http.Request) {
	p := s.opts.Prices
	if p == nil {
		writeError(w, http.StatusNotImplemented, "this server was started without a price table")
		return
	}
	rows := p.Rows()
	if v := r.URL.Query().Get("models"); v == "false" || v == "0" {
		// Provenance only (the UI's footer): the table is hundreds of KB.
		writeJSON(w, http.StatusOK, map[string]any{"source": p.Source(), "as_of": p.AsOf(), "currency": "USD",
			"unit": "per_million_tokens", "count": len(rows)})
		return
	}
	out := make([]priceRowJSON, 0, len(rows))
	for _, row := range rows {
		j := priceRowJSON{Match: row.Match, Text: row.Text, Providers: row.Providers, Note: row.Note, User: row.User,
			Prices: make([]pricePeriodJSON, 0, len(row.Periods))}
		if j.Providers == nil {
			j.Providers = []string{}
		}
		for _, pp := range row.Periods {
			j.Prices = append(j.Prices, pricePeriodJSON{From: pp.From.Format(time.DateOnly), Input: pp.Input, Output: pp.Output,
				CacheRead: pp.CacheRead, CacheWrite: pp.CacheWrite})
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, map[string]any{"source": p.Source(), "as_of": p.AsOf(), "currency": "USD",
		"unit": "per_million_tokens", "count": len(rows), "models": out})
}
