package store

import (
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
)

// MetricsRequest is a TraceQL metrics query's range.
type MetricsRequest struct {
	Start, End uint64        // [Start, End), unix ns
	Step       time.Duration // bucket width; buckets start at Origin + k*Step
	Origin     uint64        // 0: buckets at multiples of Step since the epoch; an instant query sets Start
	Exemplars  int           // most exemplars per series (0: none)
	// MaxSpans bounds the spans a query reading spans may read; 0 = 2,000,000.
	MaxSpans int
	// MaxTime bounds the time spent reading spans; 0 = 10 s.
	MaxTime time.Duration
	// NoAggregates forces the span path (tests compare both paths).
	NoAggregates bool
}

// MetricsSample is one point of a series.
type MetricsSample struct {
	TimeMs int64 // bucket start, unix ms
	Value  float64
}

// MetricsExemplar is a span behind a series' point.
type MetricsExemplar struct {
	TraceID, SpanID string
	Value           float64
	TimeMs          int64
}

// MetricsSeries is one series of a metrics answer.
type MetricsSeries struct {
	Labels    []query.GroupAttr
	Samples   []MetricsSample
	Exemplars []MetricsExemplar
}

// MetricsAnswer is a metrics query's answer.
type MetricsAnswer struct {
	Series []MetricsSeries
	// Path is "aggregates" when stored service aggregates answered (no span
	// read), "spans" otherwise.
	Path            string
	SpansRead       int
	TracesInspected int
	Partial         bool
	Reason          string
}

// QueryMetrics answers a TraceQL metrics query on any backend. A query
// whose filter, grouping and function the service aggregates cover (see
// query.OpsCovered: service, span name and error status; by service or
// name; rate and counts, or p50/p95/p99 and max of duration) with a step
// of whole minutes is answered from store.ServiceReader without reading
// spans; any other reads the matching spans (a structural or pipeline
// query reads whole traces), up to MaxSpans.
func QueryMetrics(ctx context.Context, b Backend, project string, q *query.Query, req MetricsRequest) (MetricsAnswer, Result, error) {
	m := q.Metrics()
	if m == nil && q.Math() == nil {
		return MetricsAnswer{}, Result{}, fmt.Errorf("%w: not a metrics query: end it with a metrics function such as | rate()", ErrBadRequest)
	}
	if req.Step <= 0 || req.End <= req.Start {
		return MetricsAnswer{}, Result{}, fmt.Errorf("%w: the range is empty or the step is not positive", ErrBadRequest)
	}
	if n := (req.End - req.Start) / uint64(req.Step); n > 11000 {
		return MetricsAnswer{}, Result{}, fmt.Errorf("%w: step %v gives %d points over the range; use a step giving at most 11000", ErrBadRequest, req.Step, n)
	}
	if req.MaxSpans <= 0 {
		req.MaxSpans = 2_000_000
	}
	if req.MaxTime <= 0 {
		req.MaxTime = 10 * time.Second
	}
	if q.Math() != nil {
		return metricsMath(ctx, b, project, q.Math(), req)
	}
	if !req.NoAggregates {
		if ans, res, ok, err := metricsFromAggregates(ctx, b, project, q, req); ok || err != nil {
			return finishMetrics(ans, m), res, err
		}
	}
	ans, res, err := metricsFromSpans(ctx, b, project, q, req)
	return finishMetrics(ans, m), res, err
}

// bucketOf is the bucket start of a span start time, unix ns, for buckets
// at origin + k*step.
func bucketOf(t, origin uint64, step time.Duration) uint64 {
	if t < origin {
		return origin - ((origin-t-1)/uint64(step)+1)*uint64(step)
	}
	return t - (t-origin)%uint64(step)
}

// acc accumulates one series' bucket.
type acc struct {
	count, errors int64
	sum           float64
	min, max      float64
	values        []float64 // quantiles of the span path
	hasValue      bool
	exemplar      *MetricsExemplar
	// from aggregates
	p50, p95, p99 float64
}

func (a *acc) add(x float64) {
	if !a.hasValue || x < a.min {
		a.min = x
	}
	if !a.hasValue || x > a.max {
		a.max = x
	}
	a.hasValue = true
	a.sum += x
}

// seriesKey identifies a series before its labels are made.
type seriesKey struct {
	group  string // the by() values, encoded
	bucket string // histogram bucket
}

type builder struct {
	// compare(): per side (selection true), attribute, value key.
	cmpVals   [2]map[string]map[string]*cmpValue
	cmpTotals [2]map[string]map[uint64]float64
	m         *query.Metrics
	step      time.Duration
	origin    uint64
	groups    map[string][]query.GroupAttr
	accs      map[seriesKey]map[uint64]*acc
	order     []seriesKey
	exemplar  int
}

func newBuilder(m *query.Metrics, step time.Duration, origin uint64, exemplars int) *builder {
	return &builder{m: m, step: step, origin: origin, groups: map[string][]query.GroupAttr{}, accs: map[seriesKey]map[uint64]*acc{}, exemplar: exemplars}
}

func (b *builder) bucket(group []query.GroupAttr, hist string, t uint64) *acc {
	var sb strings.Builder
	for _, g := range group {
		sb.WriteString(strconv.Itoa(int(g.Value.Type)))
		sb.WriteByte(0)
		sb.WriteString(g.Value.AsString())
		sb.WriteByte(1)
	}
	k := seriesKey{group: sb.String(), bucket: hist}
	if _, ok := b.groups[k.group]; !ok {
		b.groups[k.group] = group
	}
	s := b.accs[k]
	if s == nil {
		s = map[uint64]*acc{}
		b.accs[k] = s
		b.order = append(b.order, k)
	}
	bt := bucketOf(t, b.origin, b.step)
	a := s[bt]
	if a == nil {
		a = &acc{}
		s[bt] = a
	}
	return a
}

// histBucket is histogram_over_time's bucket of a value: the next power of
// two (durations in seconds), as Tempo's log2 buckets.
func histBucket(x float64, duration bool) float64 {
	if duration {
		x /= 1e9
	}
	if x <= 0 {
		return 0
	}
	return math.Pow(2, math.Ceil(math.Log2(x)))
}

type cmpValue struct {
	val    model.Value
	total  float64
	counts map[uint64]float64
}

// addCompare counts a span's attributes for compare(), on its side.
func (b *builder) addCompare(s *model.Span) {
	side := 0
	if b.m.Selected(s) {
		side = 1
	}
	if b.cmpVals[side] == nil {
		b.cmpVals[side], b.cmpTotals[side] = map[string]map[string]*cmpValue{}, map[string]map[uint64]float64{}
	}
	t := bucketOf(s.StartTimeUnixNano, b.origin, b.step)
	query.CompareAttributes(s, func(name string, v model.Value) {
		vals := b.cmpVals[side][name]
		if vals == nil {
			vals = map[string]*cmpValue{}
			b.cmpVals[side][name] = vals
			b.cmpTotals[side][name] = map[uint64]float64{}
		}
		k := strconv.Itoa(int(v.Type)) + "\x00" + v.AsString()
		cv := vals[k]
		if cv == nil {
			cv = &cmpValue{val: v, counts: map[uint64]float64{}}
			vals[k] = cv
		}
		cv.counts[t]++
		cv.total++
		b.cmpTotals[side][name][t]++
	})
}

// compareSeries makes compare()'s series, as Tempo names them: per side
// and attribute the top values (label __meta_type baseline or selection,
// and the attribute = value), and the totals (baseline_total,
// selection_total, the attribute without a value).
func (b *builder) compareSeries() []MetricsSeries {
	var out []MetricsSeries
	samples := func(counts map[uint64]float64) []MetricsSample {
		times := make([]uint64, 0, len(counts))
		for t := range counts {
			times = append(times, t)
		}
		slices.Sort(times)
		ss := make([]MetricsSample, len(times))
		for i, t := range times {
			ss[i] = MetricsSample{TimeMs: int64(t / 1e6), Value: counts[t]}
		}
		return ss
	}
	for side, name := range []string{"baseline", "selection"} {
		meta := query.GroupAttr{Name: "__meta_type", Value: model.StringValue(name)}
		for attr, vals := range b.cmpVals[side] {
			list := make([]*cmpValue, 0, len(vals))
			for _, v := range vals {
				list = append(list, v)
			}
			slices.SortFunc(list, func(x, y *cmpValue) int {
				return cmp.Or(cmp.Compare(y.total, x.total), strings.Compare(x.val.AsString(), y.val.AsString()))
			})
			for _, v := range list[:min(len(list), b.m.CompareTopN)] {
				out = append(out, MetricsSeries{Labels: []query.GroupAttr{meta, {Name: attr, Value: v.val}}, Samples: samples(v.counts)})
			}
			total := query.GroupAttr{Name: "__meta_type", Value: model.StringValue(name + "_total")}
			out = append(out, MetricsSeries{Labels: []query.GroupAttr{total, {Name: attr}}, Samples: samples(b.cmpTotals[side][attr])})
		}
	}
	return out
}

// addSpan folds one span into the answer.
func (b *builder) addSpan(s *model.Span) {
	if b.m.Func == query.FuncCompare {
		b.addCompare(s)
		return
	}
	vals := b.m.GroupKey(s)
	group := make([]query.GroupAttr, len(vals))
	for i, name := range b.m.By() {
		group[i] = query.GroupAttr{Name: name, Value: vals[i]}
	}
	hist := ""
	var x float64
	needValue := b.m.Func != query.FuncRate && b.m.Func != query.FuncCountOverTime
	if needValue {
		v, ok := b.m.Value(s)
		if !ok {
			return
		}
		x = v
		if b.m.Func == query.FuncHistogramOverTime {
			hist = strconv.FormatFloat(histBucket(x, b.m.FieldIsDuration()), 'g', -1, 64)
		}
	}
	a := b.bucket(group, hist, s.StartTimeUnixNano)
	a.count++
	if needValue {
		a.add(x)
		if b.m.Func == query.FuncQuantileOverTime {
			a.values = append(a.values, x)
		}
	}
	if b.exemplar > 0 && a.exemplar == nil {
		ev := x
		if !needValue {
			ev = float64(s.Duration())
		}
		if b.m.FieldIsDuration() || !needValue {
			ev /= 1e9
		}
		a.exemplar = &MetricsExemplar{TraceID: s.TraceID.String(), SpanID: s.SpanID.String(), Value: ev, TimeMs: int64(s.StartTimeUnixNano / 1e6)}
	}
}

// metricsFromSpans reads the spans the query selects.
func metricsFromSpans(ctx context.Context, b Backend, project string, q *query.Query, req MetricsRequest) (MetricsAnswer, Result, error) {
	m := q.Metrics()
	bl := newBuilder(m, req.Step, req.Origin, req.Exemplars)
	ans := MetricsAnswer{Path: "spans"}
	var res Result
	sq := q.Spans()
	deadline := time.Now().Add(req.MaxTime)
	if e, simple := sq.Simple(); simple {
		f := query.Filter{Expr: e, Start: req.Start, End: req.End}
		var cur *Cursor
		for {
			spans, next, r, err := b.SearchSpans(ctx, project, &f, 10000, cur)
			res.Warnings = append(res.Warnings, r.Warnings...)
			if err != nil {
				return ans, res, err
			}
			for i := range spans {
				bl.addSpan(&spans[i])
			}
			ans.SpansRead += len(spans)
			if next == nil {
				break
			}
			if ans.SpansRead >= req.MaxSpans || time.Now().After(deadline) {
				ans.Partial, ans.Reason = true, fmt.Sprintf("stopped after reading %d spans (budget %d spans, %v); the newest spans are counted", ans.SpansRead, req.MaxSpans, req.MaxTime)
				break
			}
			cur = next
		}
	} else {
		matches, stats, r, err := QueryTraces(ctx, b, project, sq, &query.Filter{Start: req.Start, End: req.End}, math.MaxInt32, QueryBudget{Traces: max(1, req.MaxSpans/10), Time: req.MaxTime})
		res.Warnings = append(res.Warnings, r.Warnings...)
		if err != nil {
			return ans, res, err
		}
		for _, tm := range matches {
			for i := range tm.Spans {
				if s := &tm.Spans[i]; s.StartTimeUnixNano >= req.Start && s.StartTimeUnixNano < req.End {
					bl.addSpan(s)
				}
			}
			ans.SpansRead += len(tm.All)
		}
		ans.TracesInspected, ans.Partial, ans.Reason = stats.TracesInspected, stats.Partial, stats.Reason
	}
	ans.Series = bl.series(req)
	return ans, res, nil
}

// metricsFromAggregates answers from RED (store.ServiceReader) when the
// query allows; ok false otherwise.
func metricsFromAggregates(ctx context.Context, b Backend, project string, q *query.Query, req MetricsRequest) (MetricsAnswer, Result, bool, error) {
	m := q.Metrics()
	sr, isSR := b.(ServiceReader)
	e, simple := q.Spans().Simple()
	if !isSR || !simple || req.Step%time.Minute != 0 || req.Origin%uint64(req.Step) != 0 {
		return MetricsAnswer{}, Result{}, false, nil
	}
	scope, ok := query.OpsCovered(e)
	if !ok {
		return MetricsAnswer{}, Result{}, false, nil
	}
	byService, byName := false, false
	for _, k := range m.ByKinds() {
		switch k {
		case "service":
			byService = true
		case "name":
			byName = true
		default:
			return MetricsAnswer{}, Result{}, false, nil
		}
	}
	switch m.Func {
	case query.FuncRate, query.FuncCountOverTime:
	case query.FuncMaxOverTime, query.FuncQuantileOverTime:
		// Sketches hold every span: not error spans alone; merged
		// percentiles across services are not in RED's answer.
		if !m.FieldIsDuration() || scope.ErrorsOnly {
			return MetricsAnswer{}, Result{}, false, nil
		}
		for _, x := range m.Quantiles {
			if x != 0.5 && x != 0.95 && x != 0.99 && x != 1 {
				return MetricsAnswer{}, Result{}, false, nil
			}
		}
		if !byService && !byName && scope.Service == "" {
			return MetricsAnswer{}, Result{}, false, nil // percentiles over every service are not one RED series
		}
	default:
		return MetricsAnswer{}, Result{}, false, nil
	}
	series, res, err := sr.RED(ctx, project, &OpsQuery{Start: req.Start, End: req.End, Service: scope.Service, Name: scope.Name,
		Step: req.Step, ByOperation: byName || scope.Name != "", NameOnly: byName && !byService && scope.Service == ""})
	if err != nil {
		return MetricsAnswer{}, res, true, err
	}
	bl := newBuilder(m, req.Step, 0, 0)
	names := m.By()
	kinds := m.ByKinds()
	for _, s := range series {
		group := make([]query.GroupAttr, len(names))
		for i := range names {
			v := s.Service
			if kinds[i] == "name" {
				v = s.Operation
			}
			group[i] = query.GroupAttr{Name: names[i], Value: model.StringValue(v)}
		}
		for _, p := range s.Buckets {
			n := p.Calls
			if scope.ErrorsOnly {
				n = p.Errors
			}
			if n == 0 {
				continue
			}
			a := bl.bucket(group, "", p.Start)
			if a.count > 0 && (m.Func == query.FuncQuantileOverTime || m.Func == query.FuncMaxOverTime) {
				// Two RED series in one group (by name across services is
				// refused above): cannot happen for percentiles.
				return MetricsAnswer{}, res, false, nil
			}
			a.count += n
			a.p50, a.p95, a.p99 = p.Latency.P50, p.Latency.P95, p.Latency.P99
			a.max = max(a.max, p.Latency.Max)
			a.hasValue = true
		}
	}
	return MetricsAnswer{Path: "aggregates", Series: bl.series(req)}, res, true, nil
}

// series turns the accumulators into series, buckets in time order.
func (b *builder) series(req MetricsRequest) []MetricsSeries {
	if b.m.Func == query.FuncCompare {
		return b.compareSeries()
	}
	var out []MetricsSeries
	stepSec := b.step.Seconds()
	for _, k := range b.order {
		qs := []float64{math.NaN()}
		if b.m.Func == query.FuncQuantileOverTime {
			qs = b.m.Quantiles
		}
		buckets := b.accs[k]
		times := make([]uint64, 0, len(buckets))
		for t := range buckets {
			times = append(times, t)
		}
		slices.Sort(times)
		for _, qv := range qs {
			labels := slices.Clone(b.groups[k.group])
			if len(labels) == 0 {
				labels = []query.GroupAttr{{Name: "__name__", Value: model.StringValue(b.m.Func.String())}}
			}
			if b.m.Func == query.FuncQuantileOverTime {
				labels = append(labels, query.GroupAttr{Name: "p", Value: model.DoubleValue(qv)})
			}
			if b.m.Func == query.FuncHistogramOverTime {
				f, _ := strconv.ParseFloat(k.bucket, 64)
				labels = append(labels, query.GroupAttr{Name: "__bucket", Value: model.DoubleValue(f)})
			}
			s := MetricsSeries{Labels: labels}
			for _, t := range times {
				a := buckets[t]
				var v float64
				switch b.m.Func {
				case query.FuncRate:
					v = float64(a.count) / stepSec
				case query.FuncCountOverTime, query.FuncHistogramOverTime:
					v = float64(a.count)
				case query.FuncMinOverTime:
					v = a.min
				case query.FuncMaxOverTime:
					v = a.max
				case query.FuncSumOverTime:
					v = a.sum
				case query.FuncAvgOverTime:
					v = a.sum / float64(a.count)
				case query.FuncQuantileOverTime:
					v = a.quantile(qv)
				}
				if b.m.FieldIsDuration() && b.m.Func != query.FuncHistogramOverTime && b.m.Func != query.FuncRate && b.m.Func != query.FuncCountOverTime {
					v /= 1e9 // durations in seconds, as Tempo answers
				}
				if math.IsNaN(v) || math.IsInf(v, 0) || (!a.hasValue && b.m.Field() != "") {
					continue
				}
				s.Samples = append(s.Samples, MetricsSample{TimeMs: int64(t / 1e6), Value: v})
				if a.exemplar != nil && len(s.Exemplars) < b.exemplar {
					s.Exemplars = append(s.Exemplars, *a.exemplar)
				}
			}
			if len(s.Samples) > 0 {
				out = append(out, s)
			}
		}
	}
	return out
}

// quantile of a bucket: exact over the values read (span path), or the
// stored sketch's (aggregate path).
func (a *acc) quantile(q float64) float64 {
	if len(a.values) == 0 {
		switch q {
		case 0.5:
			return a.p50
		case 0.95:
			return a.p95
		case 0.99:
			return a.p99
		case 1:
			return a.max
		}
		return math.NaN()
	}
	slices.Sort(a.values)
	return a.values[int(q*float64(len(a.values)-1))]
}

// finishMetrics sorts series by labels and applies the stages after the
// metrics function.
func finishMetrics(ans MetricsAnswer, m *query.Metrics) MetricsAnswer {
	ans.Series = applySecond(sortSeries(ans.Series), m.Second)
	return ans
}

// sortSeries sorts series by their labels.
func sortSeries(series []MetricsSeries) []MetricsSeries {
	key := func(s *MetricsSeries) string {
		var b strings.Builder
		for _, l := range s.Labels {
			b.WriteString(l.Name + "=" + l.Value.AsString() + ",")
		}
		return b.String()
	}
	slices.SortFunc(series, func(a, b MetricsSeries) int { return strings.Compare(key(&a), key(&b)) })
	return series
}

// applySecond applies topk/bottomk (per point, as in PromQL: the k
// highest values at each time) and filters on the points' values, in
// order.
func applySecond(series []MetricsSeries, stages []query.SecondStage) []MetricsSeries {
	for _, st := range stages {
		if st.TopK > 0 {
			series = topK(series, st.TopK, st.BottomK)
			continue
		}
		var out []MetricsSeries
		for _, s := range series {
			var kept []MetricsSample
			for _, p := range s.Samples {
				if st.Keep(p.Value) {
					kept = append(kept, p)
				}
			}
			if len(kept) > 0 {
				s.Samples = kept
				out = append(out, s)
			}
		}
		series = out
	}
	return series
}

// topK keeps, at each time, the k series with the highest values (bottom:
// lowest), as PromQL's topk.
func topK(series []MetricsSeries, k int, bottom bool) []MetricsSeries {
	if len(series) <= k {
		return series
	}
	type ref struct {
		s int
		v float64
	}
	at := map[int64][]ref{}
	for i := range series {
		for _, p := range series[i].Samples {
			at[p.TimeMs] = append(at[p.TimeMs], ref{i, p.Value})
		}
	}
	keep := map[[2]int64]bool{}
	for t, refs := range at {
		slices.SortStableFunc(refs, func(a, b ref) int {
			if bottom {
				return cmp.Compare(a.v, b.v)
			}
			return cmp.Compare(b.v, a.v)
		})
		for _, r := range refs[:min(k, len(refs))] {
			keep[[2]int64{int64(r.s), t}] = true
		}
	}
	var out []MetricsSeries
	for i, s := range series {
		var samples []MetricsSample
		for _, p := range s.Samples {
			if keep[[2]int64{int64(i), p.TimeMs}] {
				samples = append(samples, p)
			}
		}
		if len(samples) > 0 {
			s.Samples = samples
			out = append(out, s)
		}
	}
	return out
}
