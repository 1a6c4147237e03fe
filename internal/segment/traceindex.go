package segment

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
)

// traceEntry maps one run of a trace's spans to its place in a block. A trace
// split across blocks has one entry per block, in block order.
type traceEntry struct {
	Project uint32
	TraceID model.TraceID
	Block   uint32
	Row     uint32
	Count   uint32
}

func compareKey(ap uint32, a *model.TraceID, bp uint32, b *model.TraceID) int {
	if c := cmp.Compare(ap, bp); c != 0 {
		return c
	}
	// Big-endian halves order as the bytes do.
	if c := cmp.Compare(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])); c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}

func compareEntries(a, b traceEntry) int {
	if c := compareKey(a.Project, &a.TraceID, b.Project, &b.TraceID); c != 0 {
		return c
	}
	return cmp.Compare(a.Block, b.Block)
}

// sortEntries sorts trace index entries (compareEntries). The writer
// appends them project by project in increasing project order, so each
// project's run is sorted alone: its entries are bucketed by the first two
// bytes of the trace id (random ids spread evenly: a bucket holds one or
// two entries), and each bucket is sorted by the whole key. A comparison
// sort over all of them costs several times more at seal sizes.
func sortEntries(entries []traceEntry) {
	for i := 0; i < len(entries); {
		j := i + 1
		for j < len(entries) && entries[j].Project == entries[i].Project {
			j++
		}
		sortProjectEntries(entries[i:j])
		i = j
	}
	if !slices.IsSortedFunc(entries, compareEntries) {
		// Projects were not in runs (not as the writer appends them).
		slices.SortFunc(entries, compareEntries)
	}
}

func sortProjectEntries(entries []traceEntry) {
	if len(entries) < 256 {
		slices.SortFunc(entries, compareEntries)
		return
	}
	start := make([]int, 1<<16+1)
	for i := range entries {
		start[int(binary.BigEndian.Uint16(entries[i].TraceID[:2]))+1]++
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	next := slices.Clone(start)
	out := make([]traceEntry, len(entries))
	for _, e := range entries {
		b := binary.BigEndian.Uint16(e.TraceID[:2])
		out[next[b]] = e
		next[b]++
	}
	for b := 0; b < 1<<16; b++ {
		if start[b+1]-start[b] > 1 {
			slices.SortFunc(out[start[b]:start[b+1]], compareEntries)
		}
	}
	copy(entries, out)
}

func appendTraceEntry(b []byte, e traceEntry) []byte {
	b = le.AppendUint32(b, e.Project)
	b = append(b, e.TraceID[:]...)
	b = le.AppendUint32(b, e.Block)
	b = le.AppendUint32(b, e.Row)
	return le.AppendUint32(b, e.Count)
}

func parseTraceEntry(b []byte) traceEntry {
	var e traceEntry
	e.Project = le.Uint32(b[0:])
	copy(e.TraceID[:], b[4:20])
	e.Block = le.Uint32(b[20:])
	e.Row = le.Uint32(b[24:])
	e.Count = le.Uint32(b[28:])
	return e
}

// fence is the resident first key of one trace-index page and the page's checksum.
type fence struct {
	Project uint32
	First   model.TraceID
	CRC     uint32
}

// traceIndex is the resident part of the trace index.
type traceIndex struct {
	offset   int64 // of the trace-index section
	length   int64
	perPage  int
	entries  int
	fences   []fence
	lastProj uint32
	last     model.TraceID
}

func (t *traceIndex) pageBounds(p int) (off int64, n int) {
	start := p * t.perPage
	n = min(t.perPage, t.entries-start)
	return t.offset + int64(start)*traceEntryLen, n
}

// streamTraceIndex encodes the sorted entries page by page, handing each page
// to write (which must not keep it), and returns the fences section; only
// one page is in memory at a time.
func streamTraceIndex(entries []traceEntry, write func(page []byte) error) (fences []byte, err error) {
	nPages := (len(entries) + tracePageEntries - 1) / tracePageEntries
	fences = appendUvarints(nil, tracePageEntries, uint64(len(entries)), uint64(nPages))
	page := make([]byte, 0, tracePageEntries*traceEntryLen)
	for p := 0; p < nPages; p++ {
		page = page[:0]
		first := entries[p*tracePageEntries]
		for _, e := range entries[p*tracePageEntries : min(len(entries), (p+1)*tracePageEntries)] {
			page = appendTraceEntry(page, e)
		}
		fences = le.AppendUint32(fences, first.Project)
		fences = append(fences, first.TraceID[:]...)
		fences = le.AppendUint32(fences, crc(page))
		if err := write(page); err != nil {
			return nil, err
		}
	}
	var last traceEntry
	if len(entries) > 0 {
		last = entries[len(entries)-1]
	}
	fences = le.AppendUint32(fences, last.Project)
	fences = append(fences, last.TraceID[:]...)
	return fences, nil
}
