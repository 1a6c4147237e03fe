package logstore

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/vfs"
	"github.com/rastro-dev/rastro/internal/wal"
)

// toVersion1 rewrites a segment file in version 1's layout: no word index,
// the payload column compressed as a whole, 11 column lengths per block.
func toVersion1(t *testing.T, dir, name string) {
	t.Helper()
	seg, err := openSegment(vfs.OS{}, dir, name)
	if err != nil {
		t.Fatal(err)
	}
	enc, _, err := codecs()
	if err != nil {
		t.Fatal(err)
	}
	out := []byte{'R', 'L', 'O', 'G', 1, 0, 0, 0}
	blocks := append([]blockMeta(nil), seg.blocks...)
	for bi := range blocks {
		blk, err := seg.readBlock(bi)
		if err != nil {
			t.Fatal(err)
		}
		m := &blocks[bi]
		start := len(out)
		var off uint32
		for c := range colWords {
			raw := blk.raw[off : off+m.cols[c]]
			off += m.cols[c]
			if c == colPayload {
				all := make([]int, m.n)
				for i := range all {
					all[i] = i
				}
				pays, err := blk.payloads(all)
				if err != nil {
					t.Fatal(err)
				}
				var plain []byte
				for _, p := range pays {
					plain = appendLP(plain, p)
				}
				raw = enc.EncodeAll(plain, nil)
			}
			out = append(out, raw...)
			m.cols[c] = uint32(len(raw))
		}
		m.cols[colWords] = 0
		// Version 1's word filter holds the words' full hashes.
		hs, err := blk.headers()
		if err != nil {
			t.Fatal(err)
		}
		all := make([]int, m.n)
		for i := range all {
			all[i] = i
		}
		es, err := blk.records(hs, all)
		if err != nil {
			t.Fatal(err)
		}
		words := map[uint64]bool{}
		for i := range es {
			recordTokens(&es[i].rec, func(h uint64) { words[h] = true })
		}
		m.tokens, m.keyed = newBloom(len(words)), false
		for h := range words {
			m.tokens.add(h)
		}
		m.off, m.length = int64(start), int64(len(out)-start)
		m.crc = crc32.Checksum(out[start:], castagnoli)
	}
	footer := enc.EncodeAll(encodeFooter(seg.project, blocks, 1), nil)
	footerOff := len(out)
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint64(out, uint64(footerOff))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(footer, castagnoli))
	out = append(out, segMagic...)
	if err := os.WriteFile(dir+"/"+name, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Segments of version 1 (no word index, one payload frame) written before
// version 2 are still read: searches over them equal brute force, and an
// erasure rewrites them as version 2.
func TestVersion1SegmentsAreRead(t *testing.T) {
	dir := t.TempDir()
	g := newGen(5)
	s, err := Open(Options{Dir: dir, WALMode: wal.ModeBuffered})
	if err != nil {
		t.Fatal(err)
	}
	var all []stored
	var seq uint64
	for range 12 {
		recs := g.records(400)
		if _, err := s.AppendLogs("", FormatProto, otlp.EncodeLogsProto(recs)); err != nil {
			t.Fatal(err)
		}
		for _, r := range normalized(t, recs) {
			all = append(all, stored{seq: seq, rec: r})
			seq++
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	converted := 0
	for _, e := range names {
		if strings.HasSuffix(e.Name(), ".rlog") {
			toVersion1(t, dir, e.Name())
			converted++
		}
	}
	if converted == 0 {
		t.Fatal("no segment to convert")
	}
	s, err = Open(Options{Dir: dir, WALMode: wal.ModeBuffered})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, seg := range s.segs {
		if seg.version != 1 {
			t.Fatalf("segment %s is version %d after the conversion", seg.name, seg.version)
		}
	}
	for range 100 {
		checkQuery(t, s, all, g.query(all))
	}
	victim := g.traces[0]
	if _, err := s.EraseTrace("", victim); err != nil {
		t.Fatal(err)
	}
	kept := all[:0:0]
	for _, x := range all {
		if x.rec.TraceID != victim {
			kept = append(kept, x)
		}
	}
	if len(kept) == len(all) {
		t.Fatal("the generator gave the erased trace no record")
	}
	for range 50 {
		checkQuery(t, s, kept, g.query(kept))
	}
}
