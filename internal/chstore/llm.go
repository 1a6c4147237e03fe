package chstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// llmKeys are the SQL of each LLM group-by dimension, as text. hour and day
// are bucket numbers since the epoch, formatted in Go.
var llmKeys = map[string]string{
	"model":     "if(llm_response_model != '', llm_response_model, llm_request_model)",
	"provider":  "llm_provider",
	"service":   "service",
	"operation": "llm_operation",
	"session":   "llm_session",
	"user":      "llm_user",
	"agent":     "llm_agent",
	"hour":      "toString(intDiv(start, 3600000000000))",
	"day":       "toString(intDiv(start, 86400000000000))",
}

// checkLLM refuses what memstore and the engine refuse.
func checkLLM(dims []string, f *query.Filter) error {
	for _, d := range dims {
		if !store.ValidLLMGroupKey(d) {
			return fmt.Errorf("unknown group_by %q (use %v): %w", d, store.LLMGroupKeys, store.ErrBadRequest)
		}
	}
	if f.NeedsTrace() {
		return fmt.Errorf("trace-level conditions are not supported in LLM statistics: %w", store.ErrBadRequest)
	}
	return nil
}

// sqlOnly reports whether every condition of f has an exact SQL form:
// the window, service, name, status and duration (not TraceQL or words).
func sqlOnly(f *query.Filter) bool { return f.Expr == nil && f.Content == nil }

// exact adds f's conditions that sqlOnly covers.
func (w *where) exact(f *query.Filter) {
	if f.Service != "" {
		w.add("service = ?", f.Service)
	}
	if f.Name != "" {
		w.add("name = ?", f.Name)
	}
	if f.HasStatus {
		w.add("status = ?", int32(f.Status))
	}
	if f.MinDuration != 0 {
		w.add("duration >= ?", f.MinDuration)
	}
	if f.MaxDuration != 0 {
		w.add("duration <= ?", f.MaxDuration)
	}
}

// nearest is the SQL of the nearest-rank quantile q of a sorted array
// (memstore's definition: the ceil(q*n)-th smallest).
func nearest(arr string, q float64) string {
	return fmt.Sprintf("%s[toUInt64(greatest(ceil(%g * length(%s)), 1))]", arr, q, arr)
}

// llmGroups runs the statistics as one GROUP BY over spans: exact counts,
// sums and nearest-rank percentiles. step > 0 adds the time bucket.
func (s *Store) llmGroups(ctx context.Context, project string, q *store.LLMQuery, step time.Duration) (store.LLMStats, error) {
	if err := s.usable(ctx); err != nil {
		return store.LLMStats{}, err
	}
	f := &q.Filter
	w := base(project, f.Start, f.End)
	w.add("llm = 1")
	w.exact(f)
	var keys []string
	for i, d := range q.GroupBy {
		keys = append(keys, fmt.Sprintf("%s AS k%d", llmKeys[d], i))
	}
	var args []any
	bucket := "toInt64(0)"
	if step > 0 {
		bucket = "toInt64(intDiv(start, ?) * ?)"
		args = append(args, uint64(step), uint64(step/time.Second))
	}
	keys = append(keys, bucket+" AS bucket")
	groupBy := make([]string, 0, len(keys))
	for i := range q.GroupBy {
		groupBy = append(groupBy, fmt.Sprintf("k%d", i))
	}
	groupBy = append(groupBy, "bucket")
	inner := "SELECT " + strings.Join(keys, ", ") + `, count() AS spans, sum(llm_counted) AS counted, countIf(status = 2) AS errors,
		uniqExact(trace_id) AS traces,
		sumIf(greatest(llm_input_tokens, 0), llm_counted = 1) AS tin, sumIf(greatest(llm_output_tokens, 0), llm_counted = 1) AS tout,
		sumIf(greatest(llm_cache_read_tokens, 0), llm_counted = 1) AS tcr, sumIf(greatest(llm_cache_creation_tokens, 0), llm_counted = 1) AS tcc,
		sumIf(greatest(llm_reasoning_tokens, 0), llm_counted = 1) AS trs, sumIf(greatest(llm_cost_nano_usd, 0), llm_counted = 1) AS cost,
		min(start) AS smin, max(end) AS emax,
		arraySort(groupArray(duration)) AS d, arraySort(groupArrayIf(llm_ttft, llm_ttft != 0)) AS t
		FROM spans WHERE ` + w.String() + " GROUP BY " + strings.Join(groupBy, ", ")
	outer := "SELECT " + strings.Join(groupBy, ", ") + `, spans, counted, errors, traces, tin, tout, tcr, tcc, trs, cost, smin, emax,
		length(d), ` + nearest("d", 0.5) + ", " + nearest("d", 0.95) + ", " + nearest("d", 0.99) + `, d[length(d)],
		length(t), ` + nearest("t", 0.5) + ", " + nearest("t", 0.95) + ", " + nearest("t", 0.99) + `, t[length(t)]
		FROM (` + inner + ")"
	rows, err := s.conn.Query(ctx, outer, append(args, w.args...)...)
	if err != nil {
		return store.LLMStats{}, fmt.Errorf("LLM statistics on ClickHouse: %w", err)
	}
	defer rows.Close()
	out := store.LLMStats{Groups: []store.LLMGroup{}} // exact percentiles: QuantileError 0
	for rows.Next() {
		kv := make([]string, len(q.GroupBy))
		var (
			g                                        store.LLMGroup
			spans, counted, errs, traces             uint64
			tin, tout, tcr, tcc, trs, cost           int64
			nd, nt                                   uint64
			d50, d95, d99, dmax, t50, t95, t99, tmax uint64
		)
		dest := make([]any, 0, len(kv)+24)
		for i := range kv {
			dest = append(dest, &kv[i])
		}
		dest = append(dest, &g.Bucket, &spans, &counted, &errs, &traces, &tin, &tout, &tcr, &tcc, &trs, &cost, &g.M.MinStart, &g.M.MaxEnd,
			&nd, &d50, &d95, &d99, &dmax, &nt, &t50, &t95, &t99, &tmax)
		if err := rows.Scan(dest...); err != nil {
			return store.LLMStats{}, fmt.Errorf("LLM statistics on ClickHouse: %w", err)
		}
		g.Key = map[string]string{}
		for i, d := range q.GroupBy {
			g.Key[d] = keyText(d, kv[i])
		}
		g.M.Spans, g.M.Counted, g.M.Errors, g.M.Traces = int64(spans), int64(counted), int64(errs), int64(traces)
		g.M.InputTokens, g.M.OutputTokens, g.M.CacheReadTokens, g.M.CacheCreationTokens, g.M.ReasoningTokens, g.M.CostNanoUSD = tin, tout, tcr, tcc, trs, cost
		if nd > 0 {
			g.M.Latency = &store.Quantiles{P50: float64(d50), P95: float64(d95), P99: float64(d99), Max: float64(dmax)}
		}
		if nt > 0 {
			g.M.TTFT = &store.Quantiles{P50: float64(t50), P95: float64(t95), P99: float64(t99), Max: float64(tmax)}
		}
		out.Groups = append(out.Groups, g)
	}
	if err := rows.Err(); err != nil {
		return store.LLMStats{}, fmt.Errorf("LLM statistics on ClickHouse: %w", err)
	}
	sortGroups(out.Groups, q.GroupBy, step > 0)
	return out, nil
}

// keyText formats an hour or day bucket number as the store names it.
func keyText(dim, v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return v
	}
	switch dim {
	case "hour":
		return time.Unix(n*3600, 0).UTC().Format(time.RFC3339)
	case "day":
		return time.Unix(n*86400, 0).UTC().Format("2006-01-02")
	}
	return v
}

// sortGroups orders statistics by cost then spans, descending; a time
// series by bucket; ties by key, so that answers are stable.
func sortGroups(gs []store.LLMGroup, dims []string, series bool) {
	byKey := func(a, b store.LLMGroup) int {
		for _, d := range dims {
			if c := strings.Compare(a.Key[d], b.Key[d]); c != 0 {
				return c
			}
		}
		return 0
	}
	slices.SortFunc(gs, func(a, b store.LLMGroup) int {
		if series {
			return cmp.Or(cmp.Compare(a.Bucket, b.Bucket), byKey(a, b))
		}
		return cmp.Or(cmp.Compare(b.M.CostNanoUSD, a.M.CostNanoUSD), cmp.Compare(b.M.Spans, a.M.Spans), byKey(a, b))
	})
}

// LLMStats groups the LLM spans matching q: by SQL when the filter has an
// exact SQL form, else by scan (scan.go).
func (s *Store) LLMStats(ctx context.Context, project string, q *store.LLMQuery) (store.LLMStats, error) {
	if err := checkLLM(q.GroupBy, &q.Filter); err != nil {
		return store.LLMStats{}, err
	}
	if sqlOnly(&q.Filter) {
		return s.llmGroups(ctx, project, q, 0)
	}
	m, err := s.scan(ctx, project, q.Filter.Start, q.Filter.End, &q.Filter)
	if err != nil {
		return store.LLMStats{}, err
	}
	return m.LLMStats(ctx, project, q)
}

// LLMTimeseries is LLMStats per bucket of step.
func (s *Store) LLMTimeseries(ctx context.Context, project string, q *store.LLMQuery, step time.Duration) (store.LLMStats, error) {
	if step < time.Second || step%time.Second != 0 {
		return store.LLMStats{}, fmt.Errorf("step %s is not a whole number of seconds of at least 1s: %w", step, store.ErrBadRequest)
	}
	if err := checkLLM(q.GroupBy, &q.Filter); err != nil {
		return store.LLMStats{}, err
	}
	if sqlOnly(&q.Filter) {
		return s.llmGroups(ctx, project, q, step)
	}
	m, err := s.scan(ctx, project, q.Filter.Start, q.Filter.End, &q.Filter)
	if err != nil {
		return store.LLMStats{}, err
	}
	return m.LLMTimeseries(ctx, project, q, step)
}

// Sessions summarises the sessions of the LLM spans matching f (by scan).
func (s *Store) Sessions(ctx context.Context, project string, f *query.Filter) ([]store.SessionSummary, store.Result, error) {
	if f.NeedsTrace() {
		return nil, store.Result{}, fmt.Errorf("trace-level conditions are not supported in sessions: %w", store.ErrBadRequest)
	}
	w := *f
	m, err := s.scan(ctx, project, f.Start, f.End, &w)
	if err != nil {
		return nil, store.Result{}, err
	}
	return m.Sessions(ctx, project, f)
}

// SessionTraces returns the whole traces holding a matching span of the
// session, oldest first.
func (s *Store) SessionTraces(ctx context.Context, project, id string, f *query.Filter) ([][]model.Span, store.Result, error) {
	if f.NeedsTrace() {
		return nil, store.Result{}, fmt.Errorf("trace-level conditions are not supported in sessions: %w", store.ErrBadRequest)
	}
	if err := s.usable(ctx); err != nil {
		return nil, store.Result{}, err
	}
	w := base(project, f.Start, f.End)
	w.add("llm = 1")
	w.add("llm_session = ?", id)
	if !w.hints(f) {
		return nil, store.Result{}, nil
	}
	rows, err := s.conn.Query(ctx, "SELECT "+readColumns+" FROM spans WHERE "+w.String(), w.args...)
	if err != nil {
		return nil, store.Result{}, fmt.Errorf("session spans from ClickHouse: %w", err)
	}
	seen := map[model.TraceID]bool{}
	var ids []model.TraceID
	err = scanSpans(rows, func(st *stored) bool {
		sp := &st.span
		if !seen[sp.TraceID] && sp.LLM != nil && sp.LLM.SessionID == id && f.Match(sp) {
			seen[sp.TraceID] = true
			ids = append(ids, sp.TraceID)
		}
		return true
	})
	if err != nil {
		return nil, store.Result{}, err
	}
	all, err := s.traces(ctx, project, ids)
	if err != nil {
		return nil, store.Result{}, err
	}
	out := make([][]model.Span, 0, len(ids))
	for _, tid := range ids {
		if spans := all[tid]; len(spans) > 0 {
			out = append(out, spans)
		}
	}
	slices.SortFunc(out, func(a, b []model.Span) int {
		return cmp.Or(cmp.Compare(a[0].StartTimeUnixNano, b[0].StartTimeUnixNano), bytes.Compare(a[0].TraceID[:], b[0].TraceID[:]))
	})
	return out, store.Result{}, nil
}
