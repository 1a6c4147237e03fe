package chstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

var (
	compareSpans    = flag.Int("compare-spans", 1_000_000, "spans BenchmarkVersusEngine loads (a tenth of them from the LLM corpus)")
	compareBackends = flag.String("compare-backends", "engine,clickhouse", "the backends BenchmarkVersusEngine measures")
	compareURL      = flag.String("compare-url", "", "a ClickHouse database BenchmarkVersusEngine uses instead of a fresh chtest one, and leaves in place to be inspected; "+
		"when it already holds the corpus (as many spans), the ClickHouse ingest is skipped")
	compareStart = flag.Int64("compare-start", 0, "the corpus's start (unix seconds; default three hours ago): the one a previous run logged regenerates its corpus, "+
		"as -compare-url's reuse needs (the generator's traces depend on the time of day)")
	compareLLMSpans = flag.Int("compare-llm-spans", 0, "of -compare-spans, how many come from the LLM corpus (default a tenth)")
	compareWindow   = flag.Duration("compare-window", 2*time.Hour, "the time the corpus spans (rastro bench clickhouse's is 25m)")
	compareAB       = flag.Bool("compare-ab", false, "on ClickHouse, time only A/B pairs, interleaved sample by sample: the filter by time slices and in one query "+
		"(NoIndexSlices), LLM statistics with and without the hourly rollup")
	compareNowAfter = flag.Duration("compare-now-after", 0, "with -compare-ab: the ClickHouse store's clock (Options.Now, the filter's first time slice) "+
		"set this long after the corpus's end, as when the corpus was just ingested")
	compareSamples = flag.Int("compare-samples", 200, "timed samples of trace by id and of the filter (LLM statistics: a tenth)")
)

// BenchmarkVersusEngine loads one corpus (canonical spans and a tenth of
// LLM spans, one project) into ClickHouse and into the embedded engine
// through the store seam (Append, 4 writers of 5,000-span requests, a
// refused one sent again after 5 ms; not over HTTP), then times on each: trace by id (200 traces drawn from the
// corpus, each answer checked for its span count), a selective attribute
// filter ({ span.user.id = "u-NNN" }, about 1% of the canonical spans,
// newest 20, checked non-empty), and LLM statistics by model over the whole
// store (20 samples; on ClickHouse with and without the rollup; trace by id
// and the filter also reading whole spans from spans instead of
// spans_by_trace). It reports
// p50 and p95 of each and bytes on disk per span. Run it alone, once:
//
//	go test ./internal/chstore -run XXX -bench VersusEngine -benchtime 1x [-compare-spans N]
func BenchmarkVersusEngine(b *testing.B) {
	n := *compareSpans
	nLLM := n / 10
	if *compareLLMSpans != 0 {
		nLLM = *compareLLMSpans
	}
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	if *compareStart != 0 {
		start = time.Unix(*compareStart, 0)
	}
	b.Logf("corpus start %d (-compare-start)", start.Unix())
	canon, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: 1, Spans: n - nLLM, Start: start, Window: *compareWindow})
	if err != nil {
		b.Fatal(err)
	}
	llmSpans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 1001, Spans: nLLM, Start: start, Window: *compareWindow})
	if err != nil {
		b.Fatal(err)
	}
	corpus := append(canon, llmSpans...)
	perTrace := map[model.TraceID]int{}
	var ids []model.TraceID
	users := map[string]bool{}
	for i := range corpus {
		if perTrace[corpus[i].TraceID] == 0 {
			ids = append(ids, corpus[i].TraceID)
		}
		perTrace[corpus[i].TraceID]++
		if v, ok := corpus[i].Attr("user.id"); ok {
			users[v.Str] = true
		}
	}
	rng := rand.New(rand.NewPCG(1, 99))
	var traces []model.TraceID
	for range *compareSamples + 10 {
		traces = append(traces, ids[rng.IntN(len(ids))])
	}
	var filters []query.Filter
	all := bench.CanonicalUsers()
	for len(filters) < *compareSamples+10 {
		if u := all[rng.IntN(len(all))]; users[u] {
			expr, err := query.ParseTraceQL(fmt.Sprintf(`{ span.user.id = %q }`, u))
			if err != nil {
				b.Fatal(err)
			}
			filters = append(filters, query.Filter{Expr: expr})
		}
	}

	url := *compareURL
	if url == "" {
		url = chtestURL(b)
	}
	ch, err := Open(b.Context(), Options{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	dir := b.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	engClosed := false
	defer func() {
		if !engClosed {
			eng.Close()
		}
	}()
	ctx := b.Context()
	b.ResetTimer()
	for _, c := range []struct {
		name string
		be   store.Backend
	}{{"engine", eng}, {"clickhouse", ch}} {
		if !slices.Contains(strings.Split(*compareBackends, ","), c.name) {
			continue
		}
		if c.name == "clickhouse" && *compareURL != "" {
			var held uint64
			if err := ch.conn.QueryRow(ctx, "SELECT count() FROM spans").Scan(&held); err != nil {
				b.Fatal(err)
			}
			if held == uint64(len(corpus)) {
				b.Logf("clickhouse: %s already holds the corpus: ingest skipped", redact(url))
				goto read
			}
			if held != 0 {
				b.Fatalf("clickhouse: %s holds %d spans, neither none nor the corpus (%d)", redact(url), held, len(corpus))
			}
		}
		{
			el := ingest(b, c.be, corpus)
			b.Logf("%s: ingest %d spans in %v: %.0f spans/s", c.name, len(corpus), el.Round(time.Millisecond), float64(len(corpus))/el.Seconds())
			b.ReportMetric(float64(len(corpus))/el.Seconds(), c.name+"-ingest-spans/s")
		}
	read:
		if c.name == "clickhouse" && *compareAB {
			if *compareNowAfter != 0 {
				at := start.Add(*compareWindow + *compareNowAfter)
				ch.opts.Now = func() time.Time { return at }
			}
			timeAB(b, "clickhouse-filter-slices", "clickhouse-filter-one-query", 10, len(filters),
				func(ab int) { ch.opts.NoIndexSlices = ab == 1 }, func(i int) {
					got, _, _, err := c.be.SearchSpans(ctx, "p", &filters[i], 20, nil)
					if err != nil || len(got) == 0 {
						b.Fatalf("%s: %s: %d spans (%v)", c.name, filters[i].Expr, len(got), err)
					}
				})
			ch.opts.NoIndexSlices = false
			hours := ch.rollups["llm_hour"]
			llmq := &store.LLMQuery{GroupBy: []string{"model"}}
			var want []store.LLMGroup
			timeAB(b, "clickhouse-llm-hours", "clickhouse-llm-minutes", 2, 2+max(*compareSamples/10, 1),
				func(ab int) { ch.rollups["llm_hour"] = hours && ab == 0 }, func(int) {
					st, err := c.be.LLMStats(ctx, "p", llmq)
					if err != nil || len(st.Groups) == 0 || want != nil && !reflect.DeepEqual(st.Groups, want) {
						b.Fatalf("%s: LLM statistics: %d groups (%v), not the first answer", c.name, len(st.Groups), err)
					}
					want = st.Groups
				})
			ch.rollups["llm_hour"] = hours
			continue
		}
		timeit(b, c.name+"-trace", 10, len(traces), func(i int) {
			tr, _, err := c.be.Trace(ctx, "p", traces[i])
			if err != nil || len(tr) != perTrace[traces[i]] {
				b.Fatalf("%s: trace %s: %d spans (%v), want %d", c.name, traces[i], len(tr), err, perTrace[traces[i]])
			}
		})
		timeit(b, c.name+"-filter", 10, len(filters), func(i int) {
			got, _, _, err := c.be.SearchSpans(ctx, "p", &filters[i], 20, nil)
			if err != nil || len(got) == 0 {
				b.Fatalf("%s: %s: %d spans (%v)", c.name, filters[i].Expr, len(got), err)
			}
		})
		if c.name == "clickhouse" {
			// The same lookups reading whole spans from spans (by time)
			// instead of spans_by_trace, back to back.
			ch.opts.NoByTrace = true
			timeit(b, c.name+"-trace-spans-only", 10, len(traces), func(i int) {
				tr, _, err := c.be.Trace(ctx, "p", traces[i])
				if err != nil || len(tr) != perTrace[traces[i]] {
					b.Fatalf("%s: trace %s: %d spans (%v), want %d", c.name, traces[i], len(tr), err, perTrace[traces[i]])
				}
			})
			timeit(b, c.name+"-filter-spans-only", 10, len(filters), func(i int) {
				got, _, _, err := c.be.SearchSpans(ctx, "p", &filters[i], 20, nil)
				if err != nil || len(got) == 0 {
					b.Fatalf("%s: %s: %d spans (%v)", c.name, filters[i].Expr, len(got), err)
				}
			})
			ch.opts.NoByTrace = false
		}
		llmq := &store.LLMQuery{GroupBy: []string{"model"}}
		check := func(st store.LLMStats, err error) {
			var spans int64
			for _, g := range st.Groups {
				spans += g.M.Spans
			}
			if err != nil || spans == 0 {
				b.Fatalf("%s: LLM statistics: %d spans (%v)", c.name, spans, err)
			}
		}
		timeit(b, c.name+"-llm", 2, 2+max(*compareSamples/10, 1), func(int) { check(c.be.LLMStats(ctx, "p", llmq)) })
		if c.name == "clickhouse" {
			ch.opts.NoRollups = true
			timeit(b, c.name+"-llm-spans-only", 2, 2+max(*compareSamples/10, 1), func(int) { check(c.be.LLMStats(ctx, "p", llmq)) })
			ch.opts.NoRollups = false
			rows, err := ch.conn.Query(ctx, "SELECT table, sum(bytes_on_disk) FROM system.parts WHERE database = currentDatabase() AND active GROUP BY table ORDER BY table")
			if err != nil {
				b.Fatal(err)
			}
			var total uint64
			for rows.Next() {
				var table string
				var bytes uint64
				if err := rows.Scan(&table, &bytes); err != nil {
					b.Fatal(err)
				}
				total += bytes
				b.Logf("clickhouse: %s: %.1f bytes/span", table, float64(bytes)/float64(len(corpus)))
			}
			rows.Close()
			b.ReportMetric(float64(total)/float64(len(corpus)), "clickhouse-disk-B/span")
			b.Logf("clickhouse: all tables: %.1f bytes/span", float64(total)/float64(len(corpus)))
		} else {
			if err := eng.Close(); err != nil {
				b.Fatal(err)
			}
			var size int64
			filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if fi, err := d.Info(); err == nil {
						size += fi.Size()
					}
				}
				return nil
			})
			b.ReportMetric(float64(size)/float64(len(corpus)), "engine-disk-B/span")
			b.Logf("engine: data directory: %.1f bytes/span", float64(size)/float64(len(corpus)))
			engClosed = true
		}
	}
	fmt.Fprintln(os.Stderr, "load average:", loadavg())
}

// ingest appends spans with 4 writers of 5,000-span requests; a request
// refused as overloaded (429) is sent again after 5 ms.
func ingest(b *testing.B, be store.Backend, spans []model.Span) time.Duration {
	const req = 5000
	t0 := time.Now()
	var wg sync.WaitGroup
	next := make(chan []model.Span)
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for part := range next {
				for {
					err := be.Append(context.Background(), &store.Write{Project: "p", Spans: slices.Clone(part)})
					if errors.Is(err, store.ErrOverloaded) {
						time.Sleep(5 * time.Millisecond) // as a client backs off a 429
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		}()
	}
	for i := 0; i < len(spans); i += req {
		select {
		case next <- spans[i:min(i+req, len(spans))]:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return time.Since(t0)
}

// timeit runs f for warm then timed samples and reports p50 and p95 (ms,
// nearest rank).
func timeit(b *testing.B, name string, warm, n int, f func(i int)) {
	for i := range warm {
		f(i)
	}
	d := make([]float64, 0, n-warm)
	for i := warm; i < n; i++ {
		t0 := time.Now()
		f(i)
		d = append(d, float64(time.Since(t0).Microseconds())/1000)
	}
	slices.Sort(d)
	rank := func(q float64) float64 { return d[max(int(q*float64(len(d))+0.999999)-1, 0)] }
	b.ReportMetric(rank(0.5), name+"-p50-ms")
	b.ReportMetric(rank(0.95), name+"-p95-ms")
	b.Logf("%s: p50 %.2f ms, p95 %.2f ms over %d", name, rank(0.5), rank(0.95), len(d))
}

// timeAB runs f for warm then timed samples, each sample twice in turn
// after set(0) (A) and set(1) (B), and reports p50 and p95 of each (ms,
// nearest rank).
func timeAB(b *testing.B, nameA, nameB string, warm, n int, set func(ab int), f func(i int)) {
	var d [2][]float64
	for i := range n {
		for ab := range 2 {
			set(ab)
			t0 := time.Now()
			f(i)
			if i >= warm {
				d[ab] = append(d[ab], float64(time.Since(t0).Microseconds())/1000)
			}
		}
	}
	for ab, name := range []string{nameA, nameB} {
		slices.Sort(d[ab])
		rank := func(q float64) float64 { return d[ab][max(int(q*float64(len(d[ab]))+0.999999)-1, 0)] }
		b.ReportMetric(rank(0.5), name+"-p50-ms")
		b.ReportMetric(rank(0.95), name+"-p95-ms")
		b.Logf("%s: p50 %.2f ms, p95 %.2f ms over %d", name, rank(0.5), rank(0.95), len(d[ab]))
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return string(b)
}
