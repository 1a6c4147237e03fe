package server

import (
	"bytes"
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/spanmetrics"
)

// TestSpanMetricsScrape: spans exported by the OTel SDK are counted in
// /spanmetrics, which Prometheus' own parser reads, by service, span name,
// kind and status, per project.
func TestSpanMetricsScrape(t *testing.T) {
	ts := startServer(t, Options{})
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(ts.srv.HTTPAddr()), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))))
	defer tp.Shutdown(ctx)
	tr := tp.Tracer("spanmetrics-test")
	start := time.Now().Add(-time.Second)
	for i := range 5 {
		_, s := tr.Start(ctx, "POST /pay", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
		if i < 2 {
			s.SetStatus(codes.Error, "declined")
		}
		s.End(trace.WithTimestamp(start.Add(3 * time.Millisecond)))
	}
	// Another project's spans are counted apart.
	if code, b := ts.post("/v1/spans", "application/json", []byte(`[{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331","name":"elsewhere","service":"other","start_time_unix_nano":1,"end_time_unix_nano":2}]`), "X-Scope-OrgID", "team-b"); code != 200 {
		t.Fatalf("post to team-b: %d %s", code, b)
	}

	scrape := func(hdr ...string) map[string]float64 {
		t.Helper()
		code, h, body := ts.request("GET", "/spanmetrics", nil, hdr...)
		if code != 200 || h.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
			t.Fatalf("GET /spanmetrics: %d %s %s", code, h.Get("Content-Type"), body)
		}
		parser := expfmt.NewTextParser(pmodel.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("Prometheus' parser refuses /spanmetrics: %v\n%s", err, body)
		}
		out := map[string]float64{}
		for _, m := range fams[spanmetrics.CallsTotal].GetMetric() {
			var svc, name, kind, status string
			for _, l := range m.Label {
				switch l.GetName() {
				case "service":
					svc = l.GetValue()
				case "span_name":
					name = l.GetValue()
				case "span_kind":
					kind = l.GetValue()
				case "status_code":
					status = l.GetValue()
				}
			}
			out[svc+"|"+name+"|"+kind+"|"+status] = m.GetCounter().GetValue()
		}
		for _, m := range fams[spanmetrics.Latency].GetMetric() {
			h := m.GetHistogram()
			if m.Label[0].GetValue() != "checkout" {
				continue
			}
			// 3 ms: above the 2 ms bound, within 4 ms.
			if h.GetSampleCount() == 0 || h.Bucket[0].GetCumulativeCount() != 0 || h.Bucket[1].GetCumulativeCount() != h.GetSampleCount() {
				t.Errorf("latency buckets %v for 3 ms spans", h.Bucket)
			}
		}
		return out
	}
	got := scrape()
	if len(got) != 2 || got["checkout|POST /pay|SPAN_KIND_SERVER|STATUS_CODE_ERROR"] != 2 || got["checkout|POST /pay|SPAN_KIND_SERVER|STATUS_CODE_UNSET"] != 3 {
		t.Errorf("default project: %v", got)
	}
	if got := scrape("X-Scope-OrgID", "team-b"); len(got) != 1 || got["other|elsewhere|SPAN_KIND_UNSPECIFIED|STATUS_CODE_UNSET"] != 1 {
		t.Errorf("project team-b: %v", got)
	}
}

// TestSpanMetricsInProm: the span metrics written into the metric store are
// charted through /prom like ingested metrics: the call counter's increase
// between two writes, and a latency quantile from the histogram's buckets.
func TestSpanMetricsInProm(t *testing.T) {
	ts := startMetricsServer(t)
	now := time.Now()
	mk := func(n int, dur time.Duration, status model.StatusCode) []model.Span {
		out := make([]model.Span, n)
		for i := range out {
			start := uint64(now.Add(-time.Minute).UnixNano())
			out[i] = model.Span{TraceID: model.TraceID{7, byte(i), byte(n)}, SpanID: model.SpanID{7, byte(i), byte(n)}, Name: "GET /cart", Kind: model.KindServer,
				StatusCode: status, StartTimeUnixNano: start, EndTimeUnixNano: start + uint64(dur),
				Resource: &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("cart")}}}, Service: "cart"}
		}
		return out
	}
	ts.ingest(mk(10, 3*time.Millisecond, model.StatusUnset), "")
	t1 := now.Add(-30 * time.Second)
	ts.srv.WriteSpanMetrics(t1)
	ts.ingest(mk(30, 3*time.Millisecond, model.StatusUnset), "")
	ts.ingest(mk(4, 100*time.Millisecond, model.StatusError), "")
	t2 := now.Add(-15 * time.Second)
	ts.srv.WriteSpanMetrics(t2)

	at := strconv.FormatFloat(float64(t2.UnixMilli())/1000, 'f', 3, 64)
	code, r := ts.prom("/prom/api/v1/query", url.Values{"time": {at},
		"query": {`traces_spanmetrics_calls_total{service="cart", span_name="GET /cart", span_kind="SPAN_KIND_SERVER"}`}})
	if code != 200 || r.Status != "success" || len(r.Data.Result) != 2 {
		t.Fatalf("calls: %d %+v", code, r)
	}
	for _, s := range r.Data.Result {
		want := map[string]string{"STATUS_CODE_UNSET": "40", "STATUS_CODE_ERROR": "4"}[s.Metric["status_code"]]
		if s.Value[1] != want {
			t.Errorf("calls %v = %v, want %s", s.Metric, s.Value[1], want)
		}
	}
	// increase() over 20 s holds the two writes, 15 s apart, 30 calls
	// apart: Prometheus extrapolates to the window's 20 s (the start gap, 5 s,
	// is under 1.1 intervals, and the counter's zero point is further back),
	// so 30 * 20 / 15 = 40.
	code, r = ts.prom("/prom/api/v1/query", url.Values{"time": {at},
		"query": {`sum(increase(traces_spanmetrics_calls_total{status_code="STATUS_CODE_UNSET"}[20s]))`}})
	if code != 200 || r.Status != "success" || len(r.Data.Result) != 1 || r.Data.Result[0].Value[1] != "40" {
		t.Errorf("increase over the writes: %d %+v, want 40", code, r)
	}
	// The median from the buckets: 40 of 44 spans took 3 ms (bucket 2-4 ms).
	code, r = ts.prom("/prom/api/v1/query", url.Values{"time": {at},
		"query": {`histogram_quantile(0.5, sum by (le) (traces_spanmetrics_latency_bucket{service="cart"}))`}})
	if code != 200 || r.Status != "success" || len(r.Data.Result) != 1 {
		t.Fatalf("quantile: %d %+v", code, r)
	}
	q, err := strconv.ParseFloat(r.Data.Result[0].Value[1].(string), 64)
	if err != nil || q <= 0.002 || q > 0.004 {
		t.Errorf("median latency %v, want within the 2-4 ms bucket", r.Data.Result[0].Value[1])
	}
}
