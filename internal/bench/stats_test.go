package bench

import (
	"math"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	one := []float64{5}
	ten := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1} // unsorted on purpose
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100 .. 1
	}
	cases := []struct {
		name string
		s    []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"single p50", one, 50, 5},
		{"single p99", one, 99, 5},
		{"ten p50", ten, 50, 5},      // ceil(5)=5th
		{"ten p95", ten, 95, 10},     // ceil(9.5)=10th
		{"ten p90", ten, 90, 9},      // ceil(9)=9th, exact rank
		{"ten p10", ten, 10, 1},      // ceil(1)=1st
		{"ten p11", ten, 11, 2},      // ceil(1.1)=2nd
		{"ten p0 is min", ten, 0, 1}, // clamped
		{"ten p100 is max", ten, 100, 10},
		{"hundred p99", hundred, 99, 99},
		{"hundred p95", hundred, 95, 95},
		{"hundred p99.5", hundred, 99.5, 100},
	}
	for _, c := range cases {
		if got := Percentile(c.s, c.p); got != c.want {
			t.Errorf("%s: Percentile(p=%v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
	if ten[0] != 10 {
		t.Errorf("Percentile sorted its input in place")
	}
}

func TestSummarizeLatency(t *testing.T) {
	d := make([]time.Duration, 200)
	for i := range d {
		d[i] = time.Duration(i+1) * time.Millisecond // 1..200 ms
	}
	l := SummarizeLatency(d)
	want := Latency{Samples: 200, P50: 100, P95: 190, P99: 198, Max: 200}
	if l != want {
		t.Fatalf("SummarizeLatency = %+v, want %+v", l, want)
	}
	if z := SummarizeLatency(nil); z != (Latency{}) {
		t.Fatalf("SummarizeLatency(nil) = %+v, want zero", z)
	}
}

func TestSpreadOf(t *testing.T) {
	s := SpreadOf([]float64{3, 1, 2, 5, 4})
	if s != (Spread{Median: 3, Min: 1, Max: 5, N: 5}) {
		t.Fatalf("odd: %+v", s)
	}
	s = SpreadOf([]float64{4, 1, 3, 2})
	if s != (Spread{Median: 2.5, Min: 1, Max: 4, N: 4}) {
		t.Fatalf("even: %+v", s)
	}
	s = SpreadOf([]float64{math.NaN(), 7})
	if s != (Spread{Median: 7, Min: 7, Max: 7, N: 1}) {
		t.Fatalf("NaN ignored: %+v", s)
	}
	if s := SpreadOf(nil); !math.IsNaN(s.Median) || s.N != 0 {
		t.Fatalf("empty: %+v", s)
	}
}

func TestMatchOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		only []string
		want bool
	}{
		{"otlp-proto-wal-c16", nil, true},
		{"otlp-proto-wal-c16", []string{"otlp-proto-wal-c1"}, true},
		{"otlp-proto-wal-c16", []string{"otlp-proto-wal-c1$"}, false},
		{"otlp-proto-wal-c1", []string{"otlp-proto-wal-c1$"}, true},
		{"otlp-json-wal-c1", []string{"grpc", "json"}, true},
		{"otlp-json-wal-c1", []string{"grpc", ""}, false},
		{"x", []string{"$"}, false},
	} {
		if got := matchOnly(c.name, c.only); got != c.want {
			t.Errorf("matchOnly(%q, %q) = %v, want %v", c.name, c.only, got, c.want)
		}
	}
}
