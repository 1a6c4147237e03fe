package metricstore

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rastro-dev/rastro/internal/store"
)

// Every sample decodes to exactly what was appended, whatever the spacing
// of times (regular, jittered, huge jumps, negative) and values.
func TestChunkRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		n := 1 + r.IntN(300)
		var a appender
		var want []store.Sample
		ts := int64(r.Uint64()>>2) - 1<<60
		v := 0.0
		for i := 0; i < n; i++ {
			switch r.IntN(6) {
			case 0:
				ts += 15000
			case 1:
				ts += int64(r.IntN(1 << 30))
			case 2:
				ts += int64(r.IntN(20)) + 1
			case 3:
				ts += 15000 + int64(r.IntN(3000)) - 1500
			default:
				ts += int64(r.Uint32()) + 1
			}
			switch r.IntN(5) {
			case 0:
			case 1:
				v += 1
			case 2:
				v = r.NormFloat64() * 1e6
			case 3:
				v = math.Float64frombits(r.Uint64())
				if math.IsNaN(v) {
					v = 0
				}
			default:
				v = float64(r.IntN(100))
			}
			a.append(ts, v)
			want = append(want, store.Sample{T: ts, V: v})
		}
		got, err := decodeChunk(a.bytes(), n, math.MinInt64, math.MaxInt64, nil)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if len(got) != len(want) {
			t.Fatalf("iter %d: %d samples, want %d", iter, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("iter %d: sample %d = %v, want %v", iter, i, got[i], want[i])
			}
		}
		// A window keeps exactly the samples inside it.
		lo, hi := want[len(want)/3].T, want[2*len(want)/3].T
		got, _ = decodeChunk(a.bytes(), n, lo, hi, nil)
		if len(got) != 2*len(want)/3-len(want)/3+1 {
			t.Fatalf("iter %d: window kept %d samples, want %d", iter, len(got), 2*len(want)/3-len(want)/3+1)
		}
	}
}

// A regular scrape of a slowly changing gauge costs under 2 bytes a point.
func TestChunkBytesPerRegularGaugePoint(t *testing.T) {
	var a appender
	ts, n := int64(1_700_000_000_000), 7200
	for i := 0; i < n; i++ {
		a.append(ts+int64(i)*15000, float64(100+i%5))
	}
	if per := float64(len(a.bytes())) / float64(n); per >= 2 {
		t.Fatalf("%.2f bytes a point, want < 2", per)
	}
}

func BenchmarkChunkAppend(b *testing.B) {
	b.ReportAllocs()
	var a appender
	for i := 0; i < b.N; i++ {
		if a.n == 1000 {
			a = appender{}
		}
		a.append(int64(i)*15000, float64(i%50))
	}
	b.ReportMetric(float64(len(a.bytes()))/float64(max(a.n, 1)), "bytes/sample")
}

// Reading a window from the marks of a chunk being written equals decoding
// the whole chunk and keeping the window, for irregular times (every
// delta-of-delta width), values of every XOR shape, and windows before,
// inside, across and after the chunk.
func TestAppenderMarksEqualFullDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	var a appender
	tt, v := int64(1_000_000), 0.0
	for range 2000 {
		switch r.IntN(6) {
		case 0:
			tt += 15_000
		case 1:
			tt += 15_000 + int64(r.IntN(100))
		case 2:
			tt += int64(r.IntN(1 << 19))
		default:
			tt += 1 + int64(r.IntN(30_000))
		}
		switch r.IntN(4) {
		case 0: // unchanged
		case 1:
			v += float64(r.IntN(10))
		case 2:
			v = r.NormFloat64() * 1e6
		default:
			v = float64(r.Uint64())
		}
		a.append(tt, v)
	}
	if len(a.marks) < 10 {
		t.Fatalf("%d marks in 2,000 samples", len(a.marks))
	}
	all, err := decodeChunk(a.bytes(), a.n, math.MinInt64, math.MaxInt64, nil)
	if err != nil || len(all) != a.n {
		t.Fatalf("full decode: %d samples, %v", len(all), err)
	}
	first, last := all[0].T, all[len(all)-1].T
	for range 500 {
		mint := first - 1000 + r.Int64N(last-first+2000)
		maxt := mint + r.Int64N(last-first+1)
		var want []store.Sample
		for _, s := range all {
			if s.T >= mint && s.T <= maxt {
				want = append(want, s)
			}
		}
		got, err := a.samples(mint, maxt, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("[%d, %d]: %d samples, want %d", mint, maxt, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] && !(math.IsNaN(got[i].V) && math.IsNaN(want[i].V)) {
				t.Fatalf("[%d, %d] sample %d: %v, want %v", mint, maxt, i, got[i], want[i])
			}
		}
	}
}
