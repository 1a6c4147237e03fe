package engine_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/text"
)

// TestAbsentValuesReadNoBlock checks issue 23's promise that an absent
// value costs almost nothing: over sealed segments of the canonical corpus
// (and a segment of Unicode names), a search for a value no span has reads
// no block, whether the value shares a prefix, the case or a Unicode normal
// form with a present one, and whether the query names the span scope or
// no scope (as Tempo's tags become); every segment is ruled out on its
// resident attribute value summary. Present values still find their spans,
// as a brute-force scan does.
func TestAbsentValuesReadNoBlock(t *testing.T) {
	e, err := engine.Open(engine.Options{Dir: t.TempDir(), Durability: engine.DurabilityBuffered})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	start := time.Now().Add(-2 * time.Hour)
	spans, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: 1, Spans: 40_000, Start: start, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(spans); i += 10_000 {
		appendSealed(t, e, spans[i:i+10_000], 1000) // one segment each
	}
	names := []string{"Zoë", "Ångström", "café", "İstanbul", "straße"}
	var named []model.Span
	for i := range 500 {
		s := spans[i]
		s.TraceID[15] ^= 0xa5
		s.Attributes = append([]model.KeyValue{{Key: "customer.name", Value: model.StringValue(norm.NFC.String(names[i%len(names)]))},
			{Key: "order.total", Value: model.DoubleValue(float64(i % 7))}}, s.Attributes...)
		named = append(named, s)
	}
	appendSealed(t, e, named, 100)
	const segments = 5
	all := append(append([]model.Span(nil), spans...), named...)

	search := func(q string) (n int, c0, c1 engine.Counters) {
		t.Helper()
		expr, err := query.ParseTraceQL(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		f := &query.Filter{Expr: expr}
		c0 = e.Counters()
		got, _, _, err := e.SearchSpans(context.Background(), "default", f, 20, nil)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		tr, _, err := e.SearchTraces(context.Background(), "default", f, 20)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		c1 = e.Counters()
		want := 0
		for i := range all {
			if f.Match(&all[i]) {
				want++
			}
		}
		if (want == 0) != (len(got) == 0) || (want == 0) != (len(tr) == 0) || len(got) > 20 {
			t.Fatalf("%s: %d spans and %d traces, brute force finds %d spans", q, len(got), len(tr), want)
		}
		return want, c0, c1
	}

	absent := []string{"u-absent", "u-0010", "u-00", "U-001", "u-001 ", "u-1000", "u-100"}
	var queries []string
	for _, v := range absent {
		queries = append(queries, fmt.Sprintf(`{ span.user.id = %q }`, v), fmt.Sprintf(`{ .user.id = %q }`, v))
	}
	for _, n := range names {
		c := norm.NFC.String(n)
		for _, v := range []string{norm.NFD.String(c), norm.NFKD.String(c), c + "s", c[:len(c)-1]} {
			if v != c {
				queries = append(queries, fmt.Sprintf(`{ span.customer.name = %q }`, v))
			}
		}
	}
	queries = append(queries, `{ span.customer.name = "ZOË" }`, `{ resource.user.id = "u-001" }`, `{ span.no.such.key = "x" }`,
		`{ span.user.id = "u-001" && span.cloud.region = "mars-1" }`,
		// Numbers: an int no span has, Tempo's tag search for a value that
		// reads as a number (the string or the number), a double no span
		// has, an integer no double equals.
		`{ span.http.response.status_code = 299 }`, `{ (.user.id = "123456" || .user.id = 123456) }`,
		`{ (.http.response.status_code = "299" || .http.response.status_code = 299) }`,
		`{ span.order.total = 9 }`, `{ span.order.total = 9.0 }`, `{ .order.total = -1 }`)
	for _, q := range queries {
		n, c0, c1 := search(q)
		if n != 0 {
			t.Fatalf("%s: brute force finds %d spans: not an absent value", q, n)
		}
		if read := c1.BlocksExamined - c0.BlocksExamined; read != 0 {
			t.Errorf("%s: %d blocks read for an absent value", q, read)
		}
		if pruned := c1.AttrSegPruned - c0.AttrSegPruned; pruned != 2*segments {
			t.Errorf("%s: %d segment visits ruled out by the summary, want %d (two searches, %d segments)", q, pruned, 2*segments, segments)
		}
	}
	for _, q := range []string{`{ span.user.id = "u-001" }`, `{ .user.id = "u-042" }`,
		`{ (.http.response.status_code = "200" || .http.response.status_code = 200) }`,
		`{ span.order.total = 3 }`, `{ (.order.total = "6" || .order.total = 6) }`, `{ span.order.total = 0.0 }`,
		fmt.Sprintf(`{ span.customer.name = %q }`, norm.NFC.String("Zoë"))} {
		if n, _, _ := search(q); n == 0 {
			t.Fatalf("%s: the corpus has no match", q)
		}
	}
}

// TestContentSegmentsRuledOutByTheMap: segments sealed with interleaved
// start times, so that a search walks their blocks in turn. The newest
// holds each query's two words apart (in two spans), so its resident
// summary passes and its token map rules it out when the scan reaches it;
// the oldest holds them together in one span. Every two-word query finds
// that span alone, reading only its block, and a query with a word no span
// holds finds nothing and reads no block.
func TestContentSegmentsRuledOutByTheMap(t *testing.T) {
	e, err := engine.Open(engine.Options{Dir: t.TempDir(), Durability: engine.DurabilityBuffered,
		BlockSpans: 256, BlockCacheBytes: -1, NoCompaction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const segs, perSeg, items = 3, 3000, 12
	r := rand.New(rand.NewPCG(9, 10))
	spans := contentBenchSpans(r, segs*perSeg) // span i starts at i ms
	oldest, newest := 0, segs-1
	of := func(seg int) int { return r.IntN(perSeg)*segs + seg } // a span of segment seg
	want := make([]model.SpanID, items)
	for i := range items {
		a, b := fmt.Sprintf("alderq%02d", i), fmt.Sprintf("birchq%02d", i)
		x, y := of(newest), of(newest)
		for y == x {
			y = of(newest)
		}
		plantWords(&spans[x], false, a)
		plantWords(&spans[y], true, b)
		hit := of(oldest)
		plantWords(&spans[hit], r.IntN(2) == 0, a+" "+b)
		want[i] = spans[hit].SpanID
	}
	for seg := range segs {
		var part []model.Span
		for i := seg; i < len(spans); i += segs {
			part = append(part, spans[i])
		}
		appendSealed(t, e, part, 1000)
	}
	search := func(q string) ([]model.Span, engine.Counters, engine.Counters) {
		t.Helper()
		cq, err := text.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		c0 := e.Counters()
		got, _, res, err := e.SearchSpans(context.Background(), "default", &query.Filter{Content: cq}, 20, nil)
		if err != nil || len(res.Warnings) > 0 {
			t.Fatalf("%s: %v %v", q, err, res.Warnings)
		}
		return got, c0, e.Counters()
	}
	mapPruned := int64(0)
	for i := range items {
		q := fmt.Sprintf("alderq%02d birchq%02d", i, i)
		got, c0, c1 := search(q)
		if len(got) != 1 || got[0].SpanID != want[i] {
			t.Fatalf("%s: %d spans, want the one span holding both words", q, len(got))
		}
		if read := c1.BlocksExamined - c0.BlocksExamined; read != 1 {
			t.Errorf("%s: %d blocks read, want 1", q, read)
		}
		mapPruned += c1.ContentSegDiskPruned - c0.ContentSegDiskPruned
		q = fmt.Sprintf("alderq%02d nowhereq%02d", i, i)
		if got, c0, c1 = search(q); len(got) != 0 || c1.BlocksExamined != c0.BlocksExamined {
			t.Fatalf("%s: %d spans, %d blocks read; want none", q, len(got), c1.BlocksExamined-c0.BlocksExamined)
		}
	}
	if mapPruned < items {
		t.Fatalf("the token map ruled out %d segments over %d queries, want the newest each time", mapPruned, items)
	}
}

var (
	absentSpans    = flag.Int("absent.spans", 300_000, "BenchmarkAbsentWord: spans of the content-like store")
	absentSegSpans = flag.Int("absent.segspans", 77_000, "BenchmarkAbsentWord: spans per segment (the bench content suite's 1M spans seal into 13)")
	absentDir      = flag.String("absent.dir", "", "BenchmarkAbsentWord: keep the store in this directory and reuse it when it is there")
)

// absentStore opens (building it the first time) a store of content-like
// LLM spans: a prompt and a completion of 45-75 words, Zipf over 60,000
// pseudo-words plus multilingual words, sealed every absentSegSpans spans.
func absentStore(b *testing.B) *engine.Engine {
	b.Helper()
	dir := *absentDir
	built := false
	if dir == "" {
		dir = b.TempDir()
	} else if _, err := os.Stat(filepath.Join(dir, "built")); err == nil {
		built = true
	}
	e, err := engine.Open(engine.Options{Dir: dir, Durability: engine.DurabilityBuffered, NoCompaction: true})
	if err != nil {
		b.Fatal(err)
	}
	if built {
		return e
	}
	vocab := contentBenchVocab(60_000)
	r := rand.New(rand.NewPCG(7, 8))
	z := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	words := func() string {
		ws := make([]string, 45+r.IntN(31))
		for i := range ws {
			if r.IntN(100) < 15 {
				ws[i] = contentBenchMultilingual[r.IntN(len(contentBenchMultilingual))]
			} else {
				ws[i] = vocab[z.Uint64()]
			}
		}
		return strings.Join(ws, " ")
	}
	start := time.Now().Add(-2 * time.Hour)
	for lo := 0; lo < *absentSpans; lo += *absentSegSpans {
		n := min(*absentSegSpans, *absentSpans-lo)
		spans := make([]model.Span, n)
		for j := range spans {
			i := lo + j
			var tid model.TraceID
			var sid model.SpanID
			tid[0], tid[1], tid[2], tid[15] = byte(i>>16), byte(i>>8), byte(i), 1
			sid[5], sid[6], sid[7], sid[0] = byte(i>>16), byte(i>>8), byte(i), 1
			at := uint64(start.Add(time.Duration(i) * time.Millisecond).UnixNano())
			spans[j] = model.Span{
				TraceID: tid, SpanID: sid, Name: "chat", Service: "agent", Kind: model.KindClient,
				StartTimeUnixNano: at, EndTimeUnixNano: at + 1e6,
				Attributes: []model.KeyValue{
					{Key: "gen_ai.prompt.0.content", Value: model.StringValue(words())},
					{Key: "gen_ai.completion.0.content", Value: model.StringValue(words())},
				},
			}
		}
		appendSealed(b, e, spans, 1000)
	}
	if *absentDir != "" {
		if err := os.WriteFile(filepath.Join(dir, "built"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// BenchmarkAbsentWord times content searches for words no span holds, a
// new word each query (as the bench content suite asks them), and reports
// the distribution per query and what the slow ones did: how many
// segments passed their resident summary, whether a block was read, and
// whether a collection fell inside.
func BenchmarkAbsentWord(b *testing.B) {
	e := absentStore(b)
	defer e.Close()
	ctx := context.Background()
	var times []time.Duration
	type step struct {
		passed, read int64
		gc           bool
	}
	var steps []step
	gcs := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	i := 0
	for b.Loop() {
		cq, err := text.ParseQuery(fmt.Sprintf("nowhere%07d", i))
		if err != nil {
			b.Fatal(err)
		}
		i++
		f := query.Filter{Content: cq}
		c0 := e.Counters()
		metrics.Read(gcs)
		g0 := gcs[0].Value.Uint64()
		t0 := time.Now()
		got, _, _, err := e.SearchSpans(ctx, "default", &f, 20, nil)
		d := time.Since(t0)
		metrics.Read(gcs)
		c1 := e.Counters()
		if err != nil || len(got) != 0 {
			b.Fatalf("%v: %d spans, %v", cq, len(got), err)
		}
		times = append(times, d)
		steps = append(steps, step{
			passed: c1.ContentSegExamined - c0.ContentSegExamined + c1.ContentSegDiskPruned - c0.ContentSegDiskPruned,
			read:   c1.BlocksExamined - c0.BlocksExamined, gc: gcs[0].Value.Uint64() != g0,
		})
	}
	idx := make([]int, len(times))
	for k := range idx {
		idx[k] = k
	}
	slices.SortFunc(idx, func(x, y int) int { return cmp.Compare(times[x], times[y]) })
	at := func(p float64) time.Duration { return times[idx[min(len(idx)-1, int(p*float64(len(idx))))]] }
	b.ReportMetric(float64(at(0.50).Nanoseconds())/1e3, "p50-us")
	b.ReportMetric(float64(at(0.95).Nanoseconds())/1e3, "p95-us")
	b.ReportMetric(float64(at(0.99).Nanoseconds())/1e3, "p99-us")
	if len(times) < 100 {
		return
	}
	// What the slowest 5% did, against the rest.
	var slow, fast struct{ n, passed, read, gc int64 }
	for rank, k := range idx {
		s := &fast
		if rank >= len(idx)*95/100 {
			s = &slow
		}
		s.n++
		s.passed += steps[k].passed
		s.read += steps[k].read
		if steps[k].gc {
			s.gc++
		}
	}
	byPassed := map[int64][]time.Duration{}
	for k := range times {
		byPassed[steps[k].passed] = append(byPassed[steps[k].passed], times[k])
	}
	b.Logf("%d queries: p50 %v p95 %v p99 %v max %v", len(times), at(0.5), at(0.95), at(0.99), at(1))
	b.Logf("slowest 5%%: %.2f segments past the summary, %d blocks read, %d with a GC; the rest: %.2f, %d, %d",
		float64(slow.passed)/float64(slow.n), slow.read, slow.gc, float64(fast.passed)/float64(fast.n), fast.read, fast.gc)
	for p := int64(0); p < 20; p++ {
		if ds := byPassed[p]; len(ds) > 0 {
			slices.Sort(ds)
			b.Logf("  %d segments past the summary: %d queries, p50 %v p95 %v", p, len(ds), ds[len(ds)/2], ds[len(ds)*95/100])
		}
	}
}
