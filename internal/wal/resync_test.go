package wal

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"testing"
)

func TestCRCShift(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, n := range []int{0, 1, 3, 8, 100, 1023, 1024, 1025, 70000} {
		a := make([]byte, r.Intn(50))
		b := make([]byte, n)
		r.Read(a)
		r.Read(b)
		whole := crc32.Checksum(append(append([]byte(nil), a...), b...), castagnoli)
		got := crcShift(crc32.Checksum(a, castagnoli), int64(n)) ^ crc32.Checksum(b, castagnoli)
		if got != whole {
			t.Fatalf("len(B)=%d: crcShift(crc(A))^crc(B) = %08x, crc(A||B) = %08x", n, got, whole)
		}
	}
}

// TestScannerRangeCRC: the checkpoint arithmetic agrees with a direct CRC
// for ranges starting and ending on and off checkpoint boundaries.
func TestScannerRangeCRC(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	data := make([]byte, 200_000)
	r.Read(data)
	sc := newScanner(bytes.NewReader(data), "mem", int64(len(data)))
	if err := sc.buildCheckpoints(); err != nil {
		t.Fatal(err)
	}
	ends := []int64{0, 1, crcStride - 1, crcStride, crcStride + 1, 5 * crcStride, int64(len(data)) - 1, int64(len(data))}
	for range 200 {
		ends = append(ends, r.Int63n(int64(len(data))+1))
	}
	for i, a := range ends {
		b := ends[(i*7+3)%len(ends)]
		a, b = min(a, b), max(a, b)
		pa, err := sc.prefixCRC(a)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := sc.prefixCRC(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := pb^crcShift(pa, b-a), crc32.Checksum(data[a:b], castagnoli); got != want {
			t.Fatalf("range [%d,%d): %08x, want %08x", a, b, got, want)
		}
	}
}

// encodeRecords appends records with the given bodies to b and returns their offsets.
func encodeRecords(b []byte, project string, bodies ...[]byte) ([]byte, []int64) {
	var offs []int64
	for _, body := range bodies {
		offs = append(offs, int64(len(b)))
		r := Record{Type: 1, Project: project, Body: body}
		h := recordHeader(&r)
		b = appendRecord(b, &h, &r)
	}
	return b, offs
}

// TestResyncLargeRecords damages the length field of records of up to
// 40 KiB of random bytes (so replay must scan through their bodies, over many
// plausible-looking lengths, with the checkpoint arithmetic) and checks that
// every other record is still replayed, from an older file and from the last.
func TestResyncLargeRecords(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	var bodies [][]byte
	for i := range 40 {
		b := make([]byte, r.Intn(40_000))
		r.Read(b)
		copy(b, fmt.Sprintf("rec-%02d", i))
		bodies = append(bodies, b)
	}
	clean, offs := encodeRecords(fileHeader(1), "pj", bodies...)
	for _, last := range []bool{false, true} {
		for _, victim := range []int{0, 7, 20, 39} {
			dir := t.TempDir()
			data := append([]byte(nil), clean...)
			data[offs[victim]+3] ^= 0x80 // length now > 2^30
			w0 := &WAL{opts: Options{Dir: dir}}
			if err := os.WriteFile(w0.path(1), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if !last {
				if err := os.WriteFile(w0.path(2), encodeFile(2, "next"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, st := replayAll(t, Options{Dir: dir})
			var want []string
			for i, b := range bodies {
				if i != victim {
					want = append(want, string(b[:6]))
				}
			}
			if !last {
				want = append(want, "next")
			}
			var names []string
			for _, rec := range got {
				names = append(names, string(rec.Body[:min(6, len(rec.Body))]))
			}
			if fmt.Sprint(names) != fmt.Sprint(want) {
				t.Fatalf("last=%v victim %d: replayed %v, want %v", last, victim, names, want)
			}
			size := int64(len(bodies[victim])) + recordHeaderSize + 2 + 2
			wantResyncs, wantSkipped, wantTruncated := 1, size, int64(0)
			if victim == len(bodies)-1 { // nothing intact follows
				wantResyncs = 0
				if last {
					wantSkipped, wantTruncated = 0, size
				}
			}
			if st.Resyncs != wantResyncs || st.SkippedBytes != wantSkipped || st.TruncatedBytes != wantTruncated {
				t.Fatalf("last=%v victim %d: stats %+v, want %d resyncs, %d bytes skipped, %d truncated",
					last, victim, st, wantResyncs, wantSkipped, wantTruncated)
			}
		}
	}
}

// TestResyncDoesNotTrustRecordsInsideBodies: a body is caller data and may
// hold bytes that form a valid record (here one for another project). When
// only the body is damaged, replay resumes after the damaged record, as its
// intact length says, and never replays the record embedded in it.
func TestResyncDoesNotTrustRecordsInsideBodies(t *testing.T) {
	forged, _ := encodeRecords(nil, "victim", []byte("forged"))
	body := append(append([]byte("prefix-"), forged...), "-suffix"...)
	data, offs := encodeRecords(fileHeader(1), "pj", []byte("first"), body, []byte("last"))
	data[offs[2]-1] ^= 1 // last byte of the carrier record's body
	dir := t.TempDir()
	if err := os.WriteFile((&WAL{opts: Options{Dir: dir}}).path(1), data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, st := replayAll(t, Options{Dir: dir})
	var names []string
	for _, rec := range got {
		names = append(names, rec.Project+":"+string(rec.Body))
	}
	if fmt.Sprint(names) != "[pj:first pj:last]" || st.Resyncs != 1 {
		t.Fatalf("replayed %q (stats %+v), want [pj:first pj:last] after one resync", names, st)
	}
}

// BenchmarkResyncGarbage measures a resync through random bytes (the worst
// case: about one offset in 64 has a plausible length): 8 MiB of garbage
// between two records of an older file.
func BenchmarkResyncGarbage(b *testing.B) {
	garbage := make([]byte, 8<<20)
	rand.New(rand.NewSource(6)).Read(garbage)
	data, _ := encodeRecords(fileHeader(1), "pj", []byte("before"))
	data = append(data, garbage...)
	data, _ = encodeRecords(data, "pj", []byte("after"))
	b.SetBytes(int64(len(garbage)))
	b.ReportAllocs()
	for b.Loop() {
		sc := newScanner(bytes.NewReader(data), "mem", int64(len(data)))
		next, err := sc.next(fileHeaderSize+recordHeaderSize+10, -1)
		if err != nil || next != int64(len(data))-recordHeaderSize-2-2-5 {
			b.Fatalf("next = %d, %v", next, err)
		}
		b.ReportMetric(float64(sc.checked), "candidates/op")
	}
}
