package chstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/sketch"
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

// llmGroups runs the statistics as one GROUP BY: the window's whole
// minutes from the rollup when it can answer (rollup.go), the rest from
// spans, merged as aggregate states. Counts and sums are exact; the
// quantiles are the sketch's (1% relative error, as on the engine). step > 0
// adds the time bucket.
func (s *Store) llmGroups(ctx context.Context, project string, q *store.LLMQuery, step time.Duration) (store.LLMStats, error) {
	if err := s.usable(ctx); err != nil {
		return store.LLMStats{}, err
	}
	f := &q.Filter
	out := store.LLMStats{Groups: []store.LLMGroup{}, QuantileError: sketch.Alpha}
	start, end := s.window(project, f.Start, f.End)
	if end != 0 && start >= end {
		return out, nil
	}
	gen, m0, m1, ok, err := s.llmRollupSpan(ctx, project, q, step, start, end)
	if err != nil {
		return out, err
	}
	// The states of the rollup that answers, and of spans merged with it,
	// are of the same kind (llmGen1 when spans answer alone: exact).
	var stateNames, stateExprs []string
	for _, st := range llmStates(gen) {
		stateNames = append(stateNames, st.name)
		stateExprs = append(stateExprs, st.expr+" AS "+st.name)
	}
	var groupBy []string
	for i := range q.GroupBy {
		groupBy = append(groupBy, fmt.Sprintf("k%d", i))
	}
	groupBy = append(groupBy, "bucket")
	// spansPart aggregates spans selected by w into states.
	spansPart := func(w *where) (string, []any) {
		var sel []string
		for i, d := range q.GroupBy {
			sel = append(sel, fmt.Sprintf("%s AS k%d", llmKeys[d], i))
		}
		var args []any
		if step > 0 {
			sel = append(sel, "toInt64(intDiv(start, ?) * ?) AS bucket")
			args = append(args, uint64(step), uint64(step/time.Second))
		} else {
			sel = append(sel, s.target.zero("start")+" AS bucket")
		}
		return "SELECT " + strings.Join(append(sel, stateExprs...), ", ") + " FROM spans WHERE " + w.String() +
			" GROUP BY " + strings.Join(groupBy, ", "), append(args, w.args...)
	}
	var parts []string
	var args []any
	add := func(sql string, a []any) { parts, args = append(parts, sql), append(args, a...) }
	if ok {
		s.rollupReads.Add(1)
		// rollupPart aggregates the rows of an LLM rollup (the minutes or
		// the hours table) that rw selects; unit is its time column.
		rollupPart := func(table, unit string, dims map[string]string, rw *where) {
			var sel []string
			for i, d := range q.GroupBy {
				sel = append(sel, fmt.Sprintf("%s AS k%d", dims[d], i))
			}
			var ra []any
			if step > 0 {
				nanos := uint64(time.Minute)
				if unit == "hour" {
					nanos = uint64(time.Hour)
				}
				sel = append(sel, fmt.Sprintf("toInt64(intDiv(%s * %d, ?) * ?) AS bucket", unit, nanos))
				ra = append(ra, uint64(step), uint64(step/time.Second))
			} else {
				sel = append(sel, s.target.zero(unit)+" AS bucket")
			}
			rw.exact(f)
			add("SELECT "+strings.Join(append(sel, stateNames...), ", ")+" FROM "+table+" WHERE "+rw.String(), append(ra, rw.args...))
		}
		rw := &where{}
		rw.add("project = ?", project)
		rw.add("minute >= ?", m0)
		if h0, h1, ok := s.llmHours(gen, m0, m1, end, step); ok {
			// The whole hours from the hourly rollup, the minutes around
			// them from the minutes.
			hw := &where{}
			hw.add("project = ?", project)
			hw.add("hour >= ?", h0)
			if end != 0 {
				hw.add("hour < ?", h1)
				rw.add("(minute < ? OR minute >= ?)", h0*60, h1*60)
				rw.add("minute < ?", m1)
			} else {
				rw.add("minute < ?", h0*60)
			}
			s.hourReads.Add(1)
			rollupPart(gen.hours, "hour", llmHourDims, hw)
		} else if end != 0 {
			rw.add("minute < ?", m1)
		}
		rollupPart(gen.minutes, "minute", llmRollupDims, rw)
		// The edges: the partial minutes before m0 and from m1 on.
		w := s.base(project, start, end)
		w.add("llm = 1")
		w.exact(f)
		if end != 0 {
			w.add("(start < ? OR start >= ?)", m0*minuteNanos, m1*minuteNanos)
		} else {
			w.add("start < ?", m0*minuteNanos)
		}
		add(spansPart(w))
	} else {
		w := s.base(project, start, end)
		w.add("llm = 1")
		w.exact(f)
		add(spansPart(w))
	}
	merged := []string{"countMerge(spans)", "sumMerge(counted)", "sumMerge(errors)", "uniqExactMerge(traces)",
		"sumMerge(tin)", "sumMerge(tout)", "sumMerge(tcr)", "sumMerge(tcc)", "sumMerge(trs)", "sumMerge(cost)",
		"minMerge(smin)", "maxMerge(emax)", "minMerge(dmin)", "maxMerge(dmax)", "tupleElement(sumMapMerge(dh), 1)", "tupleElement(sumMapMerge(dh), 2)",
		"sumMerge(tn)", "minMerge(tmin)", "maxMerge(tmax)", "tupleElement(sumMapMerge(th), 1)", "tupleElement(sumMapMerge(th), 2)"}
	sql := "SELECT " + strings.Join(append(slices.Clone(groupBy), merged...), ", ") + " FROM (" + strings.Join(parts, " UNION ALL ") +
		") GROUP BY " + strings.Join(groupBy, ", ")
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return out, fmt.Errorf("LLM statistics on ClickHouse: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		kv := make([]string, len(q.GroupBy))
		var (
			g                              store.LLMGroup
			spans, counted, errs, traces   uint64
			tin, tout, tcr, tcc, trs, cost int64
			dmin, dmax, tn, tmin, tmax     uint64
			dk, tk                         []int32
			dc, tc                         []uint64
		)
		dest := make([]any, 0, len(kv)+24)
		for i := range kv {
			dest = append(dest, &kv[i])
		}
		dest = append(dest, &g.Bucket, &spans, &counted, &errs, &traces, &tin, &tout, &tcr, &tcc, &trs, &cost, &g.M.MinStart, &g.M.MaxEnd,
			&dmin, &dmax, &dk, &dc, &tn, &tmin, &tmax, &tk, &tc)
		if err := rows.Scan(dest...); err != nil {
			return out, fmt.Errorf("LLM statistics on ClickHouse: %w", err)
		}
		if spans == 0 {
			continue
		}
		g.Key = map[string]string{}
		for i, d := range q.GroupBy {
			g.Key[d] = keyText(d, kv[i])
		}
		g.M.Spans, g.M.Counted, g.M.Errors, g.M.Traces = int64(spans), int64(counted), int64(errs), int64(traces)
		g.M.InputTokens, g.M.OutputTokens, g.M.CacheReadTokens, g.M.CacheCreationTokens, g.M.ReasoningTokens, g.M.CostNanoUSD = tin, tout, tcr, tcc, trs, cost
		g.M.Latency = quantilesOf(dk, dc, spans, dmin, dmax)
		g.M.TTFT = quantilesOf(tk, tc, tn, tmin, tmax)
		out.Groups = append(out.Groups, g)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("LLM statistics on ClickHouse: %w", err)
	}
	sortGroups(out.Groups, q.GroupBy, step > 0)
	return out, nil
}

const minuteNanos = uint64(time.Minute)

// llmRollupGen is the generation of LLM rollups that saw every span of
// the database, if one did (rollup.go: the newest one made complete).
func (s *Store) llmRollupGen() (llmRollup, bool) {
	for _, g := range []llmRollup{llmGen2, llmGen1} {
		if s.rollups[g.minuteName] {
			return g, true
		}
	}
	return llmGen1, false
}

// llmRollupSpan decides whether an LLM rollup answers the whole minutes of
// [start, end) (end 0: unbounded) and returns its generation and them,
// [m0, m1). When none does, gen is llmGen1, whose states spans alone use.
func (s *Store) llmRollupSpan(ctx context.Context, project string, q *store.LLMQuery, step time.Duration, start, end uint64) (gen llmRollup, m0, m1 uint64, ok bool, err error) {
	f := &q.Filter
	gen, ok = s.llmRollupGen()
	if !ok || !sqlOnly(f) || f.MinDuration != 0 || f.MaxDuration != 0 || step%time.Minute != 0 {
		return llmGen1, 0, 0, false, nil
	}
	for _, d := range q.GroupBy {
		if _, ok := llmRollupDims[d]; !ok {
			return llmGen1, 0, 0, false, nil
		}
	}
	if m0, m1, ok, err = s.rollupSpan(ctx, project, gen.minuteName, start, end); !ok || err != nil {
		return llmGen1, 0, 0, false, err
	}
	return gen, m0, m1, true, nil
}

// llmHours returns the whole hours [h0, h1) (end 0: unbounded, h1 unused)
// within the rollup's minutes [m0, m1) that gen's hourly rollup answers:
// when it saw every span, a step is whole hours, and there is such an hour.
func (s *Store) llmHours(gen llmRollup, m0, m1, end uint64, step time.Duration) (h0, h1 uint64, ok bool) {
	if !s.rollups[gen.hourName] || step%time.Hour != 0 {
		return 0, 0, false
	}
	h0 = (m0 + 59) / 60
	if end == 0 {
		return h0, 0, true
	}
	h1 = m1 / 60
	return h0, h1, h1 > h0
}

// rollupSpan reports whether the named rollup can answer the whole minutes
// [m0, m1) of [start, end) (end 0: unbounded, m1 unused): it saw every span,
// there is a whole minute, and no erased trace overlaps them (a rollup
// still counts erased spans).
func (s *Store) rollupSpan(ctx context.Context, project, name string, start, end uint64) (m0, m1 uint64, ok bool, err error) {
	if s.opts.NoRollups || !s.rollups[name] {
		return 0, 0, false, nil
	}
	m0 = (start + minuteNanos - 1) / minuteNanos
	hi := uint64(math.MaxUint64)
	if end != 0 {
		m1 = end / minuteNanos
		if m1 <= m0 {
			return 0, 0, false, nil
		}
		hi = m1 * minuteNanos
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, `SELECT count() FROM trace_index WHERE project = ?
		AND trace_id `+s.target.global()+`IN (SELECT trace_id FROM erased_traces WHERE project = ?) AND start_max >= ? AND start_min < ?`,
		project, project, m0*minuteNanos, hi).Scan(&n); err != nil {
		return 0, 0, false, fmt.Errorf("statistics on ClickHouse: erased traces: %w", err)
	}
	return m0, m1, n == 0, nil
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
	w := s.base(project, f.Start, f.End)
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
