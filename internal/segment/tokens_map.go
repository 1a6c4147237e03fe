package segment

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"sync"
)

// The token map (section 11 written as a binary fuse map, flag bit 1 of
// section 13; docs/format/segment.md) tells, for every distinct token of a
// segment, where it lies when that is one place or a few:
//
//	code 0                           the token is in more places: ask the block filters
//	code 1 + r                       one span holds it: row r of the segment (rows numbered
//	                                 block by block)
//	code 1 + rows + g                every span holding it is in row group g of the segment
//	                                 (groups numbered block by block, ceil(spans/64) a block)
//	code 1 + rows + groups + b       every span holding it is in block b, in several groups
//	code 1 + rows + groups + blocks  (flag bit 2 of section 13 only) the spans holding it
//	  + n - 2                        lie in n places, 2 <= n <= P (section 13 gives P): the keys
//	                                 placeKey(h, 0..n-1) map to a row, group or block code each
//
// Codes are stored in w = bits(codes-1) + tokenMapFPBits bits, so a token
// absent from the segment decodes to a valid code with probability under
// 2^-tokenMapFPBits: it is then rejected by the summary's answer "absent",
// or sent to one row, group or block that does not hold it (wasted work,
// never a wrong answer). A token of the segment always decodes to its own
// code, so a rare word decodes the one row (or 64 rows) that hold it
// without consulting a block filter, and a word in a few spans of
// different blocks (a phrase's words, also apart in a decoy span) decodes
// those few rows rather than whole blocks.

const (
	// tokenMapFPBits are the slot bits beyond the code: an absent token
	// passes with probability codes/2^w < 2^-8.
	tokenMapFPBits = 8
	// groupDirTokenMap flags a section 11 written as a token map.
	groupDirTokenMap = 2
	// groupDirTokenPlaces flags a token map with place-list codes (and
	// their placeKey entries). Readers that predate it refuse the flag and
	// answer "may contain" at this level: they would read a place-list
	// code as "absent".
	groupDirTokenPlaces = 4
	// maxTokenPlaces bounds the places (rows, groups or blocks) a writer's
	// token map lists for one token; a token in more is "several blocks"
	// (code 0), or its block when it lies in one. Section 13 records it:
	// on the content corpus (60,000 spans a segment) 2 places cost 0.05%
	// of the segment, 3 0.18%, 4 0.39%, 6 1.1%.
	maxTokenPlaces = 4
	// maxTokenPlacesRead bounds what a reader accepts.
	maxTokenPlacesRead = 16
	// locMulti marks a token seen in more than maxTokenPlaces places.
	locMulti = ^uint64(0)
	// locList marks a token seen in 2..maxTokenPlaces places: the rest
	// of the value indexes placeLists.
	locList = uint64(1) << 63
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
// segment, a place is block<<40 | that (block < 2^23, so that bit 63 is
// free for locList).
func packRows(first, last uint32) uint64 { return uint64(first)<<20 | uint64(last) }
func unpackRows(v uint64) (first, last uint32) {
	return uint32(v>>20) & (1<<20 - 1), uint32(v) & (1<<20 - 1)
}

// The writer's value of a token within the block being flushed:
//
//	bits 60-63  distinct rows holding it, saturating at 15
//	bits 40-59  the second of those rows (when there are two or more)
//	bits 0-39   packRows(first, last)
//
// Rows are tokenised in order, so three rows or fewer are known exactly.
const blockRowsMask = 1<<20 - 1

// noteRow records that row holds the token whose block value is v (0 for
// a token new to the block).
func noteRow(v uint64, row uint32) uint64 {
	n := v >> 60
	if n == 0 {
		return 1<<60 | packRows(row, row)
	}
	first, last := unpackRows(v)
	if last == row {
		return v // another token of the same span
	}
	second := uint32(v>>40) & blockRowsMask
	if n == 1 {
		second = row
	}
	return min(n+1, 15)<<60 | uint64(second)<<40 | packRows(first, row)
}

// blockPlaces returns the places of a token in block b from its block
// value v: its row when one holds it, its group when one does, else up to
// three rows (rows of one group merged into a range of it) when three or
// fewer hold it, else the range of rows of the block.
func blockPlaces(b int, v uint64, buf *[3]uint64) []uint64 {
	n := v >> 60
	first, last := unpackRows(v)
	second := uint32(v>>40) & blockRowsMask
	base := uint64(b) << 40
	out := buf[:0]
	switch {
	case n == 2:
		out = append(out, base|packRows(first, first), base|packRows(last, last))
	case n == 3:
		out = append(out, base|packRows(first, first), base|packRows(second, second), base|packRows(last, last))
	default:
		return append(out, base|packRows(first, last))
	}
	if first/groupRows == last/groupRows {
		return append(out[:0], base|packRows(first, last))
	}
	// Rows of one group make one place.
	k := 0
	for _, p := range out[1:] {
		lo, _ := unpackRows(out[k])
		r, _ := unpackRows(p)
		if lo/groupRows == r/groupRows {
			out[k] = base | packRows(lo, r)
		} else {
			k++
			out[k] = p
		}
	}
	return out[:k+1]
}

// placeList is the places of a token seen in several, in segment order.
type placeList struct {
	n int
	p [maxTokenPlaces]uint64
}

// placeLists holds the lists of the tokens seen in 2..maxTokenPlaces
// places: such a token's value in the segment map is locList | index.
type placeLists struct {
	l    []placeList
	free []uint32
	live int
}

// merge adds the places ps (one block's, 1..3 of them) to the token whose
// segment value is *loc (isNew: the token was not in the segment yet).
func (pl *placeLists) merge(loc *uint64, isNew bool, ps []uint64) {
	switch {
	case isNew && len(ps) == 1:
		*loc = ps[0]
	case isNew:
		*loc = pl.add(ps, nil)
	case *loc == locMulti:
	case *loc&locList != 0:
		i := uint32(*loc &^ locList)
		l := &pl.l[i]
		if l.n+len(ps) > maxTokenPlaces {
			pl.free = append(pl.free, i)
			pl.live--
			*loc = locMulti
			return
		}
		l.n += copy(l.p[l.n:], ps)
	case 1+len(ps) > maxTokenPlaces:
		*loc = locMulti
	default:
		*loc = pl.add([]uint64{*loc}, ps)
	}
}

// add stores a new list of the places a then b and returns its value.
func (pl *placeLists) add(a, b []uint64) uint64 {
	var i uint32
	if k := len(pl.free); k > 0 {
		i = pl.free[k-1]
		pl.free = pl.free[:k-1]
	} else {
		i = uint32(len(pl.l))
		pl.l = append(pl.l, placeList{})
	}
	l := &pl.l[i]
	l.n = copy(l.p[:], a)
	l.n += copy(l.p[l.n:], b)
	pl.live++
	return locList | uint64(i)
}

// placeKey is the key of the j-th place of the token h in the token map.
func placeKey(h uint64, j int) uint64 {
	return fuseMix(h^0x6a09e667f3bcc909) + uint64(j+1)*0x9e3779b97f4a7c15
}

// maxMapBlocks bounds the blocks of a segment with a token map (the block
// field of a place; bit 63 is locList).
const maxMapBlocks = 1<<23 - 1

// groupsOf is the number of row groups of a block of n spans.
func groupsOf(n int) int { return (n + groupRows - 1) / groupRows }

// tokenMapCodes returns the number of codes of a segment whose blocks have
// the given span counts (without place-list codes), and its rows and
// groups.
func tokenMapCodes(blockSpans []int) (codes, rows, groups int) {
	for _, n := range blockSpans {
		rows += n
		groups += groupsOf(n)
	}
	return 1 + rows + groups + len(blockSpans), rows, groups
}

// buildTokenMap encodes the segment's token locations (values: locMulti,
// locList | index into pl, or a place) as section 11 pages (64 bytes of
// slots and their crc32c each) and returns the map's shape; withPlaces
// tells whether it holds place-list codes (flag bit 2 of section 13). With
// places false, or when the map's extra keys fail to build (a key
// collision, vanishingly rare), it lists no places: such tokens get code
// 0, or their block's code when they lie in one.
func buildTokenMap(seg *hashMap, pl *placeLists, blockSpans []int, places bool) (s fuseShape, out []byte, withPlaces bool, err error) {
	if len(blockSpans) > maxMapBlocks {
		return fuseShape{}, nil, false, fmt.Errorf("token map: %d blocks exceed the limit", len(blockSpans))
	}
	codes, rows, groups := tokenMapCodes(blockSpans)
	rowBase := make([]int, len(blockSpans))   // first row of each block
	groupBase := make([]int, len(blockSpans)) // first group of each block
	for i, r, g := 0, 0, 0; i < len(blockSpans); i++ {
		rowBase[i], groupBase[i] = r, g
		r += blockSpans[i]
		g += groupsOf(blockSpans[i])
	}
	placeCode := func(v uint64) uint32 {
		b := int(v >> 40)
		first, last := unpackRows(v)
		switch {
		case first == last:
			return uint32(1 + rowBase[b] + int(first))
		case first/groupRows == last/groupRows:
			return uint32(1 + rows + groupBase[b] + int(first/groupRows))
		default:
			return uint32(1 + rows + groups + b)
		}
	}
	withPlaces = places && pl.live > 0
	listBase := codes
	if withPlaces {
		codes += maxTokenPlaces - 1
	}
	w := uint32(bits.Len(uint(codes-1))) + tokenMapFPBits
	if w > 32 {
		return fuseShape{}, nil, false, fmt.Errorf("token map: %d codes do not fit a slot", codes)
	}
	n := seg.len()
	if withPlaces {
		n += pl.live * maxTokenPlaces
	}
	keys := make([]uint64, 0, n)
	vals := make([]uint32, 0, n)
	seg.each(func(k, v uint64) {
		var code uint32
		switch {
		case v == locMulti:
		case v&locList != 0:
			l := &pl.l[v&^locList]
			if withPlaces {
				code = uint32(listBase + l.n - 2)
				for j, p := range l.p[:l.n] {
					keys = append(keys, placeKey(k, j))
					vals = append(vals, placeCode(p))
				}
				break
			}
			if b := l.p[0] >> 40; l.p[l.n-1]>>40 == b { // one block
				code = uint32(1 + rows + groups + int(b))
			}
		default:
			code = placeCode(v)
		}
		keys = append(keys, k)
		vals = append(vals, code)
	})
	s, pages, err := buildFuse(keys, vals, w)
	if err != nil && withPlaces {
		return buildTokenMap(seg, pl, blockSpans, false)
	}
	if err != nil {
		return fuseShape{}, nil, false, err
	}
	out = make([]byte, 0, len(pages)/fusePageBytes*diskPageStride)
	for p := 0; p < len(pages); p += fusePageBytes {
		out = append(out, pages[p:p+fusePageBytes]...)
		out = le.AppendUint32(out, crc(pages[p:p+fusePageBytes]))
	}
	return s, out, withPlaces, nil
}

// TokenLocation is where, within one segment, a span holding every word of
// a query may lie (Reader.LocateTokens).
type TokenLocation struct {
	// Absent is certain: no span of the segment holds every word.
	Absent bool
	// Places, when not nil, are the only rows of the segment that may hold
	// such a span: at most maxTokenPlaces ranges, ordered by block and row,
	// not overlapping. Nil (and not Absent) means any block its filter
	// passes.
	Places []TokenPlace
}

// TokenPlace is rows of one block.
type TokenPlace struct {
	Block int
	Rows  RowRange
}

// anywhere is the answer without a usable token map.
var anywhere = TokenLocation{}

// LocateTokens answers from the resident summary and then the token map
// (three 68-byte page reads per word, three more per place of a word in a
// few places, stopping at the first absent word): Absent is certain;
// located places are exact for the words of the segment. A segment without
// a token map answers as SegmentMayContainTokensDisk does (Absent, or
// anywhere). Whenever err is non-nil the answer is "anywhere": a damaged
// page or directory is a *CorruptionError and the caller falls back to the
// block filters.
func (r *Reader) LocateTokens(hashes []uint64) (TokenLocation, error) {
	if !r.grp.present || !r.grp.isMap || len(hashes) == 0 || r.grp.err != nil {
		ok, err := r.SegmentMayContainTokensDisk(hashes)
		if err != nil || ok {
			return anywhere, err
		}
		return TokenLocation{Absent: true}, nil
	}
	if !r.SegmentMayContainTokens(hashes) {
		return TokenLocation{Absent: true}, nil
	}
	var places []TokenPlace
	var arr [maxTokenPlaces]TokenPlace
	buf := arr[:0]
	for _, h := range hashes {
		ps, ok, err := r.tokenPlaces(h, buf[:0])
		if err != nil {
			return anywhere, err
		}
		if !ok {
			return TokenLocation{Absent: true}, nil
		}
		if ps == nil {
			continue // in several blocks
		}
		buf = ps
		if places == nil {
			places = slices.Clone(ps)
		} else {
			places = intersectPlaces(places, ps)
		}
		if len(places) == 0 {
			return TokenLocation{Absent: true}, nil // no span holds them all
		}
	}
	return TokenLocation{Places: places}, nil
}

// tokenPlaces appends to dst the places of the token h, ordered and
// merged; nil (with ok) when it lies in more places than the map lists.
// ok is false when h is certainly absent.
func (r *Reader) tokenPlaces(h uint64, dst []TokenPlace) (ps []TokenPlace, ok bool, err error) {
	code, err := r.tokenMapCode(h)
	if err != nil || code == 0 {
		return nil, err == nil, err
	}
	p, n, ok := r.decodeTokenCode(code)
	if !ok {
		return nil, false, nil
	}
	if n == 0 {
		return append(dst, p), true, nil
	}
	for j := range n {
		code, err := r.tokenMapCode(placeKey(h, j))
		if err != nil {
			return nil, false, err
		}
		p, m, ok := r.decodeTokenCode(code)
		if code == 0 || !ok || m != 0 {
			return nil, false, nil // a token of the segment lists places only
		}
		dst = append(dst, p)
	}
	// A token of the segment lists its places in order; anything else is
	// an absent token's noise, which must still read as valid ranges.
	slices.SortFunc(dst, func(a, b TokenPlace) int {
		return cmp.Or(cmp.Compare(a.Block, b.Block), cmp.Compare(a.Rows.Lo, b.Rows.Lo))
	})
	k := 0
	for _, q := range dst[1:] {
		if last := &dst[k]; q.Block == last.Block && q.Rows.Lo <= last.Rows.Hi {
			last.Rows.Hi = max(last.Rows.Hi, q.Rows.Hi)
		} else {
			k++
			dst[k] = q
		}
	}
	return dst[:k+1], true, nil
}

// intersectPlaces returns the rows in both a and b (each ordered, not
// overlapping), ordered, not overlapping.
func intersectPlaces(a, b []TokenPlace) []TokenPlace {
	out := make([]TokenPlace, 0, len(a)+len(b))
	for i, j := 0, 0; i < len(a) && j < len(b); {
		x, y := a[i], b[j]
		switch {
		case x.Block < y.Block:
			i++
			continue
		case y.Block < x.Block:
			j++
			continue
		}
		if lo, hi := max(x.Rows.Lo, y.Rows.Lo), min(x.Rows.Hi, y.Rows.Hi); lo < hi {
			out = append(out, TokenPlace{Block: x.Block, Rows: RowRange{Lo: lo, Hi: hi}})
		}
		if x.Rows.Hi <= y.Rows.Hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// maxTokenMapRead bounds one read of token map pages: a key's three slots
// lie in three consecutive fuse segments, and pages that close are read
// together (one read of a few KiB costs less than three of 68 bytes: 1.2
// against 3 x 0.8 us for 14 KiB from the page cache on a 2-core VM).
const maxTokenMapRead = 16 << 10

// tokenMapBufs are buffers of maxTokenMapRead bytes for tokenMapCode.
var tokenMapBufs = sync.Pool{New: func() any { return new([maxTokenMapRead]byte) }}

// tokenMapCode reads the three slots of h (one checksummed page each; pages
// within maxTokenMapRead of each other in one read).
func (r *Reader) tokenMapCode(h uint64) (uint32, error) {
	s := &r.grp.shape
	mixed, pos := s.positions(h) // ascending: one position per fuse segment
	var pg [3]int
	var bit, v [3]uint32
	for j, k := range pos {
		pg[j], bit[j] = s.slotAt(k)
	}
	buf := tokenMapBufs.Get().(*[maxTokenMapRead]byte)
	defer tokenMapBufs.Put(buf)
	for j := 0; j < len(pg); {
		first, e := pg[j], j+1
		for e < len(pg) && (pg[e]-first+1)*diskPageStride <= maxTokenMapRead {
			e++
		}
		off := r.grp.diskOff + int64(first)*diskPageStride
		if err := r.readFull(buf[:(pg[e-1]-first+1)*diskPageStride], off); err != nil {
			return 0, err
		}
		for ; j < e; j++ {
			page := buf[(pg[j]-first)*diskPageStride:][:diskPageStride]
			if crc(page[:diskPageBytes]) != le.Uint32(page[diskPageBytes:]) {
				return 0, r.corrupt(r.grp.diskOff+int64(pg[j])*diskPageStride, "token map page %d: checksum mismatch", pg[j])
			}
			v[j] = getBits(page[:diskPageBytes], bit[j], s.w)
		}
	}
	return s.value(mixed, v[0], v[1], v[2]), nil
}

// decodeTokenCode turns a non-zero code into a place, or into the number
// n of places of a place-list code (maps with places only); ok is false
// for a code no token of the segment has (the word is absent).
func (r *Reader) decodeTokenCode(code uint32) (p TokenPlace, n int, ok bool) {
	c := int(code) - 1
	for i := range r.blocks { // a row
		n := r.blocks[i].Meta.Spans
		if c < n {
			return TokenPlace{i, RowRange{Lo: c, Hi: c + 1}}, 0, true
		}
		c -= n
	}
	for i := range r.blocks { // a row group
		n := r.blocks[i].Meta.Spans
		if k := groupsOf(n); c < k {
			lo := c * groupRows
			return TokenPlace{i, RowRange{Lo: lo, Hi: min(lo+groupRows, n)}}, 0, true
		} else {
			c -= k
		}
	}
	if c < len(r.blocks) {
		return TokenPlace{c, RowRange{Lo: 0, Hi: r.blocks[c].Meta.Spans}}, 0, true
	}
	if c -= len(r.blocks); c < r.grp.places-1 {
		return TokenPlace{}, c + 2, true
	}
	return TokenPlace{}, 0, false
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
