package segment

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
)

// SortSpans sorts the spans of one project into segment order: by their
// trace's minimum start time, then trace id, then span start, then span id.
// Each trace ends up contiguous and traces are roughly time-ordered.
func SortSpans(spans []model.Span) {
	if len(spans) < 2 {
		return
	}
	minStart := make(map[model.TraceID]uint64, len(spans)/4+1)
	for i := range spans {
		s := &spans[i]
		if m, ok := minStart[s.TraceID]; !ok || s.StartTimeUnixNano < m {
			minStart[s.TraceID] = s.StartTimeUnixNano
		}
	}
	type key struct {
		traceMin uint64
		start    uint64
		idx      int
	}
	keys := make([]key, len(spans))
	sorted := true
	for i := range spans {
		keys[i] = key{minStart[spans[i].TraceID], spans[i].StartTimeUnixNano, i}
		if i > 0 && sorted && compareOrder(keys[i-1].traceMin, &spans[i-1], keys[i].traceMin, &spans[i]) > 0 {
			sorted = false
		}
	}
	if sorted {
		return
	}
	slices.SortFunc(keys, func(a, b key) int {
		return compareOrder(a.traceMin, &spans[a.idx], b.traceMin, &spans[b.idx])
	})
	tmp := make([]model.Span, len(spans))
	for i, k := range keys {
		tmp[i] = spans[k.idx]
	}
	copy(spans, tmp)
}

// SortSpanPtrs sorts span pointers into segment order (see SortSpans); the
// spans themselves are not moved.
func SortSpanPtrs(spans []*model.Span) {
	if len(spans) < 2 {
		return
	}
	minStart := make(map[model.TraceID]uint64, len(spans)/4+1)
	for _, s := range spans {
		if m, ok := minStart[s.TraceID]; !ok || s.StartTimeUnixNano < m {
			minStart[s.TraceID] = s.StartTimeUnixNano
		}
	}
	refs := make([]SpanRef, len(spans))
	for i, s := range spans {
		refs[i] = SpanRef{minStart[s.TraceID], s}
	}
	SortSpanRefs(refs)
	for i, r := range refs {
		spans[i] = r.Span
	}
}

// SpanRef is a span to write with its trace's minimum start time: the
// smallest start among the spans of the trace that the same call writes.
type SpanRef struct {
	TraceMin uint64
	Span     *model.Span
}

// SortSpanRefs sorts span references of one project into segment order (see
// SortSpans), given their traces' minimum start times; the spans do not move.
// It reads spans only to order those with equal trace minimums.
func SortSpanRefs(refs []SpanRef) {
	if len(refs) < 2 {
		return
	}
	sorted := true
	for i := 1; i < len(refs) && sorted; i++ {
		sorted = compareRefs(refs[i-1], refs[i]) <= 0
	}
	if sorted {
		return
	}
	out := radixSortTraceMin(refs, make([]SpanRef, len(refs)), func(r *SpanRef) uint64 { return r.TraceMin })
	// Equal trace minimums (one trace, or traces that started together)
	// are ordered by the rest of the key.
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].TraceMin == out[i].TraceMin {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(out[i:j], compareRefs)
		}
		i = j
	}
	if &out[0] != &refs[0] {
		copy(refs, out)
	}
}

func compareRefs(a, b SpanRef) int { return compareOrder(a.TraceMin, a.Span, b.TraceMin, b.Span) }

// radixSortTraceMin sorts keys by traceMin, stably, a byte at a time from
// the lowest (only the bytes in which the keys differ from the smallest):
// a few linear passes instead of a comparison sort whose comparisons read
// spans all over the heap. tmp is scratch of the same length; the sorted
// keys are returned in one of the two.
func radixSortTraceMin[K any](keys, tmp []K, traceMin func(*K) uint64) []K {
	lo, hi := traceMin(&keys[0]), traceMin(&keys[0])
	for i := range keys {
		lo, hi = min(lo, traceMin(&keys[i])), max(hi, traceMin(&keys[i]))
	}
	for shift := uint(0); shift < 64 && (hi-lo)>>shift != 0; shift += 8 {
		var count [256]int
		for i := range keys {
			count[byte((traceMin(&keys[i])-lo)>>shift)]++
		}
		if count[byte((traceMin(&keys[0])-lo)>>shift)] == len(keys) {
			continue // every key has this byte
		}
		pos := 0
		for i, c := range count {
			count[i] = pos
			pos += c
		}
		for i := range keys {
			d := byte((traceMin(&keys[i]) - lo) >> shift)
			tmp[count[d]] = keys[i]
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// RowRef is a span to write that the caller keeps in a form of its own (a
// write buffer's encoded rows): its trace's minimum start time (as in
// SpanRef) and the caller's number for it, which a RowSource turns into
// the rest of its order key and into the span.
type RowRef struct {
	TraceMin uint64
	Row      uint32
}

// RowSource gives the writer the spans RowRefs name.
type RowSource interface {
	// Key returns a row's trace id, start time and span id.
	Key(row uint32) (model.TraceID, uint64, model.SpanID)
	// Span returns a row's span. The writer copies the Span struct before
	// the next call, and keeps its attribute, event and link slices until
	// the span's block is written.
	Span(row uint32) *model.Span
}

// RowReleaser is a RowSource that reuses the memory of the spans it
// returned once the writer says it no longer holds them (a write buffer's
// seal decodes every span of a buffer, and would otherwise allocate their
// attribute arrays afresh).
type RowReleaser interface {
	RowSource
	// Released says that the writer holds the attribute, event and link
	// arrays of none of the spans returned by the first n calls of Span
	// (counted from the first call of the writer's AppendRows with this
	// source). n only grows.
	Released(n uint64)
}

// SortRowRefs sorts row references of one project into segment order (see
// SortSpans), given their traces' minimum start times: a radix pass over
// the minimums, then the rows with equal minimums by the rest of the key,
// which only those are asked for.
func SortRowRefs(refs []RowRef, src RowSource) {
	if len(refs) < 2 {
		return
	}
	cmpRows := func(a, b RowRef) int {
		if c := cmp.Compare(a.TraceMin, b.TraceMin); c != 0 {
			return c
		}
		at, as, asp := src.Key(a.Row)
		bt, bs, bsp := src.Key(b.Row)
		if c := bytes.Compare(at[:], bt[:]); c != 0 {
			return c
		}
		if c := cmp.Compare(as, bs); c != 0 {
			return c
		}
		return bytes.Compare(asp[:], bsp[:])
	}
	sorted := true
	for i := 1; i < len(refs) && sorted; i++ {
		sorted = cmpRows(refs[i-1], refs[i]) <= 0
	}
	if sorted {
		return
	}
	out := radixSortTraceMin(refs, make([]RowRef, len(refs)), func(r *RowRef) uint64 { return r.TraceMin })
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].TraceMin == out[i].TraceMin {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(out[i:j], cmpRows)
		}
		i = j
	}
	if &out[0] != &refs[0] {
		copy(refs, out)
	}
}

// compareOrder compares two spans of one project in segment order, given
// their traces' minimum start times.
func compareOrder(aMin uint64, a *model.Span, bMin uint64, b *model.Span) int {
	if c := cmp.Compare(aMin, bMin); c != 0 {
		return c
	}
	if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
		return c
	}
	if c := cmp.Compare(a.StartTimeUnixNano, b.StartTimeUnixNano); c != 0 {
		return c
	}
	return bytes.Compare(a.SpanID[:], b.SpanID[:])
}
