package engine_test

import (
	"context"
	"flag"
	"syscall"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// appendSealed appends spans to the default project as OTLP requests of
// batch spans (encoded, then decoded as the server would), then seals them.
func appendSealed(tb testing.TB, e *engine.Engine, spans []model.Span, batch int) {
	tb.Helper()
	for i := 0; i < len(spans); i += batch {
		body := otlp.EncodeProto(spans[i:min(i+batch, len(spans))])
		bt, err := otlp.DecodeProto(body)
		if err != nil {
			tb.Fatal(err)
		}
		if err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: bt.Spans}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := e.Seal(); err != nil {
		tb.Fatal(err)
	}
}

// loaded opens an engine over 100k sealed spans of the canonical corpus.
func loaded(b *testing.B, blockSpans int) (*engine.Engine, []model.Span) {
	b.Helper()
	return loadedWith(b, engine.Options{BlockSpans: blockSpans})
}

// loadedWith is loaded with other engine options (Dir and Durability are set).
func loadedWith(b *testing.B, o engine.Options) (*engine.Engine, []model.Span) {
	b.Helper()
	o.Dir, o.Durability = b.TempDir(), engine.DurabilityBuffered
	e, err := engine.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	spans, err := bench.Generate("canonical", bench.CorpusOptions{Seed: 1, Spans: 100_000, Start: time.Now().Add(-time.Hour), Window: 30 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	appendSealed(b, e, spans, 1000)
	st, err := e.Stats(context.Background(), "default")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.SegmentBytes)/float64(st.Spans), "disk-B/span")
	return e, spans
}

// BenchmarkTraceByID measures trace lookups in sealed segments by block size
// (the block size trades lookup cost, which decompresses one block's columns,
// against bytes on disk).
func BenchmarkTraceByID(b *testing.B) {
	for _, bs := range []int{512, 1024, 2048} {
		b.Run("block"+itoa(bs), func(b *testing.B) {
			e, spans := loaded(b, bs)
			defer e.Close()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				got, _, err := e.Trace(context.Background(), "default", spans[(i*97)%len(spans)].TraceID)
				if err != nil || len(got) == 0 {
					b.Fatalf("lookup: %v, %d spans", err, len(got))
				}
				i++
			}
		})
	}
}

// Flags of BenchmarkSelectiveFilter's large store (off by default: building
// it takes tens of seconds).
var (
	selectiveSpans    = flag.Int("selective.spans", 0, "BenchmarkSelectiveFilter: also search a store of this many canonical spans (e.g. 6000000)")
	selectiveSegSpans = flag.Int("selective.segspans", 200_000, "BenchmarkSelectiveFilter: spans per segment of the large store")
)

// BenchmarkSelectiveFilter measures a ~1% attribute filter, newest 20: over
// 100k sealed spans, and with -selective.spans over a store like the
// search-live one (issue 23): many segments, each sealed from a later
// window of a fresh canonical corpus, so every user's value is in every
// segment and a newest-first search should need only the newest.
func BenchmarkSelectiveFilter(b *testing.B) {
	b.Run("spans=100000", func(b *testing.B) {
		e, _ := loaded(b, 0)
		defer e.Close()
		benchSelective(b, e)
	})
	// Without the block cache every search decodes the blocks it reads, as
	// the first searches after a restart or a merge do.
	b.Run("spans=100000/nocache", func(b *testing.B) {
		e, _ := loadedWith(b, engine.Options{BlockCacheBytes: -1})
		defer e.Close()
		benchSelective(b, e)
	})
	if *selectiveSpans > 0 {
		b.Run("spans="+itoa(*selectiveSpans), func(b *testing.B) {
			e := segmented(b, *selectiveSpans, *selectiveSegSpans)
			defer e.Close()
			benchSelective(b, e)
		})
	}
}

// segmented opens an engine over spans canonical spans sealed into
// segments of segSpans, each from its own corpus (seed) one window after
// the previous one, as live ingest seals them. Compaction is off, so the
// segment count is what the sizes say.
func segmented(b *testing.B, spans, segSpans int) *engine.Engine {
	b.Helper()
	e, err := engine.Open(engine.Options{Dir: b.TempDir(), Durability: engine.DurabilityBuffered, NoCompaction: true})
	if err != nil {
		b.Fatal(err)
	}
	const window = time.Minute
	n := (spans + segSpans - 1) / segSpans
	start := time.Now().Add(-time.Duration(n+1) * window)
	for i := 0; i < n; i++ {
		part, err := bench.Generate("canonical", bench.CorpusOptions{Seed: uint64(i + 1), Spans: min(segSpans, spans-i*segSpans),
			Start: start.Add(time.Duration(i) * window), Window: window})
		if err != nil {
			b.Fatal(err)
		}
		appendSealed(b, e, part, 1000)
	}
	st, err := e.Stats(context.Background(), "default")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Segments), "segments")
	return e
}

// benchSelective times `{ span.user.id = "u-NNN" }`, limit 20, cycling
// through the canonical users; every answer must be full.
func benchSelective(b *testing.B, e *engine.Engine) {
	users := bench.CanonicalUsers()
	ctx := context.Background()
	// Warm: the first search of each user reads its blocks into the cache.
	for _, u := range users {
		searchUser(b, e, ctx, u)
	}
	c0 := e.Counters()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	cpu := cpuNow()
	for b.Loop() {
		searchUser(b, e, ctx, users[i%len(users)])
		i++
	}
	cpu = cpuNow() - cpu
	c1 := e.Counters()
	b.ReportMetric(float64(c1.BlocksExamined-c0.BlocksExamined)/float64(i), "blocks-read/op")
	b.ReportMetric(float64(c1.BlocksPruned-c0.BlocksPruned)/float64(i), "blocks-pruned/op")
	b.ReportMetric(float64(c1.BlocksRowFiltered-c0.BlocksRowFiltered)/float64(i), "blocks-in-part/op")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(i), "cpu-ns/op")
}

// cpuNow returns the process's user and system CPU time: on a shared
// machine it inflates much less with other processes' load than wall time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func searchUser(b *testing.B, e *engine.Engine, ctx context.Context, user string) {
	expr, err := query.ParseTraceQL(`{ span.user.id = "` + user + `" }`)
	if err != nil {
		b.Fatal(err)
	}
	f := query.Filter{Expr: expr}
	got, _, _, err := e.SearchSpans(ctx, "default", &f, 20, nil)
	if err != nil || len(got) != 20 {
		b.Fatalf("search %s: %v, %d spans", user, err, len(got))
	}
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// BenchmarkSegmentDiscovery measures discovery (the Jaeger UI's services,
// Grafana's tag values) over 100k sealed spans, warm (block catalogs
// built by an untimed first call).
func BenchmarkSegmentDiscovery(b *testing.B) {
	e, _ := loaded(b, 0)
	defer e.Close()
	ctx := context.Background()
	if _, _, err := e.Services(ctx, "default", 0, 0); err != nil {
		b.Fatal(err)
	}
	b.Run("services", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := e.Services(ctx, "default", 0, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("attribute-values", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := e.AttributeValues(ctx, "default", "user.id", 0, 0, 100); err != nil {
				b.Fatal(err)
			}
		}
	})
}
