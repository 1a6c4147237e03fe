package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/metricstore"
)

// startMetricsServer is startServer with a metric store attached, as cli/serve wires it.
func startMetricsServer(t *testing.T) *testServer {
	t.Helper()
	ts := startServer(t, Options{})
	ms, err := metricstore.Open(metricstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.SetMetrics(ms)
	t.Cleanup(func() { ms.Close() })
	return ts
}

type promResp struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

func (ts *testServer) prom(path string, params url.Values) (int, promResp) {
	ts.t.Helper()
	var r promResp
	code := ts.get(path+"?"+params.Encode(), &r)
	return code, r
}

// The OpenTelemetry Go SDK's metric exporters, over HTTP and gRPC, store a
// counter and a histogram that come back through the Prometheus API with
// Prometheus' names, their values, a quantile from the buckets, and the
// exemplar's trace.
func TestMetricsFromOTelSDK(t *testing.T) {
	ts := startMetricsServer(t)
	ctx := context.Background()
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	spanCtx := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	for _, transport := range []string{"http", "grpc"} {
		var exp sdkmetric.Exporter
		var err error
		if transport == "http" {
			exp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(ts.srv.HTTPAddr()), otlpmetrichttp.WithInsecure())
		} else {
			exp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(ts.srv.GRPCAddr()), otlpmetricgrpc.WithInsecure())
		}
		if err != nil {
			t.Fatal(err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))),
			sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout-"+transport))))
		meter := mp.Meter("shop")
		orders, _ := meter.Int64Counter("orders.processed", metric.WithUnit("{order}"))
		dur, _ := meter.Float64Histogram("checkout.duration", metric.WithUnit("ms"))
		orders.Add(ctx, 5, metric.WithAttributes(attribute.String("payment.method", "card")))
		dur.Record(spanCtx, 3)
		dur.Record(ctx, 7)
		if err := mp.ForceFlush(ctx); err != nil {
			t.Fatalf("%s: first export: %v", transport, err)
		}
		orders.Add(ctx, 2, metric.WithAttributes(attribute.String("payment.method", "card")))
		dur.Record(ctx, 30)
		if err := mp.Shutdown(ctx); err != nil {
			t.Fatalf("%s exporter: %v", transport, err)
		}
	}

	code, r := ts.prom("/prom/api/v1/query", url.Values{"query": {`orders_processed_total{payment_method="card"}`}})
	if code != 200 || r.Status != "success" || r.Data.ResultType != "vector" || len(r.Data.Result) != 2 {
		t.Fatalf("counter: %d %+v", code, r)
	}
	for _, s := range r.Data.Result {
		if s.Value[1] != "7" || !strings.HasPrefix(s.Metric["job"], "checkout-") || s.Metric["service_name"] != s.Metric["job"] || s.Metric["__name__"] != "orders_processed_total" {
			t.Fatalf("counter series %+v, want 7 with job and service_name", s)
		}
	}
	// Buckets of the last export: 3, 7, 30 with the SDK's default bounds
	// (0, 5, 10, 25, 50, ...): the median's rank 1.5 falls in (5, 10],
	// which holds one: 5 + 5 x 0.5 = 7.5.
	code, r = ts.prom("/prom/api/v1/query", url.Values{"query": {`histogram_quantile(0.5, sum by (le) (checkout_duration_milliseconds_bucket{job="checkout-http"}))`}})
	if code != 200 || len(r.Data.Result) != 1 || r.Data.Result[0].Value[1] != "7.5" {
		t.Fatalf("median: %d %+v, want 7.5", code, r)
	}
	code, r = ts.prom("/prom/api/v1/query", url.Values{"query": {`sum(checkout_duration_milliseconds_count) / 2`}})
	if code != 200 || len(r.Data.Result) != 1 || r.Data.Result[0].Value[1] != "3" {
		t.Fatalf("count: %d %+v, want 3", code, r)
	}
	// A range query: one series per job, a point per step.
	now := time.Now()
	code, r = ts.prom("/prom/api/v1/query_range", url.Values{"query": {`sum by (job) (orders_processed_total)`},
		"start": {now.Add(-time.Minute).Format(time.RFC3339)}, "end": {strconv.FormatInt(now.Add(time.Minute).Unix(), 10)}, "step": {"15s"}})
	if code != 200 || r.Data.ResultType != "matrix" || len(r.Data.Result) != 2 || len(r.Data.Result[0].Values) == 0 {
		t.Fatalf("range: %d %+v", code, r)
	}
	last := r.Data.Result[0].Values[len(r.Data.Result[0].Values)-1]
	if last[1] != "7" {
		t.Fatalf("range query's last point %v, want 7", last)
	}
	// Discovery.
	var names struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if code := ts.get("/prom/api/v1/label/__name__/values", &names); code != 200 || !contains(names.Data, "orders_processed_total") ||
		!contains(names.Data, "checkout_duration_milliseconds_bucket") || !contains(names.Data, "checkout_duration_milliseconds_sum") {
		t.Fatalf("metric names: %d %v", code, names.Data)
	}
	if code := ts.get("/prom/api/v1/labels?match[]=orders_processed_total", &names); code != 200 ||
		strings.Join(names.Data, ",") != "__name__,job,payment_method,service_name" {
		t.Fatalf("labels: %d %v", code, names.Data)
	}
	var series struct {
		Data []map[string]string `json:"data"`
	}
	if code := ts.get("/prom/api/v1/series?"+url.Values{"match[]": {`{__name__=~"orders.*", job="checkout-grpc"}`}}.Encode(), &series); code != 200 ||
		len(series.Data) != 1 || series.Data[0]["payment_method"] != "card" {
		t.Fatalf("series: %d %+v", code, series)
	}
	// The exemplar recorded inside a sampled span links to its trace.
	var ex struct {
		Data []struct {
			SeriesLabels map[string]string `json:"seriesLabels"`
			Exemplars    []struct {
				Labels map[string]string `json:"labels"`
				Value  string            `json:"value"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	if code := ts.get("/prom/api/v1/query_exemplars?"+url.Values{"query": {`checkout_duration_milliseconds_bucket{job="checkout-http"}`}}.Encode(), &ex); code != 200 || len(ex.Data) == 0 {
		t.Fatalf("exemplars: %d %+v", code, ex)
	}
	found := false
	for _, d := range ex.Data {
		for _, e := range d.Exemplars {
			if e.Labels["trace_id"] == traceID.String() && e.Labels["span_id"] == spanID.String() && e.Value == "3" && d.SeriesLabels["le"] == "5" {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("exemplars %+v: none with the span's trace on le=5", ex.Data)
	}
}

// The Go SDK with its delta temporality selector sends a delta counter and
// a delta exponential histogram; the store converts them, so the Prometheus
// API answers running totals and quantiles as for a cumulative source.
func TestMetricsDeltaFromOTelSDK(t *testing.T) {
	ts := startMetricsServer(t)
	ctx := context.Background()
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(ts.srv.HTTPAddr()), otlpmetrichttp.WithInsecure(),
		otlpmetrichttp.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality { return metricdata.DeltaTemporality }))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "worker"))),
		sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "task.duration"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}})))
	defer mp.Shutdown(ctx)
	meter := mp.Meter("worker")
	jobs, _ := meter.Int64Counter("jobs.done")
	dur, _ := meter.Float64Histogram("task.duration", metric.WithUnit("s"))
	// Three exports of deltas 3, 4, 5; the histogram gets 3 and 5, then 7.
	for i, n := range []int64{3, 4, 5} {
		jobs.Add(ctx, n)
		switch i {
		case 0:
			dur.Record(ctx, 3)
			dur.Record(ctx, 5)
		case 1:
			dur.Record(ctx, 7)
		}
		if err := mp.ForceFlush(ctx); err != nil {
			t.Fatalf("export %d: %v", i, err)
		}
	}
	code, r := ts.prom("/prom/api/v1/query", url.Values{"query": {`jobs_done_total{job="worker"}`}})
	if code != 200 || len(r.Data.Result) != 1 || r.Data.Result[0].Value[1] != "12" {
		t.Fatalf("counter: %d %+v, want the running total 12", code, r)
	}
	// At scale 0, 3 is in (2, 4] and 5 and 7 in (4, 8]: le=4: 1, le=8: 3,
	// +Inf: 3. The median's rank 1.5 falls in (4, 8], which holds 2 past
	// the 1 below: 4 + 4 x (0.5 / 2) = 5.
	code, r = ts.prom("/prom/api/v1/query", url.Values{"query": {`histogram_quantile(0.5, task_duration_seconds_bucket{job="worker"})`}})
	if code != 200 || len(r.Data.Result) != 1 || r.Data.Result[0].Value[1] != "5" {
		t.Fatalf("median: %d %+v, want 5", code, r)
	}
	code, r = ts.prom("/prom/api/v1/query", url.Values{"query": {`task_duration_seconds_count{job="worker"}`}})
	if code != 200 || len(r.Data.Result) != 1 || r.Data.Result[0].Value[1] != "3" {
		t.Fatalf("count: %d %+v, want 3", code, r)
	}
}

func strconvSec(t time.Time) string {
	return json.Number(strings.TrimRight(strings.TrimRight(t.Format("0"), "0"), ".")).String()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Bad requests get Prometheus' error shape with a 400 naming what is wrong.
func TestPromAPIErrors(t *testing.T) {
	ts := startMetricsServer(t)
	for _, c := range []struct {
		path   string
		params url.Values
		want   string
	}{
		{"/prom/api/v1/query", url.Values{"query": {"irate(x[5m])"}}, `function "irate"`},
		{"/prom/api/v1/query", url.Values{"query": {"x / y"}}, `between two instant vectors`},
		{"/prom/api/v1/query", url.Values{"query": {"sum(x"}}, `parse error`},
		{"/prom/api/v1/query", url.Values{"query": {"x"}, "time": {"yesterday"}}, `invalid parameter "time"`},
		{"/prom/api/v1/query_range", url.Values{"query": {"x"}, "start": {"10"}, "end": {"20"}}, `invalid parameter "step": missing`},
		{"/prom/api/v1/query_range", url.Values{"query": {"x"}, "start": {"20"}, "end": {"10"}, "step": {"1"}}, `end timestamp must not be before start time`},
		{"/prom/api/v1/query_range", url.Values{"query": {"x"}, "start": {"0"}, "end": {"100000"}, "step": {"1"}}, `exceeded maximum resolution of 11,000 points`},
		{"/prom/api/v1/query_range", url.Values{"query": {"x[5m]"}, "start": {"0"}, "end": {"10"}, "step": {"1"}}, `range vector`},
		{"/prom/api/v1/series", url.Values{}, `no match[] parameter provided`},
		{"/prom/api/v1/series", url.Values{"match[]": {"sum(x)"}}, `is not a series selector`},
		// A message that quotes a control character and invalid UTF-8
		// from the query is still JSON.
		{"/prom/api/v1/query", url.Values{"query": {"x{a=~\"(\x01\xff\"}"}}, `error parsing regexp`},
	} {
		code, r := ts.prom(c.path, c.params)
		if code != 400 || r.Status != "error" || r.ErrorType != "bad_data" || !strings.Contains(r.Error, c.want) {
			t.Errorf("%s?%s: %d %+v, want 400 bad_data containing %q", c.path, c.params.Encode(), code, r, c.want)
		}
	}
	// POST with a form body answers like GET.
	code, _, body := ts.request("POST", "/prom/api/v1/query", []byte("query=1%2B1&time=100"), "Content-Type", "application/x-www-form-urlencoded")
	if code != 200 || string(body) != `{"status":"success","data":{"resultType":"scalar","result":[100,"2"]}}`+"\n" {
		t.Fatalf("POST query: %d %s", code, body)
	}
	code, _, body = ts.request("GET", "/prom/api/v1/nope", nil)
	if code != 404 || !strings.Contains(string(body), `"errorType":"not_found"`) {
		t.Fatalf("unknown route: %d %s", code, body)
	}
}

// Bad ingest is refused with a message naming what is wrong; points
// accepted before stay.
func TestMetricsBadInput(t *testing.T) {
	ts := startMetricsServer(t)
	good := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
		{Name: "temp", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{{TimeUnixNano: uint64(time.Now().UnixNano()), Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: 21.5}}}}}}}}}}}}
	b, _ := proto.Marshal(good)
	if code, body := ts.post("/v1/metrics", "application/x-protobuf", b); code != 200 || len(body) != 0 {
		t.Fatalf("good request: %d %q", code, body)
	}
	// gzip, as exporters send it.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(b)
	zw.Close()
	if code, body := ts.post("/v1/metrics", "application/x-protobuf", gz.Bytes(), "Content-Encoding", "gzip"); code != 200 || len(body) != 0 {
		t.Fatalf("gzip request: %d %q", code, body)
	}
	if code, body := ts.post("/v1/metrics", "text/plain", b); code != 415 || !strings.Contains(string(body), "application/x-protobuf") {
		t.Fatalf("text/plain: %d %s", code, body)
	}
	if code, body := ts.post("/v1/metrics", "application/x-protobuf", b[:len(b)-2]); code != 400 || !strings.Contains(string(body), "resource_metrics[0]") {
		t.Fatalf("truncated: %d %s", code, body)
	}
	if code, body := ts.post("/v1/metrics", "application/json", []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"x","gauge":{"dataPoints":[{"asDouble":"abc"}]}}]}]}]}`)); code != 400 || !strings.Contains(string(body), "asDouble") {
		t.Fatalf("bad JSON value: %d %s", code, body)
	}
	unspecified := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
		{Name: "jobs", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true, AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_UNSPECIFIED,
			DataPoints: []*metricspb.NumberDataPoint{{TimeUnixNano: 1, Value: &metricspb.NumberDataPoint_AsInt{AsInt: 1}}}}}}}}}}}}
	db, _ := proto.Marshal(unspecified)
	if code, body := ts.post("/v1/metrics", "application/x-protobuf", db); code != 400 || !strings.Contains(string(body), "unspecified (0) aggregation temporality") {
		t.Fatalf("unspecified temporality only: %d %s", code, body)
	}
	// Partial success in OTLP/JSON names the refused points.
	mixed := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[
		{"name":"ok","gauge":{"dataPoints":[{"timeUnixNano":"` + strconv.FormatInt(time.Now().UnixNano(), 10) + `","asInt":"4"}]}},
		{"name":"d","sum":{"aggregationTemporality":0,"isMonotonic":true,"dataPoints":[{"asInt":"1"}]}}]}]}]}`
	code, body := ts.post("/v1/metrics", "application/json", []byte(mixed))
	if code != 200 || !strings.Contains(string(body), `"rejectedDataPoints":"1"`) {
		t.Fatalf("partial: %d %s", code, body)
	}
	_, r := ts.prom("/prom/api/v1/query", url.Values{"query": {"temp"}})
	if len(r.Data.Result) != 1 || r.Data.Result[0].Value[1] != "21.5" {
		t.Fatalf("the accepted gauge: %+v", r)
	}
}

// Without a metric store (the ClickHouse backend) the routes answer 501.
func TestMetricsNotImplementedWithoutStore(t *testing.T) {
	ts := startServer(t, Options{})
	ts.srv.NoMetrics()
	if code, body := ts.post("/v1/metrics", "application/x-protobuf", nil); code != 501 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	if code, r := ts.prom("/prom/api/v1/query", url.Values{"query": {"x"}}); code != 501 || r.ErrorType != "not_implemented" {
		t.Fatalf("query: %d %+v", code, r)
	}
}
