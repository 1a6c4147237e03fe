package metricstore

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// A selection large enough to be decoded on several CPUs (internal/parallel)
// answers exactly what the one-CPU decoding answers, over series split
// between two blocks and the head.
func TestSelectParallelEqualsSequential(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	const series, points = 300, 120 // two blocks of 9,300 and 9,000 samples, 17,700 in the head: each path over parallel.MinWork
	for k := range points {
		var ms []*metricspb.Metric
		for i := range series {
			ms = append(ms, gauge("temp", int64(k)*15_000, float64(i*k)/3, strKV("inst", fmt.Sprint(i))))
		}
		if _, err := s.AppendMetrics("", store.MetricFormatProto, request("svc", ms...)); err != nil {
			t.Fatal(err)
		}
		if k == 30 || k == 60 {
			if err := s.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	prev := runtime.GOMAXPROCS(1)
	seq, err := s.SelectSeries("", 0, math.MaxInt64, eq("temp"))
	runtime.GOMAXPROCS(4)
	par, perr := s.SelectSeries("", 0, math.MaxInt64, eq("temp"))
	runtime.GOMAXPROCS(prev)
	if err != nil || perr != nil {
		t.Fatal(err, perr)
	}
	if len(seq) != series || len(par) != series {
		t.Fatalf("%d series on one CPU, %d on several, want %d", len(seq), len(par), series)
	}
	for i := range seq {
		a, b := seq[i], par[i]
		if store.CompareLabels(a.Labels, b.Labels) != 0 || len(a.Samples) != points || len(b.Samples) != points {
			t.Fatalf("series %d: %v (%d samples) against %v (%d samples), want %d samples", i, a.Labels, len(a.Samples), b.Labels, len(b.Samples), points)
		}
		for j := range a.Samples {
			if a.Samples[j] != b.Samples[j] {
				t.Fatalf("%v sample %d: %v against %v", a.Labels, j, a.Samples[j], b.Samples[j])
			}
		}
	}
}
