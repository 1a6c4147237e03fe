package segment

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/bits-and-blooms/bloom/v3"
)

// encodeInfo: spans | traces | blocks | minStart | maxStart | nProjects |
// per project: name | spans | traces | minStart | maxStart (all uvarint,
// strings length-prefixed). Fields appended later are skipped by older readers.
func encodeInfo(info Info) []byte {
	b := appendUvarints(nil, uint64(info.Spans), uint64(info.Traces), uint64(info.Blocks),
		info.MinStart, info.MaxStart, uint64(len(info.Projects)))
	for _, p := range info.Projects {
		b = appendStr(b, p.Name)
		b = appendUvarints(b, uint64(p.Spans), uint64(p.Traces), p.MinStart, p.MaxStart)
	}
	return b
}

func decodeInfo(s string) (Info, error) {
	d := dec{s: s}
	var info Info
	info.Spans = int(d.u32())
	info.Traces = int(d.u32())
	info.Blocks = int(d.u32())
	info.MinStart = d.uvarint()
	info.MaxStart = d.uvarint()
	n := d.count(5)
	info.Projects = make([]ProjectInfo, n)
	for i := range info.Projects {
		p := &info.Projects[i]
		p.Name = strings.Clone(d.str())
		p.Spans = int(d.u32())
		p.Traces = int(d.u32())
		p.MinStart = d.uvarint()
		p.MaxStart = d.uvarint()
		if i > 0 && d.err == nil && p.Name <= info.Projects[i-1].Name {
			d.failf("projects not in increasing order")
		}
	}
	if d.err != nil {
		return Info{}, d.err
	}
	return info, nil
}

// encodeBlockIndex: string table (count, strings) | nBlocks | per block:
// entry length | entry. An entry is: offset | length | project | spans |
// errors | minStart | maxStart-minStart | minDuration | maxDuration-minDuration |
// kinds | nServices, string ids | nNames, string ids | nColumns, per column:
// id | codec | offset | length | rawLength | crc32c (4 bytes LE). All numbers
// are uvarints except the crc. Bytes after the known fields of an entry are
// skipped: later versions append fields there.
func encodeBlockIndex(projects []ProjectInfo, blocks []blockEntry) []byte {
	ids := map[string]uint64{}
	var table []string
	id := func(s string) uint64 {
		i, ok := ids[s]
		if !ok {
			i = uint64(len(table))
			ids[s] = i
			table = append(table, s)
		}
		return i
	}
	var entries []byte
	var e []byte
	for i := range blocks {
		b := &blocks[i]
		m := &b.Meta
		e = appendUvarints(e[:0], b.Offset, b.Length, uint64(b.ProjectIdx), uint64(m.Spans), uint64(m.Errors),
			m.MinStart, m.MaxStart-m.MinStart, m.MinDuration, m.MaxDuration-m.MinDuration, uint64(m.Kinds))
		e = binary.AppendUvarint(e, uint64(len(m.Services)))
		for _, s := range m.Services {
			e = binary.AppendUvarint(e, id(s))
		}
		e = binary.AppendUvarint(e, uint64(len(m.Names)))
		for _, s := range m.Names {
			e = binary.AppendUvarint(e, id(s))
		}
		e = binary.AppendUvarint(e, uint64(len(b.Cols)))
		for _, c := range b.Cols {
			e = appendUvarints(e, uint64(c.ID), uint64(c.Codec), c.Offset, c.Length, c.RawLen)
			e = le.AppendUint32(e, c.CRC)
		}
		entries = binary.AppendUvarint(entries, uint64(len(e)))
		entries = append(entries, e...)
	}
	out := binary.AppendUvarint(nil, uint64(len(table)))
	for _, s := range table {
		out = appendStr(out, s)
	}
	out = binary.AppendUvarint(out, uint64(len(blocks)))
	return append(out, entries...)
}

// decodeBlockIndex parses and validates the block index against the
// projects and the region of the file that holds blocks.
func decodeBlockIndex(s string, projects []ProjectInfo, dataStart, dataEnd uint64) ([]blockEntry, error) {
	d := dec{s: s}
	table := d.strs()
	for i := range table {
		table[i] = strings.Clone(table[i]) // do not pin the whole section
	}
	n := d.count(1)
	if d.err != nil {
		return nil, d.err
	}
	blocks := make([]blockEntry, n)
	prevEnd := dataStart
	for i := range blocks {
		size := d.uvarint()
		if size > uint64(d.remaining()) {
			d.fail(errShort)
		}
		if d.err != nil {
			return nil, fmt.Errorf("block %d: %w", i, d.err)
		}
		ed := dec{s: d.fixed(int(size))}
		b := &blocks[i]
		b.Offset = ed.uvarint()
		b.Length = ed.uvarint()
		pi := ed.index(len(projects))
		b.ProjectIdx = pi
		m := &b.Meta
		m.Spans = int(ed.u32())
		m.Errors = int(ed.u32())
		m.MinStart = ed.uvarint()
		m.MaxStart = m.MinStart + ed.uvarint()
		m.MinDuration = ed.uvarint()
		m.MaxDuration = m.MinDuration + ed.uvarint()
		m.Kinds = uint8(ed.uvarint())
		m.Services = readStrIDs(&ed, table)
		m.Names = readStrIDs(&ed, table)
		nc := ed.count(6)
		b.Cols = make([]columnRef, nc)
		for j := range b.Cols {
			c := &b.Cols[j]
			c.ID = ed.u32()
			c.Codec = ed.u32()
			c.Offset = ed.uvarint()
			c.Length = ed.uvarint()
			c.RawLen = ed.uvarint()
			c.CRC = ed.u32le()
			if ed.err == nil && (c.Offset > b.Length || c.Length > b.Length-c.Offset) {
				ed.failf(fmt.Sprintf("column %d lies outside its block", c.ID))
			}
			if ed.err == nil && c.RawLen > maxColumnRawBytes {
				// Readers size buffers from it before any checksum.
				ed.failf(fmt.Sprintf("column %d: raw length %d exceeds the limit", c.ID, c.RawLen))
			}
		}
		if ed.err != nil {
			return nil, fmt.Errorf("block %d: %w", i, ed.err)
		}
		if len(projects) > 0 {
			m.Project = projects[pi].Name
		}
		switch {
		case m.Spans == 0 || m.Spans > maxBlockSpans:
			return nil, fmt.Errorf("block %d: span count %d out of range", i, m.Spans)
		case m.Errors > m.Spans:
			return nil, fmt.Errorf("block %d: more errors than spans", i)
		case b.Offset < prevEnd || b.Length > dataEnd || b.Offset > dataEnd-b.Length || b.Length > maxBlockBytes:
			return nil, fmt.Errorf("block %d: range [%d, +%d) outside the data region or overlapping", i, b.Offset, b.Length)
		case i > 0 && pi < blocks[i-1].ProjectIdx:
			return nil, fmt.Errorf("block %d: project order", i)
		}
		prevEnd = b.Offset + b.Length
	}
	if d.remaining() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", d.remaining())
	}
	return blocks, nil
}

func readStrIDs(d *dec, table []string) []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		j := d.index(len(table))
		if d.err != nil {
			return nil
		}
		out[i] = table[j]
	}
	return out
}

// encodeBlooms: nBlocks | per block: length | m | k | nWords | words (u64 LE).
func encodeBlooms(blooms [][]byte) []byte {
	out := binary.AppendUvarint(nil, uint64(len(blooms)))
	for _, b := range blooms {
		out = binary.AppendUvarint(out, uint64(len(b)))
		out = append(out, b...)
	}
	return out
}

func decodeBlooms(s string, nBlocks int) ([]*bloom.BloomFilter, error) {
	d := dec{s: s}
	n := d.count(1)
	if d.err == nil && n != nBlocks {
		return nil, fmt.Errorf("%d filters for %d blocks", n, nBlocks)
	}
	out := make([]*bloom.BloomFilter, n)
	for i := range out {
		bd := dec{s: d.str()}
		m := bd.uvarint()
		k := bd.uvarint()
		nw := bd.count(8)
		if bd.err == nil && (nw == 0 || nw > maxBloomWords || m == 0 || m > uint64(nw)*64 || k == 0 || k > 64) {
			bd.failf("filter parameters out of range")
		}
		if d.err != nil || bd.err != nil {
			return nil, fmt.Errorf("filter %d: %w", i, firstErr(d.err, bd.err))
		}
		words := make([]uint64, nw)
		for j := range words {
			words[j] = bd.u64le()
		}
		out[i] = bloom.FromWithM(words, uint(m), uint(k))
	}
	if d.err == nil && d.remaining() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", d.remaining())
	}
	return out, d.err
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// decodeFences parses the fences section.
func decodeFences(s string, t *traceIndex) error {
	d := dec{s: s}
	per := d.uvarint()
	entries := d.uvarint()
	pages := d.uvarint()
	if d.err != nil {
		return d.err
	}
	if per == 0 || per > maxFencePage {
		return fmt.Errorf("page size %d out of range", per)
	}
	if entries != uint64(t.length)/traceEntryLen || uint64(t.length)%traceEntryLen != 0 {
		return fmt.Errorf("%d entries do not match a trace index of %d bytes", entries, t.length)
	}
	if pages != (entries+per-1)/per {
		return fmt.Errorf("%d pages for %d entries of %d per page", pages, entries, per)
	}
	if uint64(d.remaining()) != pages*fenceLen+20 {
		return fmt.Errorf("fence table of %d bytes for %d pages", d.remaining(), pages)
	}
	t.perPage, t.entries = int(per), int(entries)
	t.fences = make([]fence, pages)
	for i := range t.fences {
		f := &t.fences[i]
		f.Project = d.u32le()
		copy(f.First[:], d.fixed(16))
		f.CRC = d.u32le()
		if i > 0 && compareKey(t.fences[i-1].Project, &t.fences[i-1].First, f.Project, &f.First) > 0 {
			return fmt.Errorf("fence %d out of order", i)
		}
	}
	t.lastProj = d.u32le()
	copy(t.last[:], d.fixed(16))
	return d.err
}
