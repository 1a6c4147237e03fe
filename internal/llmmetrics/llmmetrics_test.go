package llmmetrics

import (
	"context"
	"math"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"math/rand/v2"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/metricstore"

	"github.com/rastro-dev/rastro/internal/store"
)

func series(name string, delta bool, samples ...store.Sample) store.SeriesData {
	ls := store.Labels{{Name: store.MetricName, Value: name}, {Name: "gen_ai_request_model", Value: "m"}, {Name: "service_name", Value: "svc"}}
	if delta {
		ls = append(ls, store.Label{Name: temporalityLabel, Value: "delta"})
	}
	return store.SeriesData{Labels: store.SortLabels(ls), Samples: samples}
}

func total(incs []increase) float64 {
	var s float64
	for _, in := range incs {
		s += in.v
	}
	return s
}

// Increases of a cumulative series over windows, with known answers: the
// sample before the window is the base, a drop is a reset, a series whose
// first sample is in the window counts it whole.
func TestIncreasesKnownAnswers(t *testing.T) {
	cum := series(durationCount, false, store.Sample{T: 10, V: 3}, store.Sample{T: 20, V: 5}, store.Sample{T: 30, V: 2}, store.Sample{T: 40, V: 6})
	for _, c := range []struct {
		start, end int64
		want       float64
	}{
		{0, 100, 3 + 2 + 2 + 4}, // the first sample whole, +2, reset to 2, +4
		{11, 100, 2 + 2 + 4},
		{20, 100, 2 + 2 + 4}, // [start, end): the sample at 20 is inside
		{21, 100, 2 + 4},
		{31, 100, 4},
		{0, 30, 3 + 2}, // the sample at 30 is outside
		{41, 100, 0},
	} {
		if got := total(increases(&cum, c.start, c.end, nil)); got != c.want {
			t.Errorf("cumulative [%d, %d): %v, want %v", c.start, c.end, got, c.want)
		}
	}
	delta := series(durationCount, true, store.Sample{T: 10, V: 3}, store.Sample{T: 20, V: 2}, store.Sample{T: 30, V: 0}, store.Sample{T: 40, V: 4})
	if got := total(increases(&delta, 11, 100, nil)); got != 6 {
		t.Errorf("delta: %v, want 6", got)
	}
}

// The same calls counted from a cumulative series and from the matching
// delta series agree over every window, for random call counts with
// resets that show as a drop (the SDK starts again from zero).
func TestCumulativeEqualsDelta(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		var cum, del []store.Sample
		running := 0.0
		for i := range 30 {
			t := int64(i*10 + 10)
			n := float64(r.IntN(4))
			if r.IntN(8) == 0 && n < running {
				running = 0 // a restart; one whose count passes the old one at once is not seen (as in Prometheus)
			}
			running += n
			cum = append(cum, store.Sample{T: t, V: running})
			del = append(del, store.Sample{T: t, V: n})
		}
		c, d := series(durationCount, false, cum...), series(durationCount, true, del...)
		start, end := int64(r.IntN(320)), int64(r.IntN(320))
		if got, want := total(increases(&c, start, end, nil)), total(increases(&d, start, end, nil)); got != want {
			t.Fatalf("[%d, %d): cumulative %v, delta %v\n%v\n%v", start, end, got, want, cum, del)
		}
	}
}

// durationRequest is an OTLP export of gen_ai.client.operation.duration
// from service svc for model m, delta, one point per (time ms, calls).
func durationRequest(points ...[2]int64) []byte {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	var dps []*metricspb.HistogramDataPoint
	for _, p := range points {
		sum := 0.5 * float64(p[1])
		dps = append(dps, &metricspb.HistogramDataPoint{Attributes: []*commonpb.KeyValue{str("gen_ai.request.model", "m")},
			TimeUnixNano: uint64(p[0]) * 1e6, Count: uint64(p[1]), Sum: &sum, ExplicitBounds: []float64{1}, BucketCounts: []uint64{uint64(p[1]), 0}})
	}
	b, err := proto.Marshal(&colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "svc")}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{Name: "gen_ai.client.operation.duration", Unit: "s",
			Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
				AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA, DataPoints: dps}}}}}},
	}}})
	if err != nil {
		panic(err)
	}
	return b
}

// An hour with spans of the service and model leaves that hour's metric
// calls out (counted in Ignored); the other hours count, per step bucket.
func TestSpansWinPerHour(t *testing.T) {
	h := time.Hour.Milliseconds()
	base := int64(1_800_000_000_000) / h * h // a whole hour
	mb, err := metricstore.Open(metricstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	if res, err := mb.AppendMetrics("", store.MetricFormatProto, durationRequest([2]int64{base + 10, 2}, [2]int64{base + h + 10, 3}, [2]int64{base + 2*h + 10, 5})); err != nil || res.Accepted != 3 {
		t.Fatalf("append: %+v %v", res, err)
	}
	var asked [2]int64
	spans := func(_ context.Context, from, to int64) (map[SpanHour]bool, error) {
		asked = [2]int64{from, to}
		return map[SpanHour]bool{{Service: "svc", Model: "m", Hour: (base + h) / 1000}: true}, nil
	}
	q := &Query{Start: uint64(base) * 1e6, End: uint64(base+3*h) * 1e6, GroupBy: []string{"model"}, Step: time.Hour}
	u, err := Read(context.Background(), mb, q, nil, spans)
	if err != nil {
		t.Fatal(err)
	}
	if asked != [2]int64{base / 1000, (base + 3*h) / 1000} {
		t.Fatalf("span hours asked for %v", asked)
	}
	if u.Ignored.Calls != 3 || len(u.Groups) != 2 || u.Groups[0].M.Metrics.Calls != 2 || u.Groups[1].M.Metrics.Calls != 5 ||
		u.Groups[1].M.Metrics.DurationSeconds != 2.5 ||
		u.Groups[1].Bucket != (base+2*h)/1000 || u.Groups[0].Key["model"] != "m" {
		t.Fatalf("usage %+v, want hours 0 and 2 counted (2 and 5 calls) and hour 1's 3 ignored", u)
	}
	// No GenAI series in the window: no span query.
	called := false
	u, err = Read(context.Background(), mb, &Query{Start: uint64(base+4*h) * 1e6, End: uint64(base+5*h) * 1e6}, nil,
		func(context.Context, int64, int64) (map[SpanHour]bool, error) { called = true; return nil, nil })
	if err != nil || called || len(u.Groups) != 0 {
		t.Fatalf("empty window: %+v %v, span query %v", u, err, called)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Absurd values a client may send neither overflow nor turn negative.
func TestCountBounds(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want int64
	}{{2.4, 2}, {2.5, 3}, {1e300, 1 << 53}, {math.Inf(1), 1 << 53}} {
		if got := count(c.v); got != c.want {
			t.Errorf("count(%v) = %d, want %d", c.v, got, c.want)
		}
	}
	// NaN and negative increases are never counted.
	s := series(durationCount, true, store.Sample{T: 1, V: math.NaN()}, store.Sample{T: 2, V: -3}, store.Sample{T: 3, V: 4})
	if got := total(increases(&s, 0, 10, nil)); got != 4 {
		t.Errorf("delta with NaN and negative samples: %v, want 4", got)
	}
	s = series(durationCount, false, store.Sample{T: 1, V: 5}, store.Sample{T: 2, V: math.NaN()}, store.Sample{T: 3, V: 7})
	if got := total(increases(&s, 2, 10, nil)); got != 2 {
		t.Errorf("cumulative with a NaN sample: %v, want 2 (7 - 5)", got)
	}
}

// The label this package reads is the one the metric store writes.
func TestTemporalityLabelIsTheStores(t *testing.T) {
	if temporalityLabel != metricstore.TemporalityLabel {
		t.Fatalf("temporalityLabel %q, metricstore.TemporalityLabel %q", temporalityLabel, metricstore.TemporalityLabel)
	}
}
