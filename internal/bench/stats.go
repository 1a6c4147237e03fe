package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the nearest-rank percentile p (0 < p <= 100) of samples:
// the smallest sample such that at least p% of all samples are <= it, that
// is sorted[ceil(p/100*n)-1]. p <= 0 gives the minimum. It is exact (no
// interpolation, no sketch) and returns 0 for no samples. samples is not
// modified.
func Percentile(samples []float64, p float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	if p <= 0 {
		return s[0]
	}
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Latency summarises latency samples: exact nearest-rank percentiles in
// milliseconds over every sample.
type Latency struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50_ms"`
	P95     float64 `json:"p95_ms"`
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
}

// SummarizeLatency reduces durations to a Latency.
func SummarizeLatency(d []time.Duration) Latency {
	ms := make([]float64, len(d))
	for i, x := range d {
		ms[i] = float64(x) / float64(time.Millisecond)
	}
	slices.Sort(ms)
	l := Latency{Samples: len(ms)}
	if len(ms) > 0 {
		l.P50, l.P95, l.P99, l.Max = percentileSorted(ms, 50), percentileSorted(ms, 95), percentileSorted(ms, 99), ms[len(ms)-1]
	}
	return l
}

// Spread is the median, minimum and maximum of one metric across runs.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// SpreadOf returns the median (mean of the middle two for an even count),
// minimum and maximum of xs; NaN values are ignored.
func SpreadOf(xs []float64) Spread {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: med, Min: s[0], Max: s[n-1], N: n}
}
