package server

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppendPromFloatMatchesStrconv checks the fast path of the JSON writer
// against strconv's shortest formatting, which Prometheus clients read: the
// same bytes for whole numbers, numbers with a few decimals, values just
// beside them (one ulp away, where a wrong shortcut would print the
// neighbour), huge and tiny values, and random bit patterns.
func TestAppendPromFloatMatchesStrconv(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.2, 0.3, 0.1 + 0.2, 42.5, -42.5, 1e-4, 1e-5, 0.00015,
		1e15, 1e15 - 1, 1e15 + 1, 999999999999999.9, 1 << 53, 1<<53 + 2, 1e21, 1e22, -1e300, 5e-324,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789012.3456, 0.8333333333333334, 1.0000000000000002}
	for range 200000 {
		var v float64
		switch r.IntN(5) {
		case 0:
			v = float64(r.Int64N(1<<54) - 1<<53)
		case 1:
			v = float64(r.Int64N(2e15)-1e15) / []float64{10, 100, 1000, 10000, 100000}[r.IntN(5)]
		case 2:
			v = float64(r.IntN(100000)) / 10000
			v = math.Nextafter(v, []float64{math.Inf(1), math.Inf(-1)}[r.IntN(2)])
		case 3:
			v = math.Float64frombits(r.Uint64())
		default:
			v = r.NormFloat64() * math.Pow(10, float64(r.IntN(30)-10))
		}
		vals = append(vals, v)
	}
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		want := strconv.FormatFloat(v, 'f', -1, 64)
		if got := string(appendPromFloat([]byte("x"), v)); got != "x"+want {
			t.Fatalf("appendPromFloat(%v) = %q, want %q", math.Float64bits(v), got[1:], want)
		}
	}
}
