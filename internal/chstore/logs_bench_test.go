package chstore

import (
	"flag"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

var logsBenchRecords = flag.Int("logs-records", 200_000, "records BenchmarkLogsVersusLogStore loads")

// BenchmarkLogsVersusLogStore loads the same records (randomLogs: an hour,
// three services, a third in five traces) into ClickHouse and into the
// embedded log store, in 1,000-record requests, then times on each the
// newest 100 records, the newest 100 with one word, severity ERROR and up,
// and one trace's records (100 samples each, 10 warm-ups), reporting p50
// and p95. Run it alone, once:
//
//	go test ./internal/chstore -run XXX -bench LogsVersusLogStore -benchtime 1x [-logs-records N]
func BenchmarkLogsVersusLogStore(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 5))
	end := time.Now().Truncate(time.Second)
	recs := randomLogs(rng, *logsBenchRecords, end)
	ch, err := Open(b.Context(), Options{URL: chtestURL(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	ls, err := logstore.Open(logstore.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer ls.Close()
	queries := []struct {
		name string
		q    store.LogQuery
	}{
		{"newest", store.LogQuery{Project: "p", Limit: 100}},
		{"word", store.LogQuery{Project: "p", Limit: 100, Text: "shipped"}},
		{"error", store.LogQuery{Project: "p", Limit: 100, MinSeverity: 17}},
		{"trace", store.LogQuery{Project: "p", Limit: 100, TraceID: model.TraceID{0xee, 3, 3}}},
	}
	b.ResetTimer()
	for _, be := range []struct {
		name string
		b    store.LogBackend
	}{{"logstore", ls}, {"clickhouse", ch}} {
		t0 := time.Now()
		for i := 0; i < len(recs); i += 1000 {
			if _, err := be.b.AppendLogs("p", store.LogFormatProto, otlp.EncodeLogsProto(recs[i:min(i+1000, len(recs))])); err != nil {
				b.Fatal(err)
			}
		}
		el := time.Since(t0)
		b.Logf("%s: %d records in %v: %.0f records/s (one writer)", be.name, len(recs), el.Round(time.Millisecond), float64(len(recs))/el.Seconds())
		for _, q := range queries {
			timeit(b, be.name+"-"+q.name, 10, 110, func(int) {
				page, err := be.b.SearchLogs(q.q)
				if err != nil || len(page.Hits) == 0 {
					b.Fatalf("%s %s: %d records, %v", be.name, q.name, len(page.Hits), err)
				}
			})
		}
	}
	b.StopTimer()
	os.Stderr.WriteString("load average: " + loadavg())
}
