package server

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// Shapes: jaegertracing/jaeger v2.20.0 cmd/jaeger/internal/extension/
// jaegerquery/internal/http_handler.go (the v1 envelope, errors through
// http.Error), internal/uimodel/model.go (the UI trace model; fixture
// internal/uimodel/converter/v1/json/fixtures/ui_01.json), apiv3/
// http_gateway.go and the api_v3 TraceSummary message.

type jEnvelope struct {
	Data   json.RawMessage `json:"data"`
	Total  int             `json:"total"`
	Limit  int             `json:"limit"`
	Offset int             `json:"offset"`
	Errors []struct {
		Code    int    `json:"code"`
		Msg     string `json:"msg"`
		TraceID string `json:"traceID"`
	} `json:"errors"`
}

type jKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type jTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		Flags         uint32 `json:"flags"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			TraceID string `json:"traceID"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		StartTime uint64 `json:"startTime"`
		Duration  uint64 `json:"duration"`
		Tags      []jKV  `json:"tags"`
		Logs      []struct {
			Timestamp uint64 `json:"timestamp"`
			Fields    []jKV  `json:"fields"`
		} `json:"logs"`
		ProcessID string   `json:"processID"`
		Warnings  []string `json:"warnings"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
		Tags        []jKV  `json:"tags"`
	} `json:"processes"`
	Warnings []string `json:"warnings"`
}

func (ts *testServer) jaeger(t *testing.T, path string, wantCode int) jEnvelope {
	t.Helper()
	code, hdr, body := ts.request("GET", path, nil)
	if code != wantCode {
		t.Fatalf("GET %s: %d %s, want %d", path, code, body, wantCode)
	}
	if code == 200 && hdr.Get("Content-Type") != "application/json" || code != 200 && !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: Content-Type %q", path, hdr.Get("Content-Type"))
	}
	// The envelope's keys in Jaeger's order.
	if !regexp.MustCompile(`^\{"data":.*,"total":\d+,"limit":0,"offset":0,"errors":(null|\[.*\])\}\s*$`).Match(body) {
		t.Fatalf("GET %s: not Jaeger's envelope: %.200s", path, body)
	}
	var env jEnvelope
	decodeStrict(t, path, body, &env)
	return env
}

func findTag(tags []jKV, key string) (jKV, bool) {
	for _, kv := range tags {
		if kv.Key == key {
			return kv, true
		}
	}
	return jKV{}, false
}

func TestJaegerV1(t *testing.T) {
	ts, spans := startTempo(t)
	// "charge" is also a server operation of shop (its own short trace):
	// Jaeger lists one operation per name and kind.
	other := spans[1]
	other.TraceID, other.SpanID, other.ParentSpanID = model.TraceID{7, 7, 7}, model.SpanID{7, 7, 7}, model.SpanID{}
	other.Kind, other.Links, other.Events, other.EndTimeUnixNano = model.KindServer, nil, nil, other.StartTimeUnixNano+5e6
	ts.ingest([]model.Span{other}, "")
	env := ts.jaeger(t, "/api/services", 200)
	var names []string
	json.Unmarshal(env.Data, &names)
	if slices.Sort(names); !slices.Equal(names, []string{"payments", "shop"}) || env.Total != 2 || env.Errors != nil {
		t.Fatalf("services: %+v %s", env, env.Data)
	}
	env = ts.jaeger(t, "/api/services/shop/operations", 200)
	json.Unmarshal(env.Data, &names)
	if slices.Sort(names); !slices.Equal(names, []string{"GET /", "GET /cart", "charge"}) || env.Total != 3 {
		t.Fatalf("operations: %s", env.Data)
	}
	env = ts.jaeger(t, "/api/operations?service=shop&spanKind=client", 200)
	var ops []struct {
		Name     string `json:"name"`
		SpanKind string `json:"spanKind"`
	}
	decodeStrict(t, "operations", env.Data, &ops)
	if len(ops) != 1 || ops[0].Name != "charge" || ops[0].SpanKind != "client" {
		t.Fatalf("operations of kind client: %+v", ops)
	}
	env = ts.jaeger(t, "/api/operations?service=shop", 200)
	decodeStrict(t, "operations", env.Data, &ops)
	kinds := map[string]bool{}
	for _, op := range ops {
		if op.Name == "charge" {
			kinds[op.SpanKind] = true
		}
	}
	if len(ops) != 4 || env.Total != 4 || !kinds["client"] || !kinds["server"] {
		t.Fatalf("operations by name and kind: %+v", ops)
	}
	if env := ts.jaeger(t, "/api/operations", 400); env.Errors[0].Msg != "parameter 'service' is required" || env.Errors[0].Code != 400 {
		t.Fatalf("operations without service: %+v", env)
	}

	// The trace in the UI model.
	env = ts.jaeger(t, "/api/traces/"+spans[0].TraceID.String(), 200)
	var traces []jTrace
	decodeStrict(t, "trace", env.Data, &traces)
	if len(traces) != 1 || len(traces[0].Spans) != 3 {
		t.Fatalf("trace: %s", env.Data)
	}
	tr := traces[0]
	if tr.TraceID != "2f3e010203040506" || tr.Warnings != nil { // 16 hex: the high 64 bits are zero
		t.Fatalf("trace id %q, warnings %v", tr.TraceID, tr.Warnings)
	}
	bySpan := map[string]int{}
	for i, sp := range tr.Spans {
		bySpan[sp.SpanID] = i
	}
	root, charge, pay := tr.Spans[bySpan["0101010101010101"]], tr.Spans[bySpan["0202020202020202"]], tr.Spans[bySpan["0303030303030303"]]
	if root.StartTime != spans[0].StartTimeUnixNano/1000 || root.Duration != 557000 || len(root.References) != 0 || root.Logs == nil {
		t.Fatalf("root span: %+v", root)
	}
	if kv, _ := findTag(root.Tags, "http.response.status_code"); kv.Type != "int64" || kv.Value != float64(200) {
		t.Fatalf("int tag: %+v", kv)
	}
	if kv, _ := findTag(root.Tags, "cache.hit"); kv.Type != "bool" || kv.Value != true {
		t.Fatalf("bool tag: %+v", kv)
	}
	if kv, _ := findTag(root.Tags, "span.kind"); kv.Value != "server" {
		t.Fatalf("span.kind: %+v", root.Tags)
	}
	if len(charge.References) != 2 || charge.References[0].RefType != "CHILD_OF" || charge.References[0].SpanID != "0101010101010101" ||
		charge.References[1].RefType != "FOLLOWS_FROM" || charge.References[1].TraceID != strings.Repeat("09", 16) {
		t.Fatalf("references: %+v", charge.References)
	}
	if kv, _ := findTag(charge.Tags, "retry.ratio"); kv.Type != "float64" || kv.Value != 0.25 {
		t.Fatalf("float tag: %+v", kv)
	}
	if len(charge.Logs) != 1 || charge.Logs[0].Timestamp != spans[1].Events[0].TimeUnixNano/1000 ||
		charge.Logs[0].Fields[0] != (jKV{"event", "string", "retry"}) || charge.Logs[0].Fields[1].Key != "attempt" {
		t.Fatalf("logs: %+v", charge.Logs)
	}
	if e, _ := findTag(pay.Tags, "error"); e.Value != true {
		t.Fatalf("error tag: %+v", pay.Tags)
	}
	if d, _ := findTag(pay.Tags, "otel.status_description"); d.Value != "card declined" {
		t.Fatalf("status description: %+v", pay.Tags)
	}
	if root.ProcessID == pay.ProcessID || root.ProcessID != charge.ProcessID || len(tr.Processes) != 2 {
		t.Fatalf("processes: %v, ids %s %s %s", tr.Processes, root.ProcessID, charge.ProcessID, pay.ProcessID)
	}
	if p := tr.Processes[root.ProcessID]; p.ServiceName != "shop" || len(p.Tags) != 1 || p.Tags[0] != (jKV{"deployment.environment", "string", "prod"}) {
		t.Fatalf("process of shop: %+v", p)
	}
	// The same trace by a short id and by base64; unknown: 404 envelope.
	if env := ts.jaeger(t, "/api/traces/2f3e010203040506", 200); !bytes.Contains(env.Data, []byte(`"GET /cart"`)) {
		t.Fatal("short trace id")
	}
	if env := ts.jaeger(t, "/api/traces/abc", 404); env.Errors[0] != (struct {
		Code    int    `json:"code"`
		Msg     string `json:"msg"`
		TraceID string `json:"traceID"`
	}{404, "trace not found", ""}) || string(env.Data) != "null" {
		t.Fatalf("unknown trace: %+v", env)
	}
	ts.jaeger(t, "/api/traces/not-an-id!", 400)

	// Search (Grafana always calls it): microseconds, tags as JSON.
	now := time.Now()
	base := "/api/traces?service=shop&start=" + strconv.FormatInt(now.Add(-time.Hour).UnixMicro(), 10) + "&end=" + strconv.FormatInt(now.UnixMicro(), 10)
	env = ts.jaeger(t, base+"&limit=20", 200)
	decodeStrict(t, "search", env.Data, &traces)
	if len(traces) != 3 {
		t.Fatalf("search: %d traces", len(traces))
	}
	env = ts.jaeger(t, base+"&tags="+url.QueryEscape(`{"http.response.status_code":"200"}`), 200)
	decodeStrict(t, "search by tag", env.Data, &traces)
	if len(traces) != 1 || traces[0].TraceID != "2f3e010203040506" {
		t.Fatalf("search by tag: %d traces", len(traces))
	}
	env = ts.jaeger(t, base+"&operation=charge&minDuration=200ms&maxDuration=1s", 200)
	decodeStrict(t, "search by operation and duration", env.Data, &traces)
	if len(traces) != 1 {
		t.Fatalf("search by operation and duration: %d traces", len(traces))
	}
	if env := ts.jaeger(t, base+"&operation=nothing", 200); string(env.Data) != "[]" {
		t.Fatalf("no match: %s, want []", env.Data)
	}
	for q, msg := range map[string]string{
		"/api/traces":                              "parameter 'service' is required",
		base + "&minDuration=2s&maxDuration=1s":    "'maxDuration' should be greater than 'minDuration'",
		base + "&tags=" + url.QueryEscape("{bad"):  "malformed 'tags' parameter",
		"/api/traces?service=shop&start=yesterday": "unable to parse param 'start'",
	} {
		if env := ts.jaeger(t, q, 400); !strings.Contains(env.Errors[0].Msg, msg) {
			t.Errorf("%s: %+v, want %q", q, env.Errors, msg)
		}
	}
	// traceID lookup: the unknown one is an error entry, still 200.
	env = ts.jaeger(t, "/api/traces?traceID="+spans[0].TraceID.String()+"&traceID=abc", 200)
	decodeStrict(t, "traceID lookup", env.Data, &traces)
	if len(traces) != 1 || len(env.Errors) != 1 || env.Errors[0].TraceID != "0000000000000abc" || env.Errors[0].Msg != "trace not found" {
		t.Fatalf("traceID lookup: %d traces, errors %+v", len(traces), env.Errors)
	}

	// Dependencies: shop's charge span calls payments.
	env = ts.jaeger(t, "/api/dependencies?endTs="+strconv.FormatInt(now.UnixMilli(), 10)+"&lookback=3600000", 200)
	var deps []struct {
		Parent    string `json:"parent"`
		Child     string `json:"child"`
		CallCount int64  `json:"callCount"`
	}
	decodeStrict(t, "dependencies", env.Data, &deps)
	if len(deps) != 1 || deps[0].Parent != "shop" || deps[0].Child != "payments" || deps[0].CallCount != 1 {
		t.Fatalf("dependencies: %+v", deps)
	}
	if env := ts.jaeger(t, "/api/dependencies?service=nobody", 200); string(env.Data) != "[]" {
		t.Fatalf("dependencies of an unknown service: %s", env.Data)
	}
}

func TestJaegerV3(t *testing.T) {
	ts, spans := startTempo(t)
	get := func(path string, want int, v any) []byte {
		t.Helper()
		code, _, body := ts.request("GET", path, nil)
		if code != want {
			t.Fatalf("GET %s: %d %s, want %d", path, code, body, want)
		}
		if v != nil {
			decodeStrict(t, path, body, v)
		}
		return body
	}
	var svcs struct {
		Services []string `json:"services"`
	}
	get("/api/v3/services", 200, &svcs)
	if len(svcs.Services) != 2 {
		t.Fatalf("v3 services: %v", svcs)
	}
	var ops struct {
		Operations []struct {
			Name     string `json:"name"`
			SpanKind string `json:"spanKind"`
		} `json:"operations"`
	}
	get("/api/v3/operations?service=payments", 200, &ops)
	if len(ops.Operations) != 1 || ops.Operations[0].SpanKind != "server" {
		t.Fatalf("v3 operations: %+v", ops)
	}
	// OTLP/JSON as the collector writes it: hex ids, integer enums.
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	get("/api/v3/traces/"+spans[0].TraceID.String(), 200, &res)
	if !bytes.Contains(res.Result, []byte(`"traceId":"`+spans[0].TraceID.String()+`"`)) || !bytes.Contains(res.Result, []byte(`"kind":2`)) {
		t.Fatalf("v3 trace: %.300s", res.Result)
	}
	var errBody struct {
		Error struct {
			HTTPCode int    `json:"httpCode"`
			Message  string `json:"message"`
		} `json:"error"`
	}
	get("/api/v3/traces/abc", 404, &errBody)
	if errBody.Error.HTTPCode != 404 || errBody.Error.Message != "No traces found" {
		t.Fatalf("v3 unknown trace: %+v", errBody)
	}
	now := time.Now().UTC()
	window := "query.startTimeMin=" + url.QueryEscape(now.Add(-time.Hour).Format(time.RFC3339Nano)) +
		"&query.startTimeMax=" + url.QueryEscape(now.Format(time.RFC3339Nano))
	get("/api/v3/traces?query.serviceName=payments&"+window, 200, &res)
	if b, err := otlp.DecodeJSON(res.Result); err != nil || len(b.Spans) != 3 {
		t.Fatalf("v3 search: %v %.200s", err, res.Result)
	}
	get("/api/v3/traces?query.serviceName=payments", 400, &errBody)
	if !strings.Contains(errBody.Error.Message, "query.startTimeMin and query.startTimeMax are required") {
		t.Fatalf("v3 search without a window: %+v", errBody)
	}

	// Trace summaries, as the Jaeger UI's search page validates them:
	// 32-hex trace ids, decimal-string times, services with names.
	var sums struct {
		Summaries []struct {
			TraceID              string `json:"traceId"`
			RootServiceName      string `json:"rootServiceName"`
			RootOperationName    string `json:"rootOperationName"`
			MinStartTimeUnixNano string `json:"minStartTimeUnixNano"`
			MaxEndTimeUnixNano   string `json:"maxEndTimeUnixNano"`
			SpanCount            int    `json:"spanCount"`
			ErrorSpanCount       int    `json:"errorSpanCount"`
			OrphanSpanCount      int    `json:"orphanSpanCount"`
			Services             []struct {
				Name           string `json:"name"`
				SpanCount      int    `json:"spanCount"`
				ErrorSpanCount int    `json:"errorSpanCount"`
			} `json:"services"`
		} `json:"summaries"`
	}
	// The snake_case spellings are accepted too.
	snake := strings.NewReplacer("startTimeMin", "start_time_min", "startTimeMax", "start_time_max").Replace(window)
	get("/api/v3/trace-summaries?query.service_name=shop&query.search_depth=1&"+snake, 200, &sums)
	if len(sums.Summaries) != 1 {
		t.Fatalf("snake_case search: %+v", sums)
	}
	get("/api/v3/trace-summaries?query.service_name=shop&query.searchDepth=5&"+window, 200, &sums)
	if len(sums.Summaries) != 2 {
		t.Fatalf("summaries: %+v", sums)
	}
	s0 := sums.Summaries[0]
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(s0.TraceID) || s0.RootServiceName != "shop" || s0.RootOperationName != "GET /cart" ||
		s0.MinStartTimeUnixNano != strconv.FormatUint(spans[0].StartTimeUnixNano, 10) || s0.SpanCount != 3 || s0.ErrorSpanCount != 1 ||
		len(s0.Services) != 2 || s0.Services[0].Name != "payments" || s0.Services[0].ErrorSpanCount != 1 || s0.Services[1].SpanCount != 2 {
		t.Fatalf("summary: %+v", s0)
	}
	get("/api/v3/trace-summaries?query.serviceName=nobody&"+window, 200, &sums)
	if sums.Summaries == nil || len(sums.Summaries) != 0 {
		t.Fatalf("no summaries: %+v, want []", sums)
	}
}

// TestTraceRouteServesTempoAndJaeger: /api/traces/{id} is Tempo's protobuf
// for Grafana's Tempo data source and Jaeger's JSON otherwise.
func TestTraceRouteServesTempoAndJaeger(t *testing.T) {
	ts, spans := startTempo(t)
	code, hdr, body := ts.request("GET", "/api/traces/"+spans[0].TraceID.String(), nil, "Accept", "application/protobuf")
	var td tracepb.TracesData
	if code != 200 || hdr.Get("Content-Type") != "application/protobuf" || proto.Unmarshal(body, &td) != nil || len(td.ResourceSpans) == 0 {
		t.Fatalf("protobuf: %d %s", code, hdr.Get("Content-Type"))
	}
	ts.jaeger(t, "/api/traces/"+spans[0].TraceID.String(), 200)
}
