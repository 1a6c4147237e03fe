package otlp

import (
	"encoding/binary"
	"fmt"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func strKV(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func intKV(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

// realisticRequest is shaped like an SDK batch: one resource, one scope, n
// spans of ten traces, with HTTP/DB attributes and an occasional event.
func realisticRequest(n int) *coltrace.ExportTraceServiceRequest {
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.60.0"}}
	for i := range n {
		tid := make([]byte, 16)
		binary.BigEndian.PutUint64(tid, uint64(i/100+1))
		binary.BigEndian.PutUint64(tid[8:], 0xabcdef0123456789)
		sid := make([]byte, 8)
		binary.BigEndian.PutUint64(sid, uint64(i+1))
		start := uint64(1_700_000_000_000_000_000 + i*1_000_000)
		s := &tracepb.Span{
			TraceId: tid, SpanId: sid, Name: fmt.Sprintf("GET /api/v1/users/%d", i%50),
			Kind: tracepb.Span_SPAN_KIND_SERVER, StartTimeUnixNano: start, EndTimeUnixNano: start + 1_234_567,
			Attributes: []*commonpb.KeyValue{
				strKV("http.request.method", "GET"), strKV("url.path", fmt.Sprintf("/api/v1/users/%d", i%50)),
				intKV("http.response.status_code", 200), strKV("server.address", "api.example.com"),
				intKV("server.port", 443), strKV("user_agent.original", "Mozilla/5.0 (X11; Linux x86_64)"),
				strKV("network.protocol.version", "1.1"), strKV("db.system", "postgresql"),
			},
			Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
		}
		if i%10 != 0 {
			s.ParentSpanId = []byte{0, 0, 0, 0, 0, 0, 0, byte(i%10 + 1)}
		}
		if i%5 == 0 {
			s.Events = []*tracepb.Span_Event{{TimeUnixNano: start + 100, Name: "exception", Attributes: []*commonpb.KeyValue{strKV("exception.type", "io.EOF"), strKV("exception.message", "unexpected EOF")}}}
		}
		ss.Spans = append(ss.Spans, s)
	}
	return &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			strKV("service.name", "checkout"), strKV("service.version", "1.4.2"), strKV("deployment.environment", "prod"),
			strKV("host.name", "ip-10-0-0-12"), strKV("telemetry.sdk.language", "go"), strKV("telemetry.sdk.name", "opentelemetry"),
		}},
		ScopeSpans: []*tracepb.ScopeSpans{ss},
		SchemaUrl:  "https://opentelemetry.io/schemas/1.26.0",
	}}}
}

func BenchmarkDecodeProto(b *testing.B) {
	const n = 1000
	data, err := proto.Marshal(realisticRequest(n))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		batch, err := DecodeProto(data)
		if err != nil || len(batch.Spans) != n {
			b.Fatalf("decode: %v, %d spans", err, len(batch.Spans))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
}

// BenchmarkProtoUnmarshal is the official decoder on the same request, for comparison.
func BenchmarkProtoUnmarshal(b *testing.B) {
	const n = 1000
	data, err := proto.Marshal(realisticRequest(n))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
}

func BenchmarkDecodeJSON(b *testing.B) {
	const n = 1000
	pj, err := protojson.Marshal(realisticRequest(n))
	if err != nil {
		b.Fatal(err)
	}
	data := hexIDs(b, pj)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		batch, err := DecodeJSON(data)
		if err != nil || len(batch.Spans) != n {
			b.Fatalf("decode: %v, %d spans", err, len(batch.Spans))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
}

func BenchmarkEncodeProto(b *testing.B) {
	const n = 1000
	data, err := proto.Marshal(realisticRequest(n))
	if err != nil {
		b.Fatal(err)
	}
	batch, err := DecodeProto(data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	size := 0
	for b.Loop() {
		size = len(EncodeProto(batch.Spans))
	}
	b.SetBytes(int64(size))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
}
