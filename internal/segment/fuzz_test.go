package segment

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

func segmentBytes(t testing.TB, corpus map[string][]model.Span, opts WriterOptions) []byte {
	path, _ := writeCorpus(t, corpus, opts)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzOpen feeds mutated segment files to Open, then reads every block and
// looks up every trace it can name. Nothing may panic, and every failure of a
// complete read must be a CorruptionError or an unsupported feature.
func FuzzOpen(f *testing.F) {
	small := segmentBytes(f, genCorpus(21, 2, 4, 12), WriterOptions{BlockSpans: 8})
	f.Add(small)
	f.Add(segmentBytes(f, genCorpus(23, 1, 3, 6), WriterOptions{BlockSpans: 4, ContentTokens: StandInTokens}))
	f.Add(segmentBytes(f, nil, WriterOptions{}))
	refs := genCorpus(24, 1, 3, 6)
	addLargeValues(refs, 24)
	f.Add(segmentBytes(f, refs, WriterOptions{BlockSpans: 4, StoreValue: newMemValues().put, ValueThreshold: testThreshold}))
	f.Add(small[:len(small)/2])
	// Pieces (codec 2), the token map and fuse block filters.
	f.Add(segmentBytes(f, map[string][]model.Span{"default": textHeavyCorpus(25, 300)}, WriterOptions{BlockSpans: 128, ContentTokens: StandInTokens}))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.rseg")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		check := func(err error) {
			if err != nil && !IsCorruption(err) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error is neither corruption nor unsupported: %v", err)
			}
		}
		r, err := Open(path)
		check(err)
		if err != nil {
			return
		}
		defer r.Close()
		ids := []model.TraceID{{}, {1}}
		for i := range r.Blocks() {
			spans, err := r.ReadBlock(i)
			check(err)
			for _, s := range spans {
				ids = append(ids, s.TraceID)
			}
		}
		for _, p := range append(r.Info().Projects, ProjectInfo{Name: "?"}) {
			for _, id := range ids {
				_, err := r.FindTrace(p.Name, id)
				check(err)
			}
		}
		for i := -1; i <= len(r.Blocks()); i++ {
			r.MayContainAttr(i, false, "k", "v")
			r.MayContainIntAttr(i, true, "k", 1)
			_, err := r.BlockMayContainTokens(i, []uint64{1, 2})
			if i >= 0 && i < len(r.Blocks()) {
				check(err)
			}
		}
		r.SegmentMayContainTokens([]uint64{1, 2})
		for i, m := range r.Blocks() {
			for _, row := range []int{0, m.Spans / 2, m.Spans - 1} {
				if row >= 0 {
					_, err := r.ReadBlockRows(i, []RowRange{{row, row + 1}})
					check(err)
				}
			}
			if spans, err := r.ReadBlock(i); err == nil && len(spans) > 0 {
				loc, err := r.LocateTokens(spanTokens(StandInTokens, &spans[0]))
				check(err)
				if loc.Absent {
					t.Fatalf("block %d: the tokens of its first span located as absent", i)
				}
				for _, p := range loc.Places {
					_, err := r.ReadBlockRows(p.Block, []RowRange{p.Rows})
					check(err)
				}
			}
		}
		_, err = r.LocateTokens([]uint64{1, 2, 3})
		check(err)
		check(r.ValueRefs(func([32]byte) bool { return true }))
		may, err := r.BlocksMayContainTokens([]uint64{1, 2})
		check(err)
		if len(may) != len(r.Blocks()) {
			t.Fatalf("%d answers for %d blocks", len(may), len(r.Blocks()))
		}
	})
}

// FuzzDecodeColumns bypasses the checksums: it decodes arbitrary column
// contents (as a hostile file with valid checksums would hold) as a block of
// n spans, whole and in part. Nothing may panic.
func FuzzDecodeColumns(f *testing.F) {
	path, _ := writeCorpus(f, genCorpus(22, 1, 3, 10), WriterOptions{BlockSpans: 16})
	r := openT(f, path)
	bd, err := r.loadBlock(0)
	if err != nil {
		f.Fatal(err)
	}
	var seed []byte
	for id := 1; id <= numColumns; id++ {
		seed = binary.AppendUvarint(seed, uint64(len(bd.cols[id])))
		seed = append(seed, bd.cols[id]...)
	}
	f.Add(uint16(r.Blocks()[0].Spans), uint16(1), uint16(3), seed)
	// A block holding stored-value references (value tag 8).
	refs := genCorpus(25, 1, 3, 10)
	addLargeValues(refs, 25)
	rpath, _ := writeCorpus(f, refs, WriterOptions{BlockSpans: 16, StoreValue: newMemValues().put, ValueThreshold: testThreshold})
	rr := openT(f, rpath)
	rbd, err := rr.loadBlock(0)
	if err != nil {
		f.Fatal(err)
	}
	var rseed []byte
	for id := 1; id <= numColumns; id++ {
		rseed = binary.AppendUvarint(rseed, uint64(len(rbd.cols[id])))
		rseed = append(rseed, rbd.cols[id]...)
	}
	f.Add(uint16(rr.Blocks()[0].Spans), uint16(0), uint16(2), rseed)
	f.Add(uint16(1), uint16(0), uint16(1), []byte{})
	f.Fuzz(func(t *testing.T, n, lo, hi uint16, data []byte) {
		spans := int(n%4096) + 1
		entry := &blockEntry{Meta: BlockMeta{Spans: spans}}
		b := &blockData{entry: entry}
		d := dec{s: string(data)}
		for id := 1; id <= numColumns; id++ {
			b.cols[id] = d.str()
		}
		rd := &Reader{path: "fuzz"}
		if _, err := rd.decodeRows(b, 0, spans); err != nil && !IsCorruption(err) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		l, h := int(lo)%spans, int(hi)%(spans+1)
		if l < h {
			_, _ = rd.decodeRows(b, l, h)
		}
	})
}

// FuzzTokenIndexParts feeds arbitrary bytes, as a hostile file with valid
// checksums would hold them, to the decoders of the binary fuse block
// filters, the token group directory (with a token map's shape) and the
// piece header: errors, never a panic, and a fuse filter that decodes
// answers every lookup.
func FuzzTokenIndexParts(f *testing.F) {
	keys := []uint64{1, 2, 3, 1 << 40}
	var tw tokenWriter
	tw.fp = DefaultTokenFilterFP
	for _, k := range keys {
		tw.block.slot(k)
	}
	f.Add(tw.appendBlockFuse(nil, len(keys)))
	s, _, err := buildFuse(keys, []uint32{0, 1, 2, 3}, 12)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(encodeGroupDir(true, s.pages(), len(keys), &s, 0, nil, nil))
	f.Add(encodeGroupDir(true, s.pages(), len(keys), &s, maxTokenPlaces, nil, nil))
	f.Add([]byte{2, 0, 1, 3, 4, 1, 2, 3, 4, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &Reader{path: "fuzz.rseg", tok: tokenIndex{fuse: true}}
		d := dec{s: string(data)}
		if _, err := r.testBlockFuse(0, 0, &d, keys); err != nil && !IsCorruption(err) {
			t.Fatalf("block fuse filter: %v is not a corruption error", err)
		}
		if gi, err := decodeGroupDir(string(data), 0, 0, uint64(len(data))/diskPageStride*diskPageStride); err == nil && gi.isMap {
			if gi.shape.w < 1 || gi.shape.w > 32 || gi.shape.segLen == 0 || gi.shape.slots == 0 {
				t.Fatalf("accepted token map shape %+v", gi.shape)
			}
			if gi.places != 0 && (gi.places < 2 || gi.places > maxTokenPlacesRead) {
				t.Fatalf("accepted a token map of %d places", gi.places)
			}
		}
		pieceHeaderFits(data, uint64(len(data)))
		parsePieces(data, uint64(len(data)))
	})
}
