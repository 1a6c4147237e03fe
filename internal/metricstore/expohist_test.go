package metricstore

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/promql"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/vfs"
)

func expHist(name, unit string, temp metricspb.AggregationTemporality, startMs, tMs int64, p *metricspb.ExponentialHistogramDataPoint) *metricspb.Metric {
	p = proto.Clone(p).(*metricspb.ExponentialHistogramDataPoint)
	p.StartTimeUnixNano, p.TimeUnixNano = uint64(startMs)*1e6, uint64(tMs)*1e6
	return &metricspb.Metric{Name: name, Unit: unit, Data: &metricspb.Metric_ExponentialHistogram{ExponentialHistogram: &metricspb.ExponentialHistogram{
		AggregationTemporality: temp, DataPoints: []*metricspb.ExponentialHistogramDataPoint{p}}}}
}

// bucketLines reads name_bucket's series at time t as "le=value", in the
// order of their bounds.
func bucketLines(t *testing.T, s *Store, name string, tMs int64) []string {
	t.Helper()
	got, err := s.SelectSeries("", tMs, tMs, eq(name+"_bucket"))
	if err != nil {
		t.Fatal(err)
	}
	type b struct {
		le    string
		upper float64
		v     float64
	}
	var bs []b
	for _, sd := range got {
		le := sd.Labels.Get("le")
		var upper float64
		if _, err := fmt.Sscan(le, &upper); err != nil && le != "+Inf" {
			t.Fatalf("le %q: %v", le, err)
		}
		if le == "+Inf" {
			upper = math.Inf(1)
		}
		if len(sd.Samples) != 1 {
			t.Fatalf("series %v: %v, want one sample at %d", sd.Labels, sd.Samples, tMs)
		}
		bs = append(bs, b{le, upper, sd.Samples[0].V})
	}
	slices.SortFunc(bs, func(x, y b) int { return cmpF(x.upper, y.upper) })
	var out []string
	for _, x := range bs {
		out = append(out, fmt.Sprintf("%s=%g", x.le, x.v))
	}
	return out
}

// An exponential histogram of scale 2 is downscaled to scale 0 (bounds at
// powers of two) and stored as cumulative _bucket series: negative buckets,
// the zero bucket, positive buckets, +Inf; exemplars go to their bucket.
func TestExponentialHistogramBuckets(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	sum := 30.0
	// Scale 2 (base 2^(1/4)), so index i at scale 0 is i >> 2.
	// Positive: offset 3, counts 1 2 3 4 5 are indices 3..7:
	//   3 >> 2 = 0 -> (1, 2]: 1;  4..7 >> 2 = 1 -> (2, 4]: 2+3+4+5 = 14.
	// Negative: offset -2, counts 6 7 0 0 0 0 8 are indices -2..4:
	//   -2, -1 >> 2 = -1 -> [-1, -0.5): 13;  0..3 >> 2 = 0 -> [-2, -1): 0;
	//   4 >> 2 = 1 -> [-4, -2): 8.
	// Zero bucket: 4 values within 0.001.
	// Ascending with cumulative counts: le=-2: 8, -1: 8, -0.5: 21,
	// 0.001: 25, 2: 26, 4: 40, +Inf: the count, 40.
	p := &metricspb.ExponentialHistogramDataPoint{
		Count: 40, Sum: &sum, Scale: 2, ZeroCount: 4, ZeroThreshold: 0.001,
		Positive: &metricspb.ExponentialHistogramDataPoint_Buckets{Offset: 3, BucketCounts: []uint64{1, 2, 3, 4, 5}},
		Negative: &metricspb.ExponentialHistogramDataPoint_Buckets{Offset: -2, BucketCounts: []uint64{6, 7, 0, 0, 0, 0, 8}},
		Exemplars: []*metricspb.Exemplar{
			{TimeUnixNano: 900 * 1e6, Value: &metricspb.Exemplar_AsDouble{AsDouble: 3}},
			{TimeUnixNano: 900 * 1e6, Value: &metricspb.Exemplar_AsDouble{AsDouble: -1.5}},
		},
	}
	res, err := s.AppendMetrics("", store.MetricFormatProto, request("svc", expHist("temp.change", "", cum, 0, 1000, p)))
	if err != nil || res.Accepted != 1 || res.Rejected != 0 {
		t.Fatalf("append: %+v %v", res, err)
	}
	want := []string{"-2=8", "-1=8", "-0.5=21", "0.001=25", "2=26", "4=40", "+Inf=40"}
	if got := bucketLines(t, s, "temp_change", 1000); !slices.Equal(got, want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	for name, v := range map[string]float64{"temp_change_sum": 30, "temp_change_count": 40} {
		got, _ := s.SelectSeries("", 0, 2000, eq(name))
		if len(got) != 1 || !slices.Equal(got[0].Samples, []store.Sample{{T: 1000, V: v}}) {
			t.Fatalf("%s: %+v, want %v at 1000", name, got, v)
		}
	}
	ex, err := s.Exemplars("", 0, 2000, eq("temp_change_bucket"))
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, e := range ex {
		for _, x := range e.Exemplars {
			at = append(at, fmt.Sprintf("%g@%s", x.V, e.Labels.Get("le")))
		}
	}
	slices.Sort(at)
	if !slices.Equal(at, []string{"-1.5@-1", "3@4"}) {
		t.Fatalf("exemplars on %v, want -1.5 on le=-1 and 3 on le=4", at)
	}
}

// A point of scale 0 or below keeps its scale; every bucket of its range
// is a series, empty ones included. histogram_quantile works on them.
func TestExponentialHistogramNegativeScaleAndQuantile(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	// Scale -1: base 4. Offset -1, counts 2 0 3 are indices -1, 0, 1 with
	// upper bounds 4^0 = 1, 4^1 = 4, 4^2 = 16. No zero bucket (nothing in
	// it and no negative buckets).
	p := &metricspb.ExponentialHistogramDataPoint{Count: 5, Scale: -1,
		Positive: &metricspb.ExponentialHistogramDataPoint_Buckets{Offset: -1, BucketCounts: []uint64{2, 0, 3}}}
	if _, err := s.AppendMetrics("", store.MetricFormatProto, request("svc", expHist("req.size", "By", cum, 0, 1000, p))); err != nil {
		t.Fatal(err)
	}
	want := []string{"1=2", "4=2", "16=5", "+Inf=5"}
	if got := bucketLines(t, s, "req_size_bytes", 1000); !slices.Equal(got, want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	// The median: rank 2.5 falls in (4, 16], which holds 3 of the values
	// past the 2 below it: 4 + 12 x (0.5 / 3) = 6.
	expr, err := promql.Parse("histogram_quantile(0.5, req_size_bytes_bucket)")
	if err != nil {
		t.Fatal(err)
	}
	r, err := promql.Instant(s, promql.Query{Expr: expr, Start: 1000})
	if err != nil || len(r.Vector) != 1 || r.Vector[0].F != 6 {
		t.Fatalf("histogram_quantile: %+v %v, want 6", r, err)
	}
}

// The bounds do not move when the SDK changes scale: a point of scale 3
// and a later one of scale 1 give the same le series.
func TestExponentialHistogramStableBounds(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	// Scale 3: indices 8..15 are scale 0's index 1, (2, 4]; 16 is index 2, (4, 8].
	p1 := &metricspb.ExponentialHistogramDataPoint{Count: 3, Scale: 3,
		Positive: &metricspb.ExponentialHistogramDataPoint_Buckets{Offset: 8, BucketCounts: []uint64{1, 0, 0, 0, 0, 0, 0, 0, 2}}}
	// Scale 1: indices 2, 3 are index 1; 4 is index 2.
	p2 := &metricspb.ExponentialHistogramDataPoint{Count: 7, Scale: 1,
		Positive: &metricspb.ExponentialHistogramDataPoint_Buckets{Offset: 2, BucketCounts: []uint64{1, 2, 4}}}
	s.AppendMetrics("", store.MetricFormatProto, request("svc", expHist("lat", "", cum, 0, 1000, p1)))
	s.AppendMetrics("", store.MetricFormatProto, request("svc", expHist("lat", "", cum, 0, 2000, p2)))
	if got, want := bucketLines(t, s, "lat", 1000), []string{"4=1", "8=3", "+Inf=3"}; !slices.Equal(got, want) {
		t.Fatalf("first point: %v, want %v", got, want)
	}
	if got, want := bucketLines(t, s, "lat", 2000), []string{"4=3", "8=7", "+Inf=7"}; !slices.Equal(got, want) {
		t.Fatalf("second point: %v, want %v", got, want)
	}
}

// A point with a scale outside OpenTelemetry's range is refused by name,
// not stored; the request's other points are.
func TestExponentialHistogramBadScaleRefused(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	bad := &metricspb.ExponentialHistogramDataPoint{Count: 1, Scale: 21,
		Positive: &metricspb.ExponentialHistogramDataPoint_Buckets{BucketCounts: []uint64{1}}}
	res, err := s.AppendMetrics("", store.MetricFormatProto, request("svc", expHist("odd", "", cum, 0, 1000, bad), gauge("g", 1000, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || res.Rejected != 1 || !strings.Contains(res.RejectMsg, `"odd"`) || !strings.Contains(res.RejectMsg, "scale 21") {
		t.Fatalf("%+v, want the scale-21 point refused by name", res)
	}
	if got, _ := s.SeriesLabels("", 0, 2000, eq("odd_count")); len(got) != 0 {
		t.Fatalf("stored: %v", got)
	}
}
