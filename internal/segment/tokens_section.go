package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
)

// TokenStats describes a segment's full-text token filters (sections 7 and 8).
type TokenStats struct {
	// Indexed is true when the segment was written with token filters.
	Indexed bool
	// DistinctTokens is the number of distinct token hashes in the segment;
	// when Saturated is set because the segment had more than the writer
	// counts exactly, it is that lower bound.
	DistinctTokens int
	// Saturated is true when the summary holds no bits and passes every
	// query: too many distinct tokens (or blocks) for the resident budget.
	Saturated bool
	// SummaryBytes is the size of the resident summary filter's bits.
	SummaryBytes int
	// SummaryBitsPerToken is SummaryBytes*8 / DistinctTokens.
	SummaryBitsPerToken float64
	// SummaryFP is the estimated probability that the summary passes one
	// token absent from the segment (1 when saturated).
	SummaryFP float64
	// BlockFilterBytes is the size on disk of the per-block filters (section 7).
	BlockFilterBytes int64
	// DiskSummaryBytes is the size on disk of the per-segment disk summary
	// (section 11), read one 68-byte page per token; 0 when absent.
	DiskSummaryBytes int64
	// RowGroupFilterBytes is the size on disk of the row-group filters
	// (section 12); 0 when absent.
	RowGroupFilterBytes int64
	// ResidentBytes is what a Reader keeps of the token index: the summary
	// and the directories of the block and row-group filters (24 bytes a
	// block). The writer keeps it within 32 KiB unless the segment has over
	// 1,300 blocks.
	ResidentBytes int
}

// groupDirResident is the resident cost of section 13.
func groupDirResident(blocks int) int { return tokenDirEntryBytes*blocks + 64 }

func summaryStats(distinct int, saturated bool, words, k, blocks int) TokenStats {
	st := TokenStats{Indexed: true, DistinctTokens: distinct, Saturated: saturated, SummaryBytes: 8 * words,
		ResidentBytes: 8*words + tokenDirEntryBytes*blocks + 8}
	switch {
	case saturated:
		st.SummaryFP = 1
	case distinct > 0:
		st.SummaryBitsPerToken = float64(64*words) / float64(distinct)
		st.SummaryFP = bloomFP(distinct, words, k)
	}
	return st
}

// Flags of the summary (section 8).
const (
	summarySaturated  = 1 // the summary holds no bits and passes everything
	summaryFuseBlocks = 2 // section 7 parts are binary fuse filters, not bloom filters
	// summarySalted: the summary holds fuseMix(hash + salt) of each token,
	// with the segment's salt (u64 LE) after the flags. Segments of one
	// store share most of their vocabulary, so unsalted summaries of one
	// size set nearly the same bits and pass the same absent words: a word
	// one passes, all pass, and it costs a token map lookup in every
	// segment. Salted, their false positives are independent.
	summarySalted = 4
)

// writeUnsaltedSummary is a test hook: set, writers write the summary
// unsalted, as writers before summarySalted did.
var writeUnsaltedSummary bool

// tokenWriter builds the token index of a segment while it is written: one
// filter per block as the block is flushed (appended to data, section 7),
// and where every distinct token of the segment lies, for the summary
// (section 8) and the token map (section 11).
type tokenWriter struct {
	fn    func(s *model.Span, emit func(hash uint64))
	fp    float64
	emit  func(hash uint64) // noteBlock, bound once
	block hashMap           // distinct tokens of the block being flushed -> their rows (noteRow)
	row   uint32            // row of the span being tokenised
	// seg maps the distinct tokens of the segment (up to diskMaxTokens) to
	// where they lie (the token map, section 11): one place,
	// block<<40 | packRows(first, last row); locList | an index into
	// places for 2..maxTokenPlaces places; or locMulti beyond.
	seg        hashMap
	places     placeLists
	saturated  bool     // seg overflowed and was dropped
	segCount   int      // len(seg), or the count when it overflowed
	blockSpans []int    // spans of every block so far
	keys       []uint64 // scratch: the block's tokens
	data       []byte   // section 7: filters back to back
	lens       []uint64 // stored length of each block's filter
	crcs       []uint32
	// Row-group filters (section 12): a part per block, when rowGroups.
	rowGroups bool
	emitGroup func(hash uint64) // rowGroup.add, bound once
	rowGroup  hashMap           // distinct tokens of the row group being built
	gfilters  []tokenBloom
	gdistinct []int
	gdata     []byte
	glens     []uint64
	gcrcs     []uint32
}

func newTokenWriter(opts WriterOptions) *tokenWriter {
	if opts.ContentTokens == nil {
		return nil
	}
	t := &tokenWriter{fn: opts.ContentTokens, fp: opts.TokenFilterFP, rowGroups: opts.RowGroupTokenFilters}
	t.emit = t.noteBlock
	t.emitGroup = t.rowGroup.add
	return t
}

// noteBlock records a token of the span being tokenised in the block's map.
func (t *tokenWriter) noteBlock(h uint64) {
	v, _ := t.block.slot(h)
	*v = noteRow(*v, t.row)
}

// noteSegment merges the block's tokens into the segment's locations.
func (t *tokenWriter) noteSegment(block int) {
	var buf [3]uint64
	t.block.each(func(h, rows uint64) {
		v, isNew := t.seg.slot(h)
		t.places.merge(v, isNew, blockPlaces(block, rows, &buf))
	})
}

// addBlock builds the filter of a block being flushed and the filters of
// its row groups.
func (t *tokenWriter) addBlock(spans []model.Span) {
	t.block.reset()
	for i := range spans {
		t.row = uint32(i)
		t.fn(&spans[i], t.emit)
	}
	t.gfilters, t.gdistinct = t.gfilters[:0], t.gdistinct[:0]
	for lo := 0; t.rowGroups && lo < len(spans); lo += groupRows {
		t.rowGroup.reset()
		for i := lo; i < min(lo+groupRows, len(spans)); i++ {
			t.fn(&spans[i], t.emitGroup)
		}
		n := t.rowGroup.len()
		var f tokenBloom
		if n > 0 {
			w := min(bloomWordsFor(n, groupFilterFP), maxBlockTokenFilterWords)
			f = newTokenBloom(w, bloomK(n, w))
			t.rowGroup.eachKey(f.add)
		}
		t.gfilters = append(t.gfilters, f)
		t.gdistinct = append(t.gdistinct, n)
	}
	n := t.block.len()
	start, gstart := len(t.data), len(t.gdata)
	if n > 0 {
		t.data = t.appendBlockFuse(t.data, n)
		if t.rowGroups {
			t.gdata = appendGroupFilters(t.gdata, len(spans), t.gfilters, t.gdistinct)
		}
	}
	t.lens = append(t.lens, uint64(len(t.data)-start))
	t.crcs = append(t.crcs, crc(t.data[start:]))
	if t.rowGroups {
		t.glens = append(t.glens, uint64(len(t.gdata)-gstart))
		t.gcrcs = append(t.gcrcs, crc(t.gdata[gstart:]))
	}
	t.blockSpans = append(t.blockSpans, len(spans))
	if t.saturated {
		return
	}
	t.noteSegment(len(t.blockSpans) - 1)
	t.segCount = t.seg.len()
	if t.segCount > diskMaxTokens || len(t.blockSpans) >= maxMapBlocks {
		t.saturated = true
		t.seg = hashMap{}
		t.places = placeLists{}
	}
}

// appendBlockFuse appends the block's filter: a binary fuse map of its n
// distinct tokens, all to value 0, in fuseBitsFor(fp) bits a slot:
//
//	uvarint n | u64 LE seed | uvarint segment length | uvarint segment count | uvarint slot bits | pages
func (t *tokenWriter) appendBlockFuse(b []byte, n int) []byte {
	t.keys = t.keys[:0]
	t.block.eachKey(func(h uint64) { t.keys = append(t.keys, h) })
	s, pages, err := buildFuse(t.keys, nil, fuseBitsFor(t.fp))
	if err != nil {
		// Distinct keys always peel; if this ever fails, a filter that
		// passes everything keeps the block findable.
		s, pages = fuseShape{w: fuseBitsFor(t.fp)}, nil
	}
	b = binary.AppendUvarint(b, uint64(n))
	b = le.AppendUint64(b, s.seed)
	b = appendUvarints(b, uint64(s.segLen), uint64(s.segCount), uint64(s.w))
	return append(b, pages...)
}

// fuseBitsFor is the slot width of a block filter for false-positive rate
// fp: 2^-w nearest fp (the default 1/64 gives 6 bits).
func fuseBitsFor(fp float64) uint32 {
	return uint32(min(max(math.Round(-math.Log2(fp)), 1), 16))
}

// writeBloomDiskSummary makes writers produce section 11 as the blocked
// bloom filter that writers before the token map wrote, so that tests keep
// covering how such segments read. Only tests set it.
var writeBloomDiskSummary = false

// writeTokenMapWithoutPlaces makes writers produce the token map that
// writers before place lists wrote (no flag bit 2 of section 13), so that
// tests keep covering how such segments read. Only tests set it.
var writeTokenMapWithoutPlaces = false

// groups builds sections 11 (the token map), 12 (row-group filters) and 13
// (their directory).
func (t *tokenWriter) groups() (disk, dir []byte) {
	pages := 0
	var shape *fuseShape
	places := 0
	if !t.saturated && t.segCount > 0 && writeBloomDiskSummary {
		disk, pages = buildDiskSummary(&t.seg)
	} else if !t.saturated && t.segCount > 0 {
		s, data, withPlaces, err := buildTokenMap(&t.seg, &t.places, t.blockSpans, !writeTokenMapWithoutPlaces)
		if err == nil {
			disk, pages, shape = data, len(data)/diskPageStride, &s
			if withPlaces {
				places = maxTokenPlaces
			}
		}
	}
	distinct := 0
	if pages > 0 {
		distinct = t.segCount
	}
	return disk, encodeGroupDir(!t.rowGroups, pages, distinct, shape, places, t.glens, t.gcrcs)
}

// summary builds section 8: the summary filter sized for summaryFP within
// what the resident budget leaves after the directory, then the directory:
//
//	uvarint flags | filter (appendTokenBloom) | uvarint n blocks | n x (uvarint length | crc32c u32 LE)
func (t *tokenWriter) summary() ([]byte, TokenStats) {
	// Both directories (sections 8 and 13) are resident.
	// Files of the older formats the hooks write predate the salt.
	salted := !writeUnsaltedSummary && !writeTokenMapWithoutPlaces
	fixed := 8 // resident beyond the summary's bits and the directories
	if salted {
		fixed += 8
	}
	budget := (residentTokenBudget - tokenDirEntryBytes*len(t.lens) - groupDirResident(len(t.glens)) - fixed) / 8
	var f tokenBloom
	saturated := t.saturated || t.segCount > summaryMaxTokens
	var salt uint64
	if !saturated && t.segCount > 0 {
		w := min(bloomWordsFor(t.segCount, summaryFP), budget)
		if budget < summaryMinWords {
			saturated = true
		} else {
			f = newTokenBloom(w, bloomK(t.segCount, w))
			if salted {
				// From the segment's tokens: segments with other tokens
				// get other salts, and the file stays deterministic.
				salt = uint64(t.segCount)
				t.seg.eachKey(func(h uint64) { salt += fuseMix(h) })
				salt = fuseMix(salt)
				t.seg.eachKey(func(h uint64) { f.add(fuseMix(h + salt)) })
			} else {
				t.seg.eachKey(f.add)
			}
		}
	}
	var flags uint64
	if saturated {
		flags = summarySaturated
	}
	flags |= summaryFuseBlocks // bloom parts are only read, in files of older writers
	if salted {
		flags |= summarySalted
	}
	b := appendUvarints(nil, flags)
	if salted {
		b = le.AppendUint64(b, salt)
	}
	b = appendTokenBloom(b, t.segCount, &f)
	b = appendUvarints(b, uint64(len(t.lens)))
	for i, n := range t.lens {
		b = appendUvarints(b, n)
		b = le.AppendUint32(b, t.crcs[i])
	}
	st := summaryStats(t.segCount, saturated, len(f.words), f.k, len(t.lens))
	st.BlockFilterBytes = int64(len(t.data))
	st.RowGroupFilterBytes = int64(len(t.gdata))
	st.ResidentBytes += groupDirResident(len(t.glens))
	return b, st
}

// tokenIndex is the resident part of the token filters: the summary and the
// directory of the per-block filters.
type tokenIndex struct {
	present   bool  // the segment was written with token filters
	err       error // set when the index is unusable; returned by every block lookup
	saturated bool
	fuse      bool // section 7 parts are binary fuse filters
	salted    bool // the summary holds fuseMix(hash + salt) (summarySalted)
	salt      uint64
	summary   bloomView // bits cloned out of the section
	stats     TokenStats
	offset    int64    // of section 7 in the file
	offs      []uint64 // n+1 offsets of the block filters within section 7
	crcs      []uint32
}

// decodeTokenSummary decodes section 8 for a segment of nBlocks blocks whose
// section 7 has sectionLen bytes.
func decodeTokenSummary(s string, nBlocks int, sectionLen uint64) (tokenIndex, error) {
	d := dec{s: s}
	var ti tokenIndex
	flags := d.uvarint()
	if d.err == nil && flags&^(summarySaturated|summaryFuseBlocks|summarySalted) != 0 {
		d.failf(fmt.Sprintf("unknown summary flags %#x", flags))
	}
	ti.saturated = flags&summarySaturated != 0
	ti.fuse = flags&summaryFuseBlocks != 0
	if ti.salted = flags&summarySalted != 0; ti.salted {
		ti.salt = d.u64le()
	}
	distinct, f := decodeTokenBloom(&d, maxSummaryWords)
	if d.err == nil && ti.saturated && len(f.bits) > 0 {
		d.failf("saturated summary holds bits")
	}
	if d.err == nil && !ti.saturated && distinct > 0 && len(f.bits) == 0 {
		d.failf(fmt.Sprintf("summary of %d tokens has no bits", distinct))
	}
	ti.summary = bloomView{k: f.k, bits: strings.Clone(f.bits)}
	n := d.count(5)
	if d.err == nil && n != nBlocks {
		d.failf(fmt.Sprintf("directory lists %d blocks, the segment has %d", n, nBlocks))
	}
	if d.err != nil {
		return tokenIndex{}, d.err
	}
	ti.offs = make([]uint64, n+1)
	ti.crcs = make([]uint32, n)
	for i := 0; i < n; i++ {
		l := d.uvarint()
		ti.crcs[i] = d.u32le()
		if d.err == nil && l > sectionLen-ti.offs[i] {
			d.failf(fmt.Sprintf("filter of block %d lies outside the token filter section", i))
		}
		ti.offs[i+1] = ti.offs[i] + l
	}
	if d.err == nil && ti.offs[n] != sectionLen {
		d.failf(fmt.Sprintf("filters cover %d bytes, the section has %d", ti.offs[n], sectionLen))
	}
	if d.err == nil && d.remaining() != 0 {
		d.failf(fmt.Sprintf("%d trailing bytes", d.remaining()))
	}
	if d.err != nil {
		return tokenIndex{}, d.err
	}
	ti.stats = summaryStats(distinct, ti.saturated, len(f.bits)/8, f.k, n)
	ti.stats.BlockFilterBytes = int64(sectionLen)
	return ti, nil
}

// openTokens loads the token summary and directory. Damage does not fail
// Open: it is kept in r.tok.err, SegmentMayContainTokens then passes
// everything and BlockMayContainTokens reports the error.
func (r *Reader) openTokens(sections map[uint32]tocEntry, load func(uint32) (string, int64, error)) {
	data, okData := sections[sectionTokenFilters]
	sum, okSum := sections[sectionTokenSummary]
	if !okData && !okSum {
		return
	}
	r.tok.present = true
	r.tok.stats = TokenStats{Indexed: true, SummaryFP: 1} // until the summary is read
	r.info.Tokens = r.tok.stats
	if !okData || !okSum {
		r.tok.err = r.corrupt(int64(data.Offset+sum.Offset), "token filters: only one of sections %d and %d present",
			sectionTokenFilters, sectionTokenSummary)
		return
	}
	if data.Codec != codecNone || data.RawLen != data.Length {
		r.tok.err = r.corrupt(int64(data.Offset), "token filter section must be stored uncompressed")
		return
	}
	s, off, err := load(sectionTokenSummary)
	if err != nil {
		r.tok.err = err
		return
	}
	r.resident -= len(s)
	ti, err := decodeTokenSummary(s, len(r.blocks), data.Length)
	if err != nil {
		r.tok.err = r.corrupt(off, "token summary: %v", err)
		return
	}
	ti.present, ti.offset = true, int64(data.Offset)
	r.tok = ti
	r.info.Tokens = ti.stats
	r.resident += len(ti.summary.bits) + 8*len(ti.offs) + 4*len(ti.crcs) + int(unsafe.Sizeof(ti))
}

// HasTokenFilters reports whether the segment was written with full-text
// token filters (sections 7 and 8). Without them every lookup answers
// "may contain" and the caller scans.
func (r *Reader) HasTokenFilters() bool { return r.tok.present }

// TokenStats describes the segment's token filters (also in Info().Tokens).
func (r *Reader) TokenStats() TokenStats { return r.tok.stats }

// SegmentMayContainTokens answers from the resident summary only (no I/O):
// false means no span of the segment holds all the hashes. It returns true
// for a segment without token filters, a saturated or damaged summary, and
// an empty hash list.
func (r *Reader) SegmentMayContainTokens(hashes []uint64) bool {
	if !r.tok.present || r.tok.err != nil || r.tok.saturated {
		return true
	}
	if !r.tok.salted {
		return r.tok.summary.testAll(hashes)
	}
	for _, h := range hashes {
		if !r.tok.summary.test(fuseMix(h + r.tok.salt)) {
			return false
		}
	}
	return true
}

// BlockMayContainTokens reads block i's token filter (one ReadAt, checksum
// verified) and reports whether the block may hold a span with all the
// hashes; false is certain. It answers true without I/O for a segment
// without token filters and for an empty hash list. Whenever err is non-nil
// the answer is true: a damaged filter (or directory) is a
// *CorruptionError, and the caller scans the block instead.
func (r *Reader) BlockMayContainTokens(i int, hashes []uint64) (bool, error) {
	if i < 0 || i >= len(r.blocks) {
		return true, fmt.Errorf("read segment %s: block %d out of range [0, %d)", r.path, i, len(r.blocks))
	}
	if !r.tok.present || len(hashes) == 0 {
		return true, nil
	}
	if r.tok.err != nil {
		return true, r.tok.err
	}
	lo, hi := r.tok.offs[i], r.tok.offs[i+1]
	if lo == hi {
		return false, nil // the block holds no tokens
	}
	b, err := r.readAt(r.tok.offset+int64(lo), int64(hi-lo))
	if err != nil {
		return true, err
	}
	return r.testTokenFilter(i, b, hashes)
}

// tokenBatchBytes bounds one read of BlocksMayContainTokens.
const tokenBatchBytes = 256 << 10

// BlocksMayContainTokens answers BlockMayContainTokens for every block of
// the segment at once: may[i] is false only when block i certainly holds no
// span with all the hashes. When the summary rejects the hashes it reads
// nothing; otherwise it reads the filters of consecutive blocks together,
// in reads of at most 256 KiB, so a query for a rare word costs a few reads
// per segment rather than one per block. A damaged filter leaves its block
// true and the others answered; err is then the first *CorruptionError. An
// I/O error leaves the blocks not yet answered true.
func (r *Reader) BlocksMayContainTokens(hashes []uint64) (may []bool, err error) {
	may = make([]bool, len(r.blocks))
	if !r.tok.present || len(hashes) == 0 || r.tok.err != nil {
		for i := range may {
			may[i] = true
		}
		return may, r.tok.err
	}
	if !r.SegmentMayContainTokens(hashes) {
		return may, nil
	}
	var buf []byte
	for i := 0; i < len(r.blocks); {
		// Blocks [i, j) are read together.
		j := i + 1
		for j < len(r.blocks) && r.tok.offs[j+1]-r.tok.offs[i] <= tokenBatchBytes {
			j++
		}
		lo, hi := r.tok.offs[i], r.tok.offs[j]
		if hi > lo {
			if cap(buf) < int(hi-lo) {
				buf = make([]byte, hi-lo)
			}
			got, rerr := r.f.ReadAt(buf[:hi-lo], r.tok.offset+int64(lo))
			if got < int(hi-lo) {
				if rerr == nil || errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
					rerr = r.corrupt(r.tok.offset+int64(lo)+int64(got), "file ends inside the token filters of blocks %d to %d", i, j-1)
				} else {
					rerr = fmt.Errorf("read segment %s at offset %d: %w", r.path, r.tok.offset+int64(lo), rerr)
				}
				for k := i; k < len(may); k++ {
					may[k] = true
				}
				return may, rerr
			}
		}
		for k := i; k < j; k++ {
			part := buf[r.tok.offs[k]-lo : r.tok.offs[k+1]-lo]
			ok, perr := r.testTokenFilter(k, part, hashes)
			may[k] = ok
			if perr != nil && err == nil {
				err = perr
			}
		}
		i = j
	}
	return may, err
}

// testTokenFilter verifies and tests the stored filter of block i. A part
// of length 0 is a block without tokens.
func (r *Reader) testTokenFilter(i int, b []byte, hashes []uint64) (bool, error) {
	if len(b) == 0 {
		return false, nil
	}
	off := r.tok.offset + int64(r.tok.offs[i])
	if crc(b) != r.tok.crcs[i] {
		return true, r.corrupt(off, "token filter of block %d: checksum mismatch", i)
	}
	d := dec{s: bytesToString(b)}
	if r.tok.fuse {
		return r.testBlockFuse(i, off, &d, hashes)
	}
	_, f := decodeTokenBloom(&d, maxBlockTokenFilterWords)
	if d.err == nil && len(f.bits) == 0 {
		d.failf("filter without bits") // a block without tokens has a part of length 0
	}
	if d.err == nil && d.remaining() != 0 {
		d.failf(fmt.Sprintf("%d trailing bytes", d.remaining()))
	}
	if d.err != nil {
		return true, r.corrupt(off, "token filter of block %d: %v", i, d.err)
	}
	return f.testAll(hashes), nil
}

// testBlockFuse decodes a binary fuse block filter (the part after its
// checksum was verified) and tests the hashes: a hash is absent unless it
// decodes to 0. A filter without slots passes everything.
func (r *Reader) testBlockFuse(i int, off int64, d *dec, hashes []uint64) (bool, error) {
	d.uvarint() // distinct tokens
	var s fuseShape
	s.seed = d.u64le()
	segLen, segCount, w := d.uvarint(), d.uvarint(), d.uvarint()
	switch {
	case d.err != nil:
	case w < 1 || w > 16:
		d.failf(fmt.Sprintf("slots of %d bits", w))
	case segLen == 0 && segCount == 0:
		if d.remaining() == 0 {
			return true, nil
		}
		d.failf("a pass-all filter holds slots")
	case segLen == 0 || segLen > maxFuseSeg || segLen&(segLen-1) != 0 || segCount == 0 || segCount > maxFuseSlots || (segCount+2)*segLen > maxFuseSlots:
		d.failf(fmt.Sprintf("shape of %d segments of %d slots", segCount, segLen))
	}
	if d.err == nil {
		s.segLen, s.segCount, s.slots, s.w = uint32(segLen), uint32(segCount), uint32((segCount+2)*segLen), uint32(w)
		if d.remaining() != s.pages()*fusePageBytes {
			d.failf(fmt.Sprintf("%d bytes of slots, want %d", d.remaining(), s.pages()*fusePageBytes))
		}
	}
	if d.err != nil {
		return true, r.corrupt(off, "token filter of block %d: %v", i, d.err)
	}
	pages := d.s[d.off:]
	for _, h := range hashes {
		if fuseLookup(&s, pages, h) != 0 {
			return false, nil
		}
	}
	return true, nil
}
