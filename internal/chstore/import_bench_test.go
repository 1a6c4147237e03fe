package chstore

import (
	"context"
	"flag"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/store"
)

var (
	importSpans = flag.Int("import-spans", 200_000, "spans of the canonical corpus BenchmarkImport writes into a data directory and copies into ClickHouse")
	importBatch = flag.Int("import-batch", DefaultImportBatchSpans, "BenchmarkImport's ImportOptions.BatchSpans")
	importCache = flag.Int64("import-block-cache", -1, "BenchmarkImport's engine.Options.BlockCacheBytes (negative: none, as rastro migrate opens the directory)")
)

// BenchmarkImport: a data directory of -import-spans canonical spans,
// written by the engine in chunks (the corpus is never whole in memory) and
// opened again as `rastro migrate --from-data-dir` opens it, is copied into
// a fresh ClickHouse database. Reported: spans/s of the copy, and the peaks
// of the Go heap during it (sampled every 10 ms: lower bounds of the true
// peaks): its objects, garbage not yet collected included, and the live
// heap marked by each GC. Neither may grow with the store.
//
//	go test ./internal/chstore -run XXX -bench Import -benchtime 1x -import-spans 400000 -v
func BenchmarkImport(b *testing.B) {
	dir := b.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	const chunk = 50_000
	for off := 0; off < *importSpans; off += chunk {
		spans, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: uint64(off) + 1, Spans: min(chunk, *importSpans-off), Start: start, Window: 2 * time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range bench.Batches(spans, 5000) {
			if err := eng.Append(context.Background(), &store.Write{Project: "p", Spans: batch}); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := eng.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		eng, err := engine.Open(engine.Options{Dir: dir, NoCompaction: true, BlockCacheBytes: *importCache})
		if err != nil {
			b.Fatal(err)
		}
		ch, err := Open(context.Background(), Options{URL: chtest.URL(b)})
		if err != nil {
			b.Fatal(err)
		}
		st, err := eng.Status(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		// The engine's resident state (segment indexes and filters) grows
		// with the store and is there before the copy starts: measured
		// apart, after a GC.
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		stop := peakHeap()
		began := time.Now()
		prog, err := ch.Import(context.Background(), eng, ImportOptions{Source: "bench", Projects: []string{"p"}, BatchSpans: *importBatch})
		took := time.Since(began)
		peak, live := stop()
		if err != nil || len(prog) != 1 || !prog[0].Done || prog[0].Spans != uint64(*importSpans) {
			b.Fatalf("import: %+v %v", prog, err)
		}
		// What stays resident once the copy is over (the engine still open):
		// the engine's state loaded on first read, not the copy's.
		runtime.GC()
		runtime.ReadMemStats(&ms)
		after := ms.HeapAlloc
		b.ReportMetric(float64(prog[0].Spans)/took.Seconds(), "spans/s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(live)/(1<<20), "peak-live-MiB")
		b.ReportMetric(float64(base)/(1<<20), "opened-MiB")
		b.ReportMetric(float64(after)/(1<<20), "after-MiB")
		b.Logf("%d spans (data directory: %d segment bytes, %d WAL bytes) copied in %v at %.0f spans/s; heap after opening the directory %.1f MiB; peaks during the copy: heap objects %.1f MiB, live heap (after a GC) %.1f MiB; heap after the copy %.1f MiB",
			prog[0].Spans, st.SegmentBytes, st.WALBytes, took.Round(time.Millisecond), float64(prog[0].Spans)/took.Seconds(), float64(base)/(1<<20), float64(peak)/(1<<20), float64(live)/(1<<20), float64(after)/(1<<20))
		ch.Close()
		eng.Close()
	}
}

// peakHeap samples the heap until stop is called and returns the highest
// samples of the heap's objects (live and not yet collected) and of the
// live heap marked by the last GC.
func peakHeap() (stop func() (objects, live uint64)) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var mu sync.Mutex
	var peak, peakLive uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			mu.Lock()
			peak = max(peak, sample[0].Value.Uint64())
			peakLive = max(peakLive, sample[1].Value.Uint64())
			mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() (uint64, uint64) {
		close(done)
		wg.Wait()
		return peak, peakLive
	}
}
