package valuestore

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"testing"
)

// prompt returns a distinct ~2 KiB prompt-like value.
func prompt(i int) []byte {
	v := text(uint64(i%64), 2048)
	return fmt.Appendf(v[:0:0], "%d %s", i, v)
}

func BenchmarkSHA256_2KiB(b *testing.B) {
	v := prompt(1)
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		_ = sha256.Sum256(v)
	}
}

func BenchmarkPutNew(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir()})
	defer s.Close()
	vals := make([][]byte, 4096)
	for i := range vals {
		vals[i] = prompt(i)
	}
	b.SetBytes(int64(len(vals[0])))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		v := vals[i%len(vals)]
		// Make every value new without allocating a fresh one.
		v[0], v[1], v[2], v[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		if _, _, err := s.Put(v); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	st := s.Stats()
	b.ReportMetric(float64(st.DiskBytes)/float64(st.Values), "disk-B/value")
}

func BenchmarkPutDuplicate(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir()})
	defer s.Close()
	v := prompt(1)
	if _, _, err := s.Put(v); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		if _, fresh, err := s.Put(v); err != nil || fresh {
			b.Fatal(fresh, err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir()})
	defer s.Close()
	refs := make([]Ref, 1024)
	for i := range refs {
		var err error
		if refs[i], _, err = s.Put(prompt(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(prompt(0))))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Get(refs[i%len(refs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkOpen100k opens a closed store of 100,000 distinct values and
// reports the heap the open store retains per value (the resident index).
func BenchmarkOpen100k(b *testing.B) {
	dir := b.TempDir()
	s := mustOpen(b, Options{Dir: dir})
	for i := range 100_000 {
		v := fmt.Appendf(nil, "value %d %s", i, "some shared text that compresses a little, repeated")
		if _, _, err := s.Put(v); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var perEntry float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := Open(Options{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / float64(s.Stats().Values)
		runtime.KeepAlive(s)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perEntry, "resident-B/value")
}

// BenchmarkGetMessage reads message-sized values (445 bytes, the mean piece
// of the llm-sessions corpus) put one after the other, as a seal puts the new
// messages of a segment; disk-B/value is what each one costs on disk.
func BenchmarkGetMessage(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir()})
	defer s.Close()
	refs := make([]Ref, 4096)
	for i := range refs {
		v := fmt.Appendf(nil, `{"role":"user","content":"%d %s"}`, i, text(uint64(i), 400))
		var err error
		if refs[i], _, err = s.Put(v); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		b.Fatal(err)
	}
	st := s.Stats()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Get(refs[(i*2654435761)%len(refs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(st.DiskBytes)/float64(st.Values), "disk-B/value")
}
