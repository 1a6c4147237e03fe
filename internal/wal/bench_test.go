package wal

import (
	"sync/atomic"
	"testing"
)

func benchmarkAppend(b *testing.B, mode Mode, size int) {
	w, err := Open(Options{Dir: b.TempDir(), Mode: mode})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	body := make([]byte, size)
	var n atomic.Int64
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.SetParallelism(8) // 8 appenders per core: a loaded ingest path
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := Record{Type: 1, Project: "bench", Body: body}
		for pb.Next() {
			if err := w.Append(r, nil); err != nil {
				b.Error(err)
				return
			}
			// Keep the disk bounded: every 4096 records, seal and drop old files.
			if n.Add(1)%4096 == 0 {
				seq, err := w.Rotate(nil)
				if err == nil {
					err = w.RemoveBefore(seq)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
	b.StopTimer()
	st := w.Stats()
	if st.Batches > 0 {
		b.ReportMetric(float64(st.Records)/float64(st.Batches), "records/batch")
	}
}

func BenchmarkAppendSync(b *testing.B)     { benchmarkAppend(b, ModeSync, 64<<10) }
func BenchmarkAppendBuffered(b *testing.B) { benchmarkAppend(b, ModeBuffered, 64<<10) }
