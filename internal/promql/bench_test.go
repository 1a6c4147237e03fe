package promql

import (
	"fmt"
	"testing"

	"github.com/rastro-dev/rastro/internal/store"
)

// benchDB is 1,000 counter series scraped every 15 s for 2 hours.
func benchDB() mem {
	var db mem
	for i := range 1000 {
		sd := store.SeriesData{Labels: lbls("__name__", "req_total", "job", fmt.Sprintf("svc-%02d", i%20), "instance", fmt.Sprint(i))}
		v := 0.0
		for k := range 480 {
			v += float64(k % 7)
			sd.Samples = append(sd.Samples, store.Sample{T: int64(k) * 15000, V: v})
		}
		db = append(db, sd)
	}
	return db
}

func BenchmarkRangeQuery(b *testing.B) {
	db := benchDB()
	for _, q := range []string{"req_total", "rate(req_total[1m])", "sum by (job) (rate(req_total[5m]))"} {
		b.Run(q, func(b *testing.B) {
			n, err := Parse(q)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Range(db, Query{Expr: n, Start: 3600_000, End: 7200_000, Step: 15_000}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
