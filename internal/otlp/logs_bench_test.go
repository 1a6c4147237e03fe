package otlp_test

import (
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// BenchmarkDecodeLogsProto decodes one request of the logs suite's corpus
// (`rastro bench logs`: 1,000 records, a ResourceLogs per run of records of
// one service), as the log store's AppendLogs does.
func BenchmarkDecodeLogsProto(b *testing.B) {
	batches, _ := bench.GenLogs(1, 1000, 1000, time.Unix(1_700_000_000, 0))
	body := otlp.EncodeLogsProto(batches[0])
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		lb, err := otlp.DecodeLogsProto(body)
		if err != nil {
			b.Fatal(err)
		}
		if len(lb.Records) != 1000 {
			b.Fatalf("%d records, want 1000", len(lb.Records))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/record")
}
