package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/segment"
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
		content   int
		compact   bool
	}{{"values-apart", 0, 0, false}, {"values-apart-compacted", 0, 0, true}, {"whole-values-apart", 0, -1, false},
		{"inline", -1, 0, false}, {"inline-compacted", -1, 0, true}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				dir := b.TempDir()
				e, err := engine.Open(engine.Options{Dir: dir, Durability: engine.DurabilityBuffered, ValueThreshold: c.threshold, ContentThreshold: c.content})
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
				if c.compact {
					if _, err := e.Compact(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				st, err := e.Stats(context.Background(), "default")
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(st.SegmentBytes)/n, "segment-B/span")
				b.ReportMetric(float64(st.ValueBytes)/n, "values-B/span")
				b.ReportMetric(float64(st.SegmentBytes+st.ValueBytes)/n, "disk-B/span")
				b.ReportMetric(float64(e.ValueStats().Values)/n, "stored-values/span")
				b.ReportMetric(float64(raw)/n, "raw-B/span")
				// A session's turn read back whole: 1,000 traces, after one
				// pass to warm the caches, as a user browsing sessions does.
				r := rand.New(rand.NewPCG(1, 2))
				ids := make([]model.TraceID, 1000)
				for i := range ids {
					ids[i] = spans[r.IntN(len(spans))].TraceID
				}
				lat := make([]time.Duration, 0, len(ids))
				for pass := range 2 {
					for _, id := range ids {
						t0 := time.Now()
						got, _, err := e.Trace(context.Background(), "default", id)
						if err != nil || len(got) == 0 {
							b.Fatalf("trace %s: %d spans, %v", id, len(got), err)
						}
						if pass == 1 {
							lat = append(lat, time.Since(t0))
						}
					}
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "trace-p50-us")
				b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds()), "trace-p95-us")
				if err := e.Close(); err != nil {
					b.Fatal(fmt.Errorf("close: %w", err))
				}
				// The reference tables: 32 bytes per distinct stored value a
				// segment references.
				segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
				refs := 0
				for _, p := range segs {
					r, err := segment.Open(p)
					if err != nil {
						b.Fatal(err)
					}
					refs += r.Info().ValueRefs
					r.Close()
				}
				b.ReportMetric(float64(refs*32)/n, "ref-table-B/span")
				b.ReportMetric(float64(len(segs)), "segments")
			}
		})
	}
}

// BenchmarkConversationSealAndMerge times what the engine spends writing
// conversations: sealing 40,000 spans of the llm-sessions corpus into 10
// segments, then merging them (Compact), with values stored apart (the
// default). Both write every span through the segment writer, which
// tokenises its text for the token filters; the merge first resolves the
// stored values again.
func BenchmarkConversationSealAndMerge(b *testing.B) {
	const n, perSeal = 40_000, 4_000
	spans, err := bench.Generate(bench.CorpusLLMSessions, bench.CorpusOptions{Seed: 1, Spans: n, Start: time.Now().Add(-2 * time.Hour), Window: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	var seal, merge time.Duration
	for range b.N {
		e, err := engine.Open(engine.Options{Dir: b.TempDir(), Durability: engine.DurabilityBuffered, NoCompaction: true})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < n; i += perSeal {
			t0 := time.Now()
			appendSealed(b, e, spans[i:i+perSeal], 1000)
			seal += time.Since(t0)
		}
		t0 := time.Now()
		if res, err := e.Compact(context.Background()); err != nil || res.Merges == 0 {
			b.Fatalf("compact: %+v %v", res, err)
		}
		merge += time.Since(t0)
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seal.Milliseconds())/float64(b.N), "append+seal-ms")
	b.ReportMetric(float64(merge.Milliseconds())/float64(b.N), "merge-ms")
}
