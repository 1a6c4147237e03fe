package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// BenchmarkLLMSessions measures session queries over sealed spans of the
// llm corpus laid out as `rastro bench llm` leaves them: the corpus is sent
// in interleaved eighths and sealed every tenth, so every segment overlaps
// the whole time range. Warm queries take the segments' part from the
// result cache; cold ones are the first query after the engine is reopened
// (the OS page cache stays warm). The 1M case is skipped with -short.
func BenchmarkLLMSessions(b *testing.B) {
	for _, n := range []int{200_000, 1_000_000} {
		b.Run(fmt.Sprintf("spans=%dk", n/1000), func(b *testing.B) {
			if n > 200_000 && testing.Short() {
				b.Skip("-short")
			}
			benchLLMSessions(b, n)
		})
	}
}

func benchLLMSessions(b *testing.B, n int) {
	dir := b.TempDir()
	opts := engine.Options{Dir: dir, Durability: engine.DurabilityBuffered, NoCompaction: true} // the segments as the bench record saw them
	e, err := engine.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	spans, err := bench.Generate("llm", bench.CorpusOptions{Seed: 1, Spans: n, Start: time.Now().Add(-6 * time.Hour), Window: 6 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	appendInterleaved(b, e, spans, 1000, 8, 10)
	spans = nil
	ctx := context.Background()
	lo := uint64(time.Now().Add(-3*time.Hour - 18*time.Minute).UnixNano()) // a 10% window in the middle
	queries := []struct {
		name string
		run  func(e *engine.Engine) error
	}{
		{"group_by_session", func(e *engine.Engine) error {
			_, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"session"}})
			return err
		}},
		{"group_by_session_top1000", func(e *engine.Engine) error { // the route's default page
			_, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"session"}, Top: 1000})
			return err
		}},
		{"model_10pct_window", func(e *engine.Engine) error { // the window's edges cut blocks
			_, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"model"}, Filter: query.Filter{Start: lo, End: lo + uint64(36*time.Minute)}})
			return err
		}},
		{"sessions", func(e *engine.Engine) error {
			_, _, err := e.Sessions(ctx, "default", &query.Filter{})
			return err
		}},
		{"sessions_default_window", func(e *engine.Engine) error { // the route's: the last 24 hours, moving with the clock
			_, _, err := e.Sessions(ctx, "default", &query.Filter{Start: uint64(time.Now().Add(-24 * time.Hour).UnixNano())})
			return err
		}},
		{"group_by_session_top1000_default_window", func(e *engine.Engine) error {
			f := query.Filter{Start: uint64(time.Now().Add(-24 * time.Hour).UnixNano())}
			_, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"session"}, Top: 1000, Filter: f})
			return err
		}},
		{"group_by_model", func(e *engine.Engine) error {
			_, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"model"}})
			return err
		}},
	}
	for _, q := range queries {
		b.Run(q.name+"/warm", func(b *testing.B) {
			if err := q.run(e); err != nil { // fills the result cache
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := q.run(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	for _, q := range queries {
		b.Run(q.name+"/cold", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				e, err := engine.Open(opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				err = q.run(e)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// appendInterleaved sends spans cut into parts contiguous parts, one batch
// from each part in turn, and seals segs times at even intervals.
func appendInterleaved(tb testing.TB, e *engine.Engine, spans []model.Span, batch, parts, segs int) {
	tb.Helper()
	size := (len(spans) + parts - 1) / parts
	var order [][]model.Span
	for off := 0; off < size; off += batch {
		for p := range parts {
			lo, hi := p*size+off, min(p*size+off+batch, (p+1)*size, len(spans))
			if lo < hi {
				order = append(order, spans[lo:hi])
			}
		}
	}
	sealEvery := (len(order) + segs - 1) / segs
	for i, part := range order {
		body := otlp.EncodeProto(part)
		bt, err := otlp.DecodeProto(body)
		if err != nil {
			tb.Fatal(err)
		}
		if err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: bt.Spans}); err != nil {
			tb.Fatal(err)
		}
		if (i+1)%sealEvery == 0 {
			if err := e.Seal(); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := e.Seal(); err != nil {
		tb.Fatal(err)
	}
}
