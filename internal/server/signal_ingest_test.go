package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// otlpHTTPSignal is one signal's OTLP/HTTP receiver, with a request of two
// items of which the store rejects one, and how to read its answer.
type otlpHTTPSignal struct {
	path  string
	start func(t *testing.T) *testServer
	mixed proto.Message
	// mixedJSON is mixed in OTLP/JSON (protojson would write its ids in
	// base64, which OTLP/JSON does not take).
	mixedJSON string
	// partial reads a protobuf answer's partial_success.
	partial func(b []byte) (rejected int64, msg string, err error)
	// jsonField is the rejected count's name in an OTLP/JSON answer.
	jsonField string
	// wantMsg and wantJSONMsg are in the rejection's message.
	wantMsg, wantJSONMsg string
}

func otlpHTTPSignals() []otlpHTTPSignal {
	now := uint64(time.Now().UnixNano())
	nowJSON := strconv.FormatUint(now, 10)
	return []otlpHTTPSignal{
		{
			path:  "/v1/logs",
			start: startLogsServer,
			mixed: &collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{
				{TimeUnixNano: now, Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "kept"}}},
				{TimeUnixNano: now, SpanId: []byte{1, 2, 3}},
			}}}}}},
			partial: func(b []byte) (int64, string, error) {
				var resp collogs.ExportLogsServiceResponse
				err := proto.Unmarshal(b, &resp)
				return resp.GetPartialSuccess().GetRejectedLogRecords(), resp.GetPartialSuccess().GetErrorMessage(), err
			},
			mixedJSON: `{"resourceLogs":[{"scopeLogs":[{"logRecords":[
				{"timeUnixNano":"` + nowJSON + `","body":{"stringValue":"kept"}},{"timeUnixNano":"` + nowJSON + `","spanId":"010203"}]}]}]}`,
			jsonField:   "rejectedLogRecords",
			wantMsg:     "log_records[1]: span_id must be empty or 8 bytes, got 3",
			wantJSONMsg: "logRecords[1]: span_id must be empty or 8 bytes, got 3",
		},
		{
			path:  "/v1/metrics",
			start: startMetricsServer,
			mixed: &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
				{Name: "ok", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{
					{TimeUnixNano: now, Value: &metricspb.NumberDataPoint_AsInt{AsInt: 4}}}}}},
				{Name: "d", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true, DataPoints: []*metricspb.NumberDataPoint{
					{TimeUnixNano: now, Value: &metricspb.NumberDataPoint_AsInt{AsInt: 1}}}}}},
			}}}}}},
			partial: func(b []byte) (int64, string, error) {
				var resp colmetrics.ExportMetricsServiceResponse
				err := proto.Unmarshal(b, &resp)
				return resp.GetPartialSuccess().GetRejectedDataPoints(), resp.GetPartialSuccess().GetErrorMessage(), err
			},
			mixedJSON: `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[
				{"name":"ok","gauge":{"dataPoints":[{"timeUnixNano":"` + nowJSON + `","asInt":"4"}]}},
				{"name":"d","sum":{"isMonotonic":true,"dataPoints":[{"timeUnixNano":"` + nowJSON + `","asInt":"1"}]}}]}]}]}`,
			jsonField:   "rejectedDataPoints",
			wantMsg:     "aggregation temporality",
			wantJSONMsg: "aggregation temporality",
		},
	}
}

// The logs and metrics receivers answer alike: 415 naming their path for
// another Content-Type, and partial success, in protobuf as the official
// response types read it and in OTLP/JSON, when the store rejects some of a
// request's items.
func TestOTLPHTTPSignalsAnswerAlike(t *testing.T) {
	for _, sig := range otlpHTTPSignals() {
		t.Run(strings.TrimPrefix(sig.path, "/v1/"), func(t *testing.T) {
			ts := sig.start(t)
			b, err := proto.Marshal(sig.mixed)
			if err != nil {
				t.Fatal(err)
			}
			if code, body := ts.post(sig.path, "text/csv", b); code != 415 ||
				!strings.Contains(string(body), `text/csv\" is not supported on `+sig.path) {
				t.Errorf("text/csv: %d %s, want 415 naming the type and %s", code, body, sig.path)
			}

			code, body := ts.post(sig.path, "application/x-protobuf", b)
			if code != 200 {
				t.Fatalf("protobuf: %d %s", code, body)
			}
			rejected, msg, err := sig.partial(body)
			if err != nil || rejected != 1 || !strings.Contains(msg, sig.wantMsg) {
				t.Errorf("protobuf answer: rejected %d, message %q (%v), want 1 naming %q", rejected, msg, err, sig.wantMsg)
			}

			code, body = ts.post(sig.path, "application/json", []byte(sig.mixedJSON))
			var answer struct {
				PartialSuccess map[string]any `json:"partialSuccess"`
			}
			if err := json.Unmarshal(body, &answer); code != 200 || err != nil {
				t.Fatalf("JSON: %d %s (%v)", code, body, err)
			}
			// proto3 JSON writes the int64 count as a string.
			msg, _ = answer.PartialSuccess["errorMessage"].(string)
			if n := answer.PartialSuccess[sig.jsonField]; n != "1" || !strings.Contains(msg, sig.wantJSONMsg) {
				t.Errorf("JSON answer %s, want %s \"1\" naming %q", body, sig.jsonField, sig.wantJSONMsg)
			}
		})
	}
}
