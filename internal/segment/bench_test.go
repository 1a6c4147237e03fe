package segment

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

const benchSpans = 50_000

// cpuNow returns the process's user+system CPU time. Benchmarks report
// cpu-ns per op next to wall time because this machine is shared: wall
// time inflates with other people's load, CPU time much less.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWrite measures sealing a buffer of the realistic corpus (sort,
// encode, compress, write, fsync, rename) per zstd level, and reports
// bytes per span on disk.
func BenchmarkWrite(b *testing.B) {
	corpus := realisticCorpus(1, benchSpans)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(corpus), func(i, j int) { corpus[i], corpus[j] = corpus[j], corpus[i] })
	for _, level := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("zstd=%d", level), func(b *testing.B) {
			dir := b.TempDir()
			buf := make([]model.Span, len(corpus))
			var info Info
			b.ReportAllocs()
			cpu := time.Duration(0)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				copy(buf, corpus)
				name := fmt.Sprintf("s%d", i)
				b.StartTimer()
				c0 := cpuNow()
				var err error
				info, err = Write(dir, name, map[string][]model.Span{"default": buf}, WriterOptions{ZstdLevel: level})
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuNow() - c0
				b.StopTimer()
				os.Remove(filepath.Join(dir, name))
				b.StartTimer()
			}
			b.SetBytes(info.Bytes)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(corpus)), "ns/span")
			b.ReportMetric(float64(info.Bytes)/float64(len(corpus)), "B/span-disk")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(len(corpus)), "cpu-ns/span")
		})
	}
}

func benchReader(b *testing.B) (*Reader, []model.Span) {
	corpus := realisticCorpus(1, benchSpans)
	path, _ := writeCorpus(b, map[string][]model.Span{"default": corpus}, WriterOptions{})
	r := openT(b, path)
	return r, corpus
}

// BenchmarkReadBlock decodes whole blocks of the realistic corpus.
func BenchmarkReadBlock(b *testing.B) {
	r, _ := benchReader(b)
	var bytes int64
	for _, m := range r.blocks {
		bytes += int64(m.Length)
	}
	b.SetBytes(bytes / int64(len(r.blocks)))
	b.ReportAllocs()
	spans := 0
	c0 := cpuNow()
	for i := 0; b.Loop(); i++ {
		s, err := r.ReadBlock(i % len(r.blocks))
		if err != nil {
			b.Fatal(err)
		}
		spans += len(s)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(spans), "ns/span")
	b.ReportMetric(float64((cpuNow()-c0).Nanoseconds())/float64(spans), "cpu-ns/span")
}

// BenchmarkFindTrace looks up random existing traces (file pages come from
// the OS page cache: this is the warm cost).
func BenchmarkFindTrace(b *testing.B) {
	r, corpus := benchReader(b)
	var ids []model.TraceID
	for i := 0; i < len(corpus); i += 97 {
		ids = append(ids, corpus[i].TraceID)
	}
	b.ReportAllocs()
	b.SetBytes(int64(r.blocks[0].Length))
	found := 0
	c0 := cpuNow()
	for i := 0; b.Loop(); i++ {
		s, err := r.FindTrace("default", ids[i%len(ids)])
		if err != nil || len(s) == 0 {
			b.Fatal("trace not found", err)
		}
		found += len(s)
	}
	b.ReportMetric(float64((cpuNow()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(found)/float64(b.N), "spans/trace")
	b.ReportMetric(float64(r.ResidentBytes())/float64(len(corpus)), "resident-B/span")
}

// BenchmarkFindTraceAbsent looks up ids the segment does not hold.
func BenchmarkFindTraceAbsent(b *testing.B) {
	r, _ := benchReader(b)
	rng := rand.New(rand.NewPCG(5, 6))
	b.ReportAllocs()
	for b.Loop() {
		var id model.TraceID
		fillRand(rng, id[:])
		if s, err := r.FindTrace("default", id); err != nil || s != nil {
			b.Fatal("absent trace found", err)
		}
	}
}

// BenchmarkContainsTrace checks presence of existing and absent traces from
// the trace index alone (fences plus one page read, no block decoded).
func BenchmarkContainsTrace(b *testing.B) {
	r, corpus := benchReader(b)
	var ids []model.TraceID
	for i := 0; i < len(corpus); i += 97 {
		ids = append(ids, corpus[i].TraceID)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name    string
		present bool
	}{{"present", true}, {"absent", false}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			c0 := cpuNow()
			for i := 0; b.Loop(); i++ {
				id := ids[i%len(ids)]
				if !tc.present {
					fillRand(rng, id[:])
				}
				ok, err := r.ContainsTrace("default", id)
				if err != nil || ok != tc.present {
					b.Fatal("ContainsTrace", ok, err)
				}
			}
			b.ReportMetric(float64((cpuNow()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
