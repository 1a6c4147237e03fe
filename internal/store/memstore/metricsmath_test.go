package memstore_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/store/memstore"
)

// TestMetricsMath: arithmetic between metrics queries equals the same
// numbers counted span by span: error ratios per service (series matched
// by labels), per service against the whole (a series without labels
// combines with every series), scalars on either side, filters and topk
// after the arithmetic, and empty buckets counting as 0 for rates.
func TestMetricsMath(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	spans, err := bench.Generate(bench.CorpusAPI, bench.CorpusOptions{Seed: 3, Spans: 4000, Start: start, Window: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := range spans {
		if rng.IntN(8) == 0 {
			spans[i].StatusCode = model.StatusError
		}
	}
	m := memstore.New(memstore.Options{})
	if err := m.Append(ctx, &store.Write{Project: "p", Type: otlp.RecordOTLPProto, Body: otlp.EncodeProto(spans), Spans: slices.Clone(spans)}); err != nil {
		t.Fatal(err)
	}
	step := 10 * time.Minute
	// The range runs an hour past the data: those buckets have no span.
	req := store.MetricsRequest{Start: uint64(start.UnixNano()), End: uint64(start.Add(3 * time.Hour).UnixNano()), Step: step}
	type key struct {
		svc string
		t   int64
	}
	total, errs := map[key]float64{}, map[key]float64{}
	all, allErr := map[int64]float64{}, map[int64]float64{}
	for _, s := range spans {
		t0 := int64(s.StartTimeUnixNano/uint64(step)*uint64(step)) / 1e6
		total[key{s.Service, t0}]++
		all[t0]++
		if s.StatusCode == model.StatusError {
			errs[key{s.Service, t0}]++
			allErr[t0]++
		}
	}
	services := map[string]bool{}
	for k := range total {
		services[k.svc] = true
	}
	var grid []int64
	for t := req.Start; t < req.End; t += uint64(step) {
		grid = append(grid, int64(t/1e6))
	}
	run := func(src string) store.MetricsAnswer {
		t.Helper()
		q, err := query.ParseQuery(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		ans, _, err := store.QueryMetrics(ctx, m, "p", q, req)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return ans
	}
	label := func(s store.MetricsSeries, name string) string {
		for _, l := range s.Labels {
			if l.Name == name {
				return l.Value.AsString()
			}
		}
		return ""
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

	// Error ratio per service: the two sides match on the service label.
	ans := run(`({ status = error } | rate() by (resource.service.name)) / ({ } | rate() by (resource.service.name))`)
	points := 0
	for _, s := range ans.Series {
		svc := label(s, "resource.service.name")
		if !services[svc] {
			t.Fatalf("ratio series for unknown service %q: %v", svc, s.Labels)
		}
		for _, p := range s.Samples {
			k := key{svc, p.TimeMs}
			if total[k] == 0 {
				t.Fatalf("%s at %d: a point where no span was (0/0 is left out)", svc, p.TimeMs)
			}
			if want := errs[k] / total[k]; !near(p.Value, want) {
				t.Fatalf("%s at %d: ratio %v, want %v", svc, p.TimeMs, p.Value, want)
			}
			points++
		}
	}
	for k, n := range total {
		if n > 0 && !slices.ContainsFunc(ans.Series, func(s store.MetricsSeries) bool {
			return label(s, "resource.service.name") == k.svc && slices.ContainsFunc(s.Samples, func(p store.MetricsSample) bool { return p.TimeMs == k.t })
		}) {
			t.Fatalf("no ratio for %v (%v spans, %v errors)", k, n, errs[k])
		}
	}
	if points == 0 {
		t.Fatal("no ratio points")
	}

	// A service's share of all spans: the right side has no labels and
	// combines with every series; scalars on both sides.
	ans = run(`100 * ({ } | count_over_time() by (resource.service.name)) / ({ } | count_over_time()) - 1`)
	for _, s := range ans.Series {
		svc := label(s, "resource.service.name")
		for _, p := range s.Samples {
			if want := 100*total[key{svc, p.TimeMs}]/all[p.TimeMs] - 1; !near(p.Value, want) {
				t.Fatalf("share of %s at %d: %v, want %v", svc, p.TimeMs, p.Value, want)
			}
		}
	}
	if len(ans.Series) != len(services) {
		t.Fatalf("share: %d series, want one per service (%d)", len(ans.Series), len(services))
	}

	// Empty buckets of a rate are 0: every bucket of the range has a point,
	// including the hour with no data.
	ans = run(`({ } | count_over_time()) + 5`)
	if len(ans.Series) != 1 || len(ans.Series[0].Samples) != len(grid) {
		t.Fatalf("count + 5: %+v, want one series with %d points", ans.Series, len(grid))
	}
	for i, p := range ans.Series[0].Samples {
		if p.TimeMs != grid[i] || !near(p.Value, all[p.TimeMs]+5) {
			t.Fatalf("count + 5 at %d: %v, want %v", p.TimeMs, p.Value, all[p.TimeMs]+5)
		}
	}
	if name := label(ans.Series[0], "__name__"); name != "count_over_time" {
		t.Fatalf("__name__ %q after a scalar op, want count_over_time", name)
	}
	ans = run(`({ status = error } | count_over_time()) + ({ } | count_over_time())`)
	if name := label(ans.Series[0], "__name__"); name != "(count_over_time + count_over_time)" {
		t.Fatalf("__name__ %q, want (count_over_time + count_over_time)", name)
	}

	// Filters and topk apply to the arithmetic's result.
	threshold := 0.2
	ans = run(`({ status = error } | count_over_time() by (resource.service.name)) / ({ } | count_over_time() by (resource.service.name)) > 0.2 | topk(1)`)
	perTime := map[int64]int{}
	for _, s := range ans.Series {
		svc := label(s, "resource.service.name")
		for _, p := range s.Samples {
			perTime[p.TimeMs]++
			if p.Value <= threshold {
				t.Fatalf("filter kept %v", p.Value)
			}
			for other := range services {
				o := key{other, p.TimeMs}
				if total[o] > 0 && errs[o]/total[o] > p.Value+1e-12 {
					t.Fatalf("topk(1) at %d kept %s (%v) over %s (%v)", p.TimeMs, svc, p.Value, other, errs[o]/total[o])
				}
			}
		}
	}
	for tm, n := range perTime {
		if n != 1 {
			t.Fatalf("topk(1) at %d kept %d series", tm, n)
		}
	}
	if len(perTime) == 0 {
		t.Fatal("the filter kept nothing; the corpus should have buckets with more than 20% errors")
	}
}
