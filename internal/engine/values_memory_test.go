package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/text"
)

// TestLLMCorpusBytesPerSpan is the "memory" measurement of the llm
// corpus: bytes on disk per span (segments plus stored values) with large
// values stored apart and deduplicated (default threshold) and with every
// value inline (negative threshold). It logs both figures and their ratio
// and asserts that every distinct large value is stored exactly once.
//
// Measured (seed 9, 20,000 spans, 2026-12-02): 230 B/span stored apart
// versus 189 B/span inline, 0.82x: the 3x target is not met on this corpus,
// and storing apart costs disk here. Its calls do not resend a history: the
// messages are unique, and compressed one by one in the value store (about
// 100 bytes of header and index per piece) they cost more than in a block's
// zstd frame. Conversations that resend their history are the case it is
// for (BenchmarkConversationStorage: 2.5x smaller). See docs/architecture.md.
func TestLLMCorpusBytesPerSpan(t *testing.T) {
	spans, err := bench.Generate("llm", bench.CorpusOptions{Seed: 9, Spans: 20000,
		Start: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	occurrences, distinct := 0, map[string]bool{}
	for i := range spans {
		count := func(kvs []model.KeyValue) {
			for _, kv := range kvs {
				v := kv.Value.Str
				if kv.Value.Type == model.ValueString && (len(v) >= engine.DefaultValueThreshold ||
					text.IsMessageKey(kv.Key) && len(v) >= segment.DefaultContentThreshold) {
					for _, p := range segment.Pieces(v) {
						occurrences++
						distinct[p] = true
					}
				}
			}
		}
		count(spans[i].Attributes)
		for _, ev := range spans[i].Events {
			count(ev.Attributes)
		}
		for _, l := range spans[i].Links {
			count(l.Attributes)
		}
	}
	perSpan := map[int]float64{}
	for _, threshold := range []int{0, -1} {
		e, err := engine.Open(engine.Options{Dir: t.TempDir(), ValueThreshold: threshold, Durability: engine.DurabilityBuffered})
		if err != nil {
			t.Fatal(err)
		}
		appendSealed(t, e, spans, 500)
		st, err := e.Stats(context.Background(), "default")
		if err != nil {
			t.Fatal(err)
		}
		vs := e.ValueStats()
		disk := st.SegmentBytes + vs.DiskBytes
		perSpan[threshold] = float64(disk) / float64(len(spans))
		t.Logf("threshold %d: %d spans, segments %d B + values %d B (%d distinct, %d dedup hits) = %.1f B/span",
			threshold, len(spans), st.SegmentBytes, vs.DiskBytes, vs.Values, vs.DedupHits, perSpan[threshold])
		if threshold == 0 && (vs.Values != len(distinct) || vs.DedupHits != int64(occurrences-len(distinct))) {
			t.Errorf("value store holds %d values with %d dedup hits; the corpus has %d distinct pieces of values stored apart in %d occurrences",
				vs.Values, vs.DedupHits, len(distinct), occurrences)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("llm corpus: %.1f B/span with values stored apart, %.1f B/span inline: ratio %.2f (target >= 3)",
		perSpan[0], perSpan[-1], perSpan[-1]/perSpan[0])
}
