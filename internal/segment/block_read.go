package segment

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/rastro-dev/rastro/internal/model"
)

// blockData holds the decompressed columns of one block, indexed by column id.
type blockData struct {
	entry *blockEntry
	cols  [numColumns + 1]string
	// pooled and scratch are the pooled buffers of a partial load (the
	// block as read, and the decompressed ids and numbers): columns may
	// alias them until release.
	pooled, scratch *[]byte
	// wins is set for a codec-2 column of which only some pieces were
	// decompressed (loadRows): cols then holds those pieces back to back,
	// and wins maps raw column offsets to offsets in it.
	wins [numColumns + 1][]colWindow
}

// maxScratchHint bounds the scratch a partial read allocates up front.
const maxScratchHint = 64 << 20

// copiedColumn reports whether decodeRows only copies values out of the
// column (ids and numbers), so that the column's bytes may be reused once
// the rows are decoded.
func copiedColumn(id uint32) bool {
	switch id {
	case colTraceID, colSpanID, colParentID, colStart, colDuration, colKindStatus, colDropped, colRowMarks:
		return true
	}
	return false
}

// release returns the pooled buffers of a partial load once its rows are
// decoded; the block's columns must not be used afterwards.
func (bd *blockData) release() {
	bd.releaseBuffers()
	bd.cols = [numColumns + 1]string{}
}

// releaseBuffers returns the pooled buffers of a partial load, keeping the
// columns that do not alias them (those outside copiedColumn).
func (bd *blockData) releaseBuffers() {
	for _, p := range []*[]byte{bd.pooled, bd.scratch} {
		if p != nil && cap(*p) <= maxPooledRead {
			partialBufs.Put(p)
		}
	}
	bd.pooled, bd.scratch = nil, nil
	for id := range bd.cols {
		if copiedColumn(uint32(id)) {
			bd.cols[id] = ""
		}
	}
}

// partialBufs are the read buffers of partial block loads (loadRows with
// ranges); buffers over maxPooledRead are not kept.
var partialBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledRead = 4 << 20

// loadBlock reads block i with one ReadAt, verifies every column checksum
// and decompresses the columns this reader knows.
func (r *Reader) loadBlock(i int) (*blockData, error) { return r.loadRows(i, nil, allColumns) }

// colSet is a set of column ids, bit id for column id.
type colSet uint32

// allColumns holds every column this reader knows.
const allColumns colSet = 1<<(numColumns+1) - 2

func (cs colSet) has(id uint32) bool { return id <= numColumns && cs&(1<<id) != 0 }

// loadRows reads block i with one ReadAt and decompresses the columns this
// reader knows. With ranges nil, every column is checked and decompressed
// whole. Otherwise only the rows of ranges (valid for the block) will be
// decoded: of a codec-2 column it decompresses the dictionary piece and the
// pieces those rows need (pieceWanted), each checked against its own
// checksum; the column's whole checksum is skipped, as checking it would
// cost a pass over pieces that are not read and make damage to them fail
// reads that do not touch them. Other columns are checked and decompressed
// whole, as by loadBlock. Of a partial load, only the columns of cols are
// read (a required column outside it is left empty, for decoders that do
// not look at it); a whole load reads them all.
func (r *Reader) loadRows(i int, ranges []RowRange, cols colSet) (bd *blockData, err error) {
	if i < 0 || i >= len(r.blocks) {
		return nil, fmt.Errorf("read segment %s: block %d out of range [0, %d)", r.path, i, len(r.blocks))
	}
	b := &r.blocks[i]
	var raw, scratch []byte
	var pooled *[]byte
	if ranges == nil {
		raw, err = r.readAt(int64(b.Offset), int64(b.Length))
	} else {
		// Nothing decoded from a partial load aliases its read buffer (see
		// below), so the buffer is reused: a rare-word query then does not
		// allocate a block's worth of bytes for the collector to sweep.
		p := partialBufs.Get().(*[]byte)
		if uint64(cap(*p)) < b.Length {
			*p = make([]byte, b.Length)
		}
		raw = (*p)[:b.Length]
		if b.Length <= maxPooledRead {
			defer func() {
				if bd == nil { // on success the caller releases it with bd
					partialBufs.Put(p)
				}
			}()
			pooled = p
		}
		err = r.readPartial(b, raw, cols)
	}
	if err != nil {
		return nil, err
	}
	if ranges == nil {
		cols = allColumns
	}
	bd = &blockData{entry: b}
	if ranges != nil {
		// Columns decodeRows copies out (ids and numbers) are decompressed
		// into pooled scratch too: nothing decoded aliases them.
		sp := partialBufs.Get().(*[]byte)
		need := uint64(0)
		for _, c := range b.Cols {
			if copiedColumn(c.ID) && (c.Codec == codecZstd || c.Codec == codecIDs) && cols.has(c.ID) {
				need += min(c.RawLen, maxColumnRawBytes)
			}
		}
		// A capacity hint only: beyond maxScratchHint (a damaged length, or
		// a huge block) decompression grows it, checking each column.
		if need <= maxScratchHint && uint64(cap(*sp)) < need {
			*sp = make([]byte, 0, need)
		}
		bd.scratch, bd.pooled = sp, pooled
		scratch = (*sp)[:0]
	}
	var seen [numColumns + 1]bool
	var deferred []columnRef // codec-2 columns read in part, once the row marks are known
	for _, c := range b.Cols {
		if c.ID == 0 || c.ID > numColumns {
			continue // a column added by a later version
		}
		if !cols.has(c.ID) {
			continue // not asked for (a partial load)
		}
		off := int64(b.Offset + c.Offset)
		if seen[c.ID] {
			return nil, r.corrupt(off, "block %d column %s: duplicate column", i, columnNames[c.ID])
		}
		seen[c.ID] = true
		stored := raw[c.Offset : c.Offset+c.Length]
		if ranges != nil && c.Codec == codecPieces && c.ID != colRowMarks {
			deferred = append(deferred, c)
			continue
		}
		if crc(stored) != c.CRC {
			return nil, r.corrupt(off, "block %d column %s: checksum mismatch", i, columnNames[c.ID])
		}
		var s string
		var err error
		switch {
		case ranges != nil && copiedColumn(c.ID) && c.Codec == codecZstd:
			start := len(scratch)
			scratch, err = decompressAppend(scratch, stored, c.RawLen)
			s = bytesToString(scratch[start:])
		case ranges != nil && copiedColumn(c.ID) && c.Codec == codecIDs:
			start := len(scratch)
			scratch, err = appendDecodedIDs(scratch, stored, c.RawLen)
			s = bytesToString(scratch[start:])
		default:
			s, err = decompressColumn(c, stored, nil)
		}
		if err != nil {
			return nil, r.corrupt(off, "block %d column %s: %v", i, columnNames[c.ID], err)
		}
		if ranges != nil && c.Codec == codecNone && !copiedColumn(c.ID) {
			s = strings.Clone(s) // strings decoded from it would alias the pooled read buffer
		}
		bd.cols[c.ID] = s
	}
	for id := uint32(1); id <= requiredColumns; id++ {
		if !seen[id] && cols.has(id) {
			return nil, r.corrupt(int64(b.Offset), "block %d: column %s missing", i, columnNames[id])
		}
	}
	if len(deferred) == 0 {
		return bd, nil
	}
	marks := parseMarks(bd.cols[colRowMarks])
	for _, c := range deferred {
		off := int64(b.Offset + c.Offset)
		stored := raw[c.Offset : c.Offset+c.Length]
		if err := r.readPieceHeader(b, stored, c); err != nil {
			return nil, err
		}
		refs, err := parsePieces(stored, c.RawLen)
		if err != nil {
			return nil, r.corrupt(off, "block %d column %s: %v", i, columnNames[c.ID], err)
		}
		want := pieceWanted(refs, marks, c, ranges)
		if err := r.readPieces(b, stored, c, refs, want); err != nil {
			return nil, err
		}
		s, wins, err := decodePieces(stored, refs, want)
		if err != nil {
			return nil, r.corrupt(off, "block %d column %s: %v", i, columnNames[c.ID], err)
		}
		bd.cols[c.ID], bd.wins[c.ID] = s, wins
	}
	return bd, nil
}

// pieceHeaderPrefix is how much of a codec-2 column a partial load reads
// before it knows the column's piece header (30 pieces' entries fit).
const pieceHeaderPrefix = 1 << 10

// readPartial fills raw, the block's bytes at their offsets, for a partial
// load: every column this reader knows, except that of a codec-2 column
// (other than the row marks) only a prefix holding its piece header is
// read; readPieceHeader and readPieces read the rest it needs. Bytes of raw
// left unread are never looked at: a column is used only after its CRC, a
// piece header after its own CRC and a piece after its own CRC matched.
// Adjacent reads are merged, so a text-heavy block costs a few reads of
// tens of KiB instead of one of the whole block. Columns outside want are
// not read.
func (r *Reader) readPartial(b *blockEntry, raw []byte, want colSet) error {
	cols := slices.Clone(b.Cols)
	slices.SortFunc(cols, func(x, y columnRef) int { return cmp.Compare(x.Offset, y.Offset) })
	var lo, hi uint64
	flush := func() error {
		if hi > lo {
			return r.readFull(raw[lo:hi], int64(b.Offset+lo))
		}
		return nil
	}
	for _, c := range cols {
		if c.ID == 0 || c.ID > numColumns || !want.has(c.ID) {
			continue
		}
		end := c.Offset + c.Length
		if c.Codec == codecPieces && c.ID != colRowMarks {
			end = c.Offset + min(c.Length, pieceHeaderPrefix)
		}
		if c.Offset != hi {
			if err := flush(); err != nil {
				return err
			}
			lo = c.Offset
		}
		hi = end
		if end != c.Offset+c.Length { // the next column is not contiguous with what is read
			if err := flush(); err != nil {
				return err
			}
			lo = hi
		}
	}
	return flush()
}

// readPieceHeader reads the rest of a codec-2 column's piece header when it
// is longer than the prefix readPartial read.
func (r *Reader) readPieceHeader(b *blockEntry, stored []byte, c columnRef) error {
	read := min(c.Length, pieceHeaderPrefix)
	for {
		if pieceHeaderFits(stored[:read], c.Length) || read == c.Length {
			return nil
		}
		next := min(c.Length, 2*read)
		if err := r.readFull(stored[read:next], int64(b.Offset+c.Offset+read)); err != nil {
			return err
		}
		read = next
	}
}

// pieceHeaderFits reports whether b holds the whole piece header it starts
// with; a header that cannot be one (more pieces than bytes) counts as
// fitting, and parsePieces then reports it.
func pieceHeaderFits(b []byte, colLen uint64) bool {
	d := dec{s: bytesToString(b)}
	n := d.uvarint()
	for k := uint64(0); k < n && d.err == nil; k++ {
		d.uvarint()
		d.uvarint()
		d.uvarint()
		d.u32le()
	}
	d.u32le()
	return d.err == nil || n > colLen
}

// readPieces reads the wanted pieces of a codec-2 column (adjacent ones
// together) into stored, the column's bytes.
func (r *Reader) readPieces(b *blockEntry, stored []byte, c columnRef, refs []pieceRef, want []bool) error {
	for k := 0; k < len(refs); {
		if !want[k] {
			k++
			continue
		}
		j := k + 1
		for j < len(refs) && want[j] {
			j++
		}
		lo, hi := refs[k].storedOff, refs[j-1].storedOff+refs[j-1].stored
		if err := r.readFull(stored[lo:hi], int64(b.Offset+c.Offset+lo)); err != nil {
			return err
		}
		k = j
	}
	return nil
}

// decompressColumn returns the raw bytes of a stored column (want as for
// decodePieces; only a codec-2 column can be read in part).
func decompressColumn(c columnRef, stored []byte, want []bool) (string, error) {
	if c.Codec != codecPieces {
		return decompress(c.Codec, stored, c.RawLen)
	}
	refs, err := parsePieces(stored, c.RawLen)
	if err != nil {
		return "", err
	}
	s, _, err := decodePieces(stored, refs, want)
	return s, err
}

// pieceWanted selects the pieces of a codec-2 column that decoding the rows
// of ranges touches: the first piece (it holds the column's dictionary or
// table, read before any row), and for each range the pieces overlapping
// the raw bytes from the mark decodeRows starts at (rowMarks; the column
// start without one) to the first mark at or after the range's end (the
// column end without one).
func pieceWanted(refs []pieceRef, m markTable, c columnRef, ranges []RowRange) []bool {
	want := make([]bool, len(refs))
	want[0] = true
	for _, rg := range ranges { // an empty range still walks from its mark to Lo
		from, to := m.before(c.ID, rg.Lo), m.from(c.ID, rg.Hi, c.RawLen)
		for k, p := range refs {
			if p.rawOff < to && p.rawOff+p.rawLen > from {
				want[k] = true
			}
		}
	}
	return want
}

// markTable is the parsed row-marks column: the raw offset of rows every,
// 2*every, ... of each column. It is empty when the column is absent or
// does not parse (rowMarks then starts every column at row 0, so must
// everything that uses it).
type markTable struct {
	every uint64
	offs  [numColumns + 1][]uint64
}

func parseMarks(s string) markTable {
	var m markTable
	if s == "" {
		return m
	}
	d := dec{s: s}
	every := d.uvarint()
	n := d.count(2)
	for c := 0; c < n && d.err == nil; c++ {
		id := d.uvarint()
		cnt := d.count(1)
		var offs []uint64
		off := uint64(0)
		for k := 0; k < cnt && d.err == nil; k++ {
			off += d.uvarint()
			offs = append(offs, off)
		}
		if id > 0 && id <= numColumns {
			m.offs[id] = offs
		}
	}
	if d.err != nil || every == 0 {
		return markTable{}
	}
	m.every = every
	return m
}

// before returns the offset rowMarks gives for row lo of column id: the
// last mark at or before lo, or 0 (the column start).
func (m *markTable) before(id uint32, lo int) uint64 {
	if m.every == 0 || uint64(lo) < m.every {
		return 0
	}
	g := uint64(lo) / m.every
	if offs := m.offs[id]; g <= uint64(len(offs)) && offs[g-1] <= maxColumnRawBytes {
		return offs[g-1]
	}
	return 0
}

// from returns the offset of the first mark at or after row hi of column
// id, or rawLen when there is none.
func (m *markTable) from(id uint32, hi int, rawLen uint64) uint64 {
	if m.every == 0 {
		return rawLen
	}
	g := (uint64(hi) + m.every - 1) / m.every
	if offs := m.offs[id]; g >= 1 && g <= uint64(len(offs)) {
		return min(offs[g-1], rawLen)
	}
	return rawLen
}

// colErr turns a column decoding failure into a CorruptionError (or an
// unsupported-feature error) located at the column.
func (r *Reader) colErr(bd *blockData, id uint32, err error) error {
	if te, ok := err.(refTableError); ok {
		return te.err
	}
	c, _ := bd.entry.col(id)
	off := int64(bd.entry.Offset + c.Offset)
	if errors.Is(err, ErrUnsupported) {
		return fmt.Errorf("read segment %s at offset %d, column %s: %w", r.path, off, columnNames[id], err)
	}
	return r.corrupt(off, "column %s: %v", columnNames[id], err)
}

// seeker returns the seek function of decoding rows [lo, hi) of bd: it
// moves d, a decoder over column id, to the last mark at or before row lo,
// when the block has marks, and returns the row d is then at.
func (bd *blockData) seeker(lo, hi int) func(id uint32, d *dec) int {
	marks, markRow := rowMarks(bd.cols[colRowMarks], lo)
	return func(id uint32, d *dec) int {
		m := marks[id]
		if wins := bd.wins[id]; wins != nil && m > 0 {
			var ok bool
			if m, ok = windowOffset(wins, m); !ok {
				d.failf(fmt.Sprintf("row mark %d outside the decompressed pieces", marks[id]))
				return hi
			}
		}
		if m > 0 && m >= d.off && m <= len(d.s) {
			d.off = m
			return markRow
		}
		return 0
	}
}

// decodeRows materialises rows [lo, hi) of a loaded block. When the whole
// block is decoded it also checks that every column is consumed exactly.
func (r *Reader) decodeRows(bd *blockData, lo, hi int) ([]model.Span, error) {
	n := bd.entry.Meta.Spans
	full := lo == 0 && hi == n
	out := make([]model.Span, hi-lo)
	base := bd.entry.Meta.MinStart
	seek := bd.seeker(lo, hi)

	// Fixed-width ids.
	for _, c := range []struct {
		id    uint32
		width int
	}{{colTraceID, 16}, {colSpanID, 8}, {colParentID, 8}} {
		s := bd.cols[c.id]
		if len(s) != n*c.width {
			return nil, r.colErr(bd, c.id, fmt.Errorf("%d bytes for %d spans", len(s), n))
		}
		for i := lo; i < hi; i++ {
			v := s[i*c.width : (i+1)*c.width]
			switch c.id {
			case colTraceID:
				copy(out[i-lo].TraceID[:], v)
			case colSpanID:
				copy(out[i-lo].SpanID[:], v)
			default:
				copy(out[i-lo].ParentSpanID[:], v)
			}
		}
	}

	check := func(id uint32, d *dec) error {
		if d.err == nil && full && d.remaining() != 0 {
			d.failf(fmt.Sprintf("%d trailing bytes", d.remaining()))
		}
		if d.err != nil {
			return r.colErr(bd, id, d.err)
		}
		return nil
	}

	d := dec{s: bd.cols[colStart]}
	for i := seek(colStart, &d); i < hi; i++ {
		v := d.uvarint()
		if i >= lo {
			out[i-lo].StartTimeUnixNano = base + v
		}
	}
	if err := check(colStart, &d); err != nil {
		return nil, err
	}
	d = dec{s: bd.cols[colDuration]}
	for i := seek(colDuration, &d); i < hi; i++ {
		v := d.varint()
		if i >= lo {
			out[i-lo].EndTimeUnixNano = out[i-lo].StartTimeUnixNano + uint64(v)
		}
	}
	if err := check(colDuration, &d); err != nil {
		return nil, err
	}
	for _, id := range []uint32{colName, colService} {
		d = dec{s: bd.cols[id]}
		dict := d.strs()
		for i := seek(id, &d); i < hi; i++ {
			j := d.index(len(dict))
			if i >= lo && d.err == nil {
				if id == colName {
					out[i-lo].Name = dict[j]
				} else {
					out[i-lo].Service = dict[j]
				}
			}
		}
		if err := check(id, &d); err != nil {
			return nil, err
		}
	}
	d = dec{s: bd.cols[colKindStatus]}
	for i := seek(colKindStatus, &d); i < hi; i++ {
		k, st, fl := d.varint(), d.varint(), d.u32()
		if (k < math.MinInt32 || k > math.MaxInt32 || st < math.MinInt32 || st > math.MaxInt32) && d.err == nil {
			d.failf("kind or status out of range")
		}
		if i >= lo {
			out[i-lo].Kind, out[i-lo].StatusCode, out[i-lo].Flags = model.SpanKind(k), model.StatusCode(st), fl
		}
	}
	if err := check(colKindStatus, &d); err != nil {
		return nil, err
	}
	for _, id := range []uint32{colStatusMessage, colTraceState} {
		d = dec{s: bd.cols[id]}
		for i := seek(id, &d); i < hi; i++ {
			if i < lo {
				d.skipStr()
				continue
			}
			if id == colStatusMessage {
				out[i-lo].StatusMessage = d.str()
			} else {
				out[i-lo].TraceState = d.str()
			}
		}
		if err := check(id, &d); err != nil {
			return nil, err
		}
	}
	if err := r.decodeResources(bd, out, lo, hi, full, seek); err != nil {
		return nil, err
	}
	if err := r.decodeScopes(bd, out, lo, hi, full, seek); err != nil {
		return nil, err
	}

	var kd kvDec
	kd.table = r.valueRefTable()
	kd.init(bd.cols[colAttrs])
	for i := seek(colAttrs, &kd.dec); i < hi; i++ {
		if i < lo {
			kd.skipKVs()
		} else {
			out[i-lo].Attributes = kd.kvs()
		}
	}
	if err := check(colAttrs, &kd.dec); err != nil {
		return nil, err
	}

	d = dec{s: bd.cols[colDropped]}
	for i := seek(colDropped, &d); i < hi; i++ {
		a, e, l := d.u32(), d.u32(), d.u32()
		if i >= lo {
			s := &out[i-lo]
			s.DroppedAttributesCount, s.DroppedEventsCount, s.DroppedLinksCount = a, e, l
		}
	}
	if err := check(colDropped, &d); err != nil {
		return nil, err
	}

	kd.init(bd.cols[colEvents])
	for i := seek(colEvents, &kd.dec); i < hi && kd.err == nil; i++ {
		ne := kd.count(4)
		if i < lo {
			for j := 0; j < ne && kd.err == nil; j++ {
				kd.uvarint()
				kd.skipStr()
				kd.skipKVs()
				kd.uvarint()
			}
			continue
		}
		s := &out[i-lo]
		if ne > 0 {
			s.Events = make([]model.Event, ne)
		}
		for j := 0; j < ne && kd.err == nil; j++ {
			ev := &s.Events[j]
			ev.TimeUnixNano = s.StartTimeUnixNano + uint64(kd.varint())
			ev.Name = kd.str()
			ev.Attributes = kd.kvs()
			ev.DroppedAttributesCount = kd.u32()
		}
	}
	if err := check(colEvents, &kd.dec); err != nil {
		return nil, err
	}

	kd.init(bd.cols[colLinks])
	for i := seek(colLinks, &kd.dec); i < hi && kd.err == nil; i++ {
		nl := kd.count(28)
		if i < lo {
			for j := 0; j < nl && kd.err == nil; j++ {
				kd.fixed(24)
				kd.skipStr()
				kd.skipKVs()
				kd.uvarint()
				kd.uvarint()
			}
			continue
		}
		s := &out[i-lo]
		if nl > 0 {
			s.Links = make([]model.Link, nl)
		}
		for j := 0; j < nl && kd.err == nil; j++ {
			l := &s.Links[j]
			copy(l.TraceID[:], kd.fixed(16))
			copy(l.SpanID[:], kd.fixed(8))
			l.TraceState = kd.str()
			l.Attributes = kd.kvs()
			l.DroppedAttributesCount = kd.u32()
			l.Flags = kd.u32()
		}
	}
	if err := check(colLinks, &kd.dec); err != nil {
		return nil, err
	}
	if s := bd.cols[colLLM]; s != "" {
		d = dec{s: s}
		decodeLLM(&d, out, lo, hi, seek)
		if err := check(colLLM, &d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// windowOffset maps a raw column offset to its offset in a partly
// decompressed column.
func windowOffset(wins []colWindow, raw int) (int, bool) {
	for _, w := range wins {
		if raw >= w.raw && raw <= w.raw+w.n {
			return w.buf + raw - w.raw, true
		}
	}
	return 0, false
}

// decodeLLM reads the LLM column (see llmColumn) into rows [lo, hi) of out.
// Failures stick in d.err.
func decodeLLM(d *dec, out []model.Span, lo, hi int, seek func(uint32, *dec) int) {
	dict := d.strs()
	var arena []model.LLM // LLM values are carved from chunks: few allocations, stable pointers
	for i := seek(colLLM, d); i < hi && d.err == nil; i++ {
		flags := d.byte1()
		if flags == 0 {
			continue
		}
		if flags&llmPresent == 0 || flags&^(llmPresent|llmCounted) != 0 {
			d.failf(fmt.Sprintf("bad LLM flags %#x", flags))
			return
		}
		var l model.LLM
		for _, p := range [...]*string{&l.Provider, &l.RequestModel, &l.ResponseModel, &l.Operation,
			&l.SessionID, &l.UserID, &l.AgentName, &l.ToolName} {
			j := d.index(len(dict))
			if d.err != nil {
				return
			}
			*p = dict[j]
		}
		for _, p := range [...]*int64{&l.InputTokens, &l.OutputTokens, &l.CacheReadTokens, &l.CacheCreationTokens,
			&l.ReasoningTokens, &l.CostNanoUSD} {
			*p = d.varint()
		}
		src := d.uvarint()
		if src > math.MaxUint8 && d.err == nil {
			d.failf("LLM cost source out of range")
		}
		l.CostSource = model.CostSource(src)
		l.TimeToFirstTokenNanos = d.uvarint()
		l.Counted = flags&llmCounted != 0
		if i < lo || d.err != nil {
			continue
		}
		if len(arena) == cap(arena) {
			arena = make([]model.LLM, 0, min(max(2*cap(arena), 16), hi-i))
		}
		arena = append(arena, l)
		out[i-lo].LLM = &arena[len(arena)-1]
	}
}

// tableIndexes reads the per-span table indexes (0 = nil, j = table[j-1])
// that follow a resource or scope table.
func tableIndexes[T any](d *dec, table []*T, start, lo, hi int, set func(i int, p *T)) {
	for i := start; i < hi; i++ {
		j := d.index(len(table) + 1)
		if i >= lo && j > 0 && d.err == nil {
			set(i-lo, table[j-1])
		}
	}
}

func (r *Reader) decodeResources(bd *blockData, out []model.Span, lo, hi int, full bool, seek func(uint32, *dec) int) error {
	var kd kvDec
	kd.init(bd.cols[colResource])
	n := kd.count(3)
	table := make([]*model.Resource, n)
	for i := range table {
		res := &model.Resource{}
		res.Attributes = kd.kvs()
		res.DroppedAttributesCount = kd.u32()
		res.SchemaURL = kd.str()
		table[i] = res
	}
	tableIndexes(&kd.dec, table, seek(colResource, &kd.dec), lo, hi, func(i int, p *model.Resource) { out[i].Resource = p })
	if kd.err == nil && full && kd.remaining() != 0 {
		kd.failf("trailing bytes")
	}
	if kd.err != nil {
		return r.colErr(bd, colResource, kd.err)
	}
	return nil
}

func (r *Reader) decodeScopes(bd *blockData, out []model.Span, lo, hi int, full bool, seek func(uint32, *dec) int) error {
	var kd kvDec
	kd.init(bd.cols[colScope])
	n := kd.count(5)
	table := make([]*model.Scope, n)
	for i := range table {
		sc := &model.Scope{}
		sc.Name = kd.str()
		sc.Version = kd.str()
		sc.Attributes = kd.kvs()
		sc.DroppedAttributesCount = kd.u32()
		sc.SchemaURL = kd.str()
		table[i] = sc
	}
	tableIndexes(&kd.dec, table, seek(colScope, &kd.dec), lo, hi, func(i int, p *model.Scope) { out[i].Scope = p })
	if kd.err == nil && full && kd.remaining() != 0 {
		kd.failf("trailing bytes")
	}
	if kd.err != nil {
		return r.colErr(bd, colScope, kd.err)
	}
	return nil
}

// rowMarks parses the optional row-marks column and returns, per column id,
// the raw offset of the last marked row at or before lo (0 when unknown), and
// that row. A damaged marks column only costs speed: a mark that does not
// fit is ignored, and decoding starts at row 0.
func rowMarks(s string, lo int) (marks [numColumns + 1]int, row int) {
	if s == "" {
		return marks, 0
	}
	d := dec{s: s}
	every := d.uvarint()
	n := d.count(2)
	if d.err != nil || every == 0 || uint64(lo) < every {
		return marks, 0
	}
	g := uint64(lo) / every // wanted mark number, 1-based
	for c := 0; c < n && d.err == nil; c++ {
		id := d.uvarint()
		cnt := d.count(1)
		off := uint64(0)
		for k := 0; k < cnt && d.err == nil; k++ {
			off += d.uvarint()
			if uint64(k+1) == g && id > 0 && id <= numColumns && off <= maxColumnRawBytes {
				marks[id] = int(off)
			}
		}
	}
	if d.err != nil {
		return [numColumns + 1]int{}, 0
	}
	return marks, int(g * every)
}
