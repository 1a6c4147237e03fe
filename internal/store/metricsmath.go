package store

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// metricsMath answers arithmetic between metrics queries, as Tempo's
// metrics math: each query is answered on its own (from aggregates where
// they cover it), then series are combined point by point. Two series
// combine when their labels (less __name__) are equal; a series without
// labels (a query with no by()) combines with every series of the other
// side. A bucket with no span is 0 for rate, count_over_time and
// histogram_over_time (unless a filter removed it) and absent for the
// other functions; a point either side lacks, or whose value is not a
// number (a division by zero), is left out.
func metricsMath(ctx context.Context, b Backend, project string, m *query.Math, req MetricsRequest) (MetricsAnswer, Result, error) {
	var ans MetricsAnswer
	var res Result
	aggregates := true
	var eval func(m *query.Math) ([]MetricsSeries, error)
	eval = func(m *query.Math) ([]MetricsSeries, error) {
		var out []MetricsSeries
		switch m.Op {
		case 0:
			a, r, err := QueryMetrics(ctx, b, project, m.Query, req)
			if err != nil {
				return nil, err
			}
			res.Warnings = append(res.Warnings, r.Warnings...)
			ans.SpansRead += a.SpansRead
			ans.TracesInspected += a.TracesInspected
			if a.Partial && !ans.Partial {
				ans.Partial, ans.Reason = true, a.Reason
			}
			aggregates = aggregates && a.Path == "aggregates"
			out = a.Series
			if mq := m.Query.Metrics(); len(mq.Second) == 0 && (mq.Func == query.FuncRate || mq.Func == query.FuncCountOverTime || mq.Func == query.FuncHistogramOverTime) {
				out = fillZeros(out, req)
			}
		default:
			var l, r []MetricsSeries
			var err error
			if m.L.Op != '#' {
				if l, err = eval(m.L); err != nil {
					return nil, err
				}
			}
			if m.R.Op != '#' {
				if r, err = eval(m.R); err != nil {
					return nil, err
				}
			}
			switch {
			case m.L.Op == '#':
				out = scalarOp(m.Op, r, func(v float64) float64 { return query.ApplyMath(m.Op, m.L.Number, v) })
			case m.R.Op == '#':
				out = scalarOp(m.Op, l, func(v float64) float64 { return query.ApplyMath(m.Op, v, m.R.Number) })
			default:
				out = seriesOp(m.Op, l, r)
			}
		}
		return applySecond(sortSeries(out), m.Second), nil
	}
	series, err := eval(m)
	if err != nil {
		return MetricsAnswer{}, res, err
	}
	ans.Series = series
	ans.Path = "spans"
	if aggregates {
		ans.Path = "aggregates"
	}
	return ans, res, nil
}

// fillZeros gives a counting series a point at every bucket of the range.
func fillZeros(series []MetricsSeries, req MetricsRequest) []MetricsSeries {
	var grid []int64
	for t := bucketOf(req.Start, req.Origin, req.Step); t < req.End; t += uint64(req.Step) {
		grid = append(grid, int64(t/1e6))
	}
	for i, s := range series {
		have := make(map[int64]float64, len(s.Samples))
		for _, p := range s.Samples {
			have[p.TimeMs] = p.Value
		}
		filled := make([]MetricsSample, 0, len(grid))
		for _, t := range grid {
			filled = append(filled, MetricsSample{TimeMs: t, Value: have[t]})
		}
		series[i].Samples = filled
	}
	return series
}

// scalarOp applies f to every point and exemplar of the series.
func scalarOp(op byte, series []MetricsSeries, f func(float64) float64) []MetricsSeries {
	out := make([]MetricsSeries, 0, len(series))
	for _, s := range series {
		n := MetricsSeries{Labels: s.Labels}
		for _, p := range s.Samples {
			if v := f(p.Value); !math.IsNaN(v) && !math.IsInf(v, 0) {
				n.Samples = append(n.Samples, MetricsSample{TimeMs: p.TimeMs, Value: v})
			}
		}
		for _, e := range s.Exemplars {
			e.Value = f(e.Value)
			n.Exemplars = append(n.Exemplars, e)
		}
		if len(n.Samples) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// matchKey is a series' labels less __name__, the key series combine on.
func matchKey(labels []query.GroupAttr) string {
	var b strings.Builder
	for _, l := range labels {
		if l.Name != "__name__" {
			b.WriteString(l.Name + "=" + l.Value.AsString() + "\x00")
		}
	}
	return b.String()
}

// seriesOp combines two sides' series point by point (see metricsMath).
func seriesOp(op byte, l, r []MetricsSeries) []MetricsSeries {
	index := func(ss []MetricsSeries) map[string]*MetricsSeries {
		m := make(map[string]*MetricsSeries, len(ss))
		for i := range ss {
			m[matchKey(ss[i].Labels)] = &ss[i]
		}
		return m
	}
	li, ri := index(l), index(r)
	target := l
	if _, fan := ri[""]; !fan {
		target = r
	}
	lookup := func(m map[string]*MetricsSeries, k string) (*MetricsSeries, bool, bool) {
		if s, ok := m[k]; ok {
			return s, false, true
		}
		s, ok := m[""]
		return s, true, ok
	}
	var out []MetricsSeries
	for _, t := range target {
		k := matchKey(t.Labels)
		ls, lFan, ok1 := lookup(li, k)
		rs, rFan, ok2 := lookup(ri, k)
		if !ok1 || !ok2 {
			continue
		}
		rv := make(map[int64]float64, len(rs.Samples))
		for _, p := range rs.Samples {
			rv[p.TimeMs] = p.Value
		}
		n := MetricsSeries{Labels: mergeLabels(op, ls.Labels, rs.Labels)}
		for _, p := range ls.Samples {
			y, ok := rv[p.TimeMs]
			if !ok {
				continue
			}
			if v := query.ApplyMath(op, p.Value, y); !math.IsNaN(v) && !math.IsInf(v, 0) {
				n.Samples = append(n.Samples, MetricsSample{TimeMs: p.TimeMs, Value: v})
			}
		}
		switch {
		case lFan == rFan:
			n.Exemplars = append(slices.Clone(ls.Exemplars), rs.Exemplars...)
		case lFan:
			n.Exemplars = rs.Exemplars
		default:
			n.Exemplars = ls.Exemplars
		}
		if len(n.Samples) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// mergeLabels is the left side's labels then the right side's others;
// __name__ becomes "(l op r)" when both sides have one, else is dropped.
func mergeLabels(op byte, l, r []query.GroupAttr) []query.GroupAttr {
	name := func(ls []query.GroupAttr) (string, bool) {
		for _, a := range ls {
			if a.Name == "__name__" {
				return a.Value.AsString(), true
			}
		}
		return "", false
	}
	ln, lok := name(l)
	rn, rok := name(r)
	out := make([]query.GroupAttr, 0, len(l)+len(r))
	for _, a := range l {
		if a.Name != "__name__" {
			out = append(out, a)
		}
	}
	for _, a := range r {
		if a.Name != "__name__" && !slices.ContainsFunc(out, func(x query.GroupAttr) bool { return x.Name == a.Name }) {
			out = append(out, a)
		}
	}
	if lok && rok {
		out = append(out, query.GroupAttr{Name: "__name__", Value: model.StringValue("(" + ln + " " + string(op) + " " + rn + ")")})
	}
	return out
}
