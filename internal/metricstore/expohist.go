package metricstore

import (
	"math"
	"strconv"

	"github.com/rastro-dev/rastro/internal/otlp"
)

// OpenTelemetry's range of exponential histogram scales (data model,
// "Exponential Scale").
const (
	minExpScale = -10
	maxExpScale = 20
)

// expBucket is one classic bucket made of an exponential histogram's
// buckets: its upper bound and the count of the values in it (not
// cumulative).
type expBucket struct {
	upper float64
	count uint64
}

// classicBuckets turns an exponential-histogram point into classic buckets,
// ascending by upper bound, without the +Inf one (the point's count).
//
// A point of scale s > 0 is downscaled to scale 0 first: index i at scale s
// is index i >> s at scale 0 (adjacent buckets merge exactly), so the
// bounds are powers of two whatever scale the SDK chose, and stay the same
// when it changes scale. A point of scale s <= 0 keeps its scale (its
// bounds are powers of two already, 2^(2^-s) apart). Per the data model, at
// scale s with base = 2^(2^-s), positive bucket i holds (base^i, base^(i+1)],
// negative bucket i mirrors it ([-base^(i+1), -base^i)), and the zero bucket
// holds [-zero_threshold, zero_threshold]. The bounds given are: the
// negative buckets' upper bounds -base^i (most negative first), the zero
// bucket's (the zero threshold, 0 when unset) when it holds anything or
// negative buckets exist, then the positive buckets' base^(i+1). Every
// bucket of the point's index range is given, empty ones included, so a
// bucket series does not come and go with its count. A bound too large or
// too small for a float64 joins its neighbour (+Inf, or the next bound up).
func classicBuckets(p *otlp.MetricPoint) []expBucket {
	scale := min(p.Scale, 0)
	shift := uint(p.Scale - scale)
	// base^i at the target scale is 2^(i * 2^-scale).
	pow := func(i int64) float64 { return math.Ldexp(1, int(i<<uint(-scale))) }
	var out []expBucket
	add := func(upper float64, n uint64) {
		if upper == 0 {
			upper = 0 // no "-0"
		}
		if k := len(out) - 1; k >= 0 && (out[k].upper == upper || math.IsInf(out[k].upper, -1)) {
			// The same bound once formatted (or one below every float64):
			// one bucket.
			out[k].upper = upper
			out[k].count += n
			return
		}
		out = append(out, expBucket{upper, n})
	}
	side := func(b otlp.ExpBuckets) (lo, hi int64, counts map[int64]uint64) {
		if len(b.Counts) == 0 {
			return 0, -1, nil
		}
		counts = make(map[int64]uint64, len(b.Counts))
		lo = int64(b.Offset) >> shift
		hi = (int64(b.Offset) + int64(len(b.Counts)) - 1) >> shift
		for k, n := range b.Counts {
			counts[(int64(b.Offset)+int64(k))>>shift] += n
		}
		return lo, hi, counts
	}
	nlo, nhi, neg := side(p.Negative)
	for i := nhi; i >= nlo; i-- {
		add(-pow(i), neg[i])
	}
	if p.ZeroCount > 0 || len(p.Negative.Counts) > 0 {
		add(p.ZeroThreshold, p.ZeroCount)
	}
	plo, phi, pos := side(p.Positive)
	for i := plo; i <= phi; i++ {
		add(pow(i+1), pos[i])
	}
	// Bounds past the float64 range are the +Inf bucket's.
	for len(out) > 0 && math.IsInf(out[len(out)-1].upper, 1) {
		out = out[:len(out)-1]
	}
	return out
}

// checkExpScale says what is wrong with an exponential histogram point that
// cannot be turned into buckets, or "".
func checkExpScale(p *otlp.MetricPoint) string {
	if p.Scale < minExpScale || p.Scale > maxExpScale {
		return "exponential histogram scale " + strconv.Itoa(int(p.Scale)) + " is outside OpenTelemetry's range [-10, 20]"
	}
	if math.IsNaN(p.ZeroThreshold) || math.IsInf(p.ZeroThreshold, 0) || p.ZeroThreshold < 0 {
		return "exponential histogram zero_threshold " + strconv.FormatFloat(p.ZeroThreshold, 'g', -1, 64) + " is not a finite number >= 0"
	}
	return ""
}
