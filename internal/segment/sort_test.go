package segment

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// TestSortSpanPtrsEqualsReference: the radix sort of SortSpanRefs (through
// SortSpanPtrs) puts random spans in exactly the order of a comparison sort
// on the segment-order key, over traces that share minimum start times,
// spans that share start times, and start times spread from a few
// nanoseconds to the whole uint64 range.
func TestSortSpanPtrsEqualsReference(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 9))
		spread := []uint64{4, 1000, 1 << 40, math.MaxUint64}[seed%4]
		base := rng.Uint64N(math.MaxUint64 - spread + 1)
		var spans []model.Span
		for range 1 + rng.IntN(3000) {
			tr := model.TraceID{byte(rng.IntN(30)), 7}
			spans = append(spans, model.Span{TraceID: tr, SpanID: model.SpanID{byte(rng.IntN(256)), byte(rng.IntN(256))},
				StartTimeUnixNano: base + rng.Uint64N(spread)})
		}
		ptrs := make([]*model.Span, len(spans))
		for i := range spans {
			ptrs[i] = &spans[i]
		}
		minStart := map[model.TraceID]uint64{}
		for _, s := range ptrs {
			if m, ok := minStart[s.TraceID]; !ok || s.StartTimeUnixNano < m {
				minStart[s.TraceID] = s.StartTimeUnixNano
			}
		}
		want := slices.Clone(ptrs)
		slices.SortStableFunc(want, func(a, b *model.Span) int {
			return compareOrder(minStart[a.TraceID], a, minStart[b.TraceID], b)
		})
		SortSpanPtrs(ptrs)
		for i := range ptrs {
			if compareOrder(minStart[ptrs[i].TraceID], ptrs[i], minStart[want[i].TraceID], want[i]) != 0 {
				t.Fatalf("seed %d: position %d holds span %s of trace %s, want span %s of trace %s",
					seed, i, ptrs[i].SpanID, ptrs[i].TraceID, want[i].SpanID, want[i].TraceID)
			}
		}
		// Sorting again (already in order) leaves the order alone.
		again := slices.Clone(ptrs)
		SortSpanPtrs(again)
		if !slices.Equal(again, ptrs) {
			t.Fatalf("seed %d: sorting sorted spans moved them", seed)
		}
	}
}

// TestSortEntriesEqualsReference: the bucketed sort of the trace index
// entries gives the order of a comparison sort, for random and for
// clustered trace ids (one bucket), several projects, and traces split
// over blocks.
func TestSortEntriesEqualsReference(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var entries []traceEntry
		for p := range uint32(1 + rng.IntN(3)) {
			for range rng.IntN(5000) {
				var id model.TraceID
				if seed%2 == 0 {
					for i := range id {
						id[i] = byte(rng.IntN(256))
					}
					if rng.IntN(100) == 0 { // the first and last buckets
						id[0], id[1] = 0xff*byte(rng.IntN(2)), 0xff*byte(rng.IntN(2))
					}
				} else {
					id[15] = byte(rng.IntN(256)) // every id in one bucket
				}
				for b := range 1 + rng.IntN(2) {
					entries = append(entries, traceEntry{Project: p, TraceID: id, Block: uint32(rng.IntN(50) + b*50), Row: rng.Uint32()})
				}
			}
		}
		want := slices.Clone(entries)
		slices.SortStableFunc(want, compareEntries)
		sortEntries(entries)
		for i := range entries {
			if compareEntries(entries[i], want[i]) != 0 {
				t.Fatalf("seed %d: entry %d is %+v, want %+v", seed, i, entries[i], want[i])
			}
		}
	}
}

// BenchmarkSealSorts times the seal's two sorts at the size of a 64 MiB
// write buffer of telemetrygen-like spans (100,000 spans, two per trace,
// random trace ids, traces starting 1 us apart).
func BenchmarkSealSorts(b *testing.B) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	spans := make([]model.Span, n)
	start := uint64(1_700_000_000_000_000_000)
	for i := 0; i < n; i += 2 {
		var id model.TraceID
		for j := range id {
			id[j] = byte(rng.IntN(256))
		}
		spans[i] = model.Span{TraceID: id, SpanID: model.SpanID{1}, StartTimeUnixNano: start + 100}
		spans[i+1] = model.Span{TraceID: id, SpanID: model.SpanID{2}, StartTimeUnixNano: start}
		start += 1000 + uint64(rng.IntN(2000)) - 1000 // out of order by up to a trace
	}
	b.Run("spans", func(b *testing.B) {
		refs := make([]SpanRef, n)
		b.ReportAllocs()
		for b.Loop() {
			for i := range spans {
				refs[i] = SpanRef{min(spans[i&^1].StartTimeUnixNano, spans[i|1].StartTimeUnixNano), &spans[i]}
			}
			SortSpanRefs(refs)
		}
	})
	b.Run("trace-index", func(b *testing.B) {
		entries := make([]traceEntry, n/2)
		b.ReportAllocs()
		for b.Loop() {
			for i := range entries {
				entries[i] = traceEntry{TraceID: spans[2*i].TraceID, Block: uint32(i / 2000), Count: 2}
			}
			sortEntries(entries)
		}
	})
}
