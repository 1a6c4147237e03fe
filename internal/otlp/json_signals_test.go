package otlp

import (
	"math"
	"strings"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
)

// jsonSignal is one signal's OTLP/JSON request around a resource, a scope
// and one item (a span, a log record, a metric point with an exemplar).
type jsonSignal struct {
	name     string
	template string
	// decode returns the first item's resource, scope, time, ids and 64-bit
	// values (the span has none), and the rejections.
	decode func(b []byte) (jsonItem, int, string, error)
}

type jsonItem struct {
	res    *model.Resource
	scope  *model.Scope
	time   uint64
	trace  model.TraceID
	span   model.SpanID
	values []int64
}

var jsonSignals = []jsonSignal{
	{"spans", `{"resourceSpans":[{"resource":RES,"scopeSpans":[{"scope":SCOPE,"spans":[
		{"traceId":TRACE,"spanId":SPAN,"name":"s","startTimeUnixNano":TIME}]}]}]}`,
		func(b []byte) (jsonItem, int, string, error) {
			out, err := DecodeJSON(b)
			if err != nil || len(out.Spans) == 0 {
				return jsonItem{}, out.Rejected, out.RejectMsg, err
			}
			s := &out.Spans[0]
			return jsonItem{s.Resource, s.Scope, s.StartTimeUnixNano, s.TraceID, s.SpanID, nil}, out.Rejected, out.RejectMsg, nil
		}},
	{"logs", `{"resourceLogs":[{"resource":RES,"scopeLogs":[{"scope":SCOPE,"logRecords":[
		{"traceId":TRACE,"spanId":SPAN,"timeUnixNano":TIME,"body":{"intValue":INT}}]}]}]}`,
		func(b []byte) (jsonItem, int, string, error) {
			out, err := DecodeLogsJSON(b)
			if err != nil || len(out.Records) == 0 {
				return jsonItem{}, out.Rejected, out.RejectMsg, err
			}
			r := &out.Records[0]
			return jsonItem{r.Resource, r.Scope, r.TimeUnixNano, r.TraceID, r.SpanID, []int64{r.Body.Int}}, out.Rejected, out.RejectMsg, nil
		}},
	{"metrics", `{"resourceMetrics":[{"resource":RES,"scopeMetrics":[{"scope":SCOPE,"metrics":[{"name":"m","sum":{"dataPoints":[
		{"timeUnixNano":TIME,"asInt":INT,"exemplars":[{"traceId":TRACE,"spanId":SPAN,"asInt":INT}]}]}}]}]}]}`,
		func(b []byte) (jsonItem, int, string, error) {
			out, err := DecodeMetricsJSON(b)
			if err != nil || len(out.Metrics) == 0 || len(out.Metrics[0].Points) == 0 {
				return jsonItem{}, out.Rejected, out.RejectMsg, err
			}
			m := &out.Metrics[0]
			p := &m.Points[0]
			it := jsonItem{res: m.Resource, scope: m.Scope, time: p.TimeUnixNano, values: []int64{p.IntValue}}
			if len(p.Exemplars) > 0 {
				e := &p.Exemplars[0]
				it.trace, it.span = e.TraceID, e.SpanID
				it.values = append(it.values, e.IntValue)
			}
			return it, out.Rejected, out.RejectMsg, nil
		}},
}

// The pieces every signal's OTLP/JSON shares (resource, scope, attributes
// of every value type, 64-bit integers as strings or numbers, bytes as
// base64 of either alphabet, hex ids of either case, snake_case keys) decode
// alike in spans, logs and metrics.
func TestJSONSharedPiecesAcrossSignals(t *testing.T) {
	const (
		res = `{"attributes":[{"key":"big","value":{"intValue":INT}},{"key":"raw","value":{"bytesValue":B64}},
			{"key":"nan","value":{"doubleValue":"NaN"}},{"key":"list","value":{"arrayValue":{"values":[{"stringValue":"x"},{"boolValue":true}]}}}],
			"droppedAttributesCount":COUNT,"someFutureField":{"a":[1,null]}}`
		scope = `{"name":"lib","version":"1.0","attributes":[{"key":"neg","value":{"intValue":NEG}}],"droppedAttributesCount":null}`
	)
	const big = 9007199254740993 // not exact as a float64: a decoder that goes through one loses it
	wantRes := model.Resource{Attributes: []model.KeyValue{
		{Key: "big", Value: model.IntValue(big)},
		{Key: "raw", Value: model.Value{Type: model.ValueBytes, Str: "\xfb\xff"}},
		{Key: "nan", Value: model.DoubleValue(math.NaN())},
		{Key: "list", Value: model.ArrayValue([]model.Value{model.StringValue("x"), model.BoolValue(true)})},
	}, DroppedAttributesCount: 3}
	wantTrace := model.TraceID{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c}
	wantSpan := model.SpanID{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74}

	spellings := []struct {
		name string
		r    *strings.Replacer
	}{
		{"strings", strings.NewReplacer("INT", `"9007199254740993"`, "NEG", `"-42"`, "COUNT", `"3"`, "TIME", `"1700000000000000001"`,
			"B64", `"+/8="`, "TRACE", `"5b8efff798038103d269b633813fc60c"`, "SPAN", `"eee19b7ec3c1b174"`)},
		{"numbers", strings.NewReplacer("INT", `9007199254740993`, "NEG", `-42`, "COUNT", `3`, "TIME", `1700000000000000001`,
			"B64", `"-_8"`, "TRACE", `"5B8EFFF798038103D269B633813FC60C"`, "SPAN", `"EEE19B7EC3C1B174"`)},
	}
	snake := strings.NewReplacer(`"resourceSpans"`, `"resource_spans"`, `"scopeSpans"`, `"scope_spans"`,
		`"resourceLogs"`, `"resource_logs"`, `"scopeLogs"`, `"scope_logs"`, `"logRecords"`, `"log_records"`,
		`"resourceMetrics"`, `"resource_metrics"`, `"scopeMetrics"`, `"scope_metrics"`, `"dataPoints"`, `"data_points"`,
		`"intValue"`, `"int_value"`, `"bytesValue"`, `"bytes_value"`, `"doubleValue"`, `"double_value"`,
		`"arrayValue"`, `"array_value"`, `"stringValue"`, `"string_value"`, `"boolValue"`, `"bool_value"`,
		`"droppedAttributesCount"`, `"dropped_attributes_count"`, `"traceId"`, `"trace_id"`, `"spanId"`, `"span_id"`,
		`"timeUnixNano"`, `"time_unix_nano"`, `"startTimeUnixNano"`, `"start_time_unix_nano"`, `"asInt"`, `"as_int"`)

	for _, sig := range jsonSignals {
		for _, sp := range spellings {
			for _, snakeKeys := range []bool{false, true} {
				in := strings.NewReplacer("RES", res, "SCOPE", scope).Replace(sig.template)
				in = sp.r.Replace(in)
				if snakeKeys {
					in = snake.Replace(in)
				}
				name := sig.name + "/" + sp.name
				if snakeKeys {
					name += "/snake"
				}
				got, rejected, msg, err := sig.decode([]byte(in))
				if err != nil {
					t.Fatalf("%s: %v\n%s", name, err, in)
				}
				if rejected != 0 {
					t.Fatalf("%s: rejected %d: %s", name, rejected, msg)
				}
				if g, w := kvString(got.res.Attributes), kvString(wantRes.Attributes); g != w {
					t.Errorf("%s: resource attributes\n got %s\nwant %s", name, g, w)
				}
				if got.res.DroppedAttributesCount != 3 {
					t.Errorf("%s: resource droppedAttributesCount = %d, want 3", name, got.res.DroppedAttributesCount)
				}
				if got.scope.Name != "lib" || got.scope.Version != "1.0" || kvString(got.scope.Attributes) != kvString([]model.KeyValue{{Key: "neg", Value: model.IntValue(-42)}}) {
					t.Errorf("%s: scope = %+v", name, *got.scope)
				}
				if got.time != 1700000000000000001 {
					t.Errorf("%s: time = %d, want 1700000000000000001", name, got.time)
				}
				if got.trace != wantTrace || got.span != wantSpan {
					t.Errorf("%s: ids = %x %x, want %x %x", name, got.trace, got.span, wantTrace, wantSpan)
				}
				for i, v := range got.values {
					if v != big {
						t.Errorf("%s: 64-bit value %d = %d, want %d", name, i, v, int64(big))
					}
				}
			}
		}
	}
}

// An id written in base64 (protojson's form, not OTLP/JSON's hex) rejects
// the item that carries it, with the same reason in every signal.
func TestJSONBase64IDRejectedAcrossSignals(t *testing.T) {
	for _, sig := range jsonSignals {
		in := strings.NewReplacer("RES", `{}`, "SCOPE", `{}`, "INT", "1", "TIME", "1",
			"TRACE", `"W47/95gDgQPSabYzgT/GDA=="`, "SPAN", `"eee19b7ec3c1b174"`).Replace(sig.template)
		_, rejected, msg, err := sig.decode([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", sig.name, err)
		}
		if rejected != 1 || !strings.Contains(msg, "trace_id is not hex") || !strings.Contains(msg, "looks like base64") {
			t.Errorf("%s: rejected %d (%q), want 1 saying the trace_id is base64, not hex", sig.name, rejected, msg)
		}
	}
}

// Metric metadata is a repeated KeyValue field: a malformed element is
// named with its index, in protobuf as in OTLP/JSON, and a value nested too
// deeply is refused there as in attributes.
func TestDecodeMetricsMetadataErrorsNameTheElement(t *testing.T) {
	req := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{
		Name:     "m",
		Metadata: []*commonpb.KeyValue{{Key: "ok", Value: nestedAny(3)}, {Key: "deep", Value: nestedAny(maxValueDepth + 2)}},
	}}}}}}}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = DecodeMetricsProto(b)
	if err == nil || !strings.Contains(err.Error(), "resource_metrics[0].scope_metrics[0].metrics[0].metadata[1].value") ||
		!strings.Contains(err.Error(), valueDepthReason) {
		t.Errorf("protobuf: %v, want the depth refused at metadata[1]", err)
	}
	j, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = DecodeMetricsJSON(j)
	if err == nil || !strings.Contains(err.Error(), "resourceMetrics[0].scopeMetrics[0].metrics[0].metadata[1].value") ||
		!strings.Contains(err.Error(), valueDepthReason) {
		t.Errorf("otlp-json: %v, want the depth refused at metadata[1]", err)
	}
}
