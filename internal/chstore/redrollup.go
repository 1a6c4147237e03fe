package chstore

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/sketch"
	"github.com/rastro-dev/rastro/internal/store"
)

// The RED rollup: a materialized view sums every inserted block of spans
// into ops_rollup (AggregatingMergeTree), one row per project, minute of
// start, service and span name: the span count, the error count, min and
// max duration and the duration histogram in the sketch's buckets. RED
// without a further filter reads the window's whole minutes from it and the
// partial minutes at its edges from spans, as states of the same types,
// merged in one query, exactly as for the LLM rollup (rollup.go); the
// quantiles are the sketch's, as on the engine (TestREDRollupEqualsSpanScan).
// With a filter, RED reads the window's spans (scan.go).

func opsStates() []llmState {
	return []llmState{
		{"spans", "AggregateFunction(count)", "countState()"},
		{"errors", "AggregateFunction(sum, UInt64)", "sumState(toUInt64(status = 2))"},
		{"dmin", "AggregateFunction(min, UInt64)", "minState(duration)"},
		{"dmax", "AggregateFunction(max, UInt64)", "maxState(duration)"},
		{"dh", "AggregateFunction(sumMap, Array(Int32), Array(UInt64))", "sumMapState([" + rollupBucket("duration") + "], [toUInt64(1)])"},
	}
}

const opsRollupKeys = "project, minute, service, name"

func opsRollupTable() string {
	var cols []string
	for _, st := range opsStates() {
		cols = append(cols, "\t"+st.name+" "+st.typ)
	}
	return "CREATE TABLE IF NOT EXISTS ops_rollup (\n\tproject String,\n\tminute UInt64,\n\tservice String,\n\tname String,\n" +
		strings.Join(cols, ",\n") + "\n) ENGINE = AggregatingMergeTree PARTITION BY toDate(toDateTime(minute * 60)) ORDER BY (" + opsRollupKeys + ")"
}

func opsRollupView() string {
	sel := []string{"project", "intDiv(start, 60000000000) AS minute", "service", "name"}
	for _, st := range opsStates() {
		sel = append(sel, st.expr+" AS "+st.name)
	}
	return "CREATE MATERIALIZED VIEW IF NOT EXISTS ops_rollup_mv TO ops_rollup AS SELECT " + strings.Join(sel, ", ") +
		" FROM spans GROUP BY " + opsRollupKeys
}

// hist is a merged latency histogram.
type hist struct {
	calls, errors uint64
	min, max      uint64
	counts        map[int32]uint64
}

func (h *hist) add(calls, errs, lo, hi uint64, keys []int32, counts []uint64) {
	if h.counts == nil {
		h.counts = map[int32]uint64{}
		h.min = math.MaxUint64
	}
	h.calls += calls
	h.errors += errs
	h.min, h.max = min(h.min, lo), max(h.max, hi)
	for i, k := range keys {
		h.counts[k] += counts[i]
	}
}

func (h *hist) quantiles() store.Quantiles {
	keys := make([]int32, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	counts := make([]uint64, len(keys))
	for i, k := range keys {
		counts[i] = h.counts[k]
	}
	if q := quantilesOf(keys, counts, h.calls, h.min, h.max); q != nil {
		return *q
	}
	return store.Quantiles{}
}

// opsSQL runs the RED and heatmap aggregation without a filter by SQL
// (rollup and edges, or spans alone), calling visit with each (series,
// bucket) row; ok is false when it cannot (a filter, a step not in whole
// minutes: the scan answers, or refuses, those). ks and kn are the SQL of
// the series' service and name (constant text).
func (s *Store) opsSQL(ctx context.Context, project string, q *store.OpsQuery, ks, kn string,
	visit func(k [2]string, bucket, calls, errs, lo, hi uint64, keys []int32, counts []uint64)) (ok bool, err error) {
	if q.Filter != nil || q.Step < time.Minute || q.Step%time.Minute != 0 {
		return false, nil
	}
	if err := s.usable(ctx); err != nil {
		return true, err
	}
	start, end := s.window(project, q.Start, q.End)
	if end != 0 && start >= end {
		return true, nil
	}
	ks, kn = s.target.nonConstant(ks, "service"), s.target.nonConstant(kn, "name")
	step := uint64(q.Step)
	var names, exprs []string
	for _, st := range opsStates() {
		names = append(names, st.name)
		exprs = append(exprs, st.expr+" AS "+st.name)
	}
	filter := func(w *where) {
		if q.Service != "" {
			w.add("service = ?", q.Service)
		}
		if q.Name != "" {
			w.add("name = ?", q.Name)
		}
	}
	spansPart := func(w *where) (string, []any) {
		filter(w)
		return "SELECT " + ks + " AS ks, " + kn + " AS kn, toUInt64(intDiv(intDiv(start, 60000000000) * 60000000000, ?) * ?) AS bucket, " +
			strings.Join(exprs, ", ") + " FROM spans WHERE " + w.String() + " GROUP BY ks, kn, bucket", append([]any{step, step}, w.args...)
	}
	var parts []string
	var args []any
	add := func(sql string, a []any) { parts, args = append(parts, sql), append(args, a...) }
	m0, m1, use, err := s.rollupSpan(ctx, project, "ops", start, end)
	if err != nil {
		return true, err
	}
	if use {
		s.rollupReads.Add(1)
		rw := &where{}
		rw.add("project = ?", project)
		rw.add("minute >= ?", m0)
		if end != 0 {
			rw.add("minute < ?", m1)
		}
		filter(rw)
		add("SELECT "+ks+" AS ks, "+kn+" AS kn, toUInt64(intDiv(minute * 60000000000, ?) * ?) AS bucket, "+strings.Join(names, ", ")+
			" FROM ops_rollup WHERE "+rw.String(), append([]any{step, step}, rw.args...))
		w := s.base(project, start, end)
		if end != 0 {
			w.add("(start < ? OR start >= ?)", m0*minuteNanos, m1*minuteNanos)
		} else {
			w.add("start < ?", m0*minuteNanos)
		}
		add(spansPart(w))
	} else {
		add(spansPart(s.base(project, start, end)))
	}
	sql := "SELECT ks, kn, bucket, countMerge(spans), sumMerge(errors), minMerge(dmin), maxMerge(dmax), tupleElement(sumMapMerge(dh), 1), tupleElement(sumMapMerge(dh), 2) FROM (" +
		strings.Join(parts, " UNION ALL ") + ") GROUP BY ks, kn, bucket"
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return true, fmt.Errorf("RED on ClickHouse: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k                   [2]string
			bucket              uint64
			calls, errs, lo, hi uint64
			keys                []int32
			counts              []uint64
		)
		if err := rows.Scan(&k[0], &k[1], &bucket, &calls, &errs, &lo, &hi, &keys, &counts); err != nil {
			return true, fmt.Errorf("RED on ClickHouse: %w", err)
		}
		if calls > 0 {
			visit(k, bucket, calls, errs, lo, hi, keys, counts)
		}
	}
	if err := rows.Err(); err != nil {
		return true, fmt.Errorf("RED on ClickHouse: %w", err)
	}
	return true, nil
}

// redSQL answers RED without a filter by SQL (opsSQL).
func (s *Store) redSQL(ctx context.Context, project string, q *store.OpsQuery) (out []store.REDSeries, ok bool, err error) {
	ks, kn := "service", "''"
	if q.ByOperation {
		kn = "name"
		if q.NameOnly {
			ks = "''"
		}
	}
	type series struct {
		total   hist
		buckets map[uint64]*hist
	}
	groups := map[[2]string]*series{}
	ok, err = s.opsSQL(ctx, project, q, ks, kn, func(k [2]string, bucket, calls, errs, lo, hi uint64, keys []int32, counts []uint64) {
		g := groups[k]
		if g == nil {
			g = &series{buckets: map[uint64]*hist{}}
			groups[k] = g
		}
		g.total.add(calls, errs, lo, hi, keys, counts)
		b := g.buckets[bucket]
		if b == nil {
			b = &hist{}
			g.buckets[bucket] = b
		}
		b.add(calls, errs, lo, hi, keys, counts)
	})
	if !ok || err != nil {
		return nil, ok, err
	}
	out = make([]store.REDSeries, 0, len(groups))
	for k, g := range groups {
		rs := store.REDSeries{Service: k[0], Operation: k[1], Calls: int64(g.total.calls), Errors: int64(g.total.errors), Latency: g.total.quantiles()}
		for t, b := range g.buckets {
			rs.Buckets = append(rs.Buckets, store.REDPoint{Start: t, Calls: int64(b.calls), Errors: int64(b.errors), Latency: b.quantiles()})
		}
		slices.SortFunc(rs.Buckets, func(a, b store.REDPoint) int { return cmp.Compare(a.Start, b.Start) })
		out = append(out, rs)
	}
	slices.SortFunc(out, func(a, b store.REDSeries) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), strings.Compare(a.Service, b.Service), strings.Compare(a.Operation, b.Operation))
	})
	return out, true, nil
}

// heatmapSQL answers the heatmap without a filter by SQL (opsSQL): each
// sketch bucket of the histograms falls in one heatmap bucket
// (sketch.HeatmapStep), so the cells equal those of the durations.
func (s *Store) heatmapSQL(ctx context.Context, project string, q *store.OpsQuery) (store.Heatmap, bool, error) {
	type cell struct {
		t uint64
		h int
	}
	cells := map[cell]int64{}
	ok, err := s.opsSQL(ctx, project, q, "''", "''", func(_ [2]string, bucket, _, _, _, _ uint64, keys []int32, counts []uint64) {
		for i, k := range keys {
			h := 0
			if k > 0 {
				h = (int(k) + sketch.HeatmapStep - 1) / sketch.HeatmapStep
			}
			cells[cell{bucket, h}] += int64(counts[i])
		}
	})
	if !ok || err != nil {
		return store.Heatmap{}, ok, err
	}
	out := store.Heatmap{Bounds: sketch.HeatmapBounds(), Cells: make([]store.HeatCell, 0, len(cells))}
	for c, n := range cells {
		out.Cells = append(out.Cells, store.HeatCell{Start: c.t, Bucket: c.h, Count: n})
	}
	slices.SortFunc(out.Cells, func(a, b store.HeatCell) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Bucket, b.Bucket))
	})
	return out, true, nil
}
