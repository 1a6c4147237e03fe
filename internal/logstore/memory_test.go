package logstore

import (
	"runtime"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/wal"
)

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestBufferBytesMatchHeap: the write buffer's size estimate, which drives
// the seal (SealBytes) and what the store reserves in the soft memory limit,
// is within 25% of the heap the buffer really holds once the requests are
// gone, for the logs suite's corpus and this package's generator; and a
// buffered record holds a fraction of the ~1,360 B the decoded records did.
func TestBufferBytesMatchHeap(t *testing.T) {
	const total = 60_000
	corpora := map[string]func() [][]model.LogRecord{
		"suite": func() [][]model.LogRecord {
			batches, _ := bench.GenLogs(1, total, 1000, time.Now())
			return batches
		},
		"gen": func() [][]model.LogRecord {
			g := newGen(3)
			var out [][]model.LogRecord
			for range total / 500 {
				out = append(out, g.records(500))
			}
			return out
		},
	}
	for name, gen := range corpora {
		t.Run(name, func(t *testing.T) {
			var payloads [][]byte
			for _, b := range gen() {
				payloads = append(payloads, otlp.EncodeLogsProto(b))
			}
			s, err := Open(Options{Dir: t.TempDir(), WALMode: wal.ModeBuffered, SealBytes: 1 << 40})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			before := heapAlloc()
			for _, p := range payloads {
				if _, err := s.AppendLogs("", FormatProto, p); err != nil {
					t.Fatal(err)
				}
			}
			used := int64(heapAlloc()) - int64(before)
			s.mu.RLock()
			est, n := s.bufBytes, s.bufs[""].n
			s.mu.RUnlock()
			if n != total {
				t.Fatalf("%d buffered records, want %d", n, total)
			}
			ratio := float64(est) / float64(used)
			t.Logf("%s: estimate %d B, heap %d B (%.0f B/record), ratio %.2f", name, est, used, float64(used)/total, ratio)
			if ratio < 0.75 || ratio > 1.25 {
				t.Errorf("the estimate %d B is %.2f x the heap the buffer holds (%d B); want within 25%%", est, ratio, used)
			}
			if per := used / total; per > 700 {
				t.Errorf("a buffered record holds %d B of heap; want at most 700 (half of what decoded records held)", per)
			}
			runtime.KeepAlive(payloads)
		})
	}
}
