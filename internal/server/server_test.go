package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The OTel SDK and gRPC client keep package-level goroutines alive.
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
	)
}

// testServer is a real server on loopback ports over a real store.
type testServer struct {
	t    *testing.T
	srv  *Server
	eng  *engine.Engine
	base string
}

func startServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = "127.0.0.1:0"
	}
	if opts.GRPCAddr == "" {
		opts.GRPCAddr = "127.0.0.1:0"
	}
	var opened atomic.Pointer[engine.Engine] // as cli/serve wires it
	opts.Collectors = append(opts.Collectors, engine.NewCollector(opened.Load))
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	opened.Store(eng)
	srv.SetBackend(eng)
	ts := &testServer{t: t, srv: srv, eng: eng, base: "http://" + srv.HTTPAddr()}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		eng.Close()
		http.DefaultClient.CloseIdleConnections()
	})
	return ts
}

func (ts *testServer) post(path, contentType string, body []byte, hdr ...string) (int, []byte) {
	ts.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (ts *testServer) get(path string, out any, hdr ...string) int {
	ts.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.base+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			ts.t.Fatalf("GET %s: decode %q: %v", path, b, err)
		}
	}
	return resp.StatusCode
}

type traceResp struct {
	TraceID string           `json:"trace_id"`
	Spans   []map[string]any `json:"spans"`
}

// TestSDKExportersEndToEnd sends spans with the OpenTelemetry Go SDK's OTLP
// HTTP and gRPC exporters and checks that the query API returns every field.
func TestSDKExportersEndToEnd(t *testing.T) {
	ts := startServer(t, Options{})
	ctx := context.Background()
	for _, proto := range []string{"http", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			var exp sdktrace.SpanExporter
			var err error
			if proto == "http" {
				exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(ts.srv.HTTPAddr()), otlptracehttp.WithInsecure(),
					otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
			} else {
				exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(ts.srv.GRPCAddr()), otlptracegrpc.WithInsecure(),
					otlptracegrpc.WithCompressor("gzip"))
			}
			if err != nil {
				t.Fatal(err)
			}
			res := resource.NewSchemaless(attribute.String("service.name", "checkout-"+proto), attribute.String("deployment.environment", "test"))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
			defer tp.Shutdown(ctx)
			tr := tp.Tracer("rastro.test/e2e", trace.WithInstrumentationVersion("1.2.3"))

			t0 := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)
			linkCtx := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
				SpanID:  trace.SpanID{0xbb, 1, 2, 3, 4, 5, 6, 7},
			})
			pctx, parent := tr.Start(ctx, "POST /checkout", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(t0),
				trace.WithLinks(trace.Link{SpanContext: linkCtx, Attributes: []attribute.KeyValue{attribute.String("link.kind", "retry")}}),
				trace.WithAttributes(
					attribute.String("http.method", "POST"), attribute.Int64("http.status_code", 502),
					attribute.Float64("ratio", 0.25), attribute.Bool("cached", true),
					attribute.StringSlice("tags", []string{"a", "b"}), attribute.Int64Slice("sizes", []int64{1, 2, 3}),
					attribute.Float64Slice("weights", []float64{0.5, 1.5}), attribute.BoolSlice("flags", []bool{true, false}),
				))
			parent.AddEvent("payment.declined", trace.WithTimestamp(t0.Add(time.Millisecond)),
				trace.WithAttributes(attribute.String("reason", "insufficient funds"), attribute.Int("attempt", 2)))
			parent.SetStatus(codes.Error, "upstream failed")
			_, child := tr.Start(pctx, "SELECT orders", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(t0.Add(2*time.Millisecond)))
			child.End(trace.WithTimestamp(t0.Add(5 * time.Millisecond)))
			parent.End(trace.WithTimestamp(t0.Add(10 * time.Millisecond)))
			if err := tp.ForceFlush(ctx); err != nil {
				t.Fatal(err)
			}

			var got traceResp
			if code := ts.get("/api/v1/traces/"+parent.SpanContext().TraceID().String(), &got); code != 200 {
				t.Fatalf("trace lookup: %d", code)
			}
			if len(got.Spans) != 2 {
				t.Fatalf("want 2 spans, got %d", len(got.Spans))
			}
			p, c := got.Spans[0], got.Spans[1]
			wantStr := map[string]string{
				"name": "POST /checkout", "kind": "server", "service": "checkout-" + proto, "status": "error",
				"status_message": "upstream failed", "span_id": parent.SpanContext().SpanID().String(),
				"start_time_unix_nano": fmt.Sprint(t0.UnixNano()), "end_time_unix_nano": fmt.Sprint(t0.Add(10 * time.Millisecond).UnixNano()),
				"duration_ns": "10000000",
			}
			for k, v := range wantStr {
				if fmt.Sprint(p[k]) != v {
					t.Errorf("parent %s = %v, want %v", k, p[k], v)
				}
			}
			attrs := p["attributes"].(map[string]any)
			wantAttrs := map[string]string{
				"http.method": "POST", "http.status_code": "502", "ratio": "0.25", "cached": "true",
				"tags": "[a b]", "sizes": "[1 2 3]", "weights": "[0.5 1.5]", "flags": "[true false]",
			}
			for k, v := range wantAttrs {
				if fmt.Sprint(attrs[k]) != v {
					t.Errorf("attribute %s = %v, want %v", k, attrs[k], v)
				}
			}
			resAttrs := p["resource"].(map[string]any)
			if resAttrs["deployment.environment"] != "test" || resAttrs["service.name"] != "checkout-"+proto {
				t.Errorf("resource = %v", resAttrs)
			}
			scope := p["scope"].(map[string]any)
			if scope["name"] != "rastro.test/e2e" || scope["version"] != "1.2.3" {
				t.Errorf("scope = %v", scope)
			}
			events := p["events"].([]any)
			ev := events[0].(map[string]any)
			evAttrs := ev["attributes"].(map[string]any)
			if ev["name"] != "payment.declined" || evAttrs["reason"] != "insufficient funds" || fmt.Sprint(evAttrs["attempt"]) != "2" {
				t.Errorf("event = %v", ev)
			}
			links := p["links"].([]any)
			ln := links[0].(map[string]any)
			if ln["trace_id"] != linkCtx.TraceID().String() || ln["span_id"] != linkCtx.SpanID().String() ||
				ln["attributes"].(map[string]any)["link.kind"] != "retry" {
				t.Errorf("link = %v", ln)
			}
			if c["parent_span_id"] != parent.SpanContext().SpanID().String() || c["kind"] != "client" || c["name"] != "SELECT orders" {
				t.Errorf("child = %v", c)
			}
			// The OTLP JSON rendering of the same trace names the same spans.
			var o map[string]any
			ts.get("/api/v1/traces/"+parent.SpanContext().TraceID().String()+"?format=otlp", &o)
			if !strings.Contains(fmt.Sprint(o), "POST /checkout") {
				t.Errorf("otlp rendering lacks the span: %v", o)
			}
		})
	}
}

func spansFor(n int, seed byte) []model.Span {
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("svc")}}}
	out := make([]model.Span, n)
	for i := range out {
		out[i] = model.Span{
			TraceID: model.TraceID{seed, byte(i / 3), 1}, SpanID: model.SpanID{seed, byte(i), 2},
			Name: fmt.Sprintf("op-%d", i%4), Kind: model.KindServer, Resource: res, Service: "svc",
			StartTimeUnixNano: uint64(1_700_000_000_000_000_000 + i*1000), EndTimeUnixNano: uint64(1_700_000_000_000_000_000 + i*1000 + 500),
			Attributes: []model.KeyValue{{Key: "i", Value: model.IntValue(int64(i))}},
		}
	}
	return out
}

type spansResp struct {
	Spans      []map[string]any `json:"spans"`
	NextCursor string           `json:"next_cursor"`
}

// TestVisibleOnAcknowledgement: every span is found by trace lookup and by
// search as soon as its request is acknowledged, for each ingest route.
func TestVisibleOnAcknowledgement(t *testing.T) {
	ts := startServer(t, Options{})
	routes := []struct {
		path, ctype string
		enc         func([]model.Span) []byte
	}{
		{"/v1/traces", "application/x-protobuf", otlp.EncodeProto},
		{"/v1/traces", "application/json", otlp.EncodeJSON},
		{"/v1/spans", "application/json", otlp.EncodeNative},
	}
	for i, r := range routes {
		for j := range 5 {
			spans := spansFor(6, byte(10*i+j+1))
			if code, body := ts.post(r.path, r.ctype, r.enc(spans)); code != 200 {
				t.Fatalf("%s %s: %d %s", r.path, r.ctype, code, body)
			}
			var tr traceResp
			if code := ts.get("/api/v1/traces/"+spans[0].TraceID.String(), &tr); code != 200 || len(tr.Spans) != 3 {
				t.Fatalf("%s: trace lookup right after ack: code %d, %d spans", r.ctype, code, len(tr.Spans))
			}
			var sr spansResp
			q := url.QueryEscape(fmt.Sprintf(`{ span.i = 5 && resource.service.name = "svc" }`))
			ts.get("/api/v1/spans?limit=1000&since=all&q="+q, &sr)
			found := false
			for _, s := range sr.Spans {
				if s["span_id"] == spans[5].SpanID.String() {
					found = true
				}
			}
			if !found {
				t.Fatalf("%s: span not found by search right after ack", r.ctype)
			}
		}
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// TestBadInputIsRefusedAndStoresNothing: each malformed request gets a 4xx
// with a JSON error naming the problem, and the store is unchanged.
func TestBadInputIsRefusedAndStoresNothing(t *testing.T) {
	ts := startServer(t, Options{MaxBodyBytes: 64 << 10})
	good := otlp.EncodeProto(spansFor(3, 1))
	bomb := gz(bytes.Repeat([]byte{0}, 1<<20))
	zeroID := spansFor(1, 2)
	zeroID[0].TraceID = model.TraceID{}
	cases := []struct {
		name, path, ctype string
		body              []byte
		hdr               []string
		code              int
		msg               string
	}{
		{"malformed protobuf", "/v1/traces", "application/x-protobuf", []byte{0x0a, 0xff, 0xff, 0x01}, nil, 400, "decode otlp-proto"},
		{"malformed json", "/v1/traces", "application/json", []byte(`{"resourceSpans":[`), nil, 400, "decode otlp-json"},
		{"wrong content type", "/v1/traces", "text/plain", good, nil, 415, "Content-Type"},
		{"unknown encoding", "/v1/traces", "application/x-protobuf", good, []string{"Content-Encoding", "br"}, 415, "Content-Encoding"},
		{"truncated gzip", "/v1/traces", "application/x-protobuf", gz(good)[:20], []string{"Content-Encoding", "gzip"}, 400, "gzip"},
		{"gzip bomb", "/v1/traces", "application/x-protobuf", bomb, []string{"Content-Encoding", "gzip"}, 413, "limit"},
		{"oversize body", "/v1/traces", "application/x-protobuf", make([]byte, 65<<10), nil, 413, "limit"},
		{"all-zero trace id", "/v1/traces", "application/x-protobuf", otlp.EncodeProto(zeroID), nil, 400, "trace_id"},
		{"bad native id", "/v1/spans", "application/json", []byte(`[{"trace_id":"xyz","span_id":"0102030405060708","name":"a","start_time":1,"end_time":2}]`), nil, 400, "trace"},
		{"native not an array", "/v1/spans", "application/json", []byte(`{"trace_id":"x"}`), nil, 400, "array"},
		{"bad project", "/v1/traces", "application/x-protobuf", good, []string{"X-Scope-OrgID", "../etc"}, 400, "X-Scope-OrgID"},
	}
	for _, c := range cases {
		code, body := ts.post(c.path, c.ctype, c.body, c.hdr...)
		var e struct {
			Error string `json:"error"`
		}
		if code != c.code || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s: got %d %s, want %d with %q", c.name, code, body, c.code, c.msg)
		}
	}
	var st statsJSON
	ts.get("/api/v1/stats", &st)
	if st.Spans != 0 || st.WALBytes > 4096 {
		t.Fatalf("rejected requests stored data: %+v", st)
	}
	// A malformed query filter: 400 naming the position.
	var e struct {
		Error string `json:"error"`
	}
	if code := ts.get("/api/v1/spans?q="+url.QueryEscape(`{ span.x = }`), &e); code != 400 || !strings.Contains(e.Error, "position") {
		t.Fatalf("bad filter: %d %q", code, e.Error)
	}
	if code := ts.get("/api/v1/traces/nothex", &e); code != 400 {
		t.Fatalf("bad trace id: %d", code)
	}
}

// TestPartialSuccess: spans with invalid ids are rejected individually and
// reported; the rest of the request is stored.
func TestPartialSuccess(t *testing.T) {
	ts := startServer(t, Options{})
	spans := spansFor(4, 3)
	spans[1].SpanID = model.SpanID{}
	code, body := ts.post("/v1/traces", "application/json", otlp.EncodeJSON(spans))
	if code != 200 || !strings.Contains(string(body), `"rejectedSpans":"1"`) {
		t.Fatalf("got %d %s", code, body)
	}
	// The same in protobuf, as the OTLP exporters read it.
	code, body = ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans))
	var resp coltracepb.ExportTraceServiceResponse
	if err := proto.Unmarshal(body, &resp); code != 200 || err != nil || resp.GetPartialSuccess().GetRejectedSpans() != 1 ||
		!strings.Contains(resp.GetPartialSuccess().GetErrorMessage(), "span") {
		t.Fatalf("protobuf: %d %v %+v", code, err, resp.GetPartialSuccess())
	}
	var tr traceResp
	ts.get("/api/v1/traces/"+spans[0].TraceID.String(), &tr)
	if len(tr.Spans) != 2 { // spans 0 and 2 share trace 0; span 1 was rejected
		t.Fatalf("want 2 stored spans of trace 0, got %d", len(tr.Spans))
	}
}

func TestProjectsAreIsolated(t *testing.T) {
	ts := startServer(t, Options{})
	spans := spansFor(3, 4)
	if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans), "X-Scope-OrgID", "team-a"); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	id := spans[0].TraceID.String()
	if code := ts.get("/api/v1/traces/"+id, nil); code != 404 {
		t.Fatalf("default project sees team-a's trace: %d", code)
	}
	if code := ts.get("/api/v1/traces/"+id, nil, "X-Scope-OrgID", "team-a"); code != 200 {
		t.Fatalf("team-a cannot see its trace: %d", code)
	}
}

func TestMetricsExposeIngestCounters(t *testing.T) {
	ts := startServer(t, Options{})
	ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spansFor(3, 5)))
	resp, err := http.Get(ts.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`rastro_ingest_spans_total{protocol="otlp-proto"} 3`,
		`rastro_ingest_requests_total{code="200",protocol="otlp-proto"} 1`,
		"rastro_wal_fsyncs_total", "rastro_decode_ns_total", "rastro_seals_total", "rastro_segments",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestMetricsWhileTheStoreOpens: /metrics answers before the engine is open
// (WAL replay): the engine's counters read 0, the store's sizes are absent.
func TestMetricsWhileTheStoreOpens(t *testing.T) {
	srv, err := New(Options{HTTPAddr: "127.0.0.1:0", Collectors: []prometheus.Collector{
		engine.NewCollector(func() *engine.Engine { return nil })}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.http.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, "\nrastro_wal_fsyncs_total 0\n") || !strings.Contains(body, "\nrastro_tails 0\n") ||
		strings.Contains(body, "\nrastro_segments ") {
		t.Fatalf("/metrics while the store opens: %d\n%s", rec.Code, body)
	}
}

// A body that can never be accepted gets 413 (final), not a retryable 429.
func TestOversizeGets413BeforeAdmission(t *testing.T) {
	ts := startServer(t, Options{MaxBodyBytes: 1 << 10, MaxInflightBytes: 1 << 10})
	code, _ := ts.post("/v1/traces", "application/x-protobuf", bytes.Repeat([]byte{0}, 8<<10))
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", code)
	}
}

// TestContentSearchOverHTTP: words of a prompt find its span through
// content= and the TraceQL content intrinsic; a malformed query is a 400.
func TestContentSearchOverHTTP(t *testing.T) {
	ts := startServer(t, Options{})
	spans := spansFor(3, 6)
	spans[1].Attributes = append(spans[1].Attributes, model.KeyValue{Key: "gen_ai.prompt.0.content",
		Value: model.StringValue("Где мой возврат? I asked for a refund of order 42 — 退款 please 🔥")})
	if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans)); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	for _, q := range []string{
		"content=" + url.QueryEscape("REFUND возврат"),
		"content=" + url.QueryEscape(`"order 42"`),
		"content=" + url.QueryEscape("退款 🔥"),
		"q=" + url.QueryEscape(`{ content = "refund" && resource.service.name = "svc" }`),
	} {
		var sr spansResp
		if code := ts.get("/api/v1/spans?since=all&"+q, &sr); code != 200 || len(sr.Spans) != 1 || sr.Spans[0]["span_id"] != spans[1].SpanID.String() {
			t.Fatalf("%s: code %d, %d spans", q, code, len(sr.Spans))
		}
	}
	var sr spansResp
	if ts.get("/api/v1/spans?since=all&content="+url.QueryEscape(`"42 order"`), &sr); len(sr.Spans) != 0 {
		t.Fatalf("phrase in the wrong order matched")
	}
	var e struct {
		Error string `json:"error"`
	}
	if code := ts.get("/api/v1/spans?content="+url.QueryEscape(`"unterminated`), &e); code != 400 || !strings.Contains(e.Error, "content") {
		t.Fatalf("bad content query: %d %q", code, e.Error)
	}
}

// TestSearchReportsServerTiming: span and trace searches and trace by id
// (native and OTLP JSON), and the Tempo and Jaeger query routes Grafana and
// the Jaeger UI call, carry the handler's own time as a Server-Timing header
// (what browser tools show, and what the benchmark harness reads to split a
// request's latency).
func TestSearchReportsServerTiming(t *testing.T) {
	ts := startServer(t, Options{})
	spans := spansFor(6, 7)
	if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans)); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	byID := "/api/v1/traces/" + spans[0].TraceID.String()
	for _, path := range []string{"/api/v1/spans?limit=10", "/api/v1/traces?limit=10", byID, byID + "?format=otlp",
		"/api/search?tags=" + url.QueryEscape("user.id=123456"), "/api/traces/" + spans[0].TraceID.String(), "/api/v2/search/tags",
		"/api/services", "/api/services/svc-0/operations", "/api/v1/services"} {
		resp, err := http.Get(ts.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header.Get("Server-Timing")
		ms, err := strconv.ParseFloat(strings.TrimPrefix(h, "handler;dur="), 64)
		if resp.StatusCode != 200 || !strings.HasPrefix(h, "handler;dur=") || err != nil || ms < 0 || ms > 60_000 {
			t.Fatalf("%s: status %d, Server-Timing %q", path, resp.StatusCode, h)
		}
	}
}

// TestDiscoveryWindowIsChecked: the discovery routes check since/until as
// the search routes do (a window before 1970 once meant "everything"), and
// an error about a since the user did not give says so. An unknown trace
// format is a 400 too.
func TestDiscoveryWindowIsChecked(t *testing.T) {
	ts := startServer(t, Options{})
	for path, want := range map[string]string{
		"/api/v1/services?since=1h&until=2h":                                     "is not before until",
		"/api/v1/services?since=1700-01-01T00:00:00Z&until=1960-01-01T00:00:00Z": "since: time \"1700-01-01T00:00:00Z\" is outside 1970..2261",
		"/api/v1/attributes?since=1500-01-01T00:00:00Z":                          "since: time \"1500-01-01T00:00:00Z\" is outside 1970..2261",
		"/api/v1/services/api/operations?until=2600-01-01T00:00:00Z":             "until: time",
		"/api/v1/llm/timeseries?until=1970-01-01T12:00:00Z":                      "since was not given; it defaults to 24h before until",
	} {
		var e struct{ Error string }
		if code := ts.get(path, &e); code != 400 || !strings.Contains(e.Error, want) {
			t.Errorf("GET %s: %d %q, want 400 containing %q", path, code, e.Error, want)
		}
	}
	for _, path := range []string{"/api/v1/services?since=2h&until=1h", "/api/v1/services?until=48h", "/api/v1/llm/timeseries?until=48h"} {
		if code := ts.get(path, nil); code != 200 {
			t.Errorf("GET %s (a valid window; without since, the 24 hours before until): %d", path, code)
		}
	}
}
