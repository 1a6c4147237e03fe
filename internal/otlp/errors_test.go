package otlp

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
)

// field builders for hand-made protobuf input
func pbytes(num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

var (
	tid16 = []byte("0123456789abcdef")
	sid8  = []byte("01234567")
)

// wrapSpans puts span messages into request > resource_spans > scope_spans.
func wrapSpans(spans ...[]byte) []byte {
	var ss []byte
	for _, s := range spans {
		ss = append(ss, pbytes(2, s)...)
	}
	return pbytes(1, pbytes(2, ss))
}

func goodSpan(extra ...[]byte) []byte {
	return cat(append([][]byte{pbytes(1, tid16), pbytes(2, sid8), pbytes(5, []byte("op"))}, extra...)...)
}

func TestDecodeProtoErrors(t *testing.T) {
	// A span whose name claims 50 bytes but the message ends first.
	truncName := cat(pbytes(1, tid16), pbytes(2, sid8), protowire.AppendTag(nil, 5, protowire.BytesType), []byte{50, 'a'})
	cases := []struct {
		name string
		in   []byte
		want string // fragments of the error message
	}{
		{"truncated name", wrapSpans(goodSpan(), goodSpan(), truncName),
			"protobuf: resource_spans[0].scope_spans[0].spans[2].name: truncated length-delimited field at offset 103"},
		{"truncated request", []byte{0x0a, 0x05, 0x12}, "resource_spans[0]: truncated length-delimited field at offset 1"},
		{"truncated varint", wrapSpans(goodSpan([]byte{0x30, 0x80})), "spans[0].kind: truncated varint at offset"},
		{"truncated fixed64", wrapSpans(goodSpan([]byte{0x39, 1, 2, 3})), "spans[0].start_time_unix_nano: truncated fixed64 field at offset"},
		{"truncated tag", wrapSpans(goodSpan([]byte{0x80})), "spans[0]: truncated tag at offset"},
		{"wire type 6", wrapSpans(goodSpan([]byte{0x0e})), "spans[0].field 1: invalid wire type 6 at offset"},
		{"wire type 7", []byte{0x0f}, "protobuf: field 1: invalid wire type 7 at offset 0"},
		{"stray end group", []byte{0x0c}, "mismatched end-group marker"},
		{"field number 0", []byte{0x02, 0x00}, "invalid field number"},
		{"nested attribute", wrapSpans(goodSpan(pbytes(9, cat(pbytes(1, []byte("k")), pbytes(2, []byte{0x0a, 0x09}))))),
			"spans[0].attributes[0].value.string_value: truncated length-delimited field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := DecodeProto(c.in)
			if err == nil {
				t.Fatalf("no error; batch %+v", b)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, c.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Format != "protobuf" {
				t.Fatalf("error is not an *Error: %T", err)
			}
			if len(b.Spans) != 0 {
				t.Fatalf("failed decode returned %d spans", len(b.Spans))
			}
			var req coltrace.ExportTraceServiceRequest
			if proto.Unmarshal(c.in, &req) == nil {
				t.Fatalf("proto.Unmarshal accepts this input, so DecodeProto should too")
			}
		})
	}
}

func TestDecodeProtoRejects(t *testing.T) {
	zero16, zero8 := make([]byte, 16), make([]byte, 8)
	link := func(tid, sid []byte) []byte { return pbytes(13, cat(pbytes(1, tid), pbytes(2, sid))) }
	cases := []struct {
		name string
		span []byte
		want string
	}{
		{"short trace id", cat(pbytes(1, tid16[:15]), pbytes(2, sid8)), "trace_id must be 16 bytes, got 15"},
		{"missing trace id", pbytes(2, sid8), "trace_id must be 16 bytes, got 0"},
		{"zero trace id", cat(pbytes(1, zero16), pbytes(2, sid8)), "trace_id is all zeros"},
		{"long span id", cat(pbytes(1, tid16), pbytes(2, tid16[:9])), "span_id must be 8 bytes, got 9"},
		{"zero span id", cat(pbytes(1, tid16), pbytes(2, zero8)), "span_id is all zeros"},
		{"bad parent", goodSpan(pbytes(4, sid8[:4])), "parent_span_id must be empty or 8 bytes, got 4"},
		{"bad link trace id", goodSpan(link(tid16, sid8), link(tid16[:3], sid8)), "links[1].trace_id must be 16 bytes, got 3"},
		{"zero link span id", goodSpan(link(tid16, zero8)), "links[0].span_id is all zeros"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := DecodeProto(wrapSpans(goodSpan(), c.span, goodSpan()))
			if err != nil {
				t.Fatal(err)
			}
			if b.Rejected != 1 || len(b.Spans) != 2 {
				t.Fatalf("Rejected = %d, spans = %d; want 1 and 2", b.Rejected, len(b.Spans))
			}
			want := "resource_spans[0].scope_spans[0].spans[1]: " + c.want
			if b.RejectMsg != want {
				t.Fatalf("RejectMsg = %q\nwant %q", b.RejectMsg, want)
			}
			if d := checkBatch(b); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestDecodeProtoLenient(t *testing.T) {
	// A root span with 8 zero bytes as parent, an unknown field, a known field
	// with the wrong wire type (skipped, as proto.Unmarshal does), and invalid UTF-8.
	span := goodSpan(pbytes(4, make([]byte, 8)), pbytes(99, []byte("future")),
		protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 5),
		pbytes(9, cat(pbytes(1, []byte("k\xff")), pbytes(2, pbytes(1, []byte("v"))))))
	b, err := DecodeProto(wrapSpans(span))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Spans) != 1 || !b.Spans[0].IsRoot() || b.Spans[0].TraceState != "" {
		t.Fatalf("spans = %+v", b.Spans)
	}
	if b.Problems.InvalidUTF8 != 1 || b.Spans[0].Attributes[0].Key != "k\uFFFD" {
		t.Fatalf("invalid UTF-8 not repaired and counted: %+v, key %q", b.Problems, b.Spans[0].Attributes[0].Key)
	}
	if b.Problems.MissingService != 1 || b.Spans[0].Service != model.UnknownService {
		t.Fatalf("missing service not counted: %+v", b.Problems)
	}
}

func TestDecodeProtoDoesNotAliasInput(t *testing.T) {
	in := wrapSpans(goodSpan())
	b, err := DecodeProto(in)
	if err != nil {
		t.Fatal(err)
	}
	clear(in)
	if b.Spans[0].Name != "op" {
		t.Fatalf("span name changed to %q after the caller reused its buffer", b.Spans[0].Name)
	}
}

// TestDecodeProtoOwnedKeepsNoCopy: the owned decoder's strings are the
// body's own bytes (the copy DecodeProto makes is what ingest saves).
func TestDecodeProtoOwnedKeepsNoCopy(t *testing.T) {
	in := wrapSpans(goodSpan())
	b, err := DecodeProtoOwned(in)
	if err != nil {
		t.Fatal(err)
	}
	name := unsafe.StringData(b.Spans[0].Name)
	start, end := unsafe.Pointer(&in[0]), unsafe.Add(unsafe.Pointer(&in[0]), len(in))
	if p := unsafe.Pointer(name); uintptr(p) < uintptr(start) || uintptr(p) >= uintptr(end) {
		t.Fatal("the span name was copied out of the body")
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	span := func(fields string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef","spanId":"0123456789abcdef"` + fields + `}]}]}]}`
	}
	cases := []struct{ name, in, want string }{
		{"not JSON", `{"resourceSpans":[`, "otlp-json: resourceSpans[0]: expected object, got end of input at offset 18"},
		{"missing comma", `{"resourceSpans":[{} {}]}`, "otlp-json: resourceSpans: expected ',' or ']' in array at offset 21"},
		{"wrong type name", span(`,"name":5`), "resourceSpans[0].scopeSpans[0].spans[0].name: expected string, got number at offset"},
		{"wrong type spans", `{"resourceSpans":[{"scopeSpans":[{"spans":{}}]}]}`, "resourceSpans[0].scopeSpans[0].spans: expected array, got object"},
		{"bad int", span(`,"attributes":[{"key":"k","value":{"intValue":"12x"}}]`), `spans[0].attributes[0].value.intValue: invalid 64-bit integer "12x"`},
		{"fraction int", span(`,"startTimeUnixNano":1.5`), `startTimeUnixNano: invalid unsigned 64-bit integer "1.5"`},
		{"negative time", span(`,"endTimeUnixNano":"-1"`), `endTimeUnixNano: invalid unsigned 64-bit integer "-1"`},
		{"bad enum", span(`,"kind":"SPAN_KIND_SIDEWAYS"`), `spans[0].kind: unknown enum value "SPAN_KIND_SIDEWAYS"`},
		{"bad base64", span(`,"attributes":[{"key":"k","value":{"bytesValue":"!!"}}]`), "value.bytesValue: invalid base64"},
		{"bad double", span(`,"attributes":[{"key":"k","value":{"doubleValue":"fast"}}]`), `value.doubleValue: invalid number "fast"`},
		{"bool as string", span(`,"attributes":[{"key":"k","value":{"boolValue":"true"}}]`), "value.boolValue: expected boolean, got string"},
		{"trailing data", `{} {}`, "unexpected data after the JSON value at offset 3"},
		{"control char", "{\"a\":\"x\ny\"}", "control character in string"},
		{"deep nesting", `{"future":` + strings.Repeat("[", 20000), "JSON nested more than 10000 deep"},
		{"bad literal", `{"resourceSpans":nul}`, "invalid literal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeJSON([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

func TestDecodeJSONRejects(t *testing.T) {
	in := `{"resourceSpans":[{"scopeSpans":[{"spans":[
		{"traceId":"0123456789ABCDEF0123456789abcdef","spanId":"0123456789abcdef","name":"ok"},
		{"traceId":"ASNFZ4mrze8BI0VniavN7w==","spanId":"0123456789abcdef"},
		{"traceId":"0123456789abcdef0123456789abcdef","spanId":"0000000000000000"},
		{"traceId":"0123456789abcdef0123456789abcdef","spanId":"0123456789abcdef","parentSpanId":""}]}]}]}`
	b, err := DecodeJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if b.Rejected != 2 || len(b.Spans) != 2 {
		t.Fatalf("Rejected = %d, spans = %d", b.Rejected, len(b.Spans))
	}
	want := `resourceSpans[0].scopeSpans[0].spans[1]: trace_id is not hex: "ASNFZ4mrze8BI0VniavN7w==" (looks like base64; OTLP/JSON ids are hex)`
	if b.RejectMsg != want {
		t.Fatalf("RejectMsg = %q\nwant %q", b.RejectMsg, want)
	}
	for id, msg := range map[string]string{"0123": "trace_id must be 16 bytes, got 2", "012": "trace_id must be 32 hex digits, got 3",
		"0123456789abcdef0123456789abcdeX": `trace_id is not hex: "0123456789abcdef0123456789abcdeX"`} {
		b, _ = DecodeJSON([]byte(strings.Replace(in, "ASNFZ4mrze8BI0VniavN7w==", id, 1)))
		if !strings.HasSuffix(b.RejectMsg, "spans[1]: "+msg) {
			t.Errorf("id %q: RejectMsg = %q, want it to end with %q", id, b.RejectMsg, msg)
		}
	}
}

func TestDecodeNativeErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"object body", `{"trace_id":"x"}`, "native-json: native body must be a JSON array of spans, got object at offset 0"},
		{"bad time", `[{"start_time":"yesterday"}]`, `[0].start_time: invalid time "yesterday"`},
		{"pre-1970", `[{"start_time":"1969-12-31T23:59:59Z"}]`, "outside 1970..2554"},
		{"bad kind", `[{"kind":"sideways"}]`, `[0].kind: unknown value "sideways"`},
		{"attr path", `[{"attributes":{"a":{"b":[1,tru]}}}]`, `[0].attributes."a"."b"[1]: invalid literal, expected true`},
		{"wrong type", `[{"name":["x"]}]`, "[0].name: expected string, got array"},
		{"huge number", `[{"attributes":{"a":1e999}}]`, `number out of range "1e999"`},
		{"float flags", `[{"flags":1.5}]`, `[0].flags: invalid unsigned 32-bit integer "1.5"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeNative([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}
