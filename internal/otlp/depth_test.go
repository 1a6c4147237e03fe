package otlp

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
)

// nestedAny returns an AnyValue whose innermost string sits depth levels
// below it, alternating arrays (even levels) and kvlists (odd levels).
func nestedAny(depth int) *commonpb.AnyValue {
	v := &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "leaf"}}
	for d := depth - 1; d >= 0; d-- {
		if d%2 == 0 {
			v = &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{v}}}}
		} else {
			v = &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
				Values: []*commonpb.KeyValue{{Key: "k", Value: v}}}}}
		}
	}
	return v
}

// nestedNative is nestedAny in native JSON: arrays and objects.
func nestedNative(depth int) string {
	var open, close strings.Builder
	for d := range depth {
		if d%2 == 0 {
			open.WriteString("[")
		} else {
			open.WriteString(`{"k":`)
		}
	}
	for d := depth - 1; d >= 0; d-- {
		if d%2 == 0 {
			close.WriteString("]")
		} else {
			close.WriteString("}")
		}
	}
	return open.String() + `"leaf"` + close.String()
}

// deepRequest is one valid span whose second attribute "deep" nests depth levels.
func deepRequest(depth int) *coltrace.ExportTraceServiceRequest {
	return &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId:           tid16,
			SpanId:            sid8,
			Name:              "op",
			StartTimeUnixNano: 1,
			EndTimeUnixNano:   2,
			Attributes:        []*commonpb.KeyValue{strKV("flat", "x"), {Key: "deep", Value: nestedAny(depth)}},
		}}}},
	}}}
}

// valueDepth returns how many levels below v its deepest value sits.
func valueDepth(v model.Value) int {
	deepest := 0
	for _, e := range v.Elems() {
		deepest = max(deepest, 1+valueDepth(e))
	}
	for _, f := range v.Fields() {
		deepest = max(deepest, 1+valueDepth(f.Value))
	}
	return deepest
}

func deepBodies(t *testing.T, depth int) map[string][]byte {
	t.Helper()
	req := deepRequest(depth)
	pb, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	pj, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	native := `[{"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","name":"op",` +
		`"start_time":1,"end_time":2,"attributes":{"flat":"x","deep":` + nestedNative(depth) + `}}]`
	// protojson writes ids in base64, OTLP/JSON in hex (hexIDs would parse
	// the body with encoding/json, which refuses the deepest test values).
	for _, id := range [][]byte{tid16, sid8} {
		pj = bytes.Replace(pj, []byte(`"`+base64.StdEncoding.EncodeToString(id)+`"`), []byte(`"`+hex.EncodeToString(id)+`"`), 1)
	}
	return map[string][]byte{"protobuf": pb, "otlp-json": pj, "native-json": []byte(native)}
}

func decodeAs(format string, b []byte) (Batch, error) {
	switch format {
	case "protobuf":
		return DecodeProto(b)
	case "otlp-json":
		return DecodeJSON(b)
	}
	return DecodeNative(b)
}

// TestValueDepthLimit: every decoder accepts values nested maxValueDepth
// levels and refuses one level more with an error naming the attribute.
func TestValueDepthLimit(t *testing.T) {
	if maxValueDepth != 100 {
		t.Fatalf("maxValueDepth = %d; the segment format's limit is 100 (see TestValueDepthMatchesSegment)", maxValueDepth)
	}
	for format, b := range deepBodies(t, maxValueDepth) {
		got, err := decodeAs(format, b)
		if err != nil {
			t.Fatalf("%s: depth %d refused: %v", format, maxValueDepth, err)
		}
		if len(got.Spans) != 1 || len(got.Spans[0].Attributes) != 2 {
			t.Fatalf("%s: decoded %+v", format, got.Spans)
		}
		if d := valueDepth(got.Spans[0].Attributes[1].Value); d != maxValueDepth {
			t.Fatalf("%s: decoded value nests %d levels, want %d", format, d, maxValueDepth)
		}
	}
	wantPath := map[string]string{
		"protobuf":    "resource_spans[0].scope_spans[0].spans[0].attributes[1].value.array_value.values[0].kvlist_value",
		"otlp-json":   "resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.arrayValue.values[0].kvlistValue",
		"native-json": `[0].attributes."deep"[0]."k"[0]`,
	}
	for _, depth := range []int{maxValueDepth + 1, 5000} {
		for format, b := range deepBodies(t, depth) {
			got, err := decodeAs(format, b)
			var de *Error
			if !errors.As(err, &de) {
				t.Fatalf("%s: depth %d: got %d spans, err %v; want an *Error", format, depth, len(got.Spans), err)
			}
			if de.Reason != valueDepthReason || de.Format != format || !strings.HasPrefix(de.Path, wantPath[format]) {
				t.Errorf("%s: depth %d: error %q (path %q), want reason %q under path %q",
					format, depth, err, de.Path, valueDepthReason, wantPath[format])
			}
			if len(got.Spans) != 0 {
				t.Errorf("%s: a refused request returned %d spans", format, len(got.Spans))
			}
		}
	}
}

// TestValueDepthMatchesSegment: what the decoders accept, the segment writer
// stores; one level more, and the segment writer refuses it too (so the
// decoders' limit is exactly the segment format's).
func TestValueDepthMatchesSegment(t *testing.T) {
	b, err := DecodeProto(deepBodies(t, maxValueDepth)["protobuf"])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := segment.Write(dir, "ok.seg", map[string][]model.Span{"p": b.Spans}, segment.WriterOptions{}); err != nil {
		t.Fatalf("segment refuses a value the decoders accept: %v", err)
	}
	deeper := append([]model.Span(nil), b.Spans...)
	deeper[0].Attributes = []model.KeyValue{{Key: "deep", Value: model.ArrayValue([]model.Value{b.Spans[0].Attributes[1].Value})}}
	if d := valueDepth(deeper[0].Attributes[0].Value); d != maxValueDepth+1 {
		t.Fatalf("test value nests %d levels", d)
	}
	_, err = segment.Write(dir, "deep.seg", map[string][]model.Span{"p": deeper}, segment.WriterOptions{})
	if err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("segment writer accepted (or failed otherwise on) a value one level deeper than the decoders allow: %v", err)
	}
}
