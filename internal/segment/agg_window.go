package segment

import "fmt"

// BlockRowsStartingIn returns the rows of block i whose spans start in
// [lo, hi) (hi 0: unbounded), as ranges for ReadBlockRows. It reads and
// decodes the block's start column only. Aggregates over a window answer
// the blocks wholly inside it from stored aggregates; a block the window's
// edge cuts must be read row by row, and with these ranges only its rows in
// the window are materialised (and, of columns stored as pieces, only the
// pieces holding them decompressed) instead of every row.
func (r *Reader) BlockRowsStartingIn(i int, lo, hi uint64) ([]RowRange, error) {
	if i < 0 || i >= len(r.blocks) {
		return nil, fmt.Errorf("read segment %s: block %d out of range [0, %d)", r.path, i, len(r.blocks))
	}
	b := &r.blocks[i]
	var c *columnRef
	for j := range b.Cols {
		if b.Cols[j].ID == colStart {
			c = &b.Cols[j]
		}
	}
	if c == nil {
		return nil, r.corrupt(int64(b.Offset), "block %d: column %s missing", i, columnNames[colStart])
	}
	off := int64(b.Offset + c.Offset)
	stored, err := r.readAt(off, int64(c.Length))
	if err != nil {
		return nil, err
	}
	if crc(stored) != c.CRC {
		return nil, r.corrupt(off, "block %d column %s: checksum mismatch", i, columnNames[colStart])
	}
	s, err := decompressColumn(*c, stored, nil)
	if err != nil {
		return nil, r.corrupt(off, "block %d column %s: %v", i, columnNames[colStart], err)
	}
	var out []RowRange
	d := dec{s: s}
	base := b.Meta.MinStart
	for row := range b.Meta.Spans {
		start := base + d.uvarint()
		if start < lo || (hi != 0 && start >= hi) {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].Hi == row {
			out[k].Hi++
		} else {
			out = append(out, RowRange{row, row + 1})
		}
	}
	if d.err == nil && d.remaining() != 0 {
		d.failf(fmt.Sprintf("%d trailing bytes", d.remaining()))
	}
	if d.err != nil {
		return nil, r.corrupt(off, "block %d column %s: %v", i, columnNames[colStart], d.err)
	}
	return out, nil
}
