package promql

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/rastro-dev/rastro/internal/parallel"
	"github.com/rastro-dev/rastro/internal/store"
)

// DefaultLookback is how far back an instant selector looks for a sample.
const DefaultLookback = 5 * time.Minute

// Queryable is where the evaluator reads series.
type Queryable interface {
	SelectSeries(project string, mint, maxt int64, ms []*store.LabelMatcher) ([]store.SeriesData, error)
}

// Sample is one element of an instant vector.
type Sample struct {
	Labels store.Labels
	F      float64
}

// Point is a value at a time (milliseconds).
type Point struct {
	T int64
	F float64
}

// Series is one element of a matrix.
type Series struct {
	Labels store.Labels
	Points []Point
}

// Result is a query's answer: a scalar, a vector or a matrix.
type Result struct {
	Type ValueType
	// T is the evaluation time of an instant query (milliseconds).
	T      int64
	Scalar Point
	Vector []Sample
	Matrix []Series
}

// Query is one evaluation: an expression over [Start, End] every Step
// (milliseconds; an instant query has Start == End and Step 0).
type Query struct {
	Project  string
	Expr     Node
	Start    int64
	End      int64
	Step     int64
	Lookback time.Duration // default DefaultLookback
	// MaxSamples bounds the samples read (0: no bound).
	MaxSamples int
}

// ErrTooManySamples is returned when a query reads more than MaxSamples.
var ErrTooManySamples = errors.New("query processing would load too many samples into memory")

type evaluator struct {
	q        Query
	lookback int64
	data     map[*VectorSelector][]store.SeriesData
	steps    []int64 // the evaluation times
}

// Instant evaluates q at q.Start. A range-vector expression answers a matrix.
func Instant(db Queryable, q Query) (Result, error) {
	q.End, q.Step = q.Start, 0
	ev, err := prepare(db, q)
	if err != nil {
		return Result{}, err
	}
	t := q.Start
	if ms, ok := q.Expr.(*MatrixSelector); ok {
		var out []Series
		for _, s := range ev.data[ms.VS] {
			pts := window(s.Samples, q.Start-ms.Range.Milliseconds(), q.Start)
			if len(pts) > 0 {
				out = append(out, Series{Labels: s.Labels, Points: pts})
			}
		}
		return Result{Type: TypeMatrix, T: t, Matrix: out}, nil
	}
	if q.Expr.Type() == TypeScalar {
		return Result{Type: TypeScalar, T: t, Scalar: Point{t, ev.scalar(q.Expr)}}, nil
	}
	m, err := ev.eval(q.Expr)
	if err != nil {
		return Result{}, err
	}
	vec := make([]Sample, 0, len(m))
	for _, s := range m {
		if len(s.Points) > 0 {
			vec = append(vec, Sample{Labels: s.Labels, F: s.Points[0].F})
		}
	}
	slices.SortFunc(vec, func(a, b Sample) int { return store.CompareLabels(a.Labels, b.Labels) })
	return Result{Type: TypeVector, T: t, Vector: vec}, nil
}

// Range evaluates q at Start, Start+Step, ... <= End and answers a matrix.
func Range(db Queryable, q Query) (Result, error) {
	if q.Expr.Type() == TypeMatrix {
		return Result{}, &Error{BadQuery, 0, "invalid expression type \"range vector\" for range query, must be scalar or instant vector"}
	}
	if q.Step <= 0 {
		return Result{}, &Error{BadQuery, 0, "zero or negative query resolution step width"}
	}
	ev, err := prepare(db, q)
	if err != nil {
		return Result{}, err
	}
	if q.Expr.Type() == TypeScalar {
		v := ev.scalar(q.Expr)
		s := Series{}
		for _, t := range ev.steps {
			s.Points = append(s.Points, Point{t, v})
		}
		return Result{Type: TypeMatrix, Matrix: []Series{s}}, nil
	}
	m, err := ev.eval(q.Expr)
	if err != nil {
		return Result{}, err
	}
	out := m[:0]
	for _, s := range m {
		if len(s.Points) > 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Series) int { return store.CompareLabels(a.Labels, b.Labels) })
	return Result{Type: TypeMatrix, Matrix: out}, nil
}

// prepare reads, once, every selector's series over the whole query.
func prepare(db Queryable, q Query) (*evaluator, error) {
	lb := q.Lookback
	if lb <= 0 {
		lb = DefaultLookback
	}
	ev := &evaluator{q: q, lookback: lb.Milliseconds(), data: map[*VectorSelector][]store.SeriesData{}}
	for t := q.Start; t <= q.End; t += max(q.Step, 1) {
		ev.steps = append(ev.steps, t)
	}
	total := 0
	var walk func(n Node, rng int64) error
	walk = func(n Node, rng int64) error {
		switch n := n.(type) {
		case *VectorSelector:
			back := ev.lookback
			if rng > 0 {
				back = rng
			}
			ss, err := db.SelectSeries(q.Project, q.Start-back, q.End, n.Matchers)
			if err != nil {
				return err
			}
			for _, s := range ss {
				total += len(s.Samples)
			}
			if q.MaxSamples > 0 && total > q.MaxSamples {
				return ErrTooManySamples
			}
			ev.data[n] = ss
		case *MatrixSelector:
			return walk(n.VS, n.Range.Milliseconds())
		case *Call:
			for _, a := range n.Args {
				if err := walk(a, 0); err != nil {
					return err
				}
			}
		case *Aggregate:
			return walk(n.Expr, 0)
		case *Binary:
			if err := walk(n.LHS, 0); err != nil {
				return err
			}
			return walk(n.RHS, 0)
		}
		return nil
	}
	return ev, walk(q.Expr, 0)
}

// window returns the samples in (lo, hi].
func window(ss []store.Sample, lo, hi int64) []Point {
	i := sort.Search(len(ss), func(i int) bool { return ss[i].T > lo })
	j := sort.Search(len(ss), func(i int) bool { return ss[i].T > hi })
	out := make([]Point, 0, j-i)
	for _, s := range ss[i:j] {
		out = append(out, Point{s.T, s.V})
	}
	return out
}

// scalar evaluates a scalar expression: in this subset it holds numbers
// only, so its value is the same at every step.
func (ev *evaluator) scalar(n Node) float64 {
	switch n := n.(type) {
	case *NumberLiteral:
		return n.V
	case *Binary:
		return arith(n.Op, ev.scalar(n.LHS), ev.scalar(n.RHS))
	}
	panic(fmt.Sprintf("promql: %T is not a scalar expression (broken invariant: the parser let it through)", n))
}

// eval evaluates an instant-vector expression at every step at once: one
// Series per output label set, with a point at each step where it has a
// value. Evaluating series by series (rather than step by step) computes
// each output label set once.
func (ev *evaluator) eval(n Node) ([]Series, error) {
	switch n := n.(type) {
	case *VectorSelector:
		data := ev.data[n]
		out := make([]Series, len(data))
		parallel.Parts(len(data), len(data)*len(ev.steps), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				ss := data[i].Samples
				var pts []Point
				j := 0 // the first sample after the step
				for _, t := range ev.steps {
					for j < len(ss) && ss[j].T <= t {
						j++
					}
					if j > 0 && ss[j-1].T > t-ev.lookback {
						if pts == nil {
							pts = make([]Point, 0, len(ev.steps))
						}
						pts = append(pts, Point{t, ss[j-1].V})
					}
				}
				out[i] = Series{Labels: data[i].Labels, Points: pts}
			}
		})
		return out, nil
	case *Call:
		switch n.Func {
		case "rate", "increase":
			ms := n.Args[0].(*MatrixSelector)
			rng := ms.Range.Milliseconds()
			data := ev.data[ms.VS]
			all := make([]Series, len(data))
			parallel.Parts(len(data), len(data)*len(ev.steps), func(first, end int) {
				for i := first; i < end; i++ {
					ss := data[i].Samples
					var pts []Point
					lo, hi := 0, 0
					for _, t := range ev.steps {
						for hi < len(ss) && ss[hi].T <= t {
							hi++
						}
						for lo < hi && ss[lo].T <= t-rng {
							lo++
						}
						if hi-lo < 2 {
							continue
						}
						if f, ok := extrapolatedRate(ss[lo:hi], t-rng, t, ms.Range, true, n.Func == "rate"); ok {
							if pts == nil {
								pts = make([]Point, 0, len(ev.steps))
							}
							pts = append(pts, Point{t, f})
						}
					}
					if pts != nil {
						all[i] = Series{Labels: dropName(data[i].Labels), Points: pts}
					}
				}
			})
			out := all[:0]
			for _, s := range all {
				if s.Points != nil {
					out = append(out, s)
				}
			}
			return out, checkDuplicates(out)
		case "histogram_quantile":
			q := ev.scalar(n.Args[0])
			in, err := ev.eval(n.Args[1])
			if err != nil {
				return nil, err
			}
			return ev.histogramQuantile(q, in), nil
		}
	case *Aggregate:
		in, err := ev.eval(n.Expr)
		if err != nil {
			return nil, err
		}
		return ev.aggregate(n, in), nil
	case *Binary:
		lt := n.LHS.Type()
		vecSide, scalarSide := n.LHS, n.RHS
		if lt == TypeScalar {
			vecSide, scalarSide = n.RHS, n.LHS
		}
		in, err := ev.eval(vecSide)
		if err != nil {
			return nil, err
		}
		c := ev.scalar(scalarSide)
		out := make([]Series, len(in))
		for i, s := range in {
			pts := make([]Point, len(s.Points))
			for j, p := range s.Points {
				if lt == TypeScalar {
					pts[j] = Point{p.T, arith(n.Op, c, p.F)}
				} else {
					pts[j] = Point{p.T, arith(n.Op, p.F, c)}
				}
			}
			out[i] = Series{Labels: dropName(s.Labels), Points: pts}
		}
		return out, checkDuplicates(out)
	}
	return nil, fmt.Errorf("promql: cannot evaluate %T (broken invariant: the parser let it through)", n)
}

// stepIndex is the index of time t in ev.steps.
func (ev *evaluator) stepIndex(t int64) int {
	if ev.q.Step <= 0 {
		return 0
	}
	return int((t - ev.q.Start) / ev.q.Step)
}

func arith(op byte, a, b float64) float64 {
	switch op {
	case '+':
		return a + b
	case '-':
		return a - b
	case '*':
		return a * b
	}
	return a / b
}

func dropName(ls store.Labels) store.Labels {
	i := slices.IndexFunc(ls, func(l store.Label) bool { return l.Name == store.MetricName })
	if i < 0 {
		return ls
	}
	return slices.Delete(slices.Clone(ls), i, i+1)
}

// checkDuplicates refuses output whose series share a label set where
// both have a value at the same step, as Prometheus refuses such a vector.
func checkDuplicates(v []Series) error {
	if len(v) < 2 {
		return nil
	}
	seen := make(map[string]int, len(v))
	for i, s := range v {
		k := s.Labels.Key()
		if j, ok := seen[k]; ok {
			for _, p := range s.Points {
				if slices.ContainsFunc(v[j].Points, func(q Point) bool { return q.T == p.T }) {
					return &Error{BadQuery, 0, "vector cannot contain metrics with the same labelset " + s.Labels.String()}
				}
			}
		}
		seen[k] = i
	}
	return nil
}

// extrapolatedRate is Prometheus' rate and increase (promql/functions.go,
// extrapolatedRate, for float samples): the increase between the first and
// last sample in the range, corrected for counter resets, extrapolated to
// the range's ends when the samples come close enough to them, and never
// to below zero at the start.
//
// It reads the store's samples in place (a range query calls it at every
// step of every series).
func extrapolatedRate(pts []store.Sample, rangeStart, rangeEnd int64, rng time.Duration, isCounter, isRate bool) (float64, bool) {
	if len(pts) < 2 {
		return 0, false
	}
	first, last := pts[0], pts[len(pts)-1]
	result := last.V - first.V
	if isCounter {
		prev := first.V
		for _, p := range pts[1:] {
			if p.V < prev {
				result += prev
			}
			prev = p.V
		}
	}
	durationToStart := float64(first.T-rangeStart) / 1000
	durationToEnd := float64(rangeEnd-last.T) / 1000
	sampledInterval := float64(last.T-first.T) / 1000
	avgBetween := sampledInterval / float64(len(pts)-1)
	threshold := avgBetween * 1.1
	if durationToStart >= threshold {
		durationToStart = avgBetween / 2
	}
	if isCounter {
		durationToZero := durationToStart
		if result > 0 && first.V >= 0 {
			durationToZero = sampledInterval * (first.V / result)
		}
		if durationToZero < durationToStart {
			durationToStart = durationToZero
		}
	}
	if durationToEnd >= threshold {
		durationToEnd = avgBetween / 2
	}
	factor := (sampledInterval + durationToStart + durationToEnd) / sampledInterval
	if isRate {
		factor /= rng.Seconds()
	}
	return result * factor, true
}

// aggregate groups the input series by their output label set once, then
// folds each group's values step by step.
func (ev *evaluator) aggregate(a *Aggregate, in []Series) []Series {
	type group struct {
		labels  store.Labels
		members []int
	}
	var groups []*group
	byKey := map[string]*group{}
	for i, s := range in {
		var ls store.Labels
		if a.Without {
			for _, l := range s.Labels {
				if l.Name != store.MetricName && !slices.Contains(a.Grouping, l.Name) {
					ls = append(ls, l)
				}
			}
		} else {
			for _, l := range s.Labels {
				if slices.Contains(a.Grouping, l.Name) {
					ls = append(ls, l)
				}
			}
		}
		k := ls.Key()
		g := byKey[k]
		if g == nil {
			g = &group{labels: ls}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.members = append(g.members, i)
	}
	n := len(ev.steps)
	sum := make([]float64, n)
	cnt := make([]int, n)
	lo := make([]float64, n)
	hi := make([]float64, n)
	out := make([]Series, 0, len(groups))
	for _, g := range groups {
		clear(sum)
		clear(cnt)
		for _, i := range g.members {
			for _, p := range in[i].Points {
				k := ev.stepIndex(p.T)
				if cnt[k] == 0 {
					lo[k], hi[k] = p.F, p.F
				}
				sum[k] += p.F
				cnt[k]++
				// Prometheus: a NaN is replaced by any number for min and max.
				if p.F < lo[k] || math.IsNaN(lo[k]) {
					lo[k] = p.F
				}
				if p.F > hi[k] || math.IsNaN(hi[k]) {
					hi[k] = p.F
				}
			}
		}
		var pts []Point
		for k, t := range ev.steps {
			if cnt[k] == 0 {
				continue
			}
			var f float64
			switch a.Op {
			case "sum":
				f = sum[k]
			case "avg":
				f = sum[k] / float64(cnt[k])
			case "count":
				f = float64(cnt[k])
			case "min":
				f = lo[k]
			case "max":
				f = hi[k]
			}
			pts = append(pts, Point{t, f})
		}
		out = append(out, Series{Labels: g.labels, Points: pts})
	}
	return out
}

type bucket struct {
	upper float64
	count float64
}

// histogramQuantile groups the series by their labels other than le (and
// the metric name) and computes, at each step, the q-quantile of each
// group's buckets that have a value there.
func (ev *evaluator) histogramQuantile(q float64, in []Series) []Series {
	type hist struct {
		labels  store.Labels
		members []int
		uppers  []float64
	}
	var hs []*hist
	byKey := map[string]*hist{}
	for i, s := range in {
		le := s.Labels.Get("le")
		upper, err := strconv.ParseFloat(le, 64)
		if le == "" || err != nil {
			continue // Prometheus ignores a series without a valid le
		}
		var ls store.Labels
		for _, l := range s.Labels {
			if l.Name != "le" && l.Name != store.MetricName {
				ls = append(ls, l)
			}
		}
		k := ls.Key()
		h := byKey[k]
		if h == nil {
			h = &hist{labels: ls}
			byKey[k] = h
			hs = append(hs, h)
		}
		h.members = append(h.members, i)
		h.uppers = append(h.uppers, upper)
	}
	perStep := make([][]bucket, len(ev.steps))
	out := make([]Series, 0, len(hs))
	for _, h := range hs {
		for k := range perStep {
			perStep[k] = perStep[k][:0]
		}
		for j, i := range h.members {
			for _, p := range in[i].Points {
				k := ev.stepIndex(p.T)
				perStep[k] = append(perStep[k], bucket{h.uppers[j], p.F})
			}
		}
		var pts []Point
		for k, t := range ev.steps {
			if len(perStep[k]) > 0 {
				pts = append(pts, Point{t, bucketQuantile(q, perStep[k])})
			}
		}
		out = append(out, Series{Labels: h.labels, Points: pts})
	}
	return out
}

// BucketQuantile is the q-quantile of one classic histogram given as the
// cumulative counts of its buckets by upper bound (in any order; one bound
// must be +Inf), as histogram_quantile computes it (bucketQuantile).
func BucketQuantile(q float64, uppers, counts []float64) float64 {
	bs := make([]bucket, len(uppers))
	for i := range uppers {
		bs[i] = bucket{uppers[i], counts[i]}
	}
	return bucketQuantile(q, bs)
}

// bucketQuantile is Prometheus' BucketQuantile (promql/quantile.go) for
// classic histograms: linear interpolation within the bucket the rank falls
// in, 0 as the lowest bucket's lower bound when its upper bound is above 0,
// the second-highest bound when the rank falls in +Inf. Buckets with equal
// bounds are merged and the counts made monotonic by carrying the maximum
// forward (Prometheus' small-delta tolerance is not applied).
func bucketQuantile(q float64, buckets []bucket) float64 {
	if math.IsNaN(q) {
		return math.NaN()
	}
	if q < 0 {
		return math.Inf(-1)
	}
	if q > 1 {
		return math.Inf(1)
	}
	slices.SortFunc(buckets, func(a, b bucket) int {
		switch {
		case a.upper < b.upper:
			return -1
		case a.upper > b.upper:
			return 1
		}
		return 0
	})
	if len(buckets) == 0 || !math.IsInf(buckets[len(buckets)-1].upper, 1) {
		return math.NaN()
	}
	// Coalesce equal bounds.
	w := 0
	for i := range buckets {
		if w > 0 && buckets[w-1].upper == buckets[i].upper {
			buckets[w-1].count += buckets[i].count
			continue
		}
		buckets[w] = buckets[i]
		w++
	}
	buckets = buckets[:w]
	for i := 1; i < len(buckets); i++ {
		if buckets[i].count < buckets[i-1].count {
			buckets[i].count = buckets[i-1].count
		}
	}
	if len(buckets) < 2 {
		return math.NaN()
	}
	observations := buckets[len(buckets)-1].count
	if observations == 0 {
		return math.NaN()
	}
	rank := q * observations
	b := sort.Search(len(buckets)-1, func(i int) bool { return buckets[i].count >= rank })
	if b == len(buckets)-1 {
		return buckets[len(buckets)-2].upper
	}
	if b == 0 && buckets[0].upper <= 0 {
		return buckets[0].upper
	}
	var start float64
	end := buckets[b].upper
	count := buckets[b].count
	if b > 0 {
		start = buckets[b-1].upper
		count -= buckets[b-1].count
		rank -= buckets[b-1].count
	}
	return start + (end-start)*(rank/count)
}

// Selectors returns the matchers of every vector selector in n.
func Selectors(n Node) [][]*store.LabelMatcher {
	var out [][]*store.LabelMatcher
	var walk func(Node)
	walk = func(n Node) {
		switch n := n.(type) {
		case *VectorSelector:
			out = append(out, n.Matchers)
		case *MatrixSelector:
			walk(n.VS)
		case *Call:
			for _, a := range n.Args {
				walk(a)
			}
		case *Aggregate:
			walk(n.Expr)
		case *Binary:
			walk(n.LHS)
			walk(n.RHS)
		}
	}
	walk(n)
	return out
}
