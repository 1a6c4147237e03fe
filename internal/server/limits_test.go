package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// metricValue is the value of one counter or gauge series.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// waitFor polls cond until it holds, failing the test at the deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blockingBackend holds every span search until release is closed (or the
// query's context ends), telling entered as each starts.
type blockingBackend struct {
	store.Backend
	entered chan struct{}
	release chan struct{}
}

func newBlockingBackend(b store.Backend) *blockingBackend {
	return &blockingBackend{Backend: b, entered: make(chan struct{}, 64), release: make(chan struct{})}
}

func (b *blockingBackend) SearchSpans(ctx context.Context, project string, f *query.Filter, limit int, cur *store.Cursor) ([]model.Span, *store.Cursor, store.Result, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, nil, store.Result{}, fmt.Errorf("search spans: %w", ctx.Err())
	}
	return b.Backend.SearchSpans(ctx, project, f, limit, cur)
}

func TestLimitOptionsValidate(t *testing.T) {
	o := Options{HTTPAddr: "127.0.0.1:0"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.ReadHeaderTimeout != DefaultReadHeaderTimeout || o.ReadTimeout != DefaultReadTimeout || o.WriteTimeout != DefaultWriteTimeout ||
		o.IdleTimeout != DefaultIdleTimeout || o.MaxHeaderBytes != DefaultMaxHeaderBytes || o.MaxConcurrentQueries != DefaultMaxConcurrentQueries ||
		o.QueryTimeout != DefaultQueryTimeout || o.GRPCMaxStreams != DefaultGRPCMaxStreams {
		t.Fatalf("defaults not filled: %+v", o)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{WriteTimeout: time.Second, QueryTimeout: time.Second}, "must exceed the query timeout"},
		{Options{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Second}, "above the read timeout"},
		{Options{IdleTimeout: -time.Second}, "idle timeout -1s is negative"},
		{Options{MaxConcurrentQueries: -1}, "must not be negative"},
	} {
		c.o.HTTPAddr = "127.0.0.1:0"
		if err := c.o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.o, err, c.want)
		}
	}
}

// Queries beyond the cap get 429 with Retry-After; ingest, health, metrics
// and the live tail are not queries and go on.
func TestQueryCap(t *testing.T) {
	ts := startServer(t, Options{MaxConcurrentQueries: 2})
	bb := newBlockingBackend(ts.eng)
	ts.srv.SetBackend(bb)
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := http.Get(ts.base + "/api/v1/spans?since=1h")
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for range 2 {
		select {
		case <-bb.entered:
		case <-time.After(20 * time.Second):
			t.Fatal("the first two queries did not start")
		}
	}
	for _, path := range []string{"/api/v1/spans?since=1h", "/api/v1/services", "/api/search?q=%7B%7D", "/api/traces?service=svc-a"} {
		code, hdr, body := ts.request("GET", path, nil)
		wantError(t, path, code, hdr, body, http.StatusTooManyRequests, "--max-concurrent-queries")
		if hdr.Get("Retry-After") != "1" {
			t.Errorf("%s: Retry-After %q", path, hdr.Get("Retry-After"))
		}
	}
	if got := metricValue(ts.srv.met.queriesRefused); got != 4 {
		t.Errorf("rastro_queries_refused_total %v, want 4", got)
	}
	if got := metricValue(ts.srv.met.queriesRunning); got != 2 {
		t.Errorf("rastro_queries_running %v, want 2", got)
	}
	ts.ingest(recentSpans(4, 3), "")
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _, body := ts.request("GET", path, nil); code != 200 {
			t.Errorf("GET %s while the query cap is full: %d %s", path, code, body)
		}
	}
	openTail(t, ts, url.Values{})

	close(bb.release)
	for range 2 {
		if c := <-codes; c != 200 {
			t.Errorf("a query held at the cap answered %d", c)
		}
	}
	if code, _, body := ts.request("GET", "/api/v1/spans?since=1h", nil); code != 200 {
		t.Errorf("a query after the cap freed: %d %s", code, body)
	}
	_, _, metrics := ts.request("GET", "/metrics", nil)
	for _, want := range []string{"\nrastro_queries_refused_total 4\n", "\nrastro_queries_running 0\n"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// A query past its time budget is stopped by its context (the store honours
// it) and answered 503 with a message naming the budget.
func TestQueryTimeBudget(t *testing.T) {
	t.Run("blocked", func(t *testing.T) {
		ts := startServer(t, Options{QueryTimeout: 100 * time.Millisecond})
		ts.srv.SetBackend(newBlockingBackend(ts.eng))
		code, hdr, body := ts.request("GET", "/api/v1/spans?since=1h", nil)
		wantError(t, "blocked search", code, hdr, body, http.StatusServiceUnavailable, "time budget of 100ms (--query-timeout)")
		if got := metricValue(ts.srv.met.queryTimeouts.WithLabelValues("spans")); got != 1 {
			t.Errorf("rastro_query_timeouts_total{route=spans} %v, want 1", got)
		}
	})
	t.Run("engine", func(t *testing.T) {
		// A budget that has run out before the store is asked: the engine
		// checks the context and stops at once.
		ts := startServer(t, Options{QueryTimeout: time.Nanosecond})
		ts.ingest(recentSpans(40, 4), "")
		for _, path := range []string{"/api/v1/spans?since=1h&limit=10000", "/api/v1/traces?since=1h&limit=10000",
			"/api/v1/traces?since=1h&q=" + url.QueryEscape("{ } >> { }")} {
			code, hdr, body := ts.request("GET", path, nil)
			wantError(t, path, code, hdr, body, http.StatusServiceUnavailable, "--query-timeout")
		}
	})
	t.Run("huge limit", func(t *testing.T) {
		// A query over everything with a huge limit is refused or capped,
		// never run unbounded.
		ts := startServer(t, Options{})
		ts.ingest(recentSpans(40, 5), "")
		code, hdr, body := ts.request("GET", "/api/v1/spans?since=30d&limit=1000000", nil)
		wantError(t, "rastro limit", code, hdr, body, http.StatusBadRequest, "limit: invalid limit \"1000000\": want an integer from 1 to 10000")
		for _, path := range []string{"/api/search?limit=1000000", "/api/traces?service=svc-a&limit=1000000&lookback=30d"} {
			if code, _, body := ts.request("GET", path, nil); code != 200 {
				t.Errorf("%s: %d %s", path, code, body)
			}
		}
	})
}

// The live tail is exempt from the read and write timeouts: it keeps
// streaming after both have passed.
func TestTailOutlivesServerTimeouts(t *testing.T) {
	opts := Options{ReadHeaderTimeout: 50 * time.Millisecond, ReadTimeout: 100 * time.Millisecond,
		QueryTimeout: 100 * time.Millisecond, WriteTimeout: 200 * time.Millisecond}
	ts := startServer(t, opts)
	events, _ := openTail(t, ts, url.Values{})
	// Let both deadlines pass (the stream was opened before the timer).
	<-time.After(3 * opts.WriteTimeout)
	ts.ingest(spansFor(3, 6), "")
	if got := nextSpans(t, events); len(got) != 3 {
		t.Fatalf("tail after the timeouts: %v", got)
	}
	// A plain request on the same server is still bound by them: a body
	// slower than the read timeout is cut.
	conn := dialRaw(t, ts)
	fmt.Fprintf(conn, "POST /v1/spans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	if got := readStatus(t, conn); got != http.StatusRequestTimeout {
		t.Fatalf("slow body: status %d, want 408", got)
	}
}

func dialRaw(t *testing.T, ts *testServer) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", ts.srv.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readStatus reads one response's status code from a raw connection, or 0
// when the server closed it without answering; it fails the test when the
// server does neither within 20 s.
func readStatus(t *testing.T, conn net.Conn) int {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the server neither answered nor closed the connection")
		}
		return 0 // closed (EOF or reset) without an answer
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Slowloris: many connections that send their headers slowly or not at all
// do not keep others from being served, and each is closed at the
// read-header timeout, before it finishes, with no answer.
func TestSlowHeadersAreCutOff(t *testing.T) {
	ts := startServer(t, Options{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second})
	const silent, dribblers = 100, 10
	var conns []net.Conn
	for range silent {
		c := dialRaw(t, ts)
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		conns = append(conns, c)
	}
	// A dribbler sends one byte every 20 ms: its headers would take 6 s,
	// far past the read-header timeout.
	header := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 250) + "\r\n\r\n"
	finished := make(chan bool, dribblers)
	for range dribblers {
		c := dialRaw(t, ts)
		conns = append(conns, c)
		go func() {
			for i := range len(header) {
				if _, err := c.Write([]byte{header[i]}); err != nil {
					finished <- false
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			finished <- true
		}()
	}
	waitFor(t, "the slow connections to be open", func() bool {
		return metricValue(ts.srv.met.connections.WithLabelValues("new")) >= silent+dribblers
	})
	// Others are served meanwhile: health, ingest, a query.
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for _, path := range []string{"/healthz", "/api/v1/services"} {
		resp, err := client.Get(ts.base + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s beside the slow connections: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	ts.ingest(spansFor(3, 7), "")
	for i, c := range conns {
		// Go's server closes a connection whose headers time out without
		// an answer, unless the deadline falls inside the request line or
		// a header's name, where what it read does not parse: then it
		// answers 400 and closes (a dribbler on a busy host).
		if got := readStatus(t, c); got != 0 && !(i >= silent && got == http.StatusBadRequest) {
			t.Errorf("slow connection %d was answered %d; want it closed", i, got)
		}
	}
	for range dribblers {
		if <-finished {
			t.Error("a dribbler sent its whole header before the server closed it")
		}
	}
	waitFor(t, "the slow connections to be counted closed", func() bool {
		return metricValue(ts.srv.met.connsUnused) >= silent+dribblers &&
			metricValue(ts.srv.met.connections.WithLabelValues("new")) == 0
	})
}

// Slow bodies hold only the bytes they sent (admission follows the bytes
// that arrive, not the declared length): they cannot take the in-flight
// budget from others, and each is cut at the read timeout with 408.
func TestSlowBodiesHoldOnlyWhatTheySent(t *testing.T) {
	ts := startServer(t, Options{MaxBodyBytes: 1 << 20, MaxInflightBytes: 1 << 20, ReadHeaderTimeout: time.Second, ReadTimeout: 3 * time.Second})
	const slow = 16
	var conns []net.Conn
	for range slow {
		c := dialRaw(t, ts)
		// Each declares the largest body and sends 100 bytes of it.
		fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n%s", 1<<20, strings.Repeat("\x00", 100))
		conns = append(conns, c)
	}
	// Each holds its first buffer, 32 KiB: half the budget in all, where
	// admitting the declared lengths would have given all of it to one.
	waitFor(t, "every slow body to be admitted", func() bool { return ts.srv.inflight.Load() == slow*32<<10 })
	ts.ingest(spansFor(50, 8), "")
	if code, body := ts.post("/v1/traces", "application/x-protobuf", bigRequest(256<<10)); code != 200 {
		t.Fatalf("a large body beside the slow ones: %d %s", code, body)
	}
	for i, c := range conns {
		if got := readStatus(t, c); got != http.StatusRequestTimeout {
			t.Errorf("slow body %d: status %d, want 408", i, got)
		}
	}
	waitFor(t, "the slow bodies' bytes to be released", func() bool { return ts.srv.inflight.Load() == 0 })
	if got := metricValue(ts.srv.met.rejected.WithLabelValues("read_timeout")); got != slow {
		t.Errorf("rastro_ingest_rejected_total{reason=read_timeout} %v, want %d", got, slow)
	}
}

// A body larger than the in-flight budget left is refused with 429 as it
// grows past it, and what it held is released.
func TestIngestAdmissionWhileReading(t *testing.T) {
	ts := startServer(t, Options{MaxBodyBytes: 1 << 20, MaxInflightBytes: 1 << 20})
	ts.srv.inflight.Add(900 << 10) // most of the budget is taken
	code, body := ts.post("/v1/traces", "application/x-protobuf", bigRequest(512<<10))
	if code != http.StatusTooManyRequests {
		t.Fatalf("status %d %s, want 429", code, body)
	}
	ts.srv.inflight.Add(-900 << 10)
	waitFor(t, "the refused body's bytes to be released", func() bool { return ts.srv.inflight.Load() == 0 })
	if code, body := ts.post("/v1/traces", "application/x-protobuf", bigRequest(512<<10)); code != 200 {
		t.Fatalf("after the budget freed: %d %s", code, body)
	}
}

// Headers beyond MaxHeaderBytes are refused (431) without disturbing others.
func TestHeaderLimit(t *testing.T) {
	ts := startServer(t, Options{MaxHeaderBytes: 8 << 10})
	code, _, _ := ts.request("GET", "/healthz", nil, "X-Big", strings.Repeat("a", 64<<10))
	if code != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB of headers: %d, want 431", code)
	}
	if code, _, body := ts.request("GET", "/api/v1/services", nil, "X-Small", strings.Repeat("a", 1<<10)); code != 200 {
		t.Fatalf("1 KiB of headers: %d %s", code, body)
	}
}

// gRPC: a message above the body limit is refused (RESOURCE_EXHAUSTED)
// before it is stored; calls beyond the stream cap wait, and are served.
func TestGRPCLimits(t *testing.T) {
	ts := startServer(t, Options{MaxBodyBytes: 64 << 10, GRPCMaxStreams: 2})
	cc, err := grpc.NewClient("passthrough:///"+ts.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := coltracepb.NewTraceServiceClient(cc)
	big := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
		TraceId: make([]byte, 16), SpanId: make([]byte, 8), Name: strings.Repeat("n", 128<<10)}}}}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := client.Export(ctx, big); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("128 KiB message with a 64 KiB limit: %v, want ResourceExhausted", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spans := spansFor(3, byte(20+i))
			if err := exportSpans(ctx, client, spans); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("export beside the stream cap: %v", err)
	}
}

// exportSpans sends spans in one gRPC Export call.
func exportSpans(ctx context.Context, client coltracepb.TraceServiceClient, spans []model.Span) error {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(otlp.EncodeProto(spans), req); err != nil {
		return err
	}
	_, err := client.Export(ctx, req)
	return err
}

// bigRequest is an OTLP protobuf request of about n bytes: one span with a
// long attribute.
func bigRequest(n int) []byte {
	spans := spansFor(1, 9)
	spans[0].Attributes = append(spans[0].Attributes, model.KeyValue{Key: "pad", Value: model.StringValue(strings.Repeat("p", n))})
	return otlp.EncodeProto(spans)
}

// TestOpenAPIDocumentsQueryLimits: in docs/openapi.json every documented
// query route lists the query cap's 429, and no other route does, as the
// route table decides (route.isQuery).
func TestOpenAPIDocumentsQueryLimits(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	s, err := New(Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	const ref = "#/components/responses/QueryTooManyRequests"
	for _, rt := range s.routeTable() {
		if !rt.documented {
			continue
		}
		r := parsePattern(rt.method + " " + rt.pattern)
		raw, ok := doc.Paths[r.path][strings.ToLower(r.method)]
		if !ok {
			continue // TestOpenAPIMatchesRoutes reports it
		}
		var op struct {
			Responses map[string]struct {
				Ref string `json:"$ref"`
			} `json:"responses"`
		}
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatal(err)
		}
		documented := op.Responses["429"].Ref == ref
		if documented != rt.isQuery() {
			t.Errorf("%s: query route %v, but the query cap's 429 documented %v", r, rt.isQuery(), documented)
		}
	}
}

// A gRPC call whose message arrives slowly is cut at the read timeout
// (DEADLINE_EXCEEDED), as an HTTP body is; other calls go on meanwhile.
// The client is raw HTTP/2: a gRPC client sends its message whole.
func TestGRPCSlowMessageIsCut(t *testing.T) {
	ts := startServer(t, Options{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
	conn, err := net.Dial("tcp", ts.srv.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, http2.ClientPreface)
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", exportMethod}, {":authority", "x"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	// The message declares 1000 bytes and sends 10.
	fr.WriteData(1, false, append([]byte{0, 0, 0, 0x03, 0xe8}, make([]byte, 10)...))

	// Another client's calls are served meanwhile.
	cc, err := grpc.NewClient("passthrough:///"+ts.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := exportSpans(ctx, coltracepb.NewTraceServiceClient(cc), spansFor(3, 30)); err != nil {
		t.Fatalf("export beside the slow call: %v", err)
	}

	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no status for the slow call: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			if st := f.PseudoValue("status"); st != "" && st != "200" {
				t.Fatalf("HTTP status %s", st)
			}
			for _, hf := range f.Fields {
				if hf.Name == "grpc-status" {
					if hf.Value != strconv.Itoa(int(codes.DeadlineExceeded)) {
						t.Fatalf("grpc-status %s, want %d (DEADLINE_EXCEEDED)", hf.Value, codes.DeadlineExceeded)
					}
					return
				}
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset (%v) without a status", f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("connection sent away (%v) without a status for the call", f.ErrCode)
		}
	}
}
