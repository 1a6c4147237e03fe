package otlp

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
)

// TestReleasedSlabsDecodeLikeFresh: requests decoded into the arrays of
// released batches (of every size, with rejected spans among them) decode
// exactly as the reference says; a released batch leaves no pointer behind
// in its arrays, not even in the room a rejected span used; and a batch that
// is not released is never written by a later decode.
func TestReleasedSlabsDecodeLikeFresh(t *testing.T) {
	g := newGen(7)
	g.badIDs = true
	type kept struct {
		req *coltrace.ExportTraceServiceRequest
		b   Batch
	}
	var keep []kept
	reused := 0
	for iter := range 3000 {
		req := g.request()
		if iter%50 == 0 { // now and then a large request, to grow the pooled slabs
			for range 40 {
				req.ResourceSpans = append(req.ResourceSpans, g.request().ResourceSpans...)
			}
		}
		body, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeProto(body)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		want, rejected := expected(req)
		if d := diffSpans(got.Spans, want); d != "" {
			t.Fatalf("iter %d: %s", iter, d)
		}
		if got.Rejected != rejected {
			t.Fatalf("iter %d: Rejected = %d, want %d", iter, got.Rejected, rejected)
		}
		if len(got.Spans) == 0 {
			continue
		}
		if iter%9 == 0 {
			keep = append(keep, kept{req, got})
			continue
		}
		sl := got.slabs
		if sl == nil {
			t.Fatalf("iter %d: a protobuf batch with %d spans has no slabs to release", iter, len(got.Spans))
		}
		if cap(sl.spans) > len(got.Spans) {
			reused++
		}
		got.Release()
		if got.Spans != nil {
			t.Fatalf("iter %d: Release left %d spans in the batch", iter, len(got.Spans))
		}
		if i := firstNonZero(sl.spans[:cap(sl.spans)]); i >= 0 {
			t.Fatalf("iter %d: span %d of a released slab is not zeroed", iter, i)
		}
		for name, i := range map[string]int{
			"attrs": firstNonZero(sl.attrs[:cap(sl.attrs)]), "event attrs": firstNonZero(sl.eventAttrs[:cap(sl.eventAttrs)]),
			"link attrs": firstNonZero(sl.linkAttrs[:cap(sl.linkAttrs)]), "events": firstNonZero(sl.events[:cap(sl.events)]),
			"links": firstNonZero(sl.links[:cap(sl.links)]),
		} {
			if i >= 0 {
				t.Fatalf("iter %d: element %d of the released %s slab is not zeroed", iter, i, name)
			}
		}
	}
	if reused == 0 {
		t.Fatal("no request decoded into a released slab larger than itself: the pool is not used")
	}
	for i, k := range keep {
		want, _ := expected(k.req)
		if d := diffSpans(k.b.Spans, want); d != "" {
			t.Fatalf("kept batch %d changed after later decodes: %s", i, d)
		}
	}
}

func firstNonZero[T any](x []T) int {
	for i := range x {
		if !reflect.ValueOf(&x[i]).Elem().IsZero() {
			return i
		}
	}
	return -1
}
