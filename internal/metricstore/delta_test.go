package metricstore

import (
	"slices"
	"strings"
	"testing"
	"time"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/rastro-dev/rastro/internal/promql"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/vfs"
)

const delta = metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA

func deltaSum(name string, monotonic bool, startMs, tMs int64, v float64) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: monotonic, AggregationTemporality: delta,
		DataPoints: []*metricspb.NumberDataPoint{{StartTimeUnixNano: uint64(startMs) * 1e6, TimeUnixNano: uint64(tMs) * 1e6,
			Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: v}}}}}}
}

func deltaHist(name string, startMs, tMs int64, bounds []float64, counts []uint64, sum float64) *metricspb.Metric {
	n := uint64(0)
	for _, c := range counts {
		n += c
	}
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{AggregationTemporality: delta,
		DataPoints: []*metricspb.HistogramDataPoint{{StartTimeUnixNano: uint64(startMs) * 1e6, TimeUnixNano: uint64(tMs) * 1e6,
			Count: n, Sum: &sum, ExplicitBounds: bounds, BucketCounts: counts}}}}}
}

// posExp is a delta exponential histogram point of scale 0 with positive
// buckets only.
func posExp(name string, startMs, tMs int64, offset int32, counts ...uint64) *metricspb.Metric {
	n := uint64(0)
	for _, c := range counts {
		n += c
	}
	return expHist(name, "", delta, startMs, tMs, &metricspb.ExponentialHistogramDataPoint{Count: n,
		Positive: &metricspb.ExponentialHistogramDataPoint_Buckets{Offset: offset, BucketCounts: counts}})
}

func mustAppend(t *testing.T, s *Store, ms ...*metricspb.Metric) store.MetricResult {
	t.Helper()
	res, err := s.AppendMetrics("", store.MetricFormatProto, request("svc", ms...))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func samplesOf(t *testing.T, s *Store, name string, more ...*store.LabelMatcher) []store.Sample {
	t.Helper()
	got, err := s.SelectSeries("", 0, 1<<40, append(eq(name), more...))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%s: %d series, want 1: %v", name, len(got), got)
	}
	return got[0].Samples
}

func le(v string) *store.LabelMatcher {
	m, _ := store.NewLabelMatcher(store.MatchEqual, "le", v)
	return m
}

// Delta sums become running totals stored at each point's time: 3, 4, 5 are
// 3, 7, 12, a gap between intervals is fine; a point whose interval
// overlaps the previous one, or goes back in time, is refused by name and
// changes nothing. The counter is ready for rate().
func TestDeltaSumToCumulative(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	for _, d := range []struct {
		start, end int64
		v          float64
	}{{0, 1000, 3}, {1000, 2000, 4}, {3000, 4000, 5}} { // a gap from 2000 to 3000
		if res := mustAppend(t, s, deltaSum("jobs.done", true, d.start, d.end, d.v)); res.Accepted != 1 || res.Rejected != 0 {
			t.Fatalf("delta %v: %+v", d, res)
		}
	}
	want := []store.Sample{{T: 1000, V: 3}, {T: 2000, V: 7}, {T: 4000, V: 12}}
	if got := samplesOf(t, s, "jobs_done_total"); !slices.Equal(got, want) {
		t.Fatalf("totals %v, want %v", got, want)
	}
	for _, bad := range [][2]int64{{3500, 5000}, {1000, 1500}} {
		res := mustAppend(t, s, deltaSum("jobs.done", true, bad[0], bad[1], 100), gauge("g", 5000, 1))
		if res.Accepted != 1 || res.Rejected != 1 || !strings.Contains(res.RejectMsg, `"jobs.done"`) || !strings.Contains(res.RejectMsg, "overlap") {
			t.Fatalf("interval %v: %+v, want it refused by name and the gauge kept", bad, res)
		}
	}
	if got := samplesOf(t, s, "jobs_done_total"); !slices.Equal(got, want) {
		t.Fatalf("after refusals: %v, want %v", got, want)
	}
	// The next interval goes on from 12.
	mustAppend(t, s, deltaSum("jobs.done", true, 4000, 5000, 6))
	want = append(want, store.Sample{T: 5000, V: 18})
	if got := samplesOf(t, s, "jobs_done_total"); !slices.Equal(got, want) {
		t.Fatalf("totals %v, want %v", got, want)
	}
	// increase over (2000, 5000] reads 12 and 18 at 4000 and 5000 (7 at
	// 2000 is outside): 6 over 1 s sampled; the window starts 2 s before the
	// first sample, more than 1.1 x the 1 s spacing, so it extrapolates half
	// a spacing there (and none at the end): 6 x 1.5 / 1 = 9.
	expr, _ := promql.Parse("increase(jobs_done_total[3s])")
	r, err := promql.Instant(s, promql.Query{Expr: expr, Start: 5000})
	if err != nil || len(r.Vector) != 1 || r.Vector[0].F != 9 {
		t.Fatalf("increase: %+v %v, want 9", r, err)
	}
	// A non-monotonic sum adds too, downwards as well: 5, -2 are 5, 3.
	mustAppend(t, s, deltaSum("queue.depth", false, 0, 1000, 5))
	mustAppend(t, s, deltaSum("queue.depth", false, 1000, 2000, -2))
	if got := samplesOf(t, s, "queue_depth"); !slices.Equal(got, []store.Sample{{T: 1000, V: 5}, {T: 2000, V: 3}}) {
		t.Fatalf("non-monotonic: %v, want 5 then 3", got)
	}
	// A point that ends before it starts is refused by name.
	res := mustAppend(t, s, deltaSum("jobs.done", true, 9000, 8000, 1))
	if res.Rejected != 1 || !strings.Contains(res.RejectMsg, `"jobs.done"`) || !strings.Contains(res.RejectMsg, "ends") {
		t.Fatalf("end before start: %+v", res)
	}
}

// A delta histogram's buckets, sum and count each get their running total.
func TestDeltaHistogramToCumulative(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	mustAppend(t, s, deltaHist("rpc.size", 0, 1000, []float64{1, 5}, []uint64{1, 2, 0}, 2.5))
	mustAppend(t, s, deltaHist("rpc.size", 1000, 2000, []float64{1, 5}, []uint64{0, 1, 3}, 10))
	// Cumulative buckets per point: le=1: 1, 0; le=5: 3, 1; +Inf: 3, 4.
	// Running totals: le=1: 1, 1; le=5: 3, 4; +Inf: 3, 7.
	for le_, want := range map[string][]float64{"1": {1, 1}, "5": {3, 4}, "+Inf": {3, 7}} {
		if got := samplesOf(t, s, "rpc_size_bucket", le(le_)); !slices.Equal(got, []store.Sample{{T: 1000, V: want[0]}, {T: 2000, V: want[1]}}) {
			t.Fatalf("le=%s: %v, want %v", le_, got, want)
		}
	}
	if got := samplesOf(t, s, "rpc_size_sum"); !slices.Equal(got, []store.Sample{{T: 1000, V: 2.5}, {T: 2000, V: 12.5}}) {
		t.Fatalf("sum: %v", got)
	}
	if got := samplesOf(t, s, "rpc_size_count"); !slices.Equal(got, []store.Sample{{T: 1000, V: 3}, {T: 2000, V: 7}}) {
		t.Fatalf("count: %v", got)
	}
}

// A delta exponential histogram's points have different bucket ranges; each
// is spread over every bound the histogram has had, so every bucket series
// stays the count of the values at or below its bound.
func TestDeltaExponentialHistogramToCumulative(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	mustAppend(t, s, posExp("lat", 0, 1000, 0, 2))     // 2 values in (1, 2]
	mustAppend(t, s, posExp("lat", 1000, 2000, 1, 3))  // 3 in (2, 4]
	mustAppend(t, s, posExp("lat", 2000, 3000, -1, 1)) // 1 in (0.5, 1]
	// At 1000: le=2: 2, +Inf: 2.
	// At 2000: le=2: 2 + 0 = 2; le=4 is new and starts from le=2's 2: 2 + 3 = 5; +Inf: 5.
	// At 3000: le=1 is new, nothing below: 0 + 1 = 1; le=2: 2 + 1 = 3; le=4: 5 + 1 = 6; +Inf: 6.
	for _, c := range []struct {
		t    int64
		want []string
	}{{1000, []string{"2=2", "+Inf=2"}}, {2000, []string{"2=2", "4=5", "+Inf=5"}}, {3000, []string{"1=1", "2=3", "4=6", "+Inf=6"}}} {
		if got := bucketLines(t, s, "lat", c.t); !slices.Equal(got, c.want) {
			t.Fatalf("at %d: %v, want %v", c.t, got, c.want)
		}
	}
	if got := samplesOf(t, s, "lat_count"); !slices.Equal(got, []store.Sample{{T: 1000, V: 2}, {T: 2000, V: 5}, {T: 3000, V: 6}}) {
		t.Fatalf("count: %v", got)
	}
}

// The totals go on across a close and reopen (the head sealed into a
// block), across a crash replayed from the WAL without a seal, and across
// a crash whose WAL continues a sealed block: the first delta after each
// continues from the series' newest stored sample.
func TestDeltaTotalsSurviveRestarts(t *testing.T) {
	fsys := vfs.NewMemFS()
	s := openMem(t, fsys)
	mustAppend(t, s, deltaSum("jobs", true, 0, 1000, 3), posExp("lat", 0, 1000, 0, 2))
	if err := s.Close(); err != nil { // seals: the totals are in a block
		t.Fatal(err)
	}
	s = openMem(t, fsys)
	mustAppend(t, s, deltaSum("jobs", true, 1000, 2000, 4), posExp("lat", 1000, 2000, 1, 3))
	// A crash now: the second point is only in the WAL; replay must add it
	// to the block's total again, not to zero.
	img := fsys.Crash(vfs.CrashOptions{})
	s.Close()
	s = openMem(t, img)
	mustAppend(t, s, deltaSum("jobs", true, 2000, 3000, 5))
	// And a crash with nothing sealed since the reopen: replay alone.
	img2 := img.Crash(vfs.CrashOptions{})
	s.Close()
	s = openMem(t, img2)
	defer s.Close()
	mustAppend(t, s, deltaSum("jobs", true, 3000, 4000, 6), posExp("lat", 3000, 4000, -1, 1))
	want := []store.Sample{{T: 1000, V: 3}, {T: 2000, V: 7}, {T: 3000, V: 12}, {T: 4000, V: 18}}
	if got := samplesOf(t, s, "jobs_total"); !slices.Equal(got, want) {
		t.Fatalf("totals %v, want %v", got, want)
	}
	// The exponential histogram's bounds came back from storage too: the
	// point at 4000 (1 value in (0.5, 1]) reaches le=2 and le=4.
	if got, want := bucketLines(t, s, "lat", 4000), []string{"1=1", "2=3", "4=6", "+Inf=6"}; !slices.Equal(got, want) {
		t.Fatalf("buckets at 4000: %v, want %v", got, want)
	}
	// An overlap with a total read back from storage is refused as well.
	if res := mustAppend(t, s, deltaSum("jobs", true, 3500, 5000, 1)); res.Rejected != 1 {
		t.Fatalf("overlap after restart: %+v", res)
	}
}

// Running totals idle for Options.DeltaIdle are dropped at a seal; the
// next delta reads the total back from the block.
func TestDeltaIdleTotalsDropped(t *testing.T) {
	s, err := Open(Options{Dir: "/data/metrics", FS: vfs.NewMemFS(), DeltaIdle: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustAppend(t, s, deltaSum("jobs", true, 0, 1000, 3))
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	n := len(s.deltas)
	s.mu.RUnlock()
	if n != 0 {
		t.Fatalf("%d running totals kept, want none", n)
	}
	mustAppend(t, s, deltaSum("jobs", true, 1000, 2000, 4))
	if got := samplesOf(t, s, "jobs_total"); !slices.Equal(got, []store.Sample{{T: 1000, V: 3}, {T: 2000, V: 7}}) {
		t.Fatalf("totals %v, want 3 then 7", got)
	}
}
