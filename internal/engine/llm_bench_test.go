package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// BenchmarkLLMSessions measures warm session queries over 200k sealed spans
// of the llm corpus (the segment part comes from the result cache).
func BenchmarkLLMSessions(b *testing.B) {
	e, err := engine.Open(engine.Options{Dir: b.TempDir(), Durability: engine.DurabilityBuffered})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	spans, err := bench.Generate("llm", bench.CorpusOptions{Seed: 1, Spans: 200_000, Start: time.Now().Add(-6 * time.Hour), Window: 6 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	appendSealed(b, e, spans, 1000)
	ctx := context.Background()
	b.Run("group_by_session", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"session"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sessions", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := e.Sessions(ctx, "default", &query.Filter{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
