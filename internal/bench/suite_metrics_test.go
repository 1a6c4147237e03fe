package bench

import (
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/otlp"
)

// The metrics corpus is what the suite's method says: 1,000 series, every
// request of 1,000 points, each client's series its own and in time order
// (so that no point arrives out of order), and the last scrape at the end.
func TestMetricsCorpus(t *testing.T) {
	end := time.Unix(1_800_000_000, 0)
	for _, kind := range []string{"gauge", "counter"} {
		p := genMetrics(1, kind, 300_000, 1000, end)
		if p.points != 300_000 {
			t.Fatalf("%s: %d points, want 300,000", kind, p.points)
		}
		owner := map[string]int{}
		last := map[string]uint64{}
		total := 0
		for c, payloads := range p.payloads {
			for _, body := range payloads {
				b, err := otlp.DecodeMetricsProto(body)
				if err != nil {
					t.Fatal(err)
				}
				if b.Points != 1000 {
					t.Fatalf("%s: a request of %d points, want 1,000", kind, b.Points)
				}
				total += b.Points
				for _, m := range b.Metrics {
					wantKind := otlp.KindGauge
					if kind == "counter" {
						wantKind = otlp.KindSum
						if !m.Monotonic || m.Temporality != otlp.TemporalityCumulative {
							t.Fatalf("counter %+v is not a cumulative monotonic sum", m)
						}
					}
					if m.Kind != wantKind {
						t.Fatalf("%s: metric of kind %v", kind, m.Kind)
					}
					inst := m.Resource.Attributes[1].Value.Str
					if o, ok := owner[inst]; ok && o != c {
						t.Fatalf("series %s sent by clients %d and %d", inst, o, c)
					}
					owner[inst] = c
					for _, pt := range m.Points {
						if pt.TimeUnixNano <= last[inst] {
							t.Fatalf("series %s goes back in time", inst)
						}
						last[inst] = pt.TimeUnixNano
					}
				}
			}
		}
		if total != p.points || len(owner) != metricsSeries {
			t.Fatalf("%s: %d points over %d series", kind, total, len(owner))
		}
		if last["i-0000"] != uint64(end.UnixNano()) {
			t.Fatalf("%s: last scrape at %d, want the end", kind, last["i-0000"])
		}
	}
}
