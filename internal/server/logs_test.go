package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// startLogsServer is startServer with a log store attached, as cli/serve wires it.
func startLogsServer(t *testing.T) *testServer {
	t.Helper()
	ts := startServer(t, Options{})
	ls, err := logstore.Open(logstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.SetLogs(ls)
	t.Cleanup(func() { ls.Close() })
	return ts
}

type apiLog struct {
	Time         string            `json:"time"`
	TimeUnixNano uint64            `json:"time_unix_nano"`
	Severity     string            `json:"severity"`
	SeverityNum  int               `json:"severity_number"`
	SeverityText string            `json:"severity_text"`
	Service      string            `json:"service"`
	Body         any               `json:"body"`
	Attributes   map[string]any    `json:"attributes"`
	Resource     map[string]any    `json:"resource"`
	TraceID      string            `json:"trace_id"`
	SpanID       string            `json:"span_id"`
	Scope        map[string]string `json:"scope"`
}

type apiLogs struct {
	Logs       []apiLog `json:"logs"`
	NextCursor string   `json:"next_cursor"`
	Error      string   `json:"error"`
}

// The OpenTelemetry Go SDK's log exporters, over HTTP and gRPC, store
// records that come back by words, by trace and by severity, with their
// body, attributes, resource, scope and span context.
func TestLogsFromOTelSDK(t *testing.T) {
	ts := startLogsServer(t)
	ctx := context.Background()
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	spanCtx := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	at := time.Now().Add(-time.Hour).Truncate(time.Second) // inside the default window (the last 24h)

	for _, transport := range []string{"http", "grpc"} {
		var exp sdklog.Exporter
		var err error
		if transport == "http" {
			exp, err = otlploghttp.New(ctx, otlploghttp.WithEndpoint(ts.srv.HTTPAddr()), otlploghttp.WithInsecure())
		} else {
			exp, err = otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(ts.srv.GRPCAddr()), otlploggrpc.WithInsecure())
		}
		if err != nil {
			t.Fatal(err)
		}
		lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)),
			sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout-"+transport))))
		logger := lp.Logger("payments", otellog.WithInstrumentationVersion("1.2.3"))
		var rec otellog.Record
		rec.SetTimestamp(at)
		rec.SetSeverity(otellog.SeverityError)
		rec.SetSeverityText("ERROR")
		rec.SetBody(attribute.StringValue("payment declined for order 42 over " + transport))
		rec.AddAttributes(attribute.String("user.id", "u7"), attribute.Int("attempt", 3))
		logger.Emit(spanCtx, rec)
		var info otellog.Record
		info.SetTimestamp(at.Add(time.Second))
		info.SetSeverity(otellog.SeverityInfo)
		info.SetBody(attribute.MapValue(attribute.String("msg", "retry scheduled"), attribute.Int("delay_ms", 250)))
		logger.Emit(ctx, info)
		if err := lp.Shutdown(ctx); err != nil {
			t.Fatalf("%s exporter: %v", transport, err)
		}
	}

	var got apiLogs
	if code := ts.get("/api/v1/logs?content=declined+order", &got); code != 200 || len(got.Logs) != 2 {
		t.Fatalf("content search: %d, %d logs (%s), want 2", code, len(got.Logs), got.Error)
	}
	l := got.Logs[0]
	if !strings.HasPrefix(l.Service, "checkout-") || l.Severity != "ERROR" || l.SeverityNum != 17 || l.SeverityText != "ERROR" ||
		l.TraceID != traceID.String() || l.SpanID != spanID.String() || l.Attributes["user.id"] != "u7" || l.Attributes["attempt"] != json.Number("3") ||
		l.Scope["name"] != "payments" || l.Scope["version"] != "1.2.3" || l.TimeUnixNano != uint64(at.UnixNano()) ||
		!strings.HasPrefix(l.Body.(string), "payment declined for order 42 over ") {
		t.Fatalf("stored record comes back as %+v", l)
	}
	// A trace's logs; the structured body keeps its shape.
	got = apiLogs{}
	if code := ts.get("/api/v1/traces/"+traceID.String()+"/logs", &got); code != 200 || len(got.Logs) != 2 {
		t.Fatalf("trace logs: %d, %d logs", code, len(got.Logs))
	}
	got = apiLogs{}
	if code := ts.get("/api/v1/logs?severity=warn", &got); code != 200 || len(got.Logs) != 2 {
		t.Fatalf("severity >= WARN: %d, %d logs, want the 2 errors", code, len(got.Logs))
	}
	got = apiLogs{}
	if code := ts.get("/api/v1/logs?service=checkout-grpc&limit=1", &got); code != 200 || len(got.Logs) != 1 || got.NextCursor == "" {
		t.Fatalf("first page of checkout-grpc: %d, %+v", code, got)
	}
	if body, ok := got.Logs[0].Body.(map[string]any); !ok || body["msg"] != "retry scheduled" || body["delay_ms"] != json.Number("250") {
		t.Fatalf("newest checkout-grpc record's body = %#v, want the map", got.Logs[0].Body)
	}
	cursor := got.NextCursor
	got = apiLogs{}
	if code := ts.get("/api/v1/logs?service=checkout-grpc&limit=1&cursor="+cursor, &got); code != 200 || len(got.Logs) != 1 ||
		got.Logs[0].Severity != "ERROR" || got.NextCursor != "" {
		t.Fatalf("second page: %d, %+v", code, got)
	}
}

// Bad requests are refused with a message that names what is wrong, and
// what was accepted before stays.
func TestLogsBadInput(t *testing.T) {
	ts := startLogsServer(t)
	good := otlp.EncodeLogsProto([]model.LogRecord{{TimeUnixNano: 1, Body: model.StringValue("kept"), Resource: &model.Resource{}, Scope: &model.Scope{}}})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good)
	zw.Close()
	if code, body := ts.post("/v1/logs", "application/x-protobuf", gz.Bytes(), "Content-Encoding", "gzip"); code != 200 {
		t.Fatalf("good gzipped request: %d %s", code, body)
	}
	for _, c := range []struct {
		name, ctype, body string
		code              int
		want              string
	}{
		{"wrong content type", "text/plain", "x", 415, "not supported on /v1/logs"},
		{"malformed JSON", "application/json", `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":7}]}]}]}`, 400, "logRecords[0].body"},
		{"every record rejected", "application/json", `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"abcd"}]}]}]}`, 400, "trace_id must be empty or 16 bytes"},
		{"truncated protobuf", "application/x-protobuf", string(good[:len(good)-2]), 400, "decode logs request"},
	} {
		code, body := ts.post("/v1/logs", c.ctype, []byte(c.body))
		if code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want %d naming %q", c.name, code, body, c.code, c.want)
		}
	}
	// Some records rejected: the others are stored and the answer says which.
	code, body := ts.post("/v1/logs", "application/json", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[
		{"timeUnixNano":"2","body":{"stringValue":"also kept"}},{"spanId":"12"}]}]}]}`))
	var partial struct {
		PartialSuccess struct {
			RejectedLogRecords string `json:"rejectedLogRecords"`
			ErrorMessage       string `json:"errorMessage"`
		} `json:"partialSuccess"`
	}
	if json.Unmarshal(body, &partial); code != 200 || partial.PartialSuccess.RejectedLogRecords != "1" ||
		!strings.Contains(partial.PartialSuccess.ErrorMessage, "logRecords[1]: span_id must be empty or 8 bytes") {
		t.Fatalf("partial success: %d %s", code, body)
	}
	for path, want := range map[string]string{
		"/api/v1/logs?severity=loud":         `severity \"loud\"`,
		"/api/v1/logs?limit=0":               "limit",
		"/api/v1/logs?cursor=nope":           "bad cursor",
		"/api/v1/logs?q=x":                   `unknown parameter \"q\"`,
		"/api/v1/logs?since=2h&until=3h":     "until must be after since",
		"/api/v1/traces/xyz/logs":            "trace id",
		"/api/v1/logs?trace_id=" + "00":      "trace id",
		"/api/v1/logs?span_id=0000000000000": "span id",
	} {
		var out apiLogs
		req, _ := http.NewRequest("GET", ts.base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(out.Error, strings.ReplaceAll(want, `\"`, `"`)) {
			t.Errorf("GET %s: %d %q, want 400 naming %s", path, resp.StatusCode, out.Error, want)
		}
	}
	var got apiLogs
	if code := ts.get("/api/v1/logs?since=all", &got); code != 200 || len(got.Logs) != 2 {
		t.Fatalf("after the bad requests: %d, %d logs, want the 2 accepted", code, len(got.Logs))
	}
}

// A backend without logs (ClickHouse) answers 501 with a message, on
// ingest and on queries, over HTTP and gRPC.
func TestLogsNotImplementedWithoutLogStore(t *testing.T) {
	ts := startServer(t, Options{})
	ts.srv.NoLogs()
	code, body := ts.post("/v1/logs", "application/json", []byte(`{}`))
	if code != http.StatusNotImplemented || !strings.Contains(string(body), "not built for this storage backend") {
		t.Fatalf("POST /v1/logs: %d %s", code, body)
	}
	var out apiLogs
	if code := ts.get("/api/v1/logs", &out); code != http.StatusNotImplemented || out.Error == "" {
		t.Fatalf("GET /api/v1/logs: %d %+v", code, out)
	}
	conn, err := grpc.NewClient(ts.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = collogspb.NewLogsServiceClient(conn).Export(context.Background(), &collogspb.ExportLogsServiceRequest{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "not built for this storage backend") {
		t.Fatalf("gRPC export without a log store: %v, want Unimplemented with a message", err)
	}
}

// Erasing a trace erases its log records too.
func TestEraseTraceErasesItsLogs(t *testing.T) {
	ts := startLogsServer(t)
	trace := model.TraceID{0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	span := model.Span{TraceID: trace, SpanID: model.SpanID{1}, Name: "chat", StartTimeUnixNano: 1e18, EndTimeUnixNano: 1e18 + 5,
		Resource: &model.Resource{}, Scope: &model.Scope{}}
	if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto([]model.Span{span})); code != 200 {
		t.Fatalf("span: %d %s", code, body)
	}
	logs := otlp.EncodeLogsProto([]model.LogRecord{
		{TimeUnixNano: 1e18, TraceID: trace, Body: model.StringValue("the user's prompt"), Resource: &model.Resource{}, Scope: &model.Scope{}},
		{TimeUnixNano: 1e18, Body: model.StringValue("unrelated"), Resource: &model.Resource{}, Scope: &model.Scope{}},
	})
	if code, body := ts.post("/v1/logs", "application/x-protobuf", logs); code != 200 {
		t.Fatalf("logs: %d %s", code, body)
	}
	req, _ := http.NewRequest("DELETE", ts.base+"/api/v1/traces/"+trace.String(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE trace: %d", resp.StatusCode)
	}
	var got apiLogs
	if code := ts.get("/api/v1/traces/"+trace.String()+"/logs", &got); code != 200 || len(got.Logs) != 0 {
		t.Fatalf("the erased trace's logs: %d, %d records, want none", code, len(got.Logs))
	}
	got = apiLogs{}
	if code := ts.get("/api/v1/logs?since=all", &got); code != 200 || len(got.Logs) != 1 || got.Logs[0].Body != "unrelated" {
		t.Fatalf("the other record: %d, %+v", code, got.Logs)
	}
}

// A live tail of logs streams the matching records as they are
// acknowledged, and refuses window and paging parameters.
func TestLogsTail(t *testing.T) {
	ts := startLogsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.base+"/api/v1/logs/tail?severity=error&content=declined", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("tail: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	if err != nil || line != ": tail open\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	mk := func(sev model.SeverityNumber, body string) model.LogRecord {
		return model.LogRecord{TimeUnixNano: 1, SeverityNumber: sev, Body: model.StringValue(body), Resource: &model.Resource{}, Scope: &model.Scope{}}
	}
	body := otlp.EncodeLogsProto([]model.LogRecord{mk(9, "payment declined"), mk(17, "card declined"), mk(17, "disk full")})
	if code, b := ts.post("/v1/logs", "application/x-protobuf", body); code != 200 {
		t.Fatalf("post: %d %s", code, b)
	}
	var event, data string
	for event == "" || data == "" {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event: "))
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	var got apiLogs
	if err := json.Unmarshal([]byte(data), &got); err != nil || event != "logs" || len(got.Logs) != 1 || got.Logs[0].Body != "card declined" {
		t.Fatalf("event %q data %s: want only the error record with the word", event, data)
	}
	cancel()
	for _, p := range []string{"since=1h", "limit=5", "cursor=1.2", "max_rate=0", "severity=loud"} {
		var out apiLogs
		if code := ts.get("/api/v1/logs/tail?"+p, &out); code != 400 || out.Error == "" {
			t.Errorf("tail?%s: %d %q, want 400 with a message", p, code, out.Error)
		}
	}
}

// A JSON array posted to /v1/logs is the native shape: the records as
// /api/v1/logs answers them, so an answer can be sent back as it is.
func TestNativeLogs(t *testing.T) {
	ts := startLogsServer(t)
	at := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	code, body := ts.post("/v1/logs", "application/json", []byte(`[
	 {"time":"`+at+`","severity":"error","service":"checkout","body":{"msg":"card declined","code":51},"attributes":{"order.id":42}},
	 {"time":"`+at+`","severity":"info","service":"checkout","body":"retrying","trace_id":"abc"}]`))
	if code != 200 || string(body) != `{"accepted":1,"rejected":1,"error":"[1]: trace_id must be 32 hex digits, got 3"}`+"\n" {
		t.Fatalf("native post: %d %s", code, body)
	}
	var got struct {
		Logs []json.RawMessage `json:"logs"`
	}
	if code := ts.get("/api/v1/logs?content=declined", &got); code != 200 || len(got.Logs) != 1 {
		t.Fatalf("search: %d, %d records", code, len(got.Logs))
	}
	// The answer's record, sent back, is stored again as the same record.
	resend := append(append([]byte("["), got.Logs[0]...), ']')
	if code, b := ts.post("/v1/logs", "application/json", resend); code != 200 || string(b) != `{"accepted":1}`+"\n" {
		t.Fatalf("resend: %d %s", code, b)
	}
	var again struct {
		Logs []json.RawMessage `json:"logs"`
	}
	ts.get("/api/v1/logs?content=declined", &again)
	if len(again.Logs) != 2 || !bytes.Equal(again.Logs[0], again.Logs[1]) {
		t.Fatalf("the record sent back differs:\n%s\n%s", again.Logs[0], again.Logs[len(again.Logs)-1])
	}
	if code, b := ts.post("/v1/logs", "application/json", []byte(`[{"severity":"loud"}]`)); code != 400 || !strings.Contains(string(b), `severity: unknown value \"loud\"`) {
		t.Fatalf("bad native record: %d %s", code, b)
	}
}
