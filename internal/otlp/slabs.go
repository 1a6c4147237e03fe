package otlp

import (
	"sync"

	"github.com/rastro-dev/rastro/internal/model"
)

// slabs are the arrays a decoded protobuf request's spans live in: the spans
// themselves and their attributes, events, links and the attributes of
// those. Batch.Release hands them back for a later request to decode into,
// so that steady ingest stops allocating (and the collector stops chasing)
// about 900 bytes per span (a Span is 248 bytes, an attribute 64).
type slabs struct {
	spans                        []model.Span
	attrs, eventAttrs, linkAttrs []model.KeyValue
	events                       []model.Event
	links                        []model.Link
}

// Slabs larger than these are left to the collector rather than kept: a
// pooled slab is reused for requests of any size, so one huge request must
// not pin its arrays for every small one after it. 8,192 spans is the
// OpenTelemetry Collector's default batch; the bounds keep a pooled set
// under about 10 MiB.
const (
	maxPooledSpans = 8192
	maxPooledAttrs = 65536 // span, event and link attributes each
	maxPooledItems = 16384 // events and links each
)

var slabPool sync.Pool // of *slabs

// getSlabs returns a set of slabs with room for c (each slab empty).
func getSlabs(c protoCounts) *slabs {
	s, _ := slabPool.Get().(*slabs)
	if s == nil {
		s = new(slabs)
	}
	s.spans = room(s.spans, c.spans)
	s.attrs = room(s.attrs, c.attrs)
	s.events = room(s.events, c.events)
	s.eventAttrs = room(s.eventAttrs, c.eventAttrs)
	s.links = room(s.links, c.links)
	s.linkAttrs = room(s.linkAttrs, c.linkAttrs)
	return s
}

// room returns x emptied if it holds n elements, a new slice of capacity n otherwise.
func room[T any](x []T, n int) []T {
	if cap(x) >= n {
		return x[:0]
	}
	return make([]T, 0, n)
}

// putSlabs zeroes what the decode wrote (so that a pooled slab keeps no
// request body, resource or LLM record alive) and pools s unless a slab is
// too large to keep.
func putSlabs(s *slabs) {
	clear(s.spans)
	clear(s.attrs)
	clear(s.events)
	clear(s.eventAttrs)
	clear(s.links)
	clear(s.linkAttrs)
	if cap(s.spans) > maxPooledSpans || cap(s.attrs) > maxPooledAttrs ||
		cap(s.eventAttrs) > maxPooledAttrs || cap(s.linkAttrs) > maxPooledAttrs ||
		cap(s.events) > maxPooledItems || cap(s.links) > maxPooledItems {
		return
	}
	slabPool.Put(s)
}

// Release gives the memory of b's spans (the arrays of the spans, their
// attributes, events and links) to a later decode, and empties b. Call it
// only when nothing holds any of b's spans, or a slice of their attributes,
// events or links, any more: their memory will be overwritten. Strings and
// resources are not reused (they stay valid for whoever kept them). It does
// nothing for a batch that did not come from the protobuf decoder.
func (b *Batch) Release() {
	s := b.slabs
	b.Spans, b.slabs = nil, nil
	if s != nil {
		putSlabs(s)
	}
}

// dropFrom zeroes x[i:] and returns x[:i].
func dropFrom[T any](x []T, i int) []T {
	clear(x[i:])
	return x[:i]
}
