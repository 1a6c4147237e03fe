package segment

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
)

// RowRange is rows [Lo, Hi) of a block.
type RowRange struct{ Lo, Hi int }

// appendGroupFilters encodes one block's row-group filters (a part of
// section 12): uvarint group rows | uvarint n groups | n x filter
// (appendTokenBloom; a group without tokens has a filter of 0 words).
func appendGroupFilters(b []byte, spans int, filters []tokenBloom, distinct []int) []byte {
	b = appendUvarints(b, groupRows, uint64(len(filters)))
	for g := range filters {
		b = appendTokenBloom(b, distinct[g], &filters[g])
	}
	return b
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }

// HasRowGroupFilters reports whether the segment has row-group token
// filters (WriterOptions.RowGroupTokenFilters).
func (r *Reader) HasRowGroupFilters() bool { return r.grp.present && !r.grp.noGroups }

// BlockRowsMayContainTokens reads block i's row-group filters (one ReadAt,
// checksum verified) and returns the row ranges that may hold a span with
// all the hashes, adjacent groups merged, in order; an empty result is
// certain. Without row-group filters (or with an empty hash list) it
// returns the whole block without I/O. Whenever err is non-nil the answer
// is the whole block: a damaged filter is a *CorruptionError.
func (r *Reader) BlockRowsMayContainTokens(i int, hashes []uint64) ([]RowRange, error) {
	if i < 0 || i >= len(r.blocks) {
		return nil, fmt.Errorf("read segment %s: block %d out of range [0, %d)", r.path, i, len(r.blocks))
	}
	n := r.blocks[i].Meta.Spans
	all := []RowRange{{0, n}}
	if !r.grp.present || len(hashes) == 0 {
		return all, nil
	}
	if r.grp.err != nil {
		return all, r.grp.err
	}
	if r.grp.noGroups {
		return all, nil
	}
	lo, hi := r.grp.offs[i], r.grp.offs[i+1]
	if lo == hi {
		return nil, nil // the block holds no tokens
	}
	off := r.grp.offset + int64(lo)
	b, err := r.readAt(off, int64(hi-lo))
	if err != nil {
		return all, err
	}
	if crc(b) != r.grp.crcs[i] {
		return all, r.corrupt(off, "row-group token filters of block %d: checksum mismatch", i)
	}
	out, err := testGroupFilters(bytesToString(b), n, hashes)
	if err != nil {
		return all, r.corrupt(off, "row-group token filters of block %d: %v", i, err)
	}
	return out, nil
}

// testGroupFilters decodes a part of section 12 for a block of n rows and
// returns the ranges of the groups that pass all hashes.
func testGroupFilters(s string, n int, hashes []uint64) ([]RowRange, error) {
	d := dec{s: s}
	per := d.uvarint()
	cnt := d.uvarint()
	if d.err != nil {
		return nil, d.err
	}
	if per == 0 || per > maxBlockSpans {
		return nil, fmt.Errorf("group size %d out of range", per)
	}
	if want := (uint64(n) + per - 1) / per; cnt != want {
		return nil, fmt.Errorf("%d groups for %d rows of %d per group", cnt, n, per)
	}
	var out []RowRange
	for g := 0; g < int(cnt); g++ {
		_, f := decodeTokenBloom(&d, maxBlockTokenFilterWords)
		if d.err != nil {
			return nil, fmt.Errorf("group %d: %w", g, d.err)
		}
		if !f.testAll(hashes) {
			continue
		}
		lo, hi := g*int(per), min((g+1)*int(per), n)
		if k := len(out) - 1; k >= 0 && out[k].Hi == lo {
			out[k].Hi = hi
		} else {
			out = append(out, RowRange{lo, hi})
		}
	}
	if d.remaining() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", d.remaining())
	}
	return out, nil
}

// ReadBlockRows decodes the given rows of block i (ranges in increasing,
// non-overlapping order, within the block), in segment order. It reads the
// whole block with one ReadAt but decompresses, of a column stored as pieces
// (codec 2), only the pieces those rows need, and materialises only those
// rows, starting each range from the nearest row mark. Damage to pieces it
// does not read goes unnoticed here; ReadBlock and Verify report it.
func (r *Reader) ReadBlockRows(i int, ranges []RowRange) ([]model.Span, error) {
	ranges, total, err := r.checkRanges(i, ranges)
	if err != nil || len(ranges) == 0 {
		return nil, err
	}
	bd, err := r.loadRows(i, ranges, allColumns)
	if err != nil {
		return nil, err
	}
	defer bd.release()
	if len(ranges) == 1 {
		return r.decodeRows(bd, ranges[0].Lo, ranges[0].Hi)
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

// checkRanges checks row ranges of block i (increasing, non-overlapping,
// within the block) and returns them without the empty ones, which want no
// rows and must not pick pieces or row marks, and how many rows they hold.
func (r *Reader) checkRanges(i int, ranges []RowRange) ([]RowRange, int, error) {
	if i < 0 || i >= len(r.blocks) {
		return nil, 0, fmt.Errorf("read segment %s: block %d out of range [0, %d)", r.path, i, len(r.blocks))
	}
	n, prev, total := r.blocks[i].Meta.Spans, 0, 0
	for _, rg := range ranges {
		if rg.Lo < prev || rg.Hi < rg.Lo || rg.Hi > n {
			return nil, 0, fmt.Errorf("read segment %s block %d: row range [%d, %d) invalid for %d rows", r.path, i, rg.Lo, rg.Hi, n)
		}
		prev = rg.Hi
		total += rg.Hi - rg.Lo
	}
	empty := func(rg RowRange) bool { return rg.Lo == rg.Hi }
	if slices.ContainsFunc(ranges, empty) {
		ranges = slices.DeleteFunc(slices.Clone(ranges), empty)
	}
	return ranges, total, nil
}

// RowGroupRows is the number of rows one row-group token filter covers;
// groups start at multiples of it within a block.
const RowGroupRows = groupRows
