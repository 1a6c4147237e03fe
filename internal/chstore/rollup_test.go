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
	if gen, ok := roll.llmRollupGen(); !ok || gen != llmGen2 || !roll.rollups[gen.hourName] {
		t.Fatalf("the LLM rollups of a fresh database are not the complete second generation: %v", roll.rollups)
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

// openAt opens a store on url after only the first n migrations, as a
// database made by an older rastro.
func openAt(t *testing.T, url string, n int) *Store {
	t.Helper()
	saved := migrations
	migrations = migrations[:n]
	defer func() { migrations = saved }()
	return open(t, Options{URL: url})
}

// TestRollupOnDatabaseWithSpans: a database that held spans before the
// rollups existed is not answered from them (they have not seen those
// spans), and migration 9 leaves no view of its own feeding tables nothing
// reads.
func TestRollupOnDatabaseWithSpans(t *testing.T) {
	url := chtestURL(t)
	s0 := open(t, Options{URL: url})
	ctx := t.Context()
	// Undo migrations 3, 8 and 9 (the rollups), as on a database made
	// before them.
	for _, stmt := range []string{"DROP TABLE IF EXISTS llm_rollup_mv", "DROP TABLE IF EXISTS llm_rollup_hour_mv",
		"DROP TABLE llm_rollup2_mv", "DROP TABLE llm_rollup_hour2_mv", "DROP TABLE llm_rollup", "DROP TABLE llm_rollup_hour",
		"DROP TABLE llm_rollup2", "DROP TABLE llm_rollup_hour2", "DROP TABLE rollups",
		"ALTER TABLE schema_migrations DELETE WHERE version IN (3, 8, 9)"} {
		if err := s0.conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	appendAll(t, s0, "p", spansAt(t, 1, 200, time.Now().Add(-time.Hour)))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n uint64
		if err := s0.conn.QueryRow(ctx, "SELECT count() FROM schema_migrations WHERE version IN (3, 8, 9)").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the records of migrations 3, 8 and 9 not deleted after 20s")
		}
	}
	s := open(t, Options{URL: url})
	if _, ok := s.llmRollupGen(); ok || s.rollups["llm_hour"] || s.rollups["llm_hour2"] {
		t.Fatalf("a rollup created over existing spans is taken as complete: %v", s.rollups)
	}
	before := s.rollupReads.Load()
	if _, err := s.LLMStats(ctx, "p", &store.LLMQuery{Filter: query.Filter{}}); err != nil {
		t.Fatal(err)
	}
	if s.rollupReads.Load() != before {
		t.Fatal("an incomplete rollup answered")
	}
	if v := views(t, s); v["llm_rollup2_mv"] || v["llm_rollup_hour2_mv"] || !v["llm_rollup_mv"] {
		t.Fatalf("views after migration 9 on a database with spans: %v", v)
	}
}

// views are the materialized views of s's database.
func views(t *testing.T, s *Store) map[string]bool {
	t.Helper()
	rows, err := s.conn.Query(t.Context(), "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine = 'MaterializedView'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		out[name] = true
	}
	return out
}

// TestLLMRollupGenerations: a database created with migration 9 answers
// LLM statistics from the rollups with 64-bit trace sets, and no view feeds
// the first generation's tables; one migrated to 8 whose rollups saw every
// span keeps them when it is migrated to 9 with spans, and drops the
// second generation's views. Both answer as spans alone do, the whole hours
// from the hourly rollup.
func TestLLMRollupGenerations(t *testing.T) {
	base := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	spans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 5, Spans: 3000, Start: base, Window: 150 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	llm.Enrich(spans, llm.DefaultPrices())
	check := func(url string, s *Store, want llmRollup) {
		t.Helper()
		if gen, ok := s.llmRollupGen(); !ok || gen != want || !s.rollups[want.hourName] {
			t.Fatalf("rollups %v: want %s and %s complete", s.rollups, want.minuteName, want.hourName)
		}
		other := llmGen1
		if want == llmGen1 {
			other = llmGen2
		}
		if v := views(t, s); !v[want.minutes+"_mv"] || !v[want.hours+"_mv"] || v[other.minutes+"_mv"] || v[other.hours+"_mv"] {
			t.Fatalf("views %v: want those of %s and %s only", v, want.minutes, want.hours)
		}
		scan := open(t, Options{URL: url, NoRollups: true})
		for _, dims := range [][]string{{"model"}, {"service", "hour"}, nil} {
			q := store.LLMQuery{GroupBy: dims, Filter: query.Filter{Start: uint64(base.Add(-time.Minute).UnixNano())}}
			hours := s.hourReads.Load()
			got, err := s.LLMStats(t.Context(), "p", &q)
			if err != nil {
				t.Fatal(err)
			}
			if s.hourReads.Load() == hours {
				t.Fatalf("group by %v: not answered from %s", dims, want.hours)
			}
			exact, err := scan.LLMStats(t.Context(), "p", &q)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Groups) == 0 || !reflect.DeepEqual(got, exact) {
				t.Fatalf("group by %v from %s: %+v\nfrom spans: %+v", dims, want.minutes, got, exact)
			}
		}
	}
	fresh := chtestURL(t)
	s := open(t, Options{URL: fresh})
	appendAll(t, s, "p", slices.Clone(spans))
	check(fresh, s, llmGen2)

	old := chtestURL(t)
	appendAll(t, openAt(t, old, 8), "p", slices.Clone(spans))
	check(old, open(t, Options{URL: old}), llmGen1)
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
