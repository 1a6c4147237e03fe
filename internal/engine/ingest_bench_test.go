package engine_test

import (
	"context"
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

// BenchmarkBufferSearch measures queries over a full write buffer: 200,000
// canonical spans appended and not sealed, then a search for a value no span
// has (every row is read), a search whose first page fills from the newest
// chunk, and LLM statistics over the buffer.
func BenchmarkBufferSearch(b *testing.B) {
	const total = 200_000
	spans, err := bench.Generate("canonical", bench.CorpusOptions{Seed: 1, Spans: total, Start: time.Now().Add(-time.Hour), Window: 30 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.Open(engine.Options{Dir: b.TempDir(), SealBytes: 1 << 40, MaxBufferBytes: 1 << 40, SealAge: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
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
	for _, c := range []struct{ name, q string }{
		{"absent", `{ span.user.id = "no-such-user" }`},
		{"first-page", `{ }`},
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
	b.Run("llm-stats", func(b *testing.B) {
		for range b.N {
			if _, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"model"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
