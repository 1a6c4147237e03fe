package otlp

import (
	"fmt"
	"strings"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
)

func TestDecodeProtoDifferential(t *testing.T) {
	g := newGen(1)
	g.badIDs = true
	for iter := range 2000 {
		req := g.request()
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeProto(b)
		if err != nil {
			t.Fatalf("iter %d: DecodeProto: %v", iter, err)
		}
		want, rejected := expected(req)
		if d := diffSpans(got.Spans, want); d != "" {
			t.Fatalf("iter %d: %s", iter, d)
		}
		if got.Rejected != rejected {
			t.Fatalf("iter %d: Rejected = %d, want %d (%s)", iter, got.Rejected, rejected, got.RejectMsg)
		}
		if rejected > 0 && !strings.HasPrefix(got.RejectMsg, "resource_spans[") {
			t.Fatalf("iter %d: RejectMsg %q does not name the span's position", iter, got.RejectMsg)
		}
	}
}

func TestEncodeProtoRoundTrip(t *testing.T) {
	g := newGen(2)
	for iter := range 1000 {
		req := g.request()
		want, _ := expected(req)
		b := EncodeProto(want)
		var back coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &back); err != nil {
			t.Fatalf("iter %d: proto.Unmarshal(EncodeProto): %v", iter, err)
		}
		got, _ := expected(&back)
		if d := diffGrouped(got, want); d != "" {
			t.Fatalf("iter %d: official decode of EncodeProto: %s", iter, d)
		}
		if n := len(back.ResourceSpans); len(want) > 0 && n > len(req.ResourceSpans) {
			t.Fatalf("iter %d: %d ResourceSpans for %d distinct resources: spans sharing a resource were not grouped", iter, n, len(req.ResourceSpans))
		}
		ours, err := DecodeProto(b)
		if err != nil {
			t.Fatalf("iter %d: DecodeProto(EncodeProto): %v", iter, err)
		}
		if d := diffSpans(ours.Spans, got); d != "" {
			t.Fatalf("iter %d: DecodeProto(EncodeProto) differs from proto.Unmarshal: %s", iter, d)
		}
	}
}

// diffGrouped compares spans that an encoder may have regrouped: every wanted
// span must appear once, and spans of one resource+scope group keep their order.
func diffGrouped(got, want []model.Span) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d spans, want %d", len(got), len(want))
	}
	type key struct {
		t model.TraceID
		s model.SpanID
	}
	pos := map[key][]int{} // spans may share ids: match them in order
	for i := range got {
		k := key{got[i].TraceID, got[i].SpanID}
		pos[k] = append(pos[k], i)
	}
	lastInGroup := map[[2]any]int{}
	for i := range want {
		w := &want[i]
		k := key{w.TraceID, w.SpanID}
		if len(pos[k]) == 0 {
			return fmt.Sprintf("want span %d (%s/%s) missing", i, w.TraceID, w.SpanID)
		}
		j := pos[k][0]
		pos[k] = pos[k][1:]
		if d := diffSpan(&got[j], w); d != "" {
			return fmt.Sprintf("span %d: %s", i, d)
		}
		gk := [2]any{w.Resource, w.Scope}
		if last, ok := lastInGroup[gk]; ok && last > j {
			return fmt.Sprintf("span %d moved before an earlier span of its group", i)
		}
		lastInGroup[gk] = j
	}
	return ""
}
