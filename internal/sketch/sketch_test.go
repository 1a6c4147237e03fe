package sketch

import (
	"bytes"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactQuantile is the reference: the value of rank floor(q*(n-1)).
func exactQuantile(sorted []uint64, q float64) float64 {
	return float64(sorted[int(q*float64(len(sorted)-1))])
}

var quantiles = []float64{0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1}

func checkQuantiles(t *testing.T, what string, s *Sketch, values []uint64) {
	t.Helper()
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	if s.Count() != uint64(len(values)) || s.Min() != sorted[0] || s.Max() != sorted[len(sorted)-1] {
		t.Fatalf("%s: count/min/max %d/%d/%d, want %d/%d/%d", what, s.Count(), s.Min(), s.Max(),
			len(values), sorted[0], sorted[len(sorted)-1])
	}
	for _, q := range quantiles {
		got, want := s.Quantile(q), exactQuantile(sorted, q)
		if math.Abs(got-want) > Alpha*want*(1+1e-9) {
			t.Fatalf("%s: Quantile(%g) = %g, exact %g: relative error %g > %g", what, q, got, want, math.Abs(got-want)/want, Alpha)
		}
	}
}

type dist struct {
	name string
	gen  func(r *rand.Rand) uint64
}

var dists = []dist{
	{"uniform-ms", func(r *rand.Rand) uint64 { return 1e6 + r.Uint64N(1e9) }},
	{"lognormal", func(r *rand.Rand) uint64 { return uint64(math.Exp(18 + 1.5*r.NormFloat64())) }},
	{"exponential", func(r *rand.Rand) uint64 { return uint64(r.ExpFloat64() * 5e7) }},
	{"with-zeros", func(r *rand.Rand) uint64 {
		if r.IntN(5) == 0 {
			return 0
		}
		return r.Uint64N(1000)
	}},
	{"tiny", func(r *rand.Rand) uint64 { return r.Uint64N(4) }},
	{"huge", func(r *rand.Rand) uint64 { return math.MaxUint64 - r.Uint64N(1e15) }},
	{"pareto", func(r *rand.Rand) uint64 { return uint64(1e5 / math.Pow(1-r.Float64(), 1.2)) }},
	{"constant", func(r *rand.Rand) uint64 { return 123456789 }},
}

func gen(seed uint64, d dist, n int) []uint64 {
	r := rand.New(rand.NewPCG(seed, 99))
	out := make([]uint64, n)
	for i := range out {
		out[i] = d.gen(r)
	}
	return out
}

func sketchOf(values []uint64) *Sketch {
	s := New()
	for _, v := range values {
		s.Add(v)
	}
	return s
}

func TestQuantileRelativeError(t *testing.T) {
	for _, d := range dists {
		for seed := uint64(1); seed <= 3; seed++ {
			for _, n := range []int{1, 2, 7, 100, 20000} {
				values := gen(seed, d, n)
				checkQuantiles(t, d.name, sketchOf(values), values)
			}
		}
	}
}

func TestEmpty(t *testing.T) {
	var s Sketch
	if s.Count() != 0 || !math.IsNaN(s.Quantile(0.5)) {
		t.Fatalf("empty sketch: count %d, p50 %g", s.Count(), s.Quantile(0.5))
	}
	s.Add(5)
	for _, q := range []float64{-0.1, 1.1, math.NaN()} {
		if !math.IsNaN(s.Quantile(q)) {
			t.Fatalf("Quantile(%g) = %g, want NaN", q, s.Quantile(q))
		}
	}
}

func encode(s *Sketch) []byte { return s.AppendBinary(nil) }

// TestMergeEqualsUnion: merging the sketches of parts gives the same sketch
// (bucket for bucket, hence the same encoding) as sketching the union.
func TestMergeEqualsUnion(t *testing.T) {
	for _, d := range dists {
		values := gen(7, d, 5000)
		whole := sketchOf(values)
		r := rand.New(rand.NewPCG(8, 8))
		var parts []*Sketch
		for lo := 0; lo < len(values); {
			hi := min(len(values), lo+1+r.IntN(900))
			parts = append(parts, sketchOf(values[lo:hi]))
			lo = hi
		}
		parts = append(parts, New(), nil)
		r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		merged := New()
		for _, p := range parts {
			merged.Merge(p)
		}
		if !bytes.Equal(encode(merged), encode(whole)) {
			t.Fatalf("%s: merge of %d parts differs from the sketch of the union", d.name, len(parts))
		}
		checkQuantiles(t, d.name+" merged", merged, values)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, d := range dists {
		for _, n := range []int{0, 1, 3, 5000} {
			s := sketchOf(gen(3, d, n))
			b := encode(s)
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("%s/%d: Decode: %v", d.name, n, err)
			}
			if !bytes.Equal(encode(got), b) || got.Count() != s.Count() || got.Min() != s.Min() || got.Max() != s.Max() {
				t.Fatalf("%s/%d: round trip changed the sketch", d.name, n)
			}
			for _, q := range quantiles {
				if a, b := got.Quantile(q), s.Quantile(q); a != b && !(math.IsNaN(a) && math.IsNaN(b)) {
					t.Fatalf("%s/%d: Quantile(%g) %g after decode, %g before", d.name, n, q, a, b)
				}
			}
			if _, err := Decode(append(b, 0)); err == nil {
				t.Fatalf("%s/%d: trailing byte accepted", d.name, n)
			}
		}
	}
}

// TestBoundedBuckets adds values spread over the whole uint64 range: the
// sketch keeps at most MaxBuckets buckets, stays exact at the top and in
// count, min and max, and still decodes.
func TestBoundedBuckets(t *testing.T) {
	s := New()
	var values []uint64
	for v := uint64(1); v < math.MaxUint64/11; v = v*11/10 + 1 {
		s.Add(v)
		values = append(values, v)
	}
	s.Add(math.MaxUint64)
	values = append(values, math.MaxUint64)
	if len(s.counts) > MaxBuckets {
		t.Fatalf("%d buckets kept, bound %d", len(s.counts), MaxBuckets)
	}
	if s.Count() != uint64(len(values)) || s.Min() != 1 || s.Max() != math.MaxUint64 {
		t.Fatalf("count/min/max %d/%d/%d", s.Count(), s.Min(), s.Max())
	}
	slices.Sort(values)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		got, want := s.Quantile(q), exactQuantile(values, q)
		if math.Abs(got-want) > Alpha*want*(1+1e-9) {
			t.Fatalf("Quantile(%g) = %g, exact %g", q, got, want)
		}
	}
	if _, err := Decode(encode(s)); err != nil {
		t.Fatalf("Decode of a collapsed sketch: %v", err)
	}
	// Collapsing also bounds merges, and adding below the kept range.
	low := New()
	low.Add(1)
	high := New()
	high.Add(math.MaxUint64)
	high.Merge(low)
	high.Add(2)
	if len(high.counts) > MaxBuckets || high.Count() != 3 || high.Min() != 1 {
		t.Fatalf("merge across the whole range: %d buckets, count %d, min %d", len(high.counts), high.Count(), high.Min())
	}
}

func TestDecodeRejects(t *testing.T) {
	good := encode(sketchOf([]uint64{0, 5, 1000, 1e9}))
	cases := map[string][]byte{
		"empty":     {},
		"version":   {2, 0},
		"truncated": good[:len(good)-1],
		"zero total with buckets": func() []byte {
			b := slices.Clone(good)
			b[1] = 9 // count 9, buckets add up to 4
			return b
		}(),
	}
	for name, b := range cases {
		if _, err := Decode(b); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(New()))
	f.Add(encode(sketchOf([]uint64{0, 1, 2, 3, 1e9, math.MaxUint64})))
	f.Add(encode(sketchOf(gen(1, dists[1], 300))))
	f.Add([]byte{1, 5, 0, 1, 3, 2, 0, 2, 1, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		// A sketch that decodes behaves: stable re-encoding, answers in [min, max].
		again, err := Decode(encode(s))
		if err != nil || !bytes.Equal(encode(again), encode(s)) {
			t.Fatalf("re-encoding of a decoded sketch does not round-trip: %v", err)
		}
		if len(s.counts) > MaxBuckets {
			t.Fatalf("%d buckets", len(s.counts))
		}
		for _, q := range quantiles {
			v := s.Quantile(q)
			if s.Count() > 0 && (v < float64(s.Min()) || v > float64(s.Max())) {
				t.Fatalf("Quantile(%g) = %g outside [%d, %d]", q, v, s.Min(), s.Max())
			}
		}
		s.Merge(again)
		s.Add(7)
	})
}

func BenchmarkAdd(b *testing.B) {
	values := gen(1, dists[1], 4096)
	s := New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Add(values[i&4095])
	}
}

func BenchmarkMerge(b *testing.B) {
	x, y := sketchOf(gen(1, dists[1], 2000)), sketchOf(gen(2, dists[1], 2000))
	b.ReportAllocs()
	for b.Loop() {
		c := x.Clone()
		c.Merge(y)
	}
}

func BenchmarkQuantile(b *testing.B) {
	s := sketchOf(gen(1, dists[1], 20000))
	for b.Loop() {
		s.Quantile(0.99)
	}
}

func TestHeatmapMatchesRawBuckets(t *testing.T) {
	bounds := HeatmapBounds()
	for h := 1; h < len(bounds); h++ {
		if HeatmapBucket(bounds[h]) != h || (bounds[h] > 2 && HeatmapBucket(bounds[h]-1) != h-1) {
			t.Fatalf("bound %d = %d: bucket %d, the value below is in %d", h, bounds[h], HeatmapBucket(bounds[h]), HeatmapBucket(bounds[h]-1))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	s := New()
	want := map[int]uint64{}
	for range 20000 {
		v := uint64(math.Exp(rng.Float64() * 30))
		if rng.IntN(50) == 0 {
			v = 0
		}
		s.Add(v)
		want[HeatmapBucket(v)]++
	}
	got := map[int]uint64{}
	prev := -1
	s.Heatmap(func(h int, n uint64) {
		if h <= prev {
			t.Fatalf("bucket %d after %d", h, prev)
		}
		prev = h
		got[h] = n
	})
	if !maps.Equal(got, want) {
		t.Fatalf("heatmap from the sketch %v, from the values %v", got, want)
	}
}

func TestQuantilesEqualsQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for n := range 200 {
		s := New()
		for range n {
			v := uint64(math.Exp(rng.Float64() * 25))
			if rng.IntN(10) == 0 {
				v = 0
			}
			s.Add(v)
		}
		qs := []float64{0, 0.01, 0.5, 0.5, 0.9, 0.95, 0.99, 1}
		got := s.Quantiles(nil, qs...)
		for i, q := range qs {
			want := s.Quantile(q)
			if got[i] != want && !(math.IsNaN(got[i]) && math.IsNaN(want)) {
				t.Fatalf("n=%d: Quantiles[%v] = %v, Quantile = %v", n, q, got[i], want)
			}
		}
	}
}

// TestResetReuse: a sketch emptied by Reset and filled again encodes exactly
// as a new sketch filled with the same values, whatever ranges the values
// before and after cover (the reused buckets hold old counts).
func TestResetReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	reused := New()
	for round := range 300 {
		fresh := New()
		scale := math.Pow(10, float64(rng.IntN(9)))
		for range 1 + rng.IntN(300) {
			v := uint64(rng.Float64() * scale)
			fresh.Add(v)
			reused.Add(v)
		}
		if a, b := reused.AppendBinary(nil), fresh.AppendBinary(nil); !bytes.Equal(a, b) {
			t.Fatalf("round %d: a reused sketch encodes differently from a fresh one", round)
		}
		reused.Reset()
		if reused.Count() != 0 || !bytes.Equal(reused.AppendBinary(nil), New().AppendBinary(nil)) {
			t.Fatalf("round %d: Reset left %d values", round, reused.Count())
		}
	}
}
