package segment

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// TestRowGroupFiltersNoFalseNegatives: every token of every span passes the
// disk summary, and the row ranges of its block cover the span's row; the
// rows read back by ReadBlockRows equal those of ReadBlock.
func TestRowGroupFiltersNoFalseNegatives(t *testing.T) {
	path, info := writeCorpus(t, textCorpus(61, 3000, 20000), WriterOptions{BlockSpans: 300, ContentTokens: StandInTokens, RowGroupTokenFilters: true})
	r := openT(t, path)
	if !r.HasRowGroupFilters() || r.grp.pages == 0 || info.Tokens.DiskSummaryBytes == 0 || info.Tokens.RowGroupFilterBytes == 0 {
		t.Fatalf("no row-group filters or disk summary: %+v", info.Tokens)
	}
	if r.Info().Tokens != info.Tokens {
		t.Fatalf("reader stats %+v, writer stats %+v", r.Info().Tokens, info.Tokens)
	}
	narrowed := 0
	for i := range r.Blocks() {
		spans, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		for j := range spans {
			toks := spanTokens(StandInTokens, &spans[j])
			for _, hs := range [][]uint64{toks, toks[len(toks)-1:]} {
				if ok, err := r.SegmentMayContainTokensDisk(hs); !ok || err != nil {
					t.Fatalf("disk summary rejects tokens of block %d span %d: %v", i, j, err)
				}
				ranges, err := r.BlockRowsMayContainTokens(i, hs)
				if err != nil {
					t.Fatal(err)
				}
				covered, rows := false, 0
				for _, rg := range ranges {
					covered = covered || (rg.Lo <= j && j < rg.Hi)
					rows += rg.Hi - rg.Lo
				}
				if !covered {
					t.Fatalf("block %d: row ranges %v miss span %d holding the tokens", i, ranges, j)
				}
				if rows < len(spans) {
					narrowed++
				}
				got, err := r.ReadBlockRows(i, ranges)
				if err != nil {
					t.Fatal(err)
				}
				var want []model.Span
				for _, rg := range ranges {
					want = append(want, spans[rg.Lo:rg.Hi]...)
				}
				requireSpansEqual(t, "ReadBlockRows", got, want)
			}
		}
	}
	// The last token of a span is unique to it: it must narrow the block.
	if narrowed < 3000/2 {
		t.Fatalf("row groups narrowed only %d lookups", narrowed)
	}
}

// TestDiskSummaryFalsePositiveRate measures the disk summary alone on
// random (absent) hashes: it is sized for about 0.1-0.2%.
func TestDiskSummaryFalsePositiveRate(t *testing.T) {
	writeBloomDiskSummary = true
	defer func() { writeBloomDiskSummary = false }()
	path, info := writeCorpus(t, genCorpus(62, 1, 5000, 4),
		WriterOptions{BlockSpans: 1024, ContentTokens: syntheticTokens(12)})
	r := openT(t, path)
	rng := rand.New(rand.NewPCG(3, 4))
	pass := 0
	const probes = 50000
	for i := 0; i < probes; i++ {
		ok, err := r.diskMayContain([]uint64{rng.Uint64()})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			pass++
		}
	}
	fp := float64(pass) / probes
	t.Logf("disk summary: %d tokens, %d bytes (%.1f bits/token), fp %.4f", info.Tokens.DistinctTokens,
		info.Tokens.DiskSummaryBytes, float64(8*info.Tokens.DiskSummaryBytes)/float64(info.Tokens.DistinctTokens), fp)
	if fp > 0.005 {
		t.Fatalf("disk summary passes %.4f of absent tokens, want <= 0.005", fp)
	}
}

// TestRowGroupCorruptionIsolated: a damaged disk page or row-group part is
// a CorruptionError of that lookup only (answering "may contain"); blocks
// and the other filters still read.
func TestRowGroupCorruptionIsolated(t *testing.T) {
	path, _ := writeCorpus(t, textCorpus(63, 600, 2000), WriterOptions{BlockSpans: 200, ContentTokens: StandInTokens, RowGroupTokenFilters: true})
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := openT(t, path)
	spans, err := r.ReadBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	tok := spanTokens(StandInTokens, &spans[0])[:1]
	_, pos := r.grp.shape.positions(tok[0])
	pg, _ := r.grp.shape.slotAt(pos[1])
	page := r.grp.diskOff + int64(pg)*diskPageStride
	groups := r.grp.offset + int64(r.grp.offs[0]) + 3
	for _, tc := range []struct {
		name  string
		at    int64
		check func(r *Reader) error
	}{
		{"disk page", page, func(r *Reader) error {
			ok, err := r.SegmentMayContainTokensDisk(tok)
			if !ok {
				t.Fatal("damaged disk page answered false")
			}
			return err
		}},
		{"row-group part", groups, func(r *Reader) error {
			ranges, err := r.BlockRowsMayContainTokens(0, tok)
			if len(ranges) != 1 || ranges[0] != (RowRange{0, len(spans)}) {
				t.Fatalf("damaged row-group part answered %v", ranges)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := append([]byte(nil), orig...)
			data[tc.at] ^= 0x40
			bad := t.TempDir() + "/bad.rseg"
			if err := os.WriteFile(bad, data, 0o644); err != nil {
				t.Fatal(err)
			}
			r := openT(t, bad)
			var ce *CorruptionError
			if err := tc.check(r); !errors.As(err, &ce) || ce.Offset > tc.at+diskPageStride || ce.Offset < tc.at-diskPageStride-int64(r.grp.offs[1]) {
				t.Fatalf("lookup error %v, want a CorruptionError near %d", err, tc.at)
			}
			for i := range r.Blocks() {
				if _, err := r.ReadBlock(i); err != nil {
					t.Fatalf("block %d unreadable: %v", i, err)
				}
				if ok, err := r.BlockMayContainTokens(i, tok); err != nil || (i == 0 && !ok) {
					t.Fatalf("block filter %d: %v %v", i, ok, err)
				}
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		gi, err := decodeGroupDir("\x00\x01", len(r.blocks), 0, 0)
		if err == nil || gi.present {
			t.Fatalf("truncated directory accepted: %+v", gi)
		}
	})
}

// FuzzDecodeGroupDir decodes arbitrary section 13 contents.
func FuzzDecodeGroupDir(f *testing.F) {
	w := newTokenWriter(WriterOptions{ContentTokens: syntheticTokens(5), TokenFilterFP: 0.01, RowGroupTokenFilters: true})
	var ss []model.Span
	for _, s := range genCorpus(64, 1, 30, 4) {
		ss = s
	}
	w.addBlock(ss[:len(ss)/2])
	w.addBlock(ss[len(ss)/2:])
	disk, dir := w.groups()
	f.Add(dir, uint16(2), uint32(len(w.gdata)), uint32(len(disk)))
	f.Add([]byte{0, 0, 0, 0}, uint16(0), uint32(0), uint32(0))
	f.Add([]byte{1, 0, 0, 0}, uint16(3), uint32(0), uint32(0))
	f.Add([]byte{0, 1, 1, 1, 0, 0, 0, 0, 0}, uint16(1), uint32(0), uint32(diskPageStride))
	f.Fuzz(func(t *testing.T, data []byte, nBlocks uint16, groupLen, diskLen uint32) {
		gi, err := decodeGroupDir(string(data), int(nBlocks), uint64(groupLen), uint64(diskLen))
		if err != nil {
			return
		}
		if gi.noGroups && (len(gi.offs) != 1 || groupLen != 0) ||
			!gi.noGroups && (len(gi.offs) != int(nBlocks)+1 || gi.offs[nBlocks] != uint64(groupLen)) ||
			uint64(gi.pages)*diskPageStride != uint64(diskLen) {
			t.Fatalf("accepted directory %+v for %d blocks, %d and %d bytes", gi, nBlocks, groupLen, diskLen)
		}
	})
}

// FuzzGroupFilters decodes arbitrary row-group parts and tests hashes.
func FuzzGroupFilters(f *testing.F) {
	w := newTokenWriter(WriterOptions{ContentTokens: syntheticTokens(20), TokenFilterFP: 0.01, RowGroupTokenFilters: true})
	var ss []model.Span
	for _, s := range genCorpus(65, 1, 60, 4) {
		ss = s
	}
	w.addBlock(ss)
	f.Add(w.gdata, uint16(len(ss)), uint64(1))
	f.Add([]byte{64, 1, 0, 1, 0}, uint16(10), uint64(0))
	f.Add([]byte{64, 2, 1, 1, 1, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, uint16(100), uint64(7))
	f.Fuzz(func(t *testing.T, data []byte, n uint16, h uint64) {
		ranges, err := testGroupFilters(string(data), int(n), []uint64{h})
		if err != nil {
			return
		}
		prev := 0
		for _, rg := range ranges {
			if rg.Lo < prev || rg.Hi <= rg.Lo || rg.Hi > int(n) {
				t.Fatalf("ranges %v for %d rows", ranges, n)
			}
			prev = rg.Hi
		}
	})
}

// TestRowGroupFiltersOff: by default a segment has the disk summary but no
// row-group filters, and the row lookup answers the whole block.
func TestRowGroupFiltersOff(t *testing.T) {
	path, info := writeCorpus(t, textCorpus(66, 400, 2000), WriterOptions{BlockSpans: 200, ContentTokens: StandInTokens})
	r := openT(t, path)
	if r.HasRowGroupFilters() || info.Tokens.RowGroupFilterBytes != 0 || info.Tokens.DiskSummaryBytes == 0 {
		t.Fatalf("default writer: row groups %v, stats %+v", r.HasRowGroupFilters(), info.Tokens)
	}
	for i, b := range r.Blocks() {
		ranges, err := r.BlockRowsMayContainTokens(i, []uint64{1, 2})
		if err != nil || len(ranges) != 1 || ranges[0] != (RowRange{0, b.Spans}) {
			t.Fatalf("block %d: %v %v", i, ranges, err)
		}
		spans, _ := r.ReadBlock(i)
		for j := range spans {
			if ok, err := r.SegmentMayContainTokensDisk(spanTokens(StandInTokens, &spans[j])); !ok || err != nil {
				t.Fatalf("disk summary rejects block %d span %d: %v", i, j, err)
			}
		}
	}
}

// BenchmarkTokenLookupLevels times one absent-word lookup in the disk
// summary and one row-group lookup of a block (1024-span blocks of text).
func BenchmarkTokenLookupLevels(b *testing.B) {
	path, _ := writeCorpus(b, textCorpus(67, 8192, 20000), WriterOptions{BlockSpans: 1024, ContentTokens: StandInTokens, RowGroupTokenFilters: true})
	r, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.Run("disk summary", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := r.diskMayContain([]uint64{probeStep(uint64(i))}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("row groups of a block", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := r.BlockRowsMayContainTokens(i%len(r.Blocks()), []uint64{probeStep(uint64(i))}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
