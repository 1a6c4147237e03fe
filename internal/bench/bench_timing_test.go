package bench

import (
	"testing"
	"time"
)

// BenchmarkGenerate measures corpus generation per span.
func BenchmarkGenerate(b *testing.B) {
	for _, c := range Corpora {
		b.Run(c, func(b *testing.B) {
			b.ReportAllocs()
			const n = 10_000
			for i := 0; i < b.N; i++ {
				if _, err := Generate(c, CorpusOptions{Seed: uint64(i), Spans: n, Start: testStart, Window: time.Hour}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
		})
	}
}

// BenchmarkEncode measures request encoding of one 1000-span batch per protocol.
func BenchmarkEncode(b *testing.B) {
	for _, c := range Corpora {
		batch := Batches(genT(b, c, 1, 1000), 1000)[0]
		for _, p := range []Protocol{ProtoOTLPProto, ProtoOTLPJSON, ProtoNativeJSON} {
			b.Run(c+"/"+string(p), func(b *testing.B) {
				body, err := Encode(p, batch)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					Encode(p, batch)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/span")
				b.ReportMetric(float64(len(body))/float64(len(batch)), "B/span")
			})
		}
	}
}
