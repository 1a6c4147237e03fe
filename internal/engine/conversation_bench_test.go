package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

// BenchmarkConversationStorage measures bytes on disk per span for
// conversations that resend their history on every call (the llm-sessions
// corpus), with large values stored apart (the default) and with every
// value inline; raw-B/span is the spans' attribute bytes before any
// compression or deduplication.
func BenchmarkConversationStorage(b *testing.B) {
	const n = 100_000
	spans, err := bench.Generate(bench.CorpusLLMSessions, bench.CorpusOptions{Seed: 1, Spans: n, Start: time.Now().Add(-2 * time.Hour), Window: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	var raw int64
	for i := range spans {
		for _, kv := range spans[i].Attributes {
			raw += int64(len(kv.Key) + len(kv.Value.Str))
		}
	}
	for _, c := range []struct {
		name      string
		threshold int
	}{{"values-apart", 0}, {"values-apart-256", 256}, {"inline", -1}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				e, err := engine.Open(engine.Options{Dir: b.TempDir(), Durability: engine.DurabilityBuffered, ValueThreshold: c.threshold})
				if err != nil {
					b.Fatal(err)
				}
				// Conversations are large: seal whenever the buffer is full.
				for i := 0; i < len(spans); i += 1000 {
					body := otlp.EncodeProto(spans[i:min(i+1000, len(spans))])
					bt, err := otlp.DecodeProto(body)
					if err != nil {
						b.Fatal(err)
					}
					w := &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: bt.Spans}
					for {
						err := e.Append(context.Background(), w)
						if !errors.Is(err, engine.ErrBufferFull) {
							if err != nil {
								b.Fatal(err)
							}
							break
						}
						if err := e.Seal(); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := e.Seal(); err != nil {
					b.Fatal(err)
				}
				st, err := e.Stats(context.Background(), "default")
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(st.SegmentBytes)/n, "segment-B/span")
				b.ReportMetric(float64(st.ValueBytes)/n, "values-B/span")
				b.ReportMetric(float64(st.SegmentBytes+st.ValueBytes)/n, "disk-B/span")
				b.ReportMetric(float64(raw)/n, "raw-B/span")
				if err := e.Close(); err != nil {
					b.Fatal(fmt.Errorf("close: %w", err))
				}
			}
		})
	}
}
