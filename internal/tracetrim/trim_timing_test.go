package tracetrim

import (
	"encoding/json"
	"math/rand"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// BenchmarkTrim5000 trims 5,000-span traces: random wide, deep (over
// budget: its critical path alone is too long) and star shapes under the
// default budget, and a chain beside the critical path under a budget large
// enough to show half of it (the fill's worst case).
func BenchmarkTrim5000(b *testing.B) {
	cases := []struct {
		name   string
		spans  []model.Span
		budget int
	}{
		{"wide", genTrace(rand.New(rand.NewSource(1)), 5000, wide, 0.002), 0},
		{"deep", genTrace(rand.New(rand.NewSource(1)), 5000, deep, 0.002), 0},
		{"star", genTrace(rand.New(rand.NewSource(1)), 5000, star, 0.002), 0},
		{"chain_100k", offPathChain(5000), 100_000},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var out *Trace
			for b.Loop() {
				out = Trim(c.spans, Options{Budget: c.budget})
			}
			j, _ := json.Marshal(out)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.spans)), "ns/span")
			b.ReportMetric(float64(out.Shown), "shown")
			b.ReportMetric(float64(len(j)), "json_bytes")
		})
	}
}
