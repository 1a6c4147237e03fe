package logstore_test

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/wal"
)

// These benchmarks run the logs suite's corpus (internal/bench, `rastro
// bench logs`) through the store in process, without HTTP, as the server
// opens it (wal durability, 64 MiB seals, 4 clients): the figures before and
// after a change of the store, on a busy host, where the harness is slow.
// RASTRO_LOGS_BENCH_RECORDS sets the record count (default 1,000,000).

type benchCorpus struct {
	records  int
	payloads [][]byte
	trace    model.TraceID
}

var (
	corpusOnce sync.Once
	corpus     benchCorpus
)

func loadCorpus(b *testing.B) *benchCorpus {
	corpusOnce.Do(func() {
		n := 1_000_000
		if v := os.Getenv("RASTRO_LOGS_BENCH_RECORDS"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil {
				panic("RASTRO_LOGS_BENCH_RECORDS: " + err.Error())
			}
		}
		batches, trace := bench.GenLogs(1, n, 1000, time.Now())
		corpus = benchCorpus{records: n, trace: trace}
		for _, bt := range batches {
			corpus.payloads = append(corpus.payloads, otlp.EncodeLogsProto(bt))
		}
	})
	return &corpus
}

// ingest sends the corpus to s from 4 goroutines and returns the time taken.
func ingest(b *testing.B, s *logstore.Store, c *benchCorpus) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	t0 := time.Now()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(c.payloads) {
					return
				}
				if _, err := s.AppendLogs("", logstore.FormatProto, c.payloads[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}

// cpuTime is the CPU time the process has used (user and system), which a
// busy host inflates much less than the wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func openBench(b *testing.B, dir string) *logstore.Store {
	s, err := logstore.Open(logstore.Options{Dir: dir, WALMode: wal.ModeSync, SealBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkLogsIngest: records/s of the whole corpus into a fresh store,
// seals included (run with -benchtime=1x: one pass is 1M records), the CPU
// time per record and the segments' bytes per sealed record.
func BenchmarkLogsIngest(b *testing.B) {
	c := loadCorpus(b)
	b.ResetTimer()
	var total, cpu time.Duration
	var segBytes, segRecords int64
	for range b.N {
		b.StopTimer()
		s := openBench(b, b.TempDir())
		b.StartTimer()
		cpu0 := cpuTime(b)
		total += ingest(b, s, c)
		cpu += cpuTime(b) - cpu0
		b.StopTimer()
		st := s.Stats()
		segBytes += st.SegmentBytes
		segRecords += int64(st.Records - st.BufferedRecords)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(c.records*b.N)/total.Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(c.records*b.N), "cpu-ns/record")
	if segRecords > 0 {
		// The sealed segments' size (the buffer's last records are left out).
		b.ReportMetric(float64(segBytes)/float64(segRecords), "disk-B/record")
	}
}

var (
	queryOnce  sync.Once
	queryStore *logstore.Store
	queryDir   string
)

// TestMain closes and removes the store BenchmarkLogsQuery shares.
func TestMain(m *testing.M) {
	code := m.Run()
	if queryStore != nil {
		queryStore.Close()
		os.RemoveAll(queryDir)
	}
	os.Exit(code)
}

// BenchmarkLogsQuery times the suite's three queries against the corpus
// (ingested once per process, part in segments, the rest in the buffer as
// the harness leaves it), reporting the mean (ns/op), the p95 and the CPU
// time per query (GC included).
func BenchmarkLogsQuery(b *testing.B) {
	c := loadCorpus(b)
	queryOnce.Do(func() {
		var err error
		if queryDir, err = os.MkdirTemp("", "logsbench"); err != nil {
			b.Fatal(err)
		}
		queryStore = openBench(b, queryDir)
		ingest(b, queryStore, c)
	})
	s := queryStore
	since := uint64(time.Now().Add(-24 * time.Hour).UnixNano())
	for _, k := range []struct {
		name string
		q    logstore.Query
		want int
	}{
		{"rare-word", logstore.Query{Since: since, Text: bench.LogsRareWord, Limit: 20}, 1},
		{"absent-word", logstore.Query{Since: since, Text: bench.LogsAbsentWord, Limit: 20}, 0},
		{"trace", logstore.Query{Since: since, TraceID: c.trace, Limit: 100}, 12},
	} {
		b.Run(k.name, func(b *testing.B) {
			ds := make([]time.Duration, 0, b.N)
			var read int
			cpu0 := cpuTime(b)
			for range b.N {
				t0 := time.Now()
				page, err := s.SearchLogs(k.q)
				ds = append(ds, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Hits) != k.want {
					b.Fatalf("%d records, want %d", len(page.Hits), k.want)
				}
				read = page.BlocksRead
			}
			cpu := cpuTime(b) - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)*95/100].Microseconds()), "p95-us")
			b.ReportMetric(float64(read), "blocks-read")
		})
	}
	runtime.KeepAlive(s)
}
