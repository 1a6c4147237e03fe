package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
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

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIngest measures the engine's cost of ingest: 200,000 spans
// (canonical, or shaped as telemetrygen sends them) appended by 4 writers in
// batches of 1,000 (decoded beforehand: the decoder is not measured), then
// sealed. cpu-us/span is the process's user+system CPU over the appends and
// the seal, GC included.
func BenchmarkIngest(b *testing.B) {
	const total = 200_000
	b.Run("canonical", func(b *testing.B) {
		spans, err := bench.Generate("canonical", bench.CorpusOptions{Seed: 1, Spans: total, Start: time.Now().Add(-time.Hour), Window: 30 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		benchmarkIngest(b, spans)
	})
	b.Run("telemetrygen", func(b *testing.B) { benchmarkIngest(b, telemetrygenLike(total)) })
}

func benchmarkIngest(b *testing.B, spans []model.Span) {
	const batch, writers = 1000, 4
	total := len(spans)
	b.ReportAllocs()
	var bodies [][]byte
	for i := 0; i < total; i += batch {
		bodies = append(bodies, otlp.EncodeProto(spans[i:min(i+batch, total)]))
	}
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		writes := make([]*store.Write, len(bodies))
		for i, body := range bodies {
			bt, err := otlp.DecodeProto(body)
			if err != nil {
				b.Fatal(err)
			}
			writes[i] = &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: bt.Spans}
		}
		e, err := engine.Open(engine.Options{Dir: b.TempDir(), SealBytes: 1 << 40, SealAge: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c0 := cpuTime()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(writes); i += writers {
					if err := e.Append(context.Background(), writes[i]); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := e.Seal(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
		b.StopTimer()
		e.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*total), "cpu-us/span")
}

// BenchmarkSeal measures the seal alone: 200,000 spans (canonical, or
// shaped as telemetrygen sends them) are appended untimed, then one seal
// writes them into a segment. cpu-us/span is the process's user+system CPU
// over the seal, GC included; seg-B/span the segment file's bytes per span.
func BenchmarkSeal(b *testing.B) {
	const total = 200_000
	b.Run("canonical", func(b *testing.B) {
		spans, err := bench.Generate("canonical", bench.CorpusOptions{Seed: 1, Spans: total, Start: time.Now().Add(-time.Hour), Window: 30 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		benchmarkSeal(b, spans)
	})
	b.Run("telemetrygen", func(b *testing.B) { benchmarkSeal(b, telemetrygenLike(total)) })
}

func benchmarkSeal(b *testing.B, spans []model.Span) {
	const batch = 1000
	var bodies [][]byte
	for i := 0; i < len(spans); i += batch {
		bodies = append(bodies, otlp.EncodeProto(spans[i:min(i+batch, len(spans))]))
	}
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	var segBytes int64
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		e, err := engine.Open(engine.Options{Dir: dir, SealBytes: 1 << 40, MaxBufferBytes: 1 << 40, SealAge: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		appendBodies(b, e, bodies)
		runtime.GC()
		b.StartTimer()
		c0 := cpuTime()
		if err := e.Seal(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
		b.StopTimer()
		segs, err := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
		if err != nil || len(segs) != 1 {
			b.Fatalf("segments after one seal: %v %v", segs, err)
		}
		fi, err := os.Stat(segs[0])
		if err != nil {
			b.Fatal(err)
		}
		segBytes += fi.Size()
		e.Close()
		b.StartTimer()
	}
	n := float64(b.N * len(spans))
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-us/span")
	b.ReportMetric(float64(segBytes)/n, "seg-B/span")
}

// BenchmarkBufferSearch measures queries over a full write buffer (nothing
// sealed): 200,000 canonical spans (about 64 MiB by the buffer's estimate)
// for searches, a value no span has, a selective value (1% of spans, first
// page of 20) and the first page of every span; and 80,000 llm-corpus spans
// (about 64 MiB) for LLM statistics by model, over the whole buffer and over
// a window whose edges cut chunks.
func BenchmarkBufferSearch(b *testing.B) {
	ctx := context.Background()
	start := time.Now().Add(-time.Hour)
	fill := func(corpus string, total int) *engine.Engine {
		spans, err := bench.Generate(corpus, bench.CorpusOptions{Seed: 1, Spans: total, Start: start, Window: 30 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		e, err := engine.Open(engine.Options{Dir: b.TempDir(), SealBytes: 1 << 40, MaxBufferBytes: 1 << 40, SealAge: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < total; i += 1000 {
			body := otlp.EncodeProto(spans[i:min(i+1000, total)])
			bt, err := otlp.DecodeProto(body)
			if err != nil {
				b.Fatal(err)
			}
			if err := e.Append(ctx, &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: bt.Spans}); err != nil {
				b.Fatal(err)
			}
		}
		return e
	}
	e := fill(bench.CorpusCanonical, 200_000)
	defer e.Close()
	for _, c := range []struct{ name, q string }{
		{"absent", `{ span.user.id = "no-such-user" }`},
		{"selective", `{ span.user.id = "u-007" }`},
		{"first-page", `{ }`},
		{"content-absent", `{ content = "nosuchword" }`},
		{"content-word", `{ content = "refused" }`}, // a word of ~0.4% of spans' status messages
	} {
		expr, err := query.ParseTraceQL(c.q)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if _, _, _, err := e.SearchSpans(ctx, "default", &query.Filter{Expr: expr}, 20, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Discovery (Jaeger's services, Tempo's tag values) over the buffer.
	b.Run("services", func(b *testing.B) {
		for range b.N {
			if _, _, err := e.Services(ctx, "default", 0, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("attribute-values", func(b *testing.B) {
		for range b.N {
			if _, _, err := e.AttributeValues(ctx, "default", "user.id", 0, 0, 100); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("llm-stats", func(b *testing.B) {
		for range b.N {
			if _, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"model"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	l := fill(bench.CorpusLLM, 80_000)
	defer l.Close()
	window := query.Filter{Start: uint64(start.Add(7 * time.Minute).UnixNano()), End: uint64(start.Add(23 * time.Minute).UnixNano())}
	for _, c := range []struct {
		name string
		f    query.Filter
	}{{"llm-corpus-stats", query.Filter{}}, {"llm-corpus-stats-window", window}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if _, err := l.LLMStats(ctx, "default", &store.LLMQuery{Filter: c.f, GroupBy: []string{"model"}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBufferInsert measures the write buffer's insert alone: 200,000
// spans shaped as telemetrygen sends them (2-span traces, random ids), in
// batches of 1,000, into a new buffer (first: unsized, as the first buffer
// of a server; next: sized after a full previous one). ns/span is per span
// inserted.
func BenchmarkBufferInsert(b *testing.B) {
	const total, batch = 200_000, 1000
	spans := telemetrygenLike(total)
	full := engine.NewBuffer(nil)
	for i := 0; i < total; i += batch {
		full.Insert("default", spans[i:i+batch], 0)
	}
	for _, c := range []struct {
		name string
		prev *engine.Buffer
	}{{"first", nil}, {"next", full}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				m := engine.NewBuffer(c.prev)
				for i := 0; i < total; i += batch {
					m.Insert("default", spans[i:i+batch], 0)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/span")
		})
	}
}

// BenchmarkCompactResent measures the compaction of four segments that each
// hold the same 50,000 canonical spans (a sender re-sending whole traces,
// as an at-least-once exporter replaying its queue or the overload suite's
// looping load does): every trace is split over the four inputs.
func BenchmarkCompactResent(b *testing.B) {
	const total, copies = 50_000, 4
	ctx := context.Background()
	spans, err := bench.Generate("canonical", bench.CorpusOptions{Seed: 1, Spans: total, Start: time.Now().Add(-time.Hour), Window: 30 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	var bodies [][]byte
	for i := 0; i < len(spans); i += 1000 {
		bodies = append(bodies, otlp.EncodeProto(spans[i:min(i+1000, len(spans))]))
	}
	b.ReportAllocs()
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		e, err := engine.Open(engine.Options{Dir: b.TempDir(), NoCompaction: true, SealBytes: 1 << 40, MaxBufferBytes: 1 << 40, SealAge: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		for range copies {
			appendBodies(b, e, bodies)
			if err := e.Seal(); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		b.StartTimer()
		c0 := cpuTime()
		res, err := e.Compact(ctx)
		if err != nil || res.SegmentsAfter != 1 {
			b.Fatalf("compact: %+v %v", res, err)
		}
		cpu += cpuTime() - c0
		b.StopTimer()
		if st, err := e.Stats(ctx, "default"); err != nil || st.Spans != total {
			b.Fatalf("after compaction: %d spans (%v), want %d", st.Spans, err, total)
		}
		e.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*total*copies), "cpu-us/span-in")
}

// appendBodies decodes each OTLP/protobuf body and appends its spans to the
// engine's default project.
func appendBodies(b *testing.B, e *engine.Engine, bodies [][]byte) {
	b.Helper()
	for _, body := range bodies {
		bt, err := otlp.DecodeProto(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: bt.Spans}); err != nil {
			b.Fatal(err)
		}
	}
}
