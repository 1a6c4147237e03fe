package export

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// countWriter counts the bytes of the file written.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// BenchmarkExportPages measures the client side of rastro export on 10,000
// spans in pages of 1000 API spans: decoding each page's JSON, converting to
// rows and writing row groups. It reports spans/s and the file's bytes per
// span; SetBytes counts the API JSON consumed.
func BenchmarkExportPages(b *testing.B) {
	for _, corpus := range []string{bench.CorpusLLM, bench.CorpusCanonical} {
		b.Run(corpus, func(b *testing.B) {
			spans, err := bench.Generate(corpus, bench.CorpusOptions{Seed: 1, Spans: 10_000, Start: time.Unix(1764460800, 0)})
			if err != nil {
				b.Fatal(err)
			}
			llm.Enrich(spans, llm.DefaultPrices())
			var pages [][]byte
			var total int64
			for i := 0; i < len(spans); i += 1000 {
				pages = append(pages, apiPage(spans[i:min(i+1000, len(spans))]))
				total += int64(len(pages[len(pages)-1]))
			}
			b.SetBytes(total)
			b.ReportAllocs()
			var out countWriter
			for b.Loop() {
				out = countWriter{}
				w, err := NewWriter(&out, Options{})
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range pages {
					var page struct {
						Spans []APISpan `json:"spans"`
					}
					if err := json.Unmarshal(p, &page); err != nil {
						b.Fatal(err)
					}
					rows, err := Rows(page.Spans)
					if err != nil {
						b.Fatal(err)
					}
					if err := w.Write(rows); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(spans))*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
			b.ReportMetric(float64(out.n)/float64(len(spans)), "file-B/span")
			b.ReportMetric(float64(total)/float64(len(spans)), "json-B/span")
		})
	}
}

// apiPage is a /api/v1/spans answer holding spans.
func apiPage(spans []model.Span) []byte {
	b := []byte(`{"spans":[`)
	for i := range spans {
		if i > 0 {
			b = append(b, ',')
		}
		b = otlp.AppendSpanJSON(b, &spans[i])
	}
	return append(b, "]}"...)
}
