package chstore

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/store/memstore"
)

// TestRollupEqualsSpanScan: LLM statistics and time series answered with
// the rollup (whole minutes) and spans (the edges) equal those answered from
// spans alone, field for field, on random corpora, windows, group-bys,
// steps and filters; their counts and sums equal the reference's
// (memstore). After an erasure, windows it overlaps are answered from
// spans, and still agree.
func TestRollupEqualsSpanScan(t *testing.T) {
	url := chtestURL(t)
	roll := open(t, Options{URL: url})
	scan := open(t, Options{URL: url, NoRollups: true})
	if !roll.rollups["llm"] || !roll.rollups["llm_hour"] {
		t.Fatal("the LLM rollups of a fresh database are not complete")
	}
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 11))
	base := time.Now().Add(-4 * time.Hour).Truncate(time.Minute)
	ref := memstore.New(memstore.Options{})
	var spans []model.Span
	for i, corpus := range []string{bench.CorpusLLM, bench.CorpusLLMSessions, bench.CorpusLLM} {
		part, err := bench.Generate(corpus, bench.CorpusOptions{Seed: uint64(40 + i), Spans: 1500, Start: base.Add(time.Duration(i) * 17 * time.Minute), Window: 2 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, part...)
	}
	llm.Enrich(spans, llm.DefaultPrices())
	appendAll(t, roll, "p", slices.Clone(spans))
	if err := ref.Append(ctx, &store.Write{Project: "p", Spans: slices.Clone(spans)}); err != nil {
		t.Fatal(err)
	}
	var services []string
	for i := range spans {
		if spans[i].LLM != nil && !slices.Contains(services, spans[i].Service) {
			services = append(services, spans[i].Service)
		}
	}
	lo, hi := uint64(base.UnixNano()), uint64(base.Add(3*time.Hour).UnixNano())
	dims := []string{"model", "provider", "service", "operation", "agent", "hour", "day"}
	steps := []time.Duration{0, 0, time.Minute, 5 * time.Minute, time.Hour}
	trial := func(i int) (used bool) {
		var q store.LLMQuery
		a := lo + rng.Uint64N(hi-lo)
		b := a + rng.Uint64N(hi-a)
		switch rng.IntN(5) {
		case 0:
			a = 0
		case 1:
			b = 0
		}
		q.Filter.Start, q.Filter.End = a, b
		for _, d := range dims {
			if rng.IntN(4) == 0 && len(q.GroupBy) < 3 {
				q.GroupBy = append(q.GroupBy, d)
			}
		}
		if rng.IntN(3) == 0 {
			q.Filter.Service = services[rng.IntN(len(services))]
		}
		if rng.IntN(4) == 0 {
			q.Filter.HasStatus, q.Filter.Status = true, model.StatusError
		}
		step := steps[rng.IntN(len(steps))]
		what := fmt.Sprintf("trial %d: window [%d, %d) by %v step %v service %q status %v", i, a, b, q.GroupBy, step, q.Filter.Service, q.Filter.HasStatus)
		before := roll.rollupReads.Load()
		var got, want, exact store.LLMStats
		var err1, err2, err3 error
		if step == 0 {
			got, err1 = roll.LLMStats(ctx, "p", &q)
			want, err2 = scan.LLMStats(ctx, "p", &q)
			exact, err3 = ref.LLMStats(ctx, "p", &q)
		} else {
			got, err1 = roll.LLMTimeseries(ctx, "p", &q, step)
			want, err2 = scan.LLMTimeseries(ctx, "p", &q, step)
			exact, err3 = ref.LLMTimeseries(ctx, "p", &q, step)
		}
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("%s: %v / %v / %v", what, err1, err2, err3)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: with the rollup\n%+v\nfrom spans\n%+v", what, got, want)
		}
		if len(got.Groups) != len(exact.Groups) {
			t.Fatalf("%s: %d groups, the reference has %d:\n%+v\n%+v", what, len(got.Groups), len(exact.Groups), got.Groups, exact.Groups)
		}
		// The reference orders ties (and groups within a bucket) as it
		// met them: compare in one order.
		byKey := func(gs []store.LLMGroup) []store.LLMGroup {
			gs = slices.Clone(gs)
			slices.SortFunc(gs, func(a, b store.LLMGroup) int {
				return cmp.Or(cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(fmt.Sprint(a.Key), fmt.Sprint(b.Key)))
			})
			return gs
		}
		gg, eg := byKey(got.Groups), byKey(exact.Groups)
		for j := range gg {
			g, e := gg[j], eg[j]
			g.M.Latency, g.M.TTFT, e.M.Latency, e.M.TTFT = nil, nil, nil, nil
			if !reflect.DeepEqual(g, e) {
				t.Fatalf("%s: group %d\n%+v\nthe reference\n%+v\nall:\n%+v\n%+v", what, j, g, e, got.Groups, exact.Groups)
			}
		}
		return roll.rollupReads.Load() > before
	}
	used := 0
	for i := range 40 {
		if trial(i) {
			used++
		}
	}
	if used < 20 {
		t.Fatalf("the rollup answered %d of 40 random queries, want most", used)
	}
	if n := roll.hourReads.Load(); n < 5 {
		t.Fatalf("the hourly rollup answered %d of 40 random queries, want some", n)
	}

	// An erasure: the rollup still counts the erased spans, so windows the
	// erased traces overlap are answered from spans.
	var id model.TraceID
	for i := range spans {
		if spans[i].LLM != nil {
			id = spans[i].TraceID
			break
		}
	}
	if _, err := roll.Erase(ctx, store.EraseRequest{Project: "p", TraceID: &id}); err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Erase(ctx, store.EraseRequest{Project: "p", TraceID: &id}); err != nil {
		t.Fatal(err)
	}
	q := store.LLMQuery{GroupBy: []string{"model"}}
	before := roll.rollupReads.Load()
	got, err := roll.LLMStats(ctx, "p", &q)
	if err != nil {
		t.Fatal(err)
	}
	if roll.rollupReads.Load() != before {
		t.Fatal("the rollup answered a window holding an erased trace")
	}
	want, _ := scan.LLMStats(ctx, "p", &q)
	exact, _ := ref.LLMStats(ctx, "p", &q)
	if !reflect.DeepEqual(got, want) || len(got.Groups) != len(exact.Groups) || got.Groups[0].M.Spans != exact.Groups[0].M.Spans {
		t.Fatalf("after the erasure: %+v, from spans %+v, the reference %+v", got, want, exact)
	}
	for i := range 10 {
		trial(100 + i)
	}
}

// TestRollupOnDatabaseWithSpans: a database that held spans before the
// rollup existed is not answered from the rollup (it has not seen them).
func TestRollupOnDatabaseWithSpans(t *testing.T) {
	url := chtestURL(t)
	s := open(t, Options{URL: url})
	ctx := t.Context()
	if err := s.conn.Exec(ctx, "DROP TABLE llm_rollup_mv"); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"DROP TABLE llm_rollup", "DROP TABLE rollups", "ALTER TABLE schema_migrations DELETE WHERE version = 3"} {
		if err := s.conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	appendAll(t, s, "p", spansAt(t, 1, 200, time.Now().Add(-time.Hour)))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM schema_migrations WHERE version = 3").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("migration 3's record not deleted after 20s")
		}
	}
	s2 := open(t, Options{URL: url})
	if s2.rollups["llm"] {
		t.Fatal("a rollup created over existing spans is taken as complete")
	}
	before := s2.rollupReads.Load()
	if _, err := s2.LLMStats(ctx, "p", &store.LLMQuery{Filter: query.Filter{}}); err != nil {
		t.Fatal(err)
	}
	if s2.rollupReads.Load() != before {
		t.Fatal("an incomplete rollup answered")
	}
}

// TestREDRollupEqualsSpanScan: RED answered with the rollup (whole minutes)
// and spans (the edges) equals RED from spans alone, series for series and
// bucket for bucket, on random windows, steps, splits and filters; calls
// and errors equal the reference's (memstore). The latency heatmap, from the
// same rollup, equals both cell for cell.
func TestREDRollupEqualsSpanScan(t *testing.T) {
	dsn := chtestURL(t)
	roll := open(t, Options{URL: dsn})
	scan := open(t, Options{URL: dsn, NoRollups: true})
	if !roll.rollups["ops"] {
		t.Fatal("the RED rollup of a fresh database is not complete")
	}
	ctx := t.Context()
	base := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	spans := spansAt(t, 61, 4000, base)
	more, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 5062, Spans: 1000, Start: base.Add(13 * time.Minute), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	spans = append(spans, more...)
	appendAll(t, roll, "p", slices.Clone(spans))
	ref := memstore.New(memstore.Options{})
	if err := ref.Append(ctx, &store.Write{Project: "p", Spans: slices.Clone(spans)}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	lo, hi := uint64(base.UnixNano()), uint64(base.Add(3*time.Hour).UnixNano())
	used := 0
	for i := range 30 {
		q := store.OpsQuery{Step: []time.Duration{time.Minute, 5 * time.Minute, time.Hour}[rng.IntN(3)]}
		q.Start = lo + rng.Uint64N(hi-lo)
		q.End = q.Start + rng.Uint64N(hi-q.Start)
		switch rng.IntN(5) {
		case 0:
			q.Start = 0
		case 1:
			q.End = 0
		}
		q.ByOperation = rng.IntN(2) == 0
		q.NameOnly = q.ByOperation && rng.IntN(2) == 0
		if rng.IntN(3) == 0 {
			q.Service = spans[rng.IntN(len(spans))].Service
		}
		if rng.IntN(4) == 0 {
			q.Name = spans[rng.IntN(len(spans))].Name
		}
		what := fmt.Sprintf("trial %d: %+v", i, q)
		hg, _, err1 := roll.Heatmap(ctx, "p", &q)
		hw, _, err2 := scan.Heatmap(ctx, "p", &q)
		he, _, err3 := ref.Heatmap(ctx, "p", &q)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("%s: heatmap: %v / %v / %v", what, err1, err2, err3)
		}
		if !reflect.DeepEqual(hg, hw) || !reflect.DeepEqual(hg, he) {
			t.Fatalf("%s: heatmap with the rollup\n%+v\nfrom spans\n%+v\nthe reference\n%+v", what, hg, hw, he)
		}
		before := roll.rollupReads.Load()
		got, _, err1 := roll.RED(ctx, "p", &q)
		if roll.rollupReads.Load() > before {
			used++
		}
		want, _, err2 := scan.RED(ctx, "p", &q)
		exact, _, err3 := ref.RED(ctx, "p", &q)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("%s: %v / %v / %v", what, err1, err2, err3)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: with the rollup\n%+v\nfrom spans\n%+v", what, got, want)
		}
		if len(got) != len(exact) {
			t.Fatalf("%s: %d series, the reference %d", what, len(got), len(exact))
		}
		for j := range got {
			g, e := got[j], exact[j]
			if g.Service != e.Service || g.Operation != e.Operation || g.Calls != e.Calls || g.Errors != e.Errors || len(g.Buckets) != len(e.Buckets) {
				t.Fatalf("%s: series %d: %+v, the reference %+v", what, j, g, e)
			}
			for k := range g.Buckets {
				if gb, eb := g.Buckets[k], e.Buckets[k]; gb.Start != eb.Start || gb.Calls != eb.Calls || gb.Errors != eb.Errors {
					t.Fatalf("%s: series %d bucket %d: %+v, the reference %+v", what, j, k, gb, eb)
				}
			}
		}
	}
	if used < 15 {
		t.Fatalf("the rollup answered %d of 30 random RED queries, want most", used)
	}
}
