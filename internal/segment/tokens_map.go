package segment

import (
	"fmt"
	"math/bits"
)

// The token map (section 11 written as a binary fuse map, flag bit 1 of
// section 13; docs/format/segment.md) tells, for every distinct token of a
// segment, where it lies when that is one place:
//
//	code 0                      the token is in two or more blocks: ask the block filters
//	code 1 + r                  one span holds it: row r of the segment (rows numbered
//	                            block by block)
//	code 1 + rows + g           every span holding it is in row group g of the segment
//	                            (groups numbered block by block, ceil(spans/64) a block)
//	code 1 + rows + groups + b  every span holding it is in block b, in several groups
//
// Codes are stored in w = bits(codes-1) + tokenMapFPBits bits, so a token
// absent from the segment decodes to a valid code with probability under
// 2^-tokenMapFPBits: it is then rejected by the summary's answer "absent",
// or sent to one row, group or block that does not hold it (wasted work,
// never a wrong answer). A token of the segment always decodes to its own
// code, so a rare word decodes the one row (or 64 rows) that hold it
// without consulting a block filter.

const (
	// tokenMapFPBits are the slot bits beyond the code: an absent token
	// passes with probability codes/2^w < 2^-8.
	tokenMapFPBits = 8
	// groupDirTokenMap flags a section 11 written as a token map.
	groupDirTokenMap = 2
	// locMulti marks a token seen in more than one block.
	locMulti = ^uint64(0)
)

// hashMap is an open-addressing map of uint64 keys to uint64 values
// (linear probing, load <= 1/2), used by the writer to count distinct
// tokens and track where each lies.
type hashMap struct {
	keys    []uint64 // 0 = empty; key 0 lives in zeroVal
	vals    []uint64
	n       int
	hasZero bool
	zeroVal uint64
	shift   uint
}

func (m *hashMap) len() int {
	if m.hasZero {
		return m.n + 1
	}
	return m.n
}

func (m *hashMap) reset() {
	clear(m.keys)
	m.n, m.hasZero = 0, false
}

// slot returns the value slot of k, inserting it (value 0) when absent;
// isNew tells which.
func (m *hashMap) slot(k uint64) (v *uint64, isNew bool) {
	if k == 0 {
		isNew = !m.hasZero
		m.hasZero = true
		if isNew {
			m.zeroVal = 0
		}
		return &m.zeroVal, isNew
	}
	if 2*(m.n+1) > len(m.keys) {
		m.grow()
	}
	mask := uint64(len(m.keys) - 1)
	for i := (k * 0x9e3779b97f4a7c15) >> m.shift; ; i = (i + 1) & mask {
		switch m.keys[i] {
		case k:
			return &m.vals[i], false
		case 0:
			m.keys[i] = k
			m.vals[i] = 0
			m.n++
			return &m.vals[i], true
		}
	}
}

func (m *hashMap) grow() {
	oldK, oldV := m.keys, m.vals
	size := max(2*len(oldK), 1024)
	m.keys, m.vals = make([]uint64, size), make([]uint64, size)
	m.shift = uint(64 - bits.TrailingZeros(uint(size)))
	m.n = 0
	for i, k := range oldK {
		if k != 0 {
			v, _ := m.slot(k)
			*v = oldV[i]
		}
	}
}

// add inserts k (as a set: its value stays 0 when new).
func (m *hashMap) add(k uint64) { m.slot(k) }

// each calls fn for every key and its value.
func (m *hashMap) each(fn func(k, v uint64)) {
	if m.hasZero {
		fn(0, m.zeroVal)
	}
	for i, k := range m.keys {
		if k != 0 {
			fn(k, m.vals[i])
		}
	}
}

// eachKey calls fn for every key.
func (m *hashMap) eachKey(fn func(uint64)) { m.each(func(k, _ uint64) { fn(k) }) }

// Locations: within a block, the first and last row holding a token,
// packed as first<<20 | last (rows < maxBlockSpans = 2^20); within the
// segment, block<<40 | that.
func packRows(first, last uint32) uint64 { return uint64(first)<<20 | uint64(last) }
func unpackRows(v uint64) (first, last uint32) {
	return uint32(v>>20) & (1<<20 - 1), uint32(v) & (1<<20 - 1)
}

// maxMapBlocks bounds the blocks of a segment with a token map (the block
// field of a location; all ones is locMulti).
const maxMapBlocks = 1<<24 - 1

// groupsOf is the number of row groups of a block of n spans.
func groupsOf(n int) int { return (n + groupRows - 1) / groupRows }

// tokenMapCodes returns the number of codes of a segment whose blocks have
// the given span counts, and its rows and groups.
func tokenMapCodes(blockSpans []int) (codes, rows, groups int) {
	for _, n := range blockSpans {
		rows += n
		groups += groupsOf(n)
	}
	return 1 + rows + groups + len(blockSpans), rows, groups
}

// buildTokenMap encodes the segment's token locations (values: locMulti or
// block<<40 | packRows) as section 11 pages (64 bytes of slots and their
// crc32c each) and returns the map's shape.
func buildTokenMap(seg *hashMap, blockSpans []int) (fuseShape, []byte, error) {
	if len(blockSpans) > maxMapBlocks {
		return fuseShape{}, nil, fmt.Errorf("token map: %d blocks exceed the limit", len(blockSpans))
	}
	codes, rows, groups := tokenMapCodes(blockSpans)
	rowBase := make([]int, len(blockSpans))   // first row of each block
	groupBase := make([]int, len(blockSpans)) // first group of each block
	for i, r, g := 0, 0, 0; i < len(blockSpans); i++ {
		rowBase[i], groupBase[i] = r, g
		r += blockSpans[i]
		g += groupsOf(blockSpans[i])
	}
	w := uint32(bits.Len(uint(codes-1))) + tokenMapFPBits
	if w > 32 {
		return fuseShape{}, nil, fmt.Errorf("token map: %d codes do not fit a slot", codes)
	}
	keys := make([]uint64, 0, seg.len())
	vals := make([]uint32, 0, seg.len())
	seg.each(func(k, v uint64) {
		code := 0
		if v != locMulti {
			b := int(v >> 40)
			first, last := unpackRows(v)
			switch {
			case first == last:
				code = 1 + rowBase[b] + int(first)
			case first/groupRows == last/groupRows:
				code = 1 + rows + groupBase[b] + int(first/groupRows)
			default:
				code = 1 + rows + groups + b
			}
		}
		keys = append(keys, k)
		vals = append(vals, uint32(code))
	})
	s, pages, err := buildFuse(keys, vals, w)
	if err != nil {
		return fuseShape{}, nil, err
	}
	out := make([]byte, 0, len(pages)/fusePageBytes*diskPageStride)
	for p := 0; p < len(pages); p += fusePageBytes {
		out = append(out, pages[p:p+fusePageBytes]...)
		out = le.AppendUint32(out, crc(pages[p:p+fusePageBytes]))
	}
	return s, out, nil
}

// TokenLocation is where, within one segment, a span holding every word of
// a query may lie (Reader.LocateTokens).
type TokenLocation struct {
	// Absent is certain: no span of the segment holds every word.
	Absent bool
	// Block >= 0 is the only block that may hold such a span, and Rows the
	// rows of it that may; -1 means any block its filter passes.
	Block int
	Rows  RowRange
}

// anywhere is the answer without a usable token map.
var anywhere = TokenLocation{Block: -1}

// LocateTokens answers from the resident summary and then the token map
// (three 68-byte page reads per word, stopping at the first absent one):
// Absent is certain; a located block and rows are exact for the words of
// the segment. A segment without a token map answers as
// SegmentMayContainTokensDisk does (Absent, or anywhere). Whenever err is
// non-nil the answer is "anywhere": a damaged page or directory is a
// *CorruptionError and the caller falls back to the block filters.
func (r *Reader) LocateTokens(hashes []uint64) (TokenLocation, error) {
	if !r.grp.present || !r.grp.isMap || len(hashes) == 0 || r.grp.err != nil {
		ok, err := r.SegmentMayContainTokensDisk(hashes)
		if err != nil || ok {
			return anywhere, err
		}
		return TokenLocation{Absent: true, Block: -1}, nil
	}
	if !r.SegmentMayContainTokens(hashes) {
		return TokenLocation{Absent: true, Block: -1}, nil
	}
	loc := anywhere
	absent := TokenLocation{Absent: true, Block: -1}
	for _, h := range hashes {
		code, err := r.tokenMapCode(h)
		if err != nil {
			return anywhere, err
		}
		if code == 0 {
			continue // in several blocks
		}
		b, rows, ok := r.decodeTokenCode(code)
		if !ok {
			return absent, nil
		}
		switch {
		case loc.Block < 0:
			loc = TokenLocation{Block: b, Rows: rows}
		case loc.Block != b:
			return absent, nil // no span holds both
		default:
			lo, hi := max(loc.Rows.Lo, rows.Lo), min(loc.Rows.Hi, rows.Hi)
			if lo >= hi {
				return absent, nil
			}
			loc.Rows = RowRange{Lo: lo, Hi: hi}
		}
	}
	return loc, nil
}

// tokenMapCode reads the three slots of h (one checksummed page each).
func (r *Reader) tokenMapCode(h uint64) (uint32, error) {
	s := &r.grp.shape
	mixed, pos := s.positions(h)
	var buf [diskPageStride]byte
	var v [3]uint32
	for j, k := range pos {
		pg, bit := s.slotAt(k)
		off := r.grp.diskOff + int64(pg)*diskPageStride
		if err := r.readFull(buf[:], off); err != nil {
			return 0, err
		}
		if crc(buf[:diskPageBytes]) != le.Uint32(buf[diskPageBytes:]) {
			return 0, r.corrupt(off, "token map page %d: checksum mismatch", pg)
		}
		v[j] = getBits(buf[:diskPageBytes], bit, s.w)
	}
	return s.value(mixed, v[0], v[1], v[2]), nil
}

// decodeTokenCode turns a non-zero code into a block and its rows; ok is
// false for a code no token of the segment has (the word is absent).
func (r *Reader) decodeTokenCode(code uint32) (block int, rows RowRange, ok bool) {
	c := int(code) - 1
	for i := range r.blocks { // a row
		n := r.blocks[i].Meta.Spans
		if c < n {
			return i, RowRange{Lo: c, Hi: c + 1}, true
		}
		c -= n
	}
	for i := range r.blocks { // a row group
		n := r.blocks[i].Meta.Spans
		if k := groupsOf(n); c < k {
			lo := c * groupRows
			return i, RowRange{Lo: lo, Hi: min(lo+groupRows, n)}, true
		} else {
			c -= k
		}
	}
	if c < len(r.blocks) {
		return c, RowRange{Lo: 0, Hi: r.blocks[c].Meta.Spans}, true
	}
	return -1, RowRange{}, false
}

// decodeFuseShape reads a token map's shape (section 13, flag bit 1) and
// checks it against the pages of section 11.
func decodeFuseShape(d *dec, pages uint64) fuseShape {
	var s fuseShape
	s.seed = d.u64le()
	segLen, segCount, w := d.uvarint(), d.uvarint(), d.uvarint()
	if d.err != nil {
		return s
	}
	switch {
	case segLen == 0 || segLen > maxFuseSeg || segLen&(segLen-1) != 0:
		d.failf(fmt.Sprintf("token map segment length %d is not a power of two up to %d", segLen, maxFuseSeg))
	case segCount == 0 || segCount > maxFuseSlots || (segCount+2)*segLen > maxFuseSlots:
		d.failf(fmt.Sprintf("token map of %d segments of %d slots exceeds the limit", segCount, segLen))
	case w < 1+tokenMapFPBits || w > 32:
		d.failf(fmt.Sprintf("token map slots of %d bits", w))
	}
	if d.err != nil {
		return s
	}
	s.segLen, s.segCount, s.slots, s.w = uint32(segLen), uint32(segCount), uint32((segCount+2)*segLen), uint32(w)
	if uint64(s.pages()) != pages {
		d.failf(fmt.Sprintf("token map of %d slots in %d pages, want %d", s.slots, pages, s.pages()))
	}
	return s
}
