package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

// BenchmarkLLMSessionRoutes measures the session routes end to end, warm:
// engine, JSON encoding, gzip and the client's transfer (as the llm bench
// suite's client sees them: it asks for gzip), over sealed spans of the
// llm corpus in 10 segments (the 1M case is skipped with -short).
func BenchmarkLLMSessionRoutes(b *testing.B) {
	for _, n := range []int{200_000, 1_000_000} {
		b.Run(fmt.Sprintf("spans=%dk", n/1000), func(b *testing.B) {
			if n > 200_000 && testing.Short() {
				b.Skip("-short")
			}
			benchLLMSessionRoutes(b, n)
		})
	}
}

func benchLLMSessionRoutes(b *testing.B, n int) {
	e, err := engine.Open(engine.Options{Dir: b.TempDir(), Durability: engine.DurabilityBuffered, NoCompaction: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	spans, err := bench.Generate("llm", bench.CorpusOptions{Seed: 1, Spans: n, Start: time.Now().Add(-6 * time.Hour), Window: 6 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(spans); i += 1000 {
		body := otlp.EncodeProto(spans[i:min(i+1000, len(spans))])
		bt, err := otlp.DecodeProto(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: bt.Spans}); err != nil {
			b.Fatal(err)
		}
		if i%(n/10) == n/10-1000 {
			if err := e.Seal(); err != nil {
				b.Fatal(err)
			}
		}
	}
	srv, err := New(Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	srv.SetBackend(e)
	client := &http.Client{Transport: &http.Transport{}}
	for _, path := range []string{"/api/v1/llm/stats?group_by=session", "/api/v1/sessions?sort=last_seen&limit=50"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			var n int64
			get := func() {
				resp, err := client.Get("http://" + srv.HTTPAddr() + path)
				if err != nil {
					b.Fatal(err)
				}
				m, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatal(resp.Status)
				}
				n = m
			}
			get() // fills the engine's result cache
			for b.Loop() {
				get()
			}
			b.ReportMetric(float64(n), "body-bytes")
		})
	}
}
