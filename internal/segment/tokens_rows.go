package segment

import (
	"fmt"

	"github.com/rastro-dev/rastro/internal/model"
)

// textColumns are the columns holding what content search reads of a span
// (text.Sources): the status message, span attributes and events; and the
// row marks, with which a partial load seeks them.
const textColumns colSet = 1<<colStatusMessage | 1<<colAttrs | 1<<colEvents | 1<<colRowMarks

// RowTexts are candidate rows of a block read for their texts alone
// (ReadRowTexts), so that rows which turn out not to match are never
// decoded in full, and those that do are decoded without reading their
// texts again (Decode).
type RowTexts struct {
	// Spans are the rows' texts, in the order of the ranges: the status
	// message, the span attributes and the events (name, attributes, time
	// as an offset from 0); every other field is zero.
	Spans  []model.Span
	r      *Reader
	i      int
	ranges []RowRange
	bd     *blockData // the text columns; its pooled buffers are released
}

// ReadRowTexts reads, of the given rows of block i (ranges as for
// ReadBlockRows), only the texts content search reads (text.Sources). It
// reads and decompresses only the text columns (of a column stored as
// pieces, the pieces of those rows): rejecting a row the token index could
// not rule out (a phrase whose words it holds apart) then costs a fraction
// of decoding it, since the ids, times and names of the block are neither
// read nor decompressed.
func (r *Reader) ReadRowTexts(i int, ranges []RowRange) (*RowTexts, error) {
	ranges, _, err := r.checkRanges(i, ranges)
	if err != nil || len(ranges) == 0 {
		return &RowTexts{r: r, i: i}, err
	}
	bd, err := r.loadRows(i, ranges, textColumns)
	if err != nil {
		return nil, err
	}
	defer bd.releaseBuffers() // once decoded: no text column aliases them
	t := &RowTexts{r: r, i: i, ranges: ranges, bd: bd}
	for _, rg := range ranges {
		spans, err := r.decodeRowsText(bd, rg.Lo, rg.Hi)
		if err != nil {
			return nil, err
		}
		t.Spans = append(t.Spans, spans...)
	}
	return t, nil
}

// Decode decodes in full the rows of ranges, which must lie within the
// ranges t was read with (increasing, non-overlapping), as ReadBlockRows
// does; the text columns are not read again.
func (t *RowTexts) Decode(ranges []RowRange) ([]model.Span, error) {
	r := t.r
	ranges, total, err := r.checkRanges(t.i, ranges)
	if err != nil || len(ranges) == 0 {
		return nil, err
	}
	for _, rg := range ranges {
		inside := false
		for _, w := range t.ranges {
			inside = inside || (rg.Lo >= w.Lo && rg.Hi <= w.Hi)
		}
		if !inside {
			return nil, fmt.Errorf("read segment %s block %d: rows [%d, %d) were not read for their texts", r.path, t.i, rg.Lo, rg.Hi)
		}
	}
	bd, err := r.loadRows(t.i, ranges, allColumns&^textColumns|1<<colRowMarks)
	if err != nil {
		return nil, err
	}
	defer bd.release()
	for _, id := range []uint32{colStatusMessage, colAttrs, colEvents} {
		bd.cols[id], bd.wins[id] = t.bd.cols[id], t.bd.wins[id]
	}
	out := make([]model.Span, 0, total)
	for _, rg := range ranges {
		spans, err := r.decodeRows(bd, rg.Lo, rg.Hi)
		if err != nil {
			return nil, err
		}
		out = append(out, spans...)
	}
	return out, nil
}

// decodeRowsText decodes the texts of rows [lo, hi) of a block loaded with
// textColumns, as decodeRows does.
func (r *Reader) decodeRowsText(bd *blockData, lo, hi int) ([]model.Span, error) {
	out := make([]model.Span, hi-lo)
	seek := bd.seeker(lo, hi)
	d := dec{s: bd.cols[colStatusMessage]}
	for i := seek(colStatusMessage, &d); i < hi; i++ {
		if i < lo {
			d.skipStr()
			continue
		}
		out[i-lo].StatusMessage = d.str()
	}
	if d.err != nil {
		return nil, r.colErr(bd, colStatusMessage, d.err)
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
	if kd.err != nil {
		return nil, r.colErr(bd, colAttrs, kd.err)
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
			ev.TimeUnixNano = uint64(kd.varint())
			ev.Name = kd.str()
			ev.Attributes = kd.kvs()
			ev.DroppedAttributesCount = kd.u32()
		}
	}
	if kd.err != nil {
		return nil, r.colErr(bd, colEvents, kd.err)
	}
	return out, nil
}
