package server

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/metricstore"
)

// startLLMMetricsServer is a server with the engine, a metric store and the
// price table, as cli/serve wires them.
func startLLMMetricsServer(t *testing.T) *testServer {
	t.Helper()
	ts := startServer(t, Options{Prices: llm.DefaultPrices()})
	ms, err := metricstore.Open(metricstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.SetMetrics(ms)
	t.Cleanup(func() { ms.Close() })
	return ts
}

// genAIClient records the GenAI client metrics as the semantic conventions
// define them (docs/gen-ai/gen-ai-metrics.md): names, instrument types,
// units, the advised bucket boundaries and the attributes.
type genAIClient struct {
	mp       *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
	exp      sdkmetric.Exporter
	duration metric.Float64Histogram
	tokens   metric.Int64Histogram
}

func newGenAIClient(t *testing.T, service string, exp sdkmetric.Exporter, temporality metricdata.Temporality) *genAIClient {
	t.Helper()
	reader := sdkmetric.NewManualReader(sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality { return temporality }))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
	meter := mp.Meter("rastro.test/genai")
	dur, err := meter.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration."),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := meter.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864))
	if err != nil {
		t.Fatal(err)
	}
	c := &genAIClient{mp: mp, reader: reader, exp: exp, duration: dur, tokens: tok}
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return c
}

// call records one chat call to model (an OpenAI one: request and response
// model differ) taking secs; errType "" is a success with its tokens.
func (c *genAIClient) call(reqModel, respModel string, secs float64, in, out int64, errType string) {
	ctx := context.Background()
	common := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.request.model", reqModel), attribute.String("server.address", "api.openai.com"),
		attribute.Int("server.port", 443),
	}
	if errType != "" {
		c.duration.Record(ctx, secs, metric.WithAttributes(append(common, attribute.String("error.type", errType))...))
		return
	}
	common = append(common, attribute.String("gen_ai.response.model", respModel))
	c.duration.Record(ctx, secs, metric.WithAttributes(common...))
	c.tokens.Record(ctx, in, metric.WithAttributes(append(common, attribute.String("gen_ai.token.type", "input"))...))
	c.tokens.Record(ctx, out, metric.WithAttributes(append(common, attribute.String("gen_ai.token.type", "output"))...))
}

// export collects the reader's metrics and sends them with the exporter,
// returning the time of their points.
func (c *genAIClient) export(t *testing.T) time.Time {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := c.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if err := c.exp.Export(context.Background(), &rm); err != nil {
		t.Fatalf("export: %v", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && len(h.DataPoints) > 0 {
				return h.DataPoints[0].Time
			}
		}
	}
	t.Fatal("no duration point collected")
	return time.Time{}
}

// afterMs returns once the clock has passed t by a millisecond (metric
// times are stored in milliseconds), and that time.
func afterMs(t time.Time) time.Time {
	for {
		if now := time.Now(); now.Sub(t) > time.Millisecond {
			return now
		}
		time.Sleep(time.Millisecond)
	}
}

type fromMetricsJSON struct {
	Calls          int64    `json:"calls"`
	Errors         int64    `json:"errors"`
	InputTokens    int64    `json:"input_tokens"`
	OutputTokens   int64    `json:"output_tokens"`
	CostUSD        float64  `json:"cost_usd"`
	DurationMeanMs *float64 `json:"duration_mean_ms"`
	Duration       *struct {
		P50 float64 `json:"p50"`
		P95 float64 `json:"p95"`
		P99 float64 `json:"p99"`
	} `json:"duration_ms"`
}

type llmGroupResp struct {
	Key          map[string]string `json:"key"`
	Time         string            `json:"time"`
	Spans        int64             `json:"spans"`
	Counted      int64             `json:"counted_spans"`
	Errors       int64             `json:"errors"`
	InputTokens  int64             `json:"input_tokens"`
	OutputTokens int64             `json:"output_tokens"`
	CostUSD      float64           `json:"cost_usd"`
	FromMetrics  *fromMetricsJSON  `json:"from_metrics"`
}

type llmStatsResp struct {
	FromMetrics *struct {
		Series  int              `json:"series"`
		Ignored *fromMetricsJSON `json:"ignored_for_spans"`
	} `json:"from_metrics"`
	Groups   []llmGroupResp `json:"groups"`
	Points   []llmGroupResp `json:"points"`
	Totals   llmGroupResp   `json:"totals"`
	Warnings []string       `json:"warnings"`
}

func (ts *testServer) llmStats(route string, params url.Values) llmStatsResp {
	ts.t.Helper()
	var r llmStatsResp
	if code := ts.get(route+"?"+params.Encode(), &r); code != 200 {
		ts.t.Fatalf("GET %s?%s: %d", route, params.Encode(), code)
	}
	return r
}

func unixMs(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// A service that sends only the GenAI metrics and one that sends only spans
// both appear in the LLM statistics, once each, with the known calls,
// tokens, errors, mean duration and cost; a third that sends the same calls
// as spans and as metrics is counted once, from its spans, and the answer
// says how much of the metrics it left out.
func TestLLMMetricsInLLMStats(t *testing.T) {
	ts := startLLMMetricsServer(t)
	ctx := context.Background()
	start := time.Now()
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(ts.srv.HTTPAddr()), otlpmetrichttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(ctx)

	// metrics-only: 3 successful calls and one timeout.
	mo := newGenAIClient(t, "metrics-only", exp, metricdata.CumulativeTemporality)
	mo.call("gpt-4o", "gpt-4o-2024-08-06", 0.5, 100, 20, "")
	mo.call("gpt-4o", "gpt-4o-2024-08-06", 1.5, 200, 30, "")
	mo.call("gpt-4o", "gpt-4o-2024-08-06", 2.0, 300, 50, "")
	mo.call("gpt-4o", "", 4.0, 0, 0, "timeout")
	moTime := mo.export(t)

	// both: two calls as metrics, and the same two calls as spans dated
	// at the metrics' point (the same hour).
	both := newGenAIClient(t, "both", exp, metricdata.CumulativeTemporality)
	both.call("gpt-4o", "gpt-4o-2024-08-06", 1, 1000, 100, "")
	both.call("gpt-4o", "gpt-4o-2024-08-06", 1, 2000, 200, "")
	bothTime := both.export(t)

	sendCalls := func(service string, at time.Time, provider, model string, tokens [][2]int64) {
		texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(ts.srv.HTTPAddr()), otlptracehttp.WithInsecure())
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(texp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
		tr := tp.Tracer("rastro.test/genai")
		for i, tk := range tokens {
			s0 := at.Add(-time.Duration(i+1) * time.Millisecond)
			_, sp := tr.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(s0), trace.WithAttributes(
				attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", provider),
				attribute.String("gen_ai.request.model", model), attribute.String("gen_ai.response.model", model),
				attribute.Int64("gen_ai.usage.input_tokens", tk[0]), attribute.Int64("gen_ai.usage.output_tokens", tk[1])))
			sp.SetStatus(codes.Unset, "")
			sp.End(trace.WithTimestamp(s0.Add(time.Millisecond)))
		}
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The spans start a millisecond or two before the point: step back into
	// the point's hour if that crosses it.
	bothAt := bothTime
	if bothAt.Add(-3*time.Millisecond).Truncate(time.Hour) != bothAt.Truncate(time.Hour) {
		bothAt = bothAt.Add(3 * time.Millisecond)
	}
	sendCalls("both", bothAt, "openai", "gpt-4o-2024-08-06", [][2]int64{{1000, 100}, {2000, 200}})
	sendCalls("spans-only", time.Now(), "anthropic", "claude-sonnet-4-20250514", [][2]int64{{10, 1}, {20, 2}})

	prices := llm.DefaultPrices()
	wantCost := func(in, out int64, at time.Time) float64 {
		ci, ok1 := prices.Cost("openai", "gpt-4o-2024-08-06", at, in, 0, 0, 0)
		co, ok2 := prices.Cost("openai", "gpt-4o-2024-08-06", at, 0, out, 0, 0)
		if !ok1 || !ok2 || ci+co == 0 {
			t.Fatalf("the price table has no price for gpt-4o-2024-08-06")
		}
		return float64(ci+co) / 1e9
	}

	window := url.Values{"since": {unixMs(start.Add(-time.Minute))}, "until": {unixMs(time.Now().Add(time.Minute))}}
	p := url.Values{"group_by": {"service"}}
	for k, v := range window {
		p[k] = v
	}
	r := ts.llmStats("/api/v1/llm/stats", p)
	bySvc := map[string]llmGroupResp{}
	for _, g := range r.Groups {
		if _, dup := bySvc[g.Key["service"]]; dup {
			t.Fatalf("service %q appears twice: %+v", g.Key["service"], r.Groups)
		}
		bySvc[g.Key["service"]] = g
	}
	if len(bySvc) != 3 {
		t.Fatalf("groups %+v, want metrics-only, both and spans-only", r.Groups)
	}
	g := bySvc["metrics-only"]
	fm := g.FromMetrics
	if g.Spans != 0 || fm == nil || fm.Calls != 4 || fm.Errors != 1 || fm.InputTokens != 600 || fm.OutputTokens != 100 ||
		g.Errors != 1 || g.InputTokens != 600 || g.OutputTokens != 100 || fm.DurationMeanMs == nil || *fm.DurationMeanMs != 2000 {
		t.Fatalf("metrics-only: %+v %+v, want 4 calls, 1 error, 600/100 tokens, mean 2000 ms", g, fm)
	}
	// Percentiles from the buckets (0.01, ..., 0.32, 0.64, 1.28, 2.56, 5.12,
	// ...): 0.5 s in (0.32, 0.64], 1.5 and 2 s in (1.28, 2.56], 4 s in
	// (2.56, 5.12]. The median's rank 2 is the first of the two in
	// (1.28, 2.56]: 1.28 + 1.28 x 1/2 = 1.92 s; p95's rank 3.8 is 0.8 into
	// the last: 2.56 + 2.56 x 0.8 = 4.608 s; p99: 2.56 + 2.56 x 0.96.
	near := func(got, want float64) bool { return got > want-0.002 && got < want+0.002 }
	if d := fm.Duration; d == nil || !near(d.P50, 1920) || !near(d.P95, 4608) || !near(d.P99, 5017.6) {
		t.Fatalf("metrics-only duration percentiles %+v, want 1920, 4608 and 5017.6 ms", d)
	}
	if want := wantCost(600, 100, moTime); g.CostUSD != want || fm.CostUSD != want {
		t.Fatalf("metrics-only cost %v (from metrics %v), want %v", g.CostUSD, fm.CostUSD, want)
	}
	if g := bySvc["both"]; g.Spans != 2 || g.Counted != 2 || g.InputTokens != 3000 || g.OutputTokens != 300 || g.FromMetrics != nil {
		t.Fatalf("both: %+v, want its 2 spans only", g)
	}
	if g := bySvc["spans-only"]; g.Spans != 2 || g.InputTokens != 30 || g.OutputTokens != 3 || g.FromMetrics != nil {
		t.Fatalf("spans-only: %+v", g)
	}
	if r.FromMetrics == nil || r.FromMetrics.Ignored == nil || r.FromMetrics.Ignored.Calls != 2 || r.FromMetrics.Ignored.InputTokens != 3000 {
		t.Fatalf("from_metrics %+v, want the 2 calls of both left out", r.FromMetrics)
	}
	if r.Totals.InputTokens != 600+3000+30 || r.Totals.FromMetrics == nil || r.Totals.FromMetrics.Calls != 4 {
		t.Fatalf("totals %+v", r.Totals)
	}

	// By model and provider: the metrics' response model and provider.
	p.Set("group_by", "provider,model")
	r = ts.llmStats("/api/v1/llm/stats", p)
	found := false
	for _, g := range r.Groups {
		if g.Key["model"] == "gpt-4o-2024-08-06" && g.Key["provider"] == "openai" {
			found = g.Spans == 2 && g.FromMetrics != nil && g.FromMetrics.Calls == 3 && g.InputTokens == 3000+600
		}
		if g.Key["model"] == "gpt-4o" && (g.FromMetrics == nil || g.FromMetrics.Calls != 1 || g.FromMetrics.Errors != 1) {
			t.Fatalf("the failed call (request model only): %+v", g)
		}
	}
	if !found {
		t.Fatalf("groups by model %+v: want gpt-4o-2024-08-06 with 2 spans and 3 metric calls", r.Groups)
	}

	// The time series, by service at a step of a minute: the metric calls
	// sit at their point's minute.
	p.Set("group_by", "service")
	p.Set("step", "1m")
	r = ts.llmStats("/api/v1/llm/timeseries", p)
	calls := 0
	for _, pt := range r.Points {
		if pt.Key["service"] == "metrics-only" && pt.FromMetrics != nil {
			calls += int(pt.FromMetrics.Calls)
			if want := moTime.UTC().Truncate(time.Minute).Format(time.RFC3339); pt.Time != want {
				t.Fatalf("point at %s, want %s", pt.Time, want)
			}
		}
		if pt.Key["service"] == "both" && pt.FromMetrics != nil {
			t.Fatalf("both counted from metrics in the time series: %+v", pt)
		}
	}
	if calls != 4 {
		t.Fatalf("time series: %d metric calls, want 4: %+v", calls, r.Points)
	}

	// A filter the metrics cannot answer leaves them out, and says so.
	p = url.Values{"q": {`{ span.gen_ai.operation.name = "chat" }`}}
	for k, v := range window {
		p[k] = v
	}
	r = ts.llmStats("/api/v1/llm/stats", p)
	if r.FromMetrics != nil || len(r.Warnings) != 1 || r.Totals.FromMetrics != nil || r.Totals.Spans != 4 {
		t.Fatalf("with a span filter: %+v, want spans only and a warning", r)
	}
	// Another project sees none of them.
	var other llmStatsResp
	if code := ts.get("/api/v1/llm/stats?"+window.Encode(), &other, "X-Scope-OrgID", "team-b"); code != 200 ||
		other.FromMetrics != nil || other.Totals.FromMetrics != nil || other.Totals.Spans != 0 {
		t.Fatalf("project team-b: %d %+v, want nothing", code, other)
	}
	// The service parameter applies to both.
	p = url.Values{"service": {"metrics-only"}}
	for k, v := range window {
		p[k] = v
	}
	if r = ts.llmStats("/api/v1/llm/stats", p); r.Totals.FromMetrics == nil || r.Totals.FromMetrics.Calls != 4 || r.Totals.Spans != 0 {
		t.Fatalf("service=metrics-only: %+v", r.Totals)
	}
}

// Cumulative series count their increase over the window, across a reset
// (the client restarted); delta series add their points. Both give the
// same totals for the same calls, whole and for a window that starts
// between two exports.
func TestLLMMetricsTemporality(t *testing.T) {
	ts := startLLMMetricsServer(t)
	ctx := context.Background()
	hexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(ts.srv.HTTPAddr()), otlpmetrichttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer hexp.Shutdown(ctx)
	gexp, err := otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(ts.srv.GRPCAddr()), otlpmetricgrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer gexp.Shutdown(ctx)
	calls := func(c *genAIClient, n int) {
		for range n {
			c.call("gpt-4o-mini", "gpt-4o-mini", 0.25, 10, 1, "")
		}
	}
	start := time.Now()
	for _, tc := range []struct {
		service     string
		exp         sdkmetric.Exporter
		temporality metricdata.Temporality
	}{
		{"cumulative", hexp, metricdata.CumulativeTemporality},
		{"delta", gexp, metricdata.DeltaTemporality},
	} {
		// 3 calls, export; 2 calls, export; the client restarts (a new
		// meter provider: a cumulative count starts again at 0); 4 calls,
		// export.
		c := newGenAIClient(t, tc.service, tc.exp, tc.temporality)
		calls(c, 3)
		t1 := c.export(t)
		b1 := afterMs(t1)
		calls(c, 2)
		t2 := c.export(t)
		b2 := afterMs(t2)
		c = newGenAIClient(t, tc.service, tc.exp, tc.temporality)
		calls(c, 4)
		t3 := c.export(t)
		end := afterMs(t3)
		for _, w := range []struct {
			since, until time.Time
			calls        int64
		}{
			{start, end, 9}, // 3 + 2, reset, + 4
			{b1, end, 6},    // 2 + 4
			{b2, end, 4},    // after the reset
			{start, b2, 5},  // before it
			{b1, b2, 2},
		} {
			r := ts.llmStats("/api/v1/llm/stats", url.Values{"since": {unixMs(w.since)}, "until": {unixMs(w.until)}, "service": {tc.service}})
			fm := r.Totals.FromMetrics
			if fm == nil || fm.Calls != w.calls || fm.InputTokens != 10*w.calls || fm.OutputTokens != w.calls ||
				fm.DurationMeanMs == nil || *fm.DurationMeanMs != 250 {
				t.Fatalf("%s, window [%s, %s): %+v, want %d calls of 10+1 tokens, 250 ms each", tc.service,
					w.since.Format(time.RFC3339Nano), w.until.Format(time.RFC3339Nano), fm, w.calls)
			}
		}
	}
}
