package otlp

import (
	"errors"
	"net"
	"testing"
	"time"

	zipkinmodel "github.com/openzipkin/zipkin-go/model"
	"github.com/openzipkin/zipkin-go/proto/zipkin_proto3"
	"github.com/openzipkin/zipkin-go/reporter"

	"github.com/rastro-dev/rastro/internal/model"
)

// zipkinSeeds are spans as zipkin-go serializes them.
func zipkinSeeds() []zipkinmodel.SpanModel {
	root := zipkinmodel.ID(7)
	now := time.Unix(1_700_000_000, 123_000)
	return []zipkinmodel.SpanModel{
		{SpanContext: zipkinmodel.SpanContext{TraceID: zipkinmodel.TraceID{High: 1, Low: 2}, ID: root}, Name: "a", Kind: zipkinmodel.Server,
			Timestamp: now, Duration: time.Millisecond, LocalEndpoint: &zipkinmodel.Endpoint{ServiceName: "s", IPv6: net.ParseIP("::1"), Port: 1},
			Tags: map[string]string{"k": "v", "error": "boom", "otel.library.name": "lib"}},
		{SpanContext: zipkinmodel.SpanContext{TraceID: zipkinmodel.TraceID{Low: 2}, ID: 8, ParentID: &root}, Name: "b", Kind: zipkinmodel.Server,
			Shared: true, Timestamp: now, Duration: 2 * time.Millisecond, RemoteEndpoint: &zipkinmodel.Endpoint{ServiceName: "r", IPv4: net.ParseIP("10.1.2.3")},
			Annotations: []zipkinmodel.Annotation{{Timestamp: now, Value: "ev"}}},
	}
}

func zipkinSeedBodies(t testing.TB, s reporter.SpanSerializer) []byte {
	spans := zipkinSeeds()
	ptrs := []*zipkinmodel.SpanModel{&spans[0], &spans[1]}
	b, err := s.Serialize(ptrs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestZipkinDecodersAgree(t *testing.T) {
	j, err := DecodeZipkinJSON(zipkinSeedBodies(t, reporter.JSONSerializer{}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodeZipkinProto(zipkinSeedBodies(t, zipkin_proto3.SpanSerializer{}))
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSpans(j.Spans, p.Spans); d != "" || len(j.Spans) != 2 {
		t.Fatalf("JSON and protobuf decode differently (%d spans): %s", len(j.Spans), d)
	}
	a, b := &j.Spans[0], &j.Spans[1]
	if a.Service != "s" || a.StatusCode != 2 || a.StatusMessage != "boom" || a.Scope == nil || a.Scope.Name != "lib" ||
		a.StartTimeUnixNano != 1_700_000_000_000_123_000 || a.Duration() != 1e6 {
		t.Fatalf("first span: %+v", a)
	}
	// The shared server span: an id of its own, the client span (8) as parent.
	if b.Service != model.UnknownService || b.ParentSpanID != (model.SpanID{0, 0, 0, 0, 0, 0, 0, 8}) || b.SpanID == b.ParentSpanID ||
		len(b.Events) != 1 || b.Events[0].Name != "ev" {
		t.Fatalf("shared span: %+v", b)
	}
}

func fuzzZipkin(f *testing.F, s reporter.SpanSerializer, decode func([]byte) (Batch, error)) {
	f.Add(zipkinSeedBodies(f, s))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decode(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error is not an *Error: %v", err)
			}
			return
		}
		if d := checkBatch(got); d != "" {
			t.Fatal(d)
		}
	})
}

func FuzzDecodeZipkinJSON(f *testing.F) {
	fuzzZipkin(f, reporter.JSONSerializer{}, DecodeZipkinJSON)
}

func FuzzDecodeZipkinProto(f *testing.F) {
	fuzzZipkin(f, zipkin_proto3.SpanSerializer{}, DecodeZipkinProto)
}

// TestZipkinShortIDsAndResourceTags: short hex ids are left-padded, as
// Zipkin pads them; resource-convention tags go to the resource.
func TestZipkinShortIDsAndResourceTags(t *testing.T) {
	b, err := DecodeZipkinJSON([]byte(`[{"traceId":"abc","id":"a1","name":"x","timestamp":1,"localEndpoint":{"serviceName":"svc"},
		"tags":{"host.name":"h1","service.version":"1.2","http.route":"/r"}}]`))
	if err != nil || len(b.Spans) != 1 {
		t.Fatalf("decode: %v %+v", err, b)
	}
	s := &b.Spans[0]
	if s.TraceID != (model.TraceID{14: 0x0a, 15: 0xbc}) || s.SpanID != (model.SpanID{7: 0xa1}) {
		t.Fatalf("ids %s %s", s.TraceID, s.SpanID)
	}
	if v, _ := model.Lookup(s.Resource.Attributes, "host.name"); v.Str != "h1" {
		t.Fatalf("resource: %+v", s.Resource.Attributes)
	}
	if _, ok := model.Lookup(s.Attributes, "host.name"); ok || len(s.Attributes) != 1 {
		t.Fatalf("span attributes: %+v", s.Attributes)
	}
}
