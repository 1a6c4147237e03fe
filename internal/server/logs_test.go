package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
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

	"github.com/rastro-dev/rastro/internal/chstore"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
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

// forEachLogBackend runs f against a fresh server over each log backend:
// the embedded engine with its log store, and ClickHouse (spans and logs on
// a real clickhouse-server, as cli/serve wires it).
func forEachLogBackend(t *testing.T, f func(t *testing.T, ts *testServer)) {
	t.Run("logstore", func(t *testing.T) { f(t, startLogsServer(t)) })
	t.Run("clickhouse", func(t *testing.T) {
		ch, err := chstore.Open(t.Context(), chstore.Options{URL: chtest.URL(t), BatchWindow: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ch.Close() })
		ts := startWith(t, ch)
		ts.srv.SetLogs(ch)
		f(t, ts)
	})
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
	forEachLogBackend(t, func(t *testing.T, ts *testServer) {
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
	})
}

// Bad requests are refused with a message that names what is wrong, and
// what was accepted before stays.
func TestLogsBadInput(t *testing.T) {
	forEachLogBackend(t, func(t *testing.T, ts *testServer) {
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
			"/api/v1/logs?query=x":               `unknown parameter \"query\"`,
			"/api/v1/logs?q=colour%3D1":          `q: log filter: position 1: unknown field \"colour\"`,
			"/api/v1/logs/tail?q=severity%3D~1":  `q: log filter`,
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
	})
}

// A backend without logs (NoLogs) answers 501 with a message, on
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
	forEachLogBackend(t, func(t *testing.T, ts *testServer) {
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
	})
}

// A live tail of logs streams the matching records as they are
// acknowledged, and refuses window and paging parameters.
func TestLogsTail(t *testing.T) {
	forEachLogBackend(t, func(t *testing.T, ts *testServer) {
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
	})
}

// A JSON array posted to /v1/logs is the native shape: the records as
// /api/v1/logs answers them, so an answer can be sent back as it is.
func TestNativeLogs(t *testing.T) {
	forEachLogBackend(t, func(t *testing.T, ts *testServer) {
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
	})
}

// An erasure by query erases the log records of every trace it covers,
// before it answers, in the buffer and in sealed segments (on ClickHouse,
// hidden at once, removed by a mutation), and no others.
func TestEraseByQueryErasesItsTracesLogs(t *testing.T) {
	forEachLogBackend(t, testEraseByQueryErasesItsTracesLogs)
}

// sealLogs seals the log backend's write buffer, when it has one, so that
// what follows lands in a new segment.
func sealLogs(t *testing.T, ts *testServer) {
	t.Helper()
	if s, ok := ts.srv.logs.Load().LogBackend.(interface{ Seal() error }); ok {
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
	}
}

func testEraseByQueryErasesItsTracesLogs(t *testing.T, ts *testServer) {
	now := uint64(time.Now().Add(-time.Minute).UnixNano())
	var spans []model.Span
	var recs []model.LogRecord
	owner := map[string]string{} // body -> user of its trace ("" for none)
	for i := range 60 {
		trace := model.TraceID{0xee, byte(i), 1}
		user := []string{"u_42", "u_7", "u_9"}[i%3]
		spans = append(spans, model.Span{TraceID: trace, SpanID: model.SpanID{1, byte(i)}, Name: "chat", StartTimeUnixNano: now, EndTimeUnixNano: now + 5,
			Attributes: []model.KeyValue{{Key: "user.id", Value: model.StringValue(user)}}, Resource: &model.Resource{}, Scope: &model.Scope{}})
		for j := range 20 {
			body := fmt.Sprintf("trace %d record %d", i, j)
			owner[body] = user
			recs = append(recs, model.LogRecord{TimeUnixNano: now + uint64(j), TraceID: trace, Body: model.StringValue(body), Resource: &model.Resource{}, Scope: &model.Scope{}})
		}
	}
	recs = append(recs, model.LogRecord{TimeUnixNano: now, Body: model.StringValue("no trace"), Resource: &model.Resource{}, Scope: &model.Scope{}})
	owner["no trace"] = ""
	if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans)); code != 200 {
		t.Fatalf("spans: %d %s", code, body)
	}
	// Half the records before a seal (into segments), half after (in the buffer).
	for i, part := range [][]model.LogRecord{recs[:len(recs)/2], recs[len(recs)/2:]} {
		if code, body := ts.post("/v1/logs", "application/x-protobuf", otlp.EncodeLogsProto(part)); code != 200 {
			t.Fatalf("logs: %d %s", code, body)
		}
		if i == 0 {
			sealLogs(t, ts)
		}
	}
	if code, body := ts.post("/v1/logs", "application/x-protobuf", otlp.EncodeLogsProto([]model.LogRecord{{TimeUnixNano: now, TraceID: model.TraceID{0xee, 0, 1},
		Body: model.StringValue("trace 0 late record"), Resource: &model.Resource{}, Scope: &model.Scope{}}})); code != 200 {
		t.Fatalf("logs: %d %s", code, body)
	}
	owner["trace 0 late record"] = "u_42"
	code, body := ts.post("/api/v1/erase", "application/json", []byte(`{"query": "{ span.user.id = \"u_42\" }"}`))
	if code != http.StatusAccepted {
		t.Fatalf("erase: %d %s", code, body)
	}
	var got apiLogs
	if code := ts.get("/api/v1/logs?since=all&limit=10000", &got); code != 200 {
		t.Fatalf("logs: %d %s", code, got.Error)
	}
	left := map[string]bool{}
	for _, r := range got.Logs {
		left[r.Body.(string)] = true
	}
	for b, user := range owner {
		if user == "u_42" && left[b] {
			t.Errorf("%q of a trace of u_42 is still there", b)
		}
		if user != "u_42" && !left[b] {
			t.Errorf("%q (user %q) was erased", b, user)
		}
	}
	// Records that arrive after the erasure are kept, as for a trace.
	if code, body := ts.post("/v1/logs", "application/x-protobuf", otlp.EncodeLogsProto([]model.LogRecord{{TimeUnixNano: now, TraceID: model.TraceID{0xee, 0, 1},
		Body: model.StringValue("after"), Resource: &model.Resource{}, Scope: &model.Scope{}}})); code != 200 {
		t.Fatalf("logs: %d %s", code, body)
	}
	got = apiLogs{}
	if ts.get("/api/v1/traces/"+model.TraceID{0xee, 0, 1}.String()+"/logs", &got); len(got.Logs) != 1 || got.Logs[0].Body != "after" {
		t.Errorf("the erased trace's logs after the erasure: %+v, want only the later record", got.Logs)
	}
}

// The q filter through the API equals the filter applied to every record
// by hand, for random filters over a random corpus spread over the buffer
// and sealed segments (on ClickHouse, its table) (the filter's hints let the store skip blocks; they
// must never skip a match).
func TestLogFilterQueryEqualsBruteForce(t *testing.T) {
	forEachLogBackend(t, testLogFilterQueryEqualsBruteForce)
}

func testLogFilterQueryEqualsBruteForce(t *testing.T, ts *testServer) {
	rng := rand.New(rand.NewPCG(7, 8))
	services := []string{"checkout", "auth", "batch"}
	traces := []string{"5b8efff798038103d269b633813fc60c", "0af7651916cd43dd8448eb211c80319c"}
	t0 := uint64(time.Now().Add(-time.Hour).UnixNano())
	var all []model.LogRecord
	for batch := range 12 {
		var recs []model.LogRecord
		for i := range 200 {
			n := batch*200 + i
			svc := services[rng.IntN(len(services))]
			r := model.LogRecord{
				TimeUnixNano:   t0 + uint64(n)*1e6,
				SeverityNumber: model.SeverityNumber(rng.IntN(25)),
				Body:           model.StringValue(fmt.Sprintf("record %d %s", n, []string{"ok", "timed out", "declined"}[rng.IntN(3)])),
				Attributes: []model.KeyValue{{Key: "order.id", Value: model.IntValue(int64(rng.IntN(20)))},
					{Key: "region", Value: model.StringValue([]string{"eu", "us"}[rng.IntN(2)])}},
				Resource: &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(svc)}}},
				Scope:    &model.Scope{Name: "s"},
				Service:  svc,
			}
			if rng.IntN(2) == 0 {
				r.TraceID, _ = model.ParseTraceID(traces[rng.IntN(2)])
			}
			recs = append(recs, r)
		}
		if code, body := ts.post("/v1/logs", "application/x-protobuf", otlp.EncodeLogsProto(recs)); code != 200 {
			t.Fatalf("post: %d %s", code, body)
		}
		if batch%3 == 2 {
			sealLogs(t, ts) // segments and the buffer both
		}
		all = append(all, recs...)
	}
	conds := []string{`severity >= warn`, `severity > 9`, `severity = 17`, `severity < 13`, `service = "checkout"`, `service != "auth"`,
		`trace_id = "` + traces[0] + `"`, `trace_id = nil`, `.order.id = 7`, `.order.id >= 15`, `.region = "eu"`, `body =~ ".*timed out"`,
		`resource.service.name = "batch"`, `service = "absent"`, `.order.id = 99`}
	for range 150 {
		var b strings.Builder
		for j := range 1 + rng.IntN(3) {
			if j > 0 {
				b.WriteString([]string{" && ", " || "}[rng.IntN(2)])
			}
			if rng.IntN(6) == 0 {
				b.WriteString("!")
			}
			b.WriteString(conds[rng.IntN(len(conds))])
		}
		q := "{ " + b.String() + " }"
		f, err := query.ParseLogFilter(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		want := map[string]bool{}
		for i := range all {
			if f.Match(&all[i]) {
				want[all[i].Body.Str] = true
			}
		}
		var got apiLogs
		if code := ts.get("/api/v1/logs?since=all&limit=10000&q="+url.QueryEscape(q), &got); code != 200 {
			t.Fatalf("%s: %d %s", q, code, got.Error)
		}
		if len(got.Logs) != len(want) {
			t.Fatalf("%s: %d records, by hand %d", q, len(got.Logs), len(want))
		}
		for _, r := range got.Logs {
			if !want[r.Body.(string)] {
				t.Fatalf("%s: %q is not a match", q, r.Body)
			}
		}
	}
}
