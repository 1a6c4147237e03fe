package llmmetrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/metricstore"
	"github.com/rastro-dev/rastro/internal/store"
)

// benchStore fills a metric store with a day of exports every 60 s (the
// SDKs' default interval): services x models GenAI clients, each with the
// two histograms at the conventions' bucket boundaries (51 series), and
// other gauge series beside them, as span metrics and application metrics
// would be.
func benchStore(b *testing.B, services, models, others int, withGenAI bool) (*metricstore.Store, int64) {
	b.Helper()
	ms, err := metricstore.Open(metricstore.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ms.Close() })
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	durBounds := []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	tokBounds := []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	hist := func(attrs []*commonpb.KeyValue, t uint64, n uint64, sum float64, bounds []float64) *metricspb.HistogramDataPoint {
		counts := make([]uint64, len(bounds)+1)
		counts[len(bounds)/2] = n
		return &metricspb.HistogramDataPoint{Attributes: attrs, TimeUnixNano: t, Count: n, Sum: &sum, ExplicitBounds: bounds, BucketCounts: counts}
	}
	end := time.Now().Truncate(time.Minute)
	start := end.Add(-24 * time.Hour)
	for i := 0; start.Add(time.Duration(i) * time.Minute).Before(end); i++ {
		t := uint64(start.Add(time.Duration(i) * time.Minute).UnixNano())
		calls := uint64(i + 1)
		var rms []*metricspb.ResourceMetrics
		if withGenAI {
			for s := range services {
				var dur, tok []*metricspb.HistogramDataPoint
				for m := range models {
					attrs := []*commonpb.KeyValue{str("gen_ai.operation.name", "chat"), str("gen_ai.provider.name", "openai"),
						str("gen_ai.request.model", fmt.Sprintf("model-%d", m)), str("server.address", "api.openai.com")}
					dur = append(dur, hist(attrs, t, calls, 0.5*float64(calls), durBounds))
					tok = append(tok, hist(append(attrs, str("gen_ai.token.type", "input")), t, calls, 300*float64(calls), tokBounds),
						hist(append(attrs, str("gen_ai.token.type", "output")), t, calls, 50*float64(calls), tokBounds))
				}
				rms = append(rms, &metricspb.ResourceMetrics{
					Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", fmt.Sprintf("svc-%d", s))}},
					ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
						{Name: "gen_ai.client.operation.duration", Unit: "s", Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
							AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, DataPoints: dur}}},
						{Name: "gen_ai.client.token.usage", Unit: "{token}", Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
							AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, DataPoints: tok}}},
					}}},
				})
			}
		}
		var gauges []*metricspb.NumberDataPoint
		for o := range others {
			gauges = append(gauges, &metricspb.NumberDataPoint{Attributes: []*commonpb.KeyValue{str("queue", fmt.Sprintf("q-%d", o))},
				TimeUnixNano: t, Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: float64(o + i)}})
		}
		rms = append(rms, &metricspb.ResourceMetrics{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "worker")}},
			ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{Name: "queue.depth",
				Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: gauges}}}}}},
		})
		body, err := proto.Marshal(&colmetrics.ExportMetricsServiceRequest{ResourceMetrics: rms})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := ms.AppendMetrics("", store.MetricFormatProto, body); err != nil || res.Rejected > 0 {
			b.Fatalf("append: %+v %v", res, err)
		}
	}
	return ms, end.UnixNano()
}

func noSpans(context.Context, int64, int64) (map[SpanHour]bool, error) { return nil, nil }

// The cost the GenAI metrics add to an LLM statistics request over the
// default window (24 hours): reading and counting every GenAI series.
func BenchmarkRead24h(b *testing.B) {
	for _, c := range []struct {
		services, models, others int
		genAI                    bool
	}{
		{10, 5, 1000, true}, // 2,550 GenAI series
		{0, 0, 1000, false}, // none: the cost of finding out
	} {
		b.Run(fmt.Sprintf("genai=%d/others=%d", c.services*c.models*51, c.others), func(b *testing.B) {
			ms, end := benchStore(b, c.services, c.models, c.others, c.genAI)
			q := &Query{Start: uint64(end - int64(24*time.Hour)), End: uint64(end), GroupBy: []string{"model"}}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				u, err := Read(context.Background(), ms, q, nil, noSpans)
				if err != nil {
					b.Fatal(err)
				}
				if c.genAI && len(u.Groups) != c.models {
					b.Fatalf("%d groups, want %d", len(u.Groups), c.models)
				}
			}
		})
	}
}
