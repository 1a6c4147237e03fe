package otlp

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
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

// TestDecodedValueShapes checks what the decoders hand to the rest of the
// system for each kind of attribute value: bytes stay bytes (not strings) and
// survive the caller reusing its buffer, and only non-empty arrays and
// kvlists carry a model.List.
func TestDecodedValueShapes(t *testing.T) {
	kv := func(k string, v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: k, Value: v} }
	req := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
		TraceId: []byte("0123456789abcdef"), SpanId: []byte("01234567"), Name: "s",
		Attributes: []*commonpb.KeyValue{
			kv("s", &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "str"}}),
			kv("b", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 0xff, 'x'}}}),
			kv("d", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 2.5}}),
			kv("ea", &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{}}}),
			kv("a", &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{
				{Value: &commonpb.AnyValue_IntValue{IntValue: 7}}, {Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte("y")}},
			}}}}),
			kv("o", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{
				kv("k", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}),
			}}}}),
		},
	}}}}}}}
	want := []model.KeyValue{
		{Key: "s", Value: model.StringValue("str")},
		{Key: "b", Value: model.BytesValue([]byte{0, 0xff, 'x'})},
		{Key: "d", Value: model.DoubleValue(2.5)},
		{Key: "ea", Value: model.ArrayValue(nil)},
		{Key: "a", Value: model.ArrayValue([]model.Value{model.IntValue(7), model.BytesValue([]byte("y"))})},
		{Key: "o", Value: model.KvListValue([]model.KeyValue{{Key: "k", Value: model.BoolValue(true)}})},
	}
	pb, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		in     []byte
		decode func([]byte) (Batch, error)
	}{{"proto", pb, DecodeProto}, {"json", hexIDs(t, js), DecodeJSON}} {
		got, err := c.decode(c.in)
		if err != nil || len(got.Spans) != 1 {
			t.Fatalf("%s: %d spans, %v", c.name, len(got.Spans), err)
		}
		clear(c.in) // the caller may reuse its buffer once Decode returns
		attrs := got.Spans[0].Attributes
		if !model.EqualKeyValues(attrs, want) {
			t.Fatalf("%s: attributes = %+v\nwant %+v", c.name, attrs, want)
		}
		for _, a := range attrs {
			hasElems := len(a.Value.Elems())+len(a.Value.Fields()) > 0
			if (a.Value.List != nil) != hasElems {
				t.Errorf("%s: %s (%v) has List %v", c.name, a.Key, a.Value.Type, a.Value.List)
			}
		}
	}
}

// TestPlainKeyValueMatchesGeneral: the attribute fast path (plainKeyValue)
// decodes exactly what the general path decodes, or declines. Every
// encoding below, and every prefix of it (truncated input), is tried: when
// the fast path takes one, the general path must accept it with the same
// key and value. The common shapes must take the fast path.
func TestPlainKeyValueMatchesGeneral(t *testing.T) {
	str := func(s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), s)
	}
	i64 := func(x int64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), uint64(x))
	}
	kv := func(key []byte, values ...[]byte) []byte {
		b := key
		for _, v := range values {
			b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), v)
		}
		return b
	}
	key := func(s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), s)
	}
	long := strings.Repeat("x", 200)
	type tc struct {
		b    []byte
		fast bool // the fast path must take it
	}
	cases := []tc{
		{kv(key("peer.service"), str("telemetrygen-server")), true},
		{kv(key(""), str("")), true},
		{kv(key("k"), str(long[:127-4])), true},
		{kv(key("k"), i64(0)), true},
		{kv(key("k"), i64(-1)), true},
		{kv(key("k"), i64(math.MaxInt64)), true},
		{kv(key(long[:125]), str("v")), false}, // value pushes the message past 127 bytes: still fine either way
		{kv(key(long[:128]), str("v")), false},
		{kv(key("k"), str(long[:128])), false},
		{kv(key("k"), str(long[:126])), false},
		{kv(key("k"), nil), false},                                     // empty value
		{kv(key("k"), str("a"), str("b")), false},                      // repeated value: merged
		{kv(key("k"), append(str("a"), i64(7)...)), false},             // string then int: the last wins
		{kv(key("k"), append(i64(7), str("a")...)), false},             // int then string
		{append(kv(nil, str("v")), key("k")...), false},                // key after value
		{append(kv(key("k"), str("v")), key("k2")...), false},          // repeated key
		{append(kv(key("k"), str("v")), 0x20, 0x01), false},            // unknown field after
		{kv(key("k"), protowire.AppendVarint([]byte{0x10}, 1)), false}, // bool
		{kv(key("k"), protowire.AppendFixed64([]byte{0x21}, math.Float64bits(1.5))), false},
		{kv(key("k"), append(str("v"), 0x28, 0x01)), false},      // unknown AnyValue field after the string
		{[]byte{0x0a, 0x01, 'k', 0x12, 0x03, 0x0a, 0x01}, false}, // truncated string inside
		{[]byte{0x0a, 0x01, 'k', 0x12, 0x02, 0x18, 0x80}, false}, // truncated varint
		{[]byte{0x0a, 0x01, 'k', 0x12, 0x02, 0x0a, 0x05}, false}, // string longer than the value
	}
	for ci, c := range cases {
		for n := len(c.b); n >= 0; n-- {
			b := c.b[:n]
			var got model.KeyValue
			ok := plainKeyValue(b, &got)
			if n == len(c.b) && c.fast && !ok {
				t.Errorf("case %d (% x): the fast path declined a plain attribute", ci, b)
			}
			if !ok {
				if !reflect.DeepEqual(got, model.KeyValue{}) {
					t.Errorf("case %d prefix %d: declined but wrote %+v", ci, n, got)
				}
				continue
			}
			var d protoDecoder
			var want model.KeyValue
			if err := d.keyValue(b, 0, &want, 0); err != nil {
				t.Errorf("case %d prefix %d (% x): fast path took input the general path refuses: %v", ci, n, b, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("case %d prefix %d (% x): fast path %+v, general %+v", ci, n, b, got, want)
			}
		}
	}
}
