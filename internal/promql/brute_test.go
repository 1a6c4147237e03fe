package promql

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/store"
)

// bruteAt evaluates n at time t the plainest way: every series scanned at
// every step, no shared state between steps. The evaluator's answers must
// equal it.
func bruteAt(db mem, n Node, t int64) map[string]float64 {
	out := map[string]float64{}
	switch n := n.(type) {
	case *VectorSelector:
		for _, s := range db {
			if !store.MatchLabels(s.Labels, n.Matchers) {
				continue
			}
			var last *store.Sample
			for i := range s.Samples {
				if x := &s.Samples[i]; x.T <= t && x.T > t-DefaultLookback.Milliseconds() {
					last = x
				}
			}
			if last != nil {
				out[s.Labels.Key()] = last.V
			}
		}
	case *Call:
		switch n.Func {
		case "rate", "increase":
			ms := n.Args[0].(*MatrixSelector)
			for _, s := range db {
				if !store.MatchLabels(s.Labels, ms.VS.Matchers) {
					continue
				}
				var pts []store.Sample
				for _, x := range s.Samples {
					if x.T > t-ms.Range.Milliseconds() && x.T <= t {
						pts = append(pts, x)
					}
				}
				if f, ok := extrapolatedRate(pts, t-ms.Range.Milliseconds(), t, ms.Range, true, n.Func == "rate"); ok {
					out[dropName(s.Labels).Key()] = f
				}
			}
		case "histogram_quantile":
			in := bruteAt(db, n.Args[1], t)
			groups := map[string][]bucket{}
			for k, v := range in {
				ls := keyLabels(k)
				le := ls.Get("le")
				var upper float64
				if _, err := fmt.Sscan(le, &upper); err != nil && le != "+Inf" {
					continue
				}
				if le == "+Inf" {
					upper = math.Inf(1)
				}
				var g store.Labels
				for _, l := range ls {
					if l.Name != "le" && l.Name != store.MetricName {
						g = append(g, l)
					}
				}
				groups[g.Key()] = append(groups[g.Key()], bucket{upper, v})
			}
			q := n.Args[0].(*NumberLiteral).V
			for k, bs := range groups {
				out[k] = bucketQuantile(q, bs)
			}
		}
	case *Aggregate:
		in := bruteAt(db, n.Expr, t)
		type acc struct {
			vals []float64
		}
		groups := map[string]*acc{}
		for k, v := range in {
			var g store.Labels
			for _, l := range keyLabels(k) {
				keep := slices.Contains(n.Grouping, l.Name)
				if n.Without {
					keep = !keep && l.Name != store.MetricName
				}
				if keep {
					g = append(g, l)
				}
			}
			a := groups[g.Key()]
			if a == nil {
				a = &acc{}
				groups[g.Key()] = a
			}
			a.vals = append(a.vals, v)
		}
		for k, a := range groups {
			var f float64
			switch n.Op {
			case "sum", "avg":
				for _, v := range a.vals {
					f += v
				}
				if n.Op == "avg" {
					f /= float64(len(a.vals))
				}
			case "count":
				f = float64(len(a.vals))
			case "min":
				f = slices.Min(a.vals)
			case "max":
				f = slices.Max(a.vals)
			}
			out[k] = f
		}
	case *Binary:
		if n.LHS.Type() == TypeVector {
			c := n.RHS.(*NumberLiteral).V
			for k, v := range bruteAt(db, n.LHS, t) {
				out[dropName(keyLabels(k)).Key()] = arith(n.Op, v, c)
			}
		} else {
			c := n.LHS.(*NumberLiteral).V
			for k, v := range bruteAt(db, n.RHS, t) {
				out[dropName(keyLabels(k)).Key()] = arith(n.Op, c, v)
			}
		}
	}
	return out
}

// keyLabels reads back what Labels.Key wrote.
func keyLabels(k string) store.Labels {
	var ls store.Labels
	for _, pair := range strings.Split(k, "\xfe") {
		if pair == "" {
			continue
		}
		name, value, _ := strings.Cut(pair, "\xff")
		ls = append(ls, store.Label{Name: name, Value: value})
	}
	return ls
}

// Range queries over random series (gaps, resets, irregular spacing, a
// histogram) equal the brute-force evaluation at every step.
func TestRangeEqualsBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var db mem
	for i := range 30 {
		ls := lbls("__name__", "c_total", "job", fmt.Sprintf("j%d", i%3), "inst", fmt.Sprint(i))
		sd := store.SeriesData{Labels: ls}
		tt, v := int64(r.IntN(60_000)), 0.0
		for tt < 3_600_000 {
			if r.IntN(40) == 0 {
				v = 0 // a reset
			}
			v += float64(r.IntN(20))
			sd.Samples = append(sd.Samples, store.Sample{T: tt, V: v})
			tt += 5_000 + int64(r.IntN(30_000))
			if r.IntN(30) == 0 {
				tt += 600_000 // a gap longer than the lookback
			}
		}
		db = append(db, sd)
	}
	for _, le := range []string{"0.1", "1", "10", "+Inf"} {
		for inst := range 3 {
			sd := store.SeriesData{Labels: lbls("__name__", "h_bucket", "le", le, "inst", fmt.Sprint(inst))}
			v := 0.0
			for tt := int64(0); tt < 3_600_000; tt += 15_000 {
				switch le {
				case "0.1":
					v += float64(r.IntN(3))
				case "1":
					v += float64(r.IntN(3)) + 2
				default:
					v += float64(r.IntN(3)) + 4
				}
				sd.Samples = append(sd.Samples, store.Sample{T: tt, V: v})
			}
			db = append(db, sd)
		}
	}
	compared := 0
	for _, q := range []string{
		"c_total", `c_total{job="j1"}`, "rate(c_total[1m])", "increase(c_total[5m])", "sum by (job) (rate(c_total[2m]))",
		"avg without (inst) (c_total)", "max by (job) (c_total) * 2", "10 - min(c_total)", "count by (job) (c_total)",
		"histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m])))", "histogram_quantile(0.5, rate(h_bucket[1m]))",
	} {
		n, err := Parse(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []int64{15_000, 60_000, 7_000} {
			start := int64(r.IntN(600_000))
			res, err := Range(db, Query{Expr: n, Start: start, End: 3_600_000, Step: step})
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			got := map[int64]map[string]float64{}
			for _, s := range res.Matrix {
				for _, p := range s.Points {
					if got[p.T] == nil {
						got[p.T] = map[string]float64{}
					}
					got[p.T][s.Labels.Key()] = p.F
				}
			}
			for tt := start; tt <= 3_600_000; tt += step {
				want := bruteAt(db, n, tt)
				g := got[tt]
				if len(g) != len(want) {
					t.Fatalf("%s at %d: %d series, brute force %d", q, tt, len(g), len(want))
				}
				compared += len(want)
				for k, w := range want {
					if gv, ok := g[k]; !ok || !(near(gv, w) || (math.IsNaN(gv) && math.IsNaN(w))) {
						t.Fatalf("%s at %d: %s = %v, brute force %v", q, tt, keyLabels(k), gv, w)
					}
				}
			}
		}
	}
	if compared < 10_000 {
		t.Fatalf("only %d values compared: the corpus is too sparse to test anything", compared)
	}
}

// A range query large enough to be evaluated on several CPUs
// (internal/parallel) answers exactly what the one-CPU evaluation (which
// TestRangeEqualsBruteForce checks) answers: same series, same order, the
// same bits in every value.
func TestRangeParallelEqualsSequential(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	var db mem
	for i := range 300 {
		sd := store.SeriesData{Labels: lbls("__name__", "c_total", "job", fmt.Sprintf("j%d", i%7), "inst", fmt.Sprint(i))}
		v := 0.0
		for tt := int64(r.IntN(15_000)); tt < 3_600_000; tt += 15_000 {
			if r.IntN(50) == 0 {
				v = 0
			}
			v += float64(r.IntN(100)) / 10
			sd.Samples = append(sd.Samples, store.Sample{T: tt, V: v})
		}
		db = append(db, sd)
	}
	for _, q := range []string{"c_total", "rate(c_total[1m])", "sum by (job) (increase(c_total[5m]))"} {
		n, err := Parse(q)
		if err != nil {
			t.Fatal(err)
		}
		query := Query{Expr: n, Start: 0, End: 3_600_000, Step: 15_000}
		prev := runtime.GOMAXPROCS(1)
		seq, err := Range(db, query)
		runtime.GOMAXPROCS(4)
		par, perr := Range(db, query)
		runtime.GOMAXPROCS(prev)
		if err != nil || perr != nil {
			t.Fatalf("%s: %v, %v", q, err, perr)
		}
		if len(seq.Matrix) == 0 || len(seq.Matrix) != len(par.Matrix) {
			t.Fatalf("%s: %d series on one CPU, %d on several", q, len(seq.Matrix), len(par.Matrix))
		}
		for i := range seq.Matrix {
			a, b := seq.Matrix[i], par.Matrix[i]
			if store.CompareLabels(a.Labels, b.Labels) != 0 || len(a.Points) != len(b.Points) {
				t.Fatalf("%s: series %d differs: %v (%d points) against %v (%d points)", q, i, a.Labels, len(a.Points), b.Labels, len(b.Points))
			}
			for j := range a.Points {
				if a.Points[j].T != b.Points[j].T || math.Float64bits(a.Points[j].F) != math.Float64bits(b.Points[j].F) {
					t.Fatalf("%s: %v point %d: %v against %v", q, a.Labels, j, a.Points[j], b.Points[j])
				}
			}
		}
	}
}
