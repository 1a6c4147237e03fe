package segment

import (
	"math"

	"github.com/rastro-dev/rastro/internal/model"
)

// RowFilter holds necessary conditions on the cheap columns of a span
// (times, duration, name, service, kind, status, span and resource
// attributes), which FilterRows evaluates on a block's columns before any
// row is decoded. A row that fails one cannot match; a row that passes all
// may, and the caller's own match decides. Zero values leave a field
// unconstrained.
type RowFilter struct {
	Start, End               uint64   // start time in [Start, End); 0 = unbounded
	MinDuration, MaxDuration uint64   // model.Span.Duration() within, inclusive; 0 = unbounded
	Services, Names          []string // one of these; nil = any, empty = none
	HasStatus                bool
	Status                   model.StatusCode
	Kinds                    []model.SpanKind // one of these; nil = any
	Attrs                    []AttrCond       // every one holds (at most 64 are checked)
}

// AttrCond says that the span's attributes (Span) or its resource's
// (Resource), or either when both are set, have the top-level attribute Key
// with a string value in Strs or a number equal to an integer in Ints (an
// int of that value, or a double equal to it). A stored value (a reference,
// whose text the block does not hold) passes when its length is that of one
// of Strs.
type AttrCond struct {
	Span, Resource bool
	Key            string
	Strs           []string
	Ints           []int64
}

// maxRowAttrConds is how many attribute conditions a row filter checks;
// further ones are left to the caller's match.
const maxRowAttrConds = 64

// columns returns the columns rf reads.
func (rf *RowFilter) columns() colSet {
	var cs colSet
	if rf.Start != 0 || rf.End != 0 {
		cs |= 1 << colStart
	}
	if rf.MinDuration != 0 || rf.MaxDuration != 0 {
		cs |= 1<<colStart | 1<<colDuration
	}
	if rf.Services != nil {
		cs |= 1 << colService
	}
	if rf.Names != nil {
		cs |= 1 << colName
	}
	if rf.HasStatus || rf.Kinds != nil {
		cs |= 1 << colKindStatus
	}
	for _, a := range rf.Attrs {
		if a.Span {
			cs |= 1 << colAttrs
		}
		if a.Resource {
			cs |= 1 << colResource
		}
	}
	return cs
}

// RowMatch is what FilterRows found in a block: the rows that may satisfy
// the filter, and the columns it read, which Decode reuses.
type RowMatch struct {
	// Ranges are the candidate rows, increasing and non-overlapping;
	// Rows is how many they hold.
	Ranges []RowRange
	Rows   int
	r      *Reader
	i      int
	bd     *blockData // the filter's columns that Decode reuses
	kept   colSet
}

// FilterRows reads only the columns rf looks at of block i (of columns
// stored as pieces, every piece), evaluates rf on every row, and returns the
// rows that may satisfy it. Decode then decodes just those: a selective
// search decompresses the block's other columns once and materialises only
// its candidate rows, instead of every span of the block.
func (r *Reader) FilterRows(i int, rf *RowFilter) (*RowMatch, error) {
	if i < 0 || i >= len(r.blocks) {
		return nil, r.checkBlock(i)
	}
	b := &r.blocks[i]
	n := b.Meta.Spans
	m := &RowMatch{r: r, i: i}
	if n == 0 {
		return m, nil
	}
	cols := rf.columns()
	bd, err := r.loadRows(i, []RowRange{{0, n}}, cols)
	if err != nil {
		return nil, err
	}
	keep := make([]bool, n)
	for j := range keep {
		keep[j] = true
	}
	err = r.evalRows(bd, rf, keep)
	bd.releaseBuffers() // the copied columns (times, kinds) are not kept
	if err != nil {
		return nil, err
	}
	for j, ok := range keep {
		if !ok {
			continue
		}
		m.Rows++
		if k := len(m.Ranges) - 1; k >= 0 && m.Ranges[k].Hi == j {
			m.Ranges[k].Hi++
		} else {
			m.Ranges = append(m.Ranges, RowRange{j, j + 1})
		}
	}
	for id := uint32(1); id <= numColumns; id++ {
		if cols.has(id) && !copiedColumn(id) {
			m.kept |= 1 << id
		}
	}
	m.bd = bd
	return m, nil
}

// checkBlock returns the error of a block number out of range.
func (r *Reader) checkBlock(i int) error {
	_, _, err := r.checkRanges(i, nil)
	return err
}

// Decode decodes in full the candidate rows, as ReadBlockRows does; the
// columns FilterRows read (other than times and kinds) are not read again.
func (m *RowMatch) Decode() ([]model.Span, error) {
	if m.Rows == 0 {
		return nil, nil
	}
	r := m.r
	bd, err := r.loadRows(m.i, m.Ranges, allColumns&^m.kept|1<<colRowMarks)
	if err != nil {
		return nil, err
	}
	defer bd.release()
	for id := uint32(1); id <= numColumns; id++ {
		if m.kept.has(id) {
			bd.cols[id], bd.wins[id] = m.bd.cols[id], m.bd.wins[id]
		}
	}
	out := make([]model.Span, 0, m.Rows)
	for _, rg := range m.Ranges {
		spans, err := r.decodeRows(bd, rg.Lo, rg.Hi)
		if err != nil {
			return nil, err
		}
		out = append(out, spans...)
	}
	return out, nil
}

// evalRows clears keep[j] for every row j of the loaded block that fails a
// condition of rf.
func (r *Reader) evalRows(bd *blockData, rf *RowFilter, keep []bool) error {
	n := len(keep)
	if len(rf.Attrs) > 0 {
		if err := r.evalAttrs(bd, rf.Attrs, keep); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		id   uint32
		want []string
	}{{colService, rf.Services}, {colName, rf.Names}} {
		if c.want == nil {
			continue
		}
		d := dec{s: bd.cols[c.id]}
		dict := d.strs()
		ok := make([]bool, len(dict))
		for j, s := range dict {
			for _, w := range c.want {
				ok[j] = ok[j] || s == w
			}
		}
		for j := 0; j < n && d.err == nil; j++ {
			if k := d.index(len(dict)); d.err == nil && !ok[k] {
				keep[j] = false
			}
		}
		if d.err != nil {
			return r.colErr(bd, c.id, d.err)
		}
	}
	if rf.HasStatus || rf.Kinds != nil {
		d := dec{s: bd.cols[colKindStatus]}
		for j := 0; j < n && d.err == nil; j++ {
			k, st := d.varint(), d.varint()
			d.u32()
			if rf.HasStatus && st != int64(rf.Status) {
				keep[j] = false
			}
			if rf.Kinds != nil && !hasKind(rf.Kinds, k) {
				keep[j] = false
			}
		}
		if d.err != nil {
			return r.colErr(bd, colKindStatus, d.err)
		}
	}
	if rf.Start == 0 && rf.End == 0 && rf.MinDuration == 0 && rf.MaxDuration == 0 {
		return nil
	}
	base := bd.entry.Meta.MinStart
	ds, dd := dec{s: bd.cols[colStart]}, dec{s: bd.cols[colDuration]}
	durations := rf.MinDuration != 0 || rf.MaxDuration != 0
	for j := 0; j < n && ds.err == nil && dd.err == nil; j++ {
		s := model.Span{StartTimeUnixNano: base + ds.uvarint()}
		if rf.Start != 0 && s.StartTimeUnixNano < rf.Start || rf.End != 0 && s.StartTimeUnixNano >= rf.End {
			keep[j] = false
		}
		if !durations {
			continue
		}
		s.EndTimeUnixNano = s.StartTimeUnixNano + uint64(dd.varint())
		if d := s.Duration(); d < rf.MinDuration || rf.MaxDuration != 0 && d > rf.MaxDuration {
			keep[j] = false
		}
	}
	if ds.err != nil {
		return r.colErr(bd, colStart, ds.err)
	}
	if dd.err != nil {
		return r.colErr(bd, colDuration, dd.err)
	}
	return nil
}

func hasKind(kinds []model.SpanKind, k int64) bool {
	for _, w := range kinds {
		if int64(w) == k {
			return true
		}
	}
	return false
}

// evalAttrs clears keep[j] for every row j whose span and resource
// attributes miss one of conds. It walks the attributes column's kvlists
// and the resource table without materialising a value.
func (r *Reader) evalAttrs(bd *blockData, conds []AttrCond, keep []bool) error {
	conds = conds[:min(len(conds), maxRowAttrConds)]
	all := uint64(1)<<len(conds) - 1
	if len(conds) == 64 {
		all = math.MaxUint64
	}
	n := len(keep)
	got := make([]uint64, n)
	var spanConds, resConds bool
	for _, c := range conds {
		spanConds = spanConds || c.Span
		resConds = resConds || c.Resource
	}
	if spanConds {
		var kd kvDec
		kd.init(bd.cols[colAttrs])
		want := keyMasks(kd.keys, conds, false)
		for j := 0; j < n && kd.err == nil; j++ {
			got[j] = kd.matchKVs(want, conds)
		}
		if kd.err != nil {
			return r.colErr(bd, colAttrs, kd.err)
		}
	}
	if resConds {
		var kd kvDec
		kd.init(bd.cols[colResource])
		want := keyMasks(kd.keys, conds, true)
		table := make([]uint64, kd.count(3))
		for k := range table {
			table[k] = kd.matchKVs(want, conds)
			kd.u32()
			kd.skipStr()
		}
		for j := 0; j < n && kd.err == nil; j++ {
			if k := kd.index(len(table) + 1); k > 0 && kd.err == nil {
				got[j] |= table[k-1]
			}
		}
		if kd.err != nil {
			return r.colErr(bd, colResource, kd.err)
		}
	}
	for j := range keep {
		if got[j] != all {
			keep[j] = false
		}
	}
	return nil
}

// keyMasks returns, per key of a column's dictionary, the conditions on
// that key in the column's scope (resource or span).
func keyMasks(keys []string, conds []AttrCond, resource bool) []uint64 {
	want := make([]uint64, len(keys))
	for j, k := range keys {
		for c := range conds {
			if (resource && conds[c].Resource || !resource && conds[c].Span) && conds[c].Key == k {
				want[j] |= 1 << c
			}
		}
	}
	return want
}

// matchKVs reads a kvlist and returns the conditions one of its top-level
// values satisfies (want: per key index, the conditions on that key).
func (d *kvDec) matchKVs(want []uint64, conds []AttrCond) uint64 {
	var got uint64
	cnt := d.count(2)
	s := d.s
	for k := 0; k < cnt && d.err == nil; k++ {
		// Fast paths for the common encodings (a one-byte key index, a
		// string shorter than 128 bytes): this loop walks every attribute
		// of every row of the block.
		var ki int
		if d.off < len(s) && int(s[d.off]) < min(len(d.keys), 0x80) {
			ki = int(s[d.off])
			d.off++
		} else if ki = d.index(len(d.keys)); d.err != nil {
			break
		}
		w := want[ki]
		if w == 0 && d.off+1 < len(s) && s[d.off] == tagString && s[d.off+1] < 0x80 {
			if end := d.off + 2 + int(s[d.off+1]); end <= len(s) {
				d.off = end
				continue
			}
		}
		if w == 0 || d.off >= len(s) {
			d.skipValue(0)
			continue
		}
		switch s[d.off] {
		case tagString:
			d.off++
			s := d.str()
			for c := range conds {
				if w&(1<<c) != 0 && hasStr(conds[c].Strs, s) {
					got |= 1 << c
				}
			}
		case tagInt:
			d.off++
			v := d.varint()
			for c := range conds {
				if w&(1<<c) != 0 && hasInt(conds[c].Ints, func(i int64) bool { return i == v }) {
					got |= 1 << c
				}
			}
		case tagDouble:
			d.off++
			v := math.Float64frombits(d.u64le())
			for c := range conds {
				if w&(1<<c) != 0 && hasInt(conds[c].Ints, func(i int64) bool { return float64(i) == v }) {
					got |= 1 << c
				}
			}
		case tagValueRef, tagValuePieces:
			// The text is stored apart: only its length is known here.
			size := d.refLength()
			for c := range conds {
				if w&(1<<c) != 0 && hasStrOfLen(conds[c].Strs, size) {
					got |= 1 << c
				}
			}
		default:
			d.skipValue(0)
		}
	}
	return got
}

// refLength reads a stored-value reference (tag 8 or 9) and returns the
// length of the value it stands for.
func (d *kvDec) refLength() uint64 {
	var size uint64
	switch d.byte1() {
	case tagValueRef:
		d.fixed(32)
		size = d.uvarint()
	default: // tagValuePieces
		n := d.count(1)
		for k := 0; k < n && d.err == nil; k++ {
			d.uvarint()
		}
		size = d.uvarint()
	}
	if orig := d.byte1(); orig != tagString && d.err == nil {
		d.failf("stored-value reference to a value of another tag than string")
	}
	return size
}

func hasStr(set []string, s string) bool {
	for _, w := range set {
		if w == s {
			return true
		}
	}
	return false
}

func hasStrOfLen(set []string, n uint64) bool {
	for _, w := range set {
		if uint64(len(w)) == n {
			return true
		}
	}
	return false
}

func hasInt(set []int64, eq func(int64) bool) bool {
	for _, v := range set {
		if eq(v) {
			return true
		}
	}
	return false
}
