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
	type key struct {
		traceMin uint64
		s        *model.Span
	}
	keys := make([]key, len(spans))
	sorted := true
	for i, s := range spans {
		keys[i] = key{minStart[s.TraceID], s}
		if i > 0 && sorted && compareOrder(keys[i-1].traceMin, keys[i-1].s, keys[i].traceMin, s) > 0 {
			sorted = false
		}
	}
	if sorted {
		return
	}
	slices.SortFunc(keys, func(a, b key) int { return compareOrder(a.traceMin, a.s, b.traceMin, b.s) })
	for i, k := range keys {
		spans[i] = k.s
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
