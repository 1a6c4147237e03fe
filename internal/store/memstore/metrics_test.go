package memstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/store/memstore"
)

// TestMetricsPathsAgree: TraceQL metrics answered from stored aggregates
// equal the same queries answered by reading spans (on the engine and on
// the brute-force memstore), over random corpora and windows; and each
// path is proven to have run.
func TestMetricsPathsAgree(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 2; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		start := time.Now().Add(-5 * time.Hour).Truncate(time.Minute)
		spans, err := bench.Generate(bench.CorpusAPI, bench.CorpusOptions{Seed: seed, Spans: 6000, Start: start, Window: 4 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for i := range spans {
			if rng.IntN(30) == 0 {
				spans[i].StatusCode = model.StatusError
			}
		}
		e, err := engine.Open(engine.Options{Dir: t.TempDir(), BlockSpans: 300})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		m := memstore.New(memstore.Options{})
		for i := 0; i < len(spans); i += 500 {
			b := spans[i:min(i+500, len(spans))]
			for _, be := range []store.Backend{e, m} {
				if err := be.Append(ctx, &store.Write{Project: "p", Type: otlp.RecordOTLPProto, Body: otlp.EncodeProto(b), Spans: slices.Clone(b)}); err != nil {
					t.Fatal(err)
				}
			}
			if i%2000 == 1500 {
				if err := e.Seal(); err != nil {
					t.Fatal(err)
				}
			}
		}
		svc := spans[rng.IntN(len(spans))].Service
		for _, src := range []string{
			`{ } | rate() by (resource.service.name)`,
			`{ } | count_over_time() by (name)`,
			`{ status = error } | count_over_time() by (resource.service.name, name)`,
			`{ resource.service.name = "` + svc + `" } | quantile_over_time(duration, .5, .95, .99) by (name)`,
			`{ } | quantile_over_time(duration, .95) by (resource.service.name)`,
			`{ } | quantile_over_time(duration, .5, .95, .99) by (name)`,
			`{ status = error } | rate() by (name)`,
			`{ } | max_over_time(duration) by (resource.service.name, name)`,
			`{ } | rate()`,
			`{ } | count_over_time() by (name) | topk(3)`,
			`{ } | count_over_time() by (resource.service.name) > 2 | bottomk(2)`,
		} {
			q, err := query.ParseQuery(src)
			if err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				req := store.MetricsRequest{Start: uint64(start.UnixNano()), End: uint64(start.Add(4 * time.Hour).UnixNano()), Step: 15 * time.Minute}
				if round > 0 {
					req.Start += uint64(rng.Int64N(int64(time.Hour)))
					req.End -= uint64(rng.Int64N(int64(time.Hour)))
					req.Step = time.Duration(1+rng.IntN(30)) * time.Minute
				}
				agg, _, err := store.QueryMetrics(ctx, e, "p", q, req)
				if err != nil {
					t.Fatal(err)
				}
				rows := req
				rows.NoAggregates = true
				engRows, _, err := store.QueryMetrics(ctx, e, "p", q, rows)
				if err != nil {
					t.Fatal(err)
				}
				brute, _, err := store.QueryMetrics(ctx, m, "p", q, rows)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("seed %d %s round %d", seed, src, round)
				if agg.Path != "aggregates" || engRows.Path != "spans" || brute.Path != "spans" || engRows.SpansRead == 0 {
					t.Fatalf("%s: paths %s/%s/%s (spans read %d)", what, agg.Path, engRows.Path, brute.Path, engRows.SpansRead)
				}
				if len(agg.Series) == 0 {
					t.Fatalf("%s: no series", what)
				}
				checkSeries(t, what+" (aggregates vs engine spans)", agg.Series, engRows.Series, 0.011)
				checkSeries(t, what+" (engine spans vs brute force)", engRows.Series, brute.Series, 0)
			}
		}
	}
}

func checkSeries(t *testing.T, what string, a, b []store.MetricsSeries, tol float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d series vs %d", what, len(a), len(b))
	}
	for i := range a {
		if fmt.Sprint(a[i].Labels) != fmt.Sprint(b[i].Labels) || len(a[i].Samples) != len(b[i].Samples) {
			t.Fatalf("%s: series %d: %v (%d samples) vs %v (%d samples)", what, i, a[i].Labels, len(a[i].Samples), b[i].Labels, len(b[i].Samples))
		}
		for j := range a[i].Samples {
			x, y := a[i].Samples[j], b[i].Samples[j]
			if x.TimeMs != y.TimeMs || math.Abs(x.Value-y.Value) > tol*math.Abs(y.Value)+1e-9 {
				t.Fatalf("%s: series %v sample %d: %+v vs %+v", what, a[i].Labels, j, x, y)
			}
		}
	}
}

// TestCompare: compare() counts every attribute's values on each side of
// the selection, keeps the top values, and its totals add up to the spans.
func TestCompare(t *testing.T) {
	ctx := context.Background()
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	spans, err := bench.Generate(bench.CorpusAPI, bench.CorpusOptions{Seed: 3, Spans: 3000, Start: start, Window: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m := memstore.New(memstore.Options{})
	if err := m.Append(ctx, &store.Write{Project: "p", Type: otlp.RecordOTLPProto, Body: otlp.EncodeProto(spans), Spans: slices.Clone(spans)}); err != nil {
		t.Fatal(err)
	}
	var errs, others int
	byName := map[string]int{}
	for i := range spans {
		if spans[i].StatusCode == model.StatusError {
			errs++
			byName[spans[i].Name]++
		} else {
			others++
		}
	}
	q, err := query.ParseQuery(`{ } | compare({ status = error }, 3)`)
	if err != nil {
		t.Fatal(err)
	}
	ans, _, err := store.QueryMetrics(ctx, m, "p", q, store.MetricsRequest{Start: uint64(start.UnixNano()), End: uint64(start.Add(2 * time.Hour).UnixNano()), Step: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sum := func(s store.MetricsSeries) int {
		n := 0.0
		for _, p := range s.Samples {
			n += p.Value
		}
		return int(n)
	}
	perAttr := map[string]int{}
	var selTotal, baseTotal, selErr int
	var topNames []int
	for _, s := range ans.Series {
		meta, attr := s.Labels[0].Value.AsString(), s.Labels[1]
		switch {
		case meta == "selection_total" && attr.Name == "name":
			selTotal = sum(s)
		case meta == "baseline_total" && attr.Name == "name":
			baseTotal = sum(s)
		case meta == "selection" && attr.Name == "status":
			selErr = sum(s)
			if attr.Value.AsString() != "error" {
				t.Fatalf("a selected span with status %s", attr.Value.AsString())
			}
		case meta == "selection" && attr.Name == "name":
			topNames = append(topNames, sum(s))
			if sum(s) != byName[attr.Value.AsString()] {
				t.Fatalf("selection name=%s: %d, brute force %d", attr.Value.AsString(), sum(s), byName[attr.Value.AsString()])
			}
		}
		if meta == "selection" || meta == "baseline" {
			perAttr[meta+attr.Name]++
		}
	}
	if errs == 0 || selTotal != errs || baseTotal != others || selErr != errs || len(topNames) != 3 {
		t.Fatalf("totals: selection %d (errors %d), baseline %d (others %d), status=error %d, top names %v", selTotal, errs, baseTotal, others, selErr, topNames)
	}
	for k, n := range perAttr {
		if n > 3 {
			t.Fatalf("%s: %d values kept, topN is 3", k, n)
		}
	}
}
