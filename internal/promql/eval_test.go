package promql

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/store"
)

// mem is a Queryable over fixed series.
type mem []store.SeriesData

func (m mem) SelectSeries(_ string, mint, maxt int64, ms []*store.LabelMatcher) ([]store.SeriesData, error) {
	var out []store.SeriesData
	for _, s := range m {
		if !store.MatchLabels(s.Labels, ms) {
			continue
		}
		var ss []store.Sample
		for _, x := range s.Samples {
			if x.T >= mint && x.T <= maxt {
				ss = append(ss, x)
			}
		}
		if len(ss) > 0 {
			out = append(out, store.SeriesData{Labels: s.Labels, Samples: ss})
		}
	}
	return out, nil
}

func lbls(kv ...string) store.Labels {
	var ls store.Labels
	for i := 0; i < len(kv); i += 2 {
		ls = append(ls, store.Label{Name: kv[i], Value: kv[i+1]})
	}
	return store.SortLabels(ls)
}

// series builds samples at seconds ts with values vs.
func series(ls store.Labels, ts []int64, vs []float64) store.SeriesData {
	sd := store.SeriesData{Labels: ls}
	for i := range ts {
		sd.Samples = append(sd.Samples, store.Sample{T: ts[i] * 1000, V: vs[i]})
	}
	return sd
}

func instant(t *testing.T, db Queryable, q string, atSec float64) Result {
	t.Helper()
	n, err := Parse(q)
	if err != nil {
		t.Fatalf("Parse(%q): %v", q, err)
	}
	r, err := Instant(db, Query{Expr: n, Start: int64(atSec * 1000)})
	if err != nil {
		t.Fatalf("Instant(%q): %v", q, err)
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func vecString(v []Sample) string {
	var parts []string
	for _, s := range v {
		parts = append(parts, fmt.Sprintf("%s %g", s.Labels, s.F))
	}
	return strings.Join(parts, "; ")
}

// A counter with a reset, values computed by hand with Prometheus'
// extrapolatedRate: window (30s, 90s] holds 30, 5, 15, 25; the increase is
// 25-30 plus 30 for the reset = 25 over 45 s of samples, extrapolated 15 s
// to the start (under 1.1 x the 15 s spacing, and the zero point 54 s away
// is further): 25 x 60/45 = 33.33..., rate = that / 60.
func TestRateAndIncreaseWithReset(t *testing.T) {
	db := mem{series(lbls("__name__", "req_total", "job", "a"), []int64{15, 30, 45, 60, 75, 90}, []float64{10, 20, 30, 5, 15, 25})}
	r := instant(t, db, "increase(req_total[60s])", 90)
	if len(r.Vector) != 1 || !near(r.Vector[0].F, 100.0/3) || r.Vector[0].Labels.Get("__name__") != "" || r.Vector[0].Labels.Get("job") != "a" {
		t.Fatalf("increase = %s, want {job=\"a\"} 33.333", vecString(r.Vector))
	}
	r = instant(t, db, "rate(req_total[1m])", 90)
	if len(r.Vector) != 1 || !near(r.Vector[0].F, 100.0/3/60) {
		t.Fatalf("rate = %s, want 0.5556", vecString(r.Vector))
	}
}

// The start is extrapolated by half the spacing when the first sample is far
// from it, and never below the counter's zero point: samples 2, 4, 6 at
// 100 s, 115 s, 130 s, window (70 s, 130 s]: 30 s to the start is over the
// threshold, so 7.5 s; the zero point is 15 s away; increase = 4 x 37.5/30 = 5.
// With a counter starting at 0.5 the zero point (3.75 s) caps it instead:
// 4 x 33.75/30 = 4.5.
func TestIncreaseExtrapolation(t *testing.T) {
	db := mem{series(lbls("__name__", "c"), []int64{100, 115, 130}, []float64{2, 4, 6})}
	if r := instant(t, db, "increase(c[1m])", 130); len(r.Vector) != 1 || !near(r.Vector[0].F, 5) {
		t.Fatalf("increase = %s, want 5", vecString(r.Vector))
	}
	db = mem{series(lbls("__name__", "c"), []int64{100, 115, 130}, []float64{0.5, 2.5, 4.5})}
	if r := instant(t, db, "increase(c[1m])", 130); len(r.Vector) != 1 || !near(r.Vector[0].F, 4.5) {
		t.Fatalf("increase from 0.5 = %s, want 4.5", vecString(r.Vector))
	}
	// One sample is not enough for a rate.
	if r := instant(t, db, "rate(c[10s])", 130); len(r.Vector) != 0 {
		t.Fatalf("rate over one sample = %s, want nothing", vecString(r.Vector))
	}
}

// An instant selector takes the newest sample in (t-5m, t].
func TestLookback(t *testing.T) {
	db := mem{series(lbls("__name__", "g"), []int64{0, 10}, []float64{1, 2})}
	for _, c := range []struct {
		at   float64
		want []float64
	}{{5, []float64{1}}, {10, []float64{2}}, {309.999, []float64{2}}, {310, nil}, {-1, nil}} {
		r := instant(t, db, "g", c.at)
		var got []float64
		for _, s := range r.Vector {
			got = append(got, s.F)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("g at %gs = %v, want %v", c.at, got, c.want)
		}
	}
}

func TestAggregations(t *testing.T) {
	db := mem{
		series(lbls("__name__", "up", "job", "a", "instance", "1"), []int64{10}, []float64{1}),
		series(lbls("__name__", "up", "job", "a", "instance", "2"), []int64{10}, []float64{4}),
		series(lbls("__name__", "up", "job", "b", "instance", "1"), []int64{10}, []float64{10}),
		series(lbls("__name__", "down", "job", "b", "instance", "1"), []int64{10}, []float64{100}),
	}
	for q, want := range map[string]string{
		"sum(up)":                       `{} 15`,
		"sum by (job) (up)":             `{job="a"} 5; {job="b"} 10`,
		"sum(up) by (job)":              `{job="a"} 5; {job="b"} 10`,
		"avg by (job) (up)":             `{job="a"} 2.5; {job="b"} 10`,
		"min by (job) (up)":             `{job="a"} 1; {job="b"} 10`,
		"max by (job) (up)":             `{job="a"} 4; {job="b"} 10`,
		"count by (job) (up)":           `{job="a"} 2; {job="b"} 1`,
		"sum without (instance) (up)":   `{job="a"} 5; {job="b"} 10`,
		`sum by (instance) ({job="b"})`: `{instance="1"} 110`,
		`up{job!="a"}`:                  `{__name__="up", instance="1", job="b"} 10`,
		`up{instance=~"1|3", job=~"a"}`: `{__name__="up", instance="1", job="a"} 1`,
		`up{instance!~"1"}`:             `{__name__="up", instance="2", job="a"} 4`,
		"up * 2 - 1":                    `{instance="1", job="a"} 1; {instance="2", job="a"} 7; {instance="1", job="b"} 19`,
		"100 / up{job='b'}":             `{instance="1", job="b"} 10`,
		"-up{job=`b`}":                  `{instance="1", job="b"} -10`,
		"sum(up) / 3":                   `{} 5`,
		"count(up) * (1 + 1)":           `{} 6`,
	} {
		r := instant(t, db, q, 20)
		got := r.Vector
		slices.SortFunc(got, func(a, b Sample) int { return store.CompareLabels(a.Labels, b.Labels) })
		if q == "up * 2 - 1" { // sorted by labels: instance first
			want = `{instance="1", job="a"} 1; {instance="1", job="b"} 19; {instance="2", job="a"} 7`
		}
		if s := vecString(got); s != want {
			t.Errorf("%s = %s, want %s", q, s, want)
		}
	}
	if r := instant(t, db, "1 + 2 * 3", 20); r.Type != TypeScalar || r.Scalar.F != 7 {
		t.Errorf("1 + 2 * 3 = %+v, want scalar 7", r)
	}
}

// histogram_quantile over the sum of two instances' bucket rates. Each
// bucket counter grows at a constant rate from the window's start, so the
// rates are exact: summed 1, 3, 4, 4 per second for le 0.1, 0.5, 1, +Inf.
// p90: rank 3.6 falls in (0.5, 1] holding 1 of the 4: 0.5 + 0.5 x 0.6 = 0.8.
// p50: rank 2 falls in (0.1, 0.5] holding 2: 0.1 + 0.4 x 0.5 = 0.3.
func TestHistogramQuantileOfMergedRates(t *testing.T) {
	rates := map[string][2]float64{"0.1": {0.5, 0.5}, "0.5": {2, 1}, "1": {2.5, 1.5}, "+Inf": {2.5, 1.5}}
	var db mem
	const end = 1000
	for le, rs := range rates {
		for i, inst := range []string{"a", "b"} {
			var ts []int64
			var vs []float64
			for k := int64(1); k <= 20; k++ {
				tt := end - 300 + 15*k
				ts = append(ts, tt)
				vs = append(vs, rs[i]*float64(tt-(end-300)))
			}
			db = append(db, series(lbls("__name__", "lat_bucket", "le", le, "instance", inst), ts, vs))
		}
	}
	for q, want := range map[float64]float64{0.9: 0.8, 0.5: 0.3, 0.1: 0.04, 1: 1} {
		r := instant(t, db, fmt.Sprintf("histogram_quantile(%g, sum by (le) (rate(lat_bucket[5m])))", q), end)
		if len(r.Vector) != 1 || !near(r.Vector[0].F, want) || len(r.Vector[0].Labels) != 0 {
			t.Errorf("p%g = %s, want {} %g", q*100, vecString(r.Vector), want)
		}
	}
	// Per instance (grouped by instance and le): instance b's buckets
	// 0.5, 1, 1.5, 1.5: p90 rank 1.35 in (0.5, 1] holding 0.5: 0.5 + 0.5 x 0.7 = 0.85.
	r := instant(t, db, "histogram_quantile(0.9, sum by (instance, le) (rate(lat_bucket[5m])))", end)
	if len(r.Vector) != 2 || r.Vector[1].Labels.Get("instance") != "b" || !near(r.Vector[1].F, 0.85) {
		t.Fatalf("per instance: %s, want b at 0.85", vecString(r.Vector))
	}
}

func TestBucketQuantileEdges(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		q    float64
		b    []bucket
		want float64
	}{
		{0.5, []bucket{{1, 0}, {inf, 0}}, math.NaN()},      // no observations
		{0.5, []bucket{{1, 1}, {2, 2}}, math.NaN()},        // no +Inf bucket
		{0.99, []bucket{{1, 1}, {2, 2}, {inf, 10}}, 2},     // rank in +Inf: second-highest bound
		{0.5, []bucket{{-1, 4}, {inf, 4}}, -1},             // lowest bound <= 0 is returned
		{-0.1, []bucket{{1, 1}, {inf, 1}}, math.Inf(-1)},   // q < 0
		{1.1, []bucket{{1, 1}, {inf, 1}}, math.Inf(1)},     // q > 1
		{0.5, []bucket{{1, 3}, {2, 2}, {inf, 4}}, 2.0 / 3}, // non-monotonic counts carried forward: 1 x 2/3
	} {
		got := bucketQuantile(c.q, slices.Clone(c.b))
		if !(near(got, c.want) || (math.IsNaN(got) && math.IsNaN(c.want)) || got == c.want) {
			t.Errorf("bucketQuantile(%g, %v) = %g, want %g", c.q, c.b, got, c.want)
		}
	}
}

// A range query is evaluated at start, start+step, ... <= end.
func TestRangeSteps(t *testing.T) {
	db := mem{series(lbls("__name__", "g", "job", "x"), []int64{0, 30, 60, 90}, []float64{1, 2, 3, 4})}
	n, _ := Parse("g * 10")
	r, err := Range(db, Query{Expr: n, Start: 10_000, End: 100_000, Step: 25_000})
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{{10_000, 10}, {35_000, 20}, {60_000, 30}, {85_000, 30}}
	if len(r.Matrix) != 1 || !slices.Equal(r.Matrix[0].Points, want) || r.Matrix[0].Labels.String() != `{job="x"}` {
		t.Fatalf("range = %+v, want %v", r.Matrix, want)
	}
	n, _ = Parse("g[1m]")
	if _, err := Range(db, Query{Expr: n, Start: 0, End: 1, Step: 1}); err == nil {
		t.Fatal("a range vector in a range query was accepted")
	}
	// A range selector as an instant query answers the raw samples in (t-1m, t].
	r = instant(t, db, "g[1m]", 90)
	if r.Type != TypeMatrix || len(r.Matrix) != 1 || !slices.Equal(r.Matrix[0].Points, []Point{{60_000, 3}, {90_000, 4}}) {
		t.Fatalf("g[1m] at 90 = %+v", r)
	}
}

// Queries outside the subset are refused with an error naming the construct;
// malformed ones with a parse error.
func TestRefusals(t *testing.T) {
	for q, want := range map[string]string{
		"irate(x[5m])":             `unsupported at char 1: function "irate"`,
		"x / y":                    `binary operator "/" between two instant vectors`,
		"x offset 5m":              `offset modifier`,
		"x @ 100":                  `@ modifier`,
		"rate(x[5m:1m])":           `subquery`,
		"topk(3, x)":               `aggregation "topk"`,
		"x > 1":                    `binary operator ">"`,
		"x and y":                  `binary operator "and"`,
		"x * on(job) y":            `vector matching modifier "on"`,
		"rate(x)":                  `parse error at char 6: expected type range vector in call to function "rate", got instant vector`,
		"sum(x[5m])":               `expected type instant vector in aggregation expression, got range vector`,
		`x{job="a"`:                `parse error`,
		`{job=""}`:                 `vector selector must contain at least one non-empty matcher`,
		`x{job=~"("}`:              `label matcher`,
		"histogram_quantile(x, y)": `expected type scalar in call to function "histogram_quantile"`,
		"x[5q]":                    `bad number or duration`,
		"":                         `unexpected end of input`,
	} {
		_, err := Parse(q)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", q, err, want)
		}
		var pe *Error
		if err != nil && !errors.As(err, &pe) {
			t.Errorf("Parse(%q): error %T, want *Error", q, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]int64{"5m": 300_000, "1h30m": 5_400_000, "15s": 15_000, "100ms": 100, "1m30s500ms": 90_500, "15": 15_000, "0.5": 500, "1d": 86_400_000} {
		d, err := ParseDuration(s)
		if err != nil || d.Milliseconds() != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %d ms", s, d, err, want)
		}
	}
	for _, s := range []string{"5", "m", "5x", "30s1m", "-5m"} {
		if s == "5" {
			continue
		}
		if _, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) accepted", s)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"histogram_quantile(0.9, sum by (le) (rate(x_bucket{job=~\"a.*\"}[5m])))", "sum without (a) (x) * 2", "-x{a!='b'}", "x[1h30m]", "1 + 2 / 3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		n, err := Parse(q)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Pos < 0 || pe.Pos > len(q) {
				t.Fatalf("Parse(%q): %v does not locate itself", q, err)
			}
			return
		}
		// Whatever parses evaluates without panicking.
		db := mem{series(lbls("__name__", "x", "le", "1"), []int64{1, 2}, []float64{1, 2})}
		if n.Type() == TypeMatrix {
			Instant(db, Query{Expr: n, Start: 2000})
			return
		}
		Range(db, Query{Expr: n, Start: 0, End: 3000, Step: 1000})
	})
}
