package otlp

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Seeds in code; more (hand-made edge cases) live in testdata/fuzz/FuzzX/.
func fuzzSeedRequests() []*coltrace.ExportTraceServiceRequest {
	g := newGen(7)
	g.badIDs = true
	reqs := []*coltrace.ExportTraceServiceRequest{realisticRequest(3)}
	for range 6 {
		reqs = append(reqs, g.request())
	}
	return reqs
}

func FuzzDecodeProto(f *testing.F) {
	for _, req := range fuzzSeedRequests() {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(wrapSpans(goodSpan(), goodSpan(pbytes(4, sid8))))
	for _, depth := range []int{maxValueDepth, maxValueDepth + 1} {
		b, err := proto.Marshal(deepRequest(depth))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeProto(data)
		// The ingest paths decode without the copy: same answer, same error.
		owned, ownedErr := DecodeProtoOwned(append([]byte(nil), data...))
		if (err == nil) != (ownedErr == nil) || (err != nil && err.Error() != ownedErr.Error()) {
			t.Fatalf("DecodeProto: %v; DecodeProtoOwned: %v", err, ownedErr)
		}
		if d := diffSpans(owned.Spans, got.Spans); err == nil && (d != "" || owned.Rejected != got.Rejected || owned.Problems != got.Problems) {
			t.Fatalf("DecodeProtoOwned disagrees with DecodeProto: %s (rejected %d, %d)", d, owned.Rejected, got.Rejected)
		}
		var req coltrace.ExportTraceServiceRequest
		officialErr := proto.Unmarshal(data, &req)
		if officialErr == nil && requestValueDepth(&req) > maxValueDepth {
			// proto.Unmarshal has no such limit; the segment format has.
			var de *Error
			if !errors.As(err, &de) || de.Reason != valueDepthReason {
				t.Fatalf("value nested %d levels: DecodeProto returned %v, want a depth error", requestValueDepth(&req), err)
			}
			return
		}
		if officialErr == nil {
			// proto.Unmarshal accepted, so every string is valid UTF-8: we must agree exactly.
			if err != nil {
				t.Fatalf("proto.Unmarshal accepts, DecodeProto fails: %v", err)
			}
			want, rejected := expected(&req)
			if d := diffSpans(got.Spans, want); d != "" {
				t.Fatalf("disagrees with proto.Unmarshal: %s", d)
			}
			if got.Rejected != rejected {
				t.Fatalf("Rejected = %d, proto.Unmarshal-based count %d", got.Rejected, rejected)
			}
		} else if err == nil && !strings.Contains(officialErr.Error(), "UTF-8") && !strings.Contains(officialErr.Error(), "recursion") {
			t.Fatalf("DecodeProto accepts input proto.Unmarshal rejects: %v", officialErr)
		}
		if err != nil {
			return
		}
		if d := checkBatch(got); d != "" {
			t.Fatal(d)
		}
		again, err := DecodeProto(EncodeProto(got.Spans))
		if err != nil {
			t.Fatalf("DecodeProto(EncodeProto(spans)): %v", err)
		}
		if d := diffGrouped(again.Spans, got.Spans); d != "" {
			t.Fatalf("EncodeProto round trip: %s", d)
		}
	})
}

func FuzzDecodeJSON(f *testing.F) {
	for _, req := range fuzzSeedRequests() {
		pj, err := protojson.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(hexIDs(f, pj))
		want, _ := expected(req)
		f.Add(EncodeJSON(want))
	}
	f.Add([]byte(`{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"0123456789abcdef0123456789abcdef","span_id":"0123456789abcdef","kind":"SPAN_KIND_SERVER","attributes":[{"key":"d","value":{"doubleValue":"-Infinity"}}]}]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeJSON(data)
		if err != nil {
			return
		}
		if d := checkBatch(got); d != "" {
			t.Fatal(d)
		}
		enc := EncodeJSON(got.Spans)
		again, err := DecodeJSON(enc)
		if err != nil {
			t.Fatalf("DecodeJSON(EncodeJSON(spans)): %v", err)
		}
		if d := diffGrouped(again.Spans, got.Spans); d != "" {
			t.Fatalf("EncodeJSON round trip: %s", d)
		}
	})
}

func FuzzDecodeNative(f *testing.F) {
	for _, req := range fuzzSeedRequests() {
		want, _ := expected(req)
		f.Add(EncodeNative(want))
	}
	f.Add([]byte(nativeExample))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeNative(data)
		if err != nil {
			if !utf8.ValidString(err.Error()) && utf8.Valid(data) {
				t.Fatalf("error message is not valid UTF-8: %q", err)
			}
			return
		}
		if d := checkBatch(got); d != "" {
			t.Fatal(d)
		}
		for i := range got.Spans {
			out := AppendSpanJSON(nil, &got.Spans[i])
			if !jsonValid(out) {
				t.Fatalf("AppendSpanJSON output is not valid JSON: %s", out)
			}
		}
		again, err := DecodeNative(EncodeNative(got.Spans))
		if err != nil {
			t.Fatalf("DecodeNative(EncodeNative(spans)): %v", err)
		}
		if d := diffSpans(again.Spans, got.Spans); d != "" {
			t.Fatalf("EncodeNative round trip: %s", d)
		}
	})
}

// requestValueDepth returns how deeply the attribute values of req nest (see
// maxValueDepth): 0 when every value is a scalar.
// anyDepth is how deeply an official AnyValue nests (0 for a scalar).
func anyDepth(v *commonpb.AnyValue) int {
	d := 0
	for _, e := range v.GetArrayValue().GetValues() {
		d = max(d, 1+anyDepth(e))
	}
	for _, kv := range v.GetKvlistValue().GetValues() {
		d = max(d, 1+anyDepth(kv.GetValue()))
	}
	return d
}

func requestValueDepth(req *coltrace.ExportTraceServiceRequest) int {
	deepest := 0
	kvs := func(l []*commonpb.KeyValue) {
		for _, kv := range l {
			deepest = max(deepest, anyDepth(kv.GetValue()))
		}
	}
	for _, rs := range req.GetResourceSpans() {
		kvs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			kvs(ss.GetScope().GetAttributes())
			for _, sp := range ss.GetSpans() {
				kvs(sp.GetAttributes())
				for _, e := range sp.GetEvents() {
					kvs(e.GetAttributes())
				}
				for _, l := range sp.GetLinks() {
					kvs(l.GetAttributes())
				}
			}
		}
	}
	return deepest
}
