package segment

import (
	"fmt"
	"sort"
)

// aggRef locates one part of the aggregates section: the entries of one
// block, or the rollup of one project. A part of length 0 holds no entries.
type aggRef struct {
	Codec  uint32
	Offset uint64 // from the start of the aggregates section
	Length uint64 // stored bytes
	RawLen uint64
	CRC    uint32 // crc32c of the stored bytes
}

// aggIndex is the resident directory of the aggregates section.
type aggIndex struct {
	present  bool  // the segment was written with aggregates
	err      error // set when the directory is unusable; returned by every aggregate call
	offset   int64 // of the aggregates section in the file
	length   uint64
	blocks   []aggRef
	projects []aggRef
}

// aggWriter collects the aggregates of a segment while it is written: one
// part per block as the block is flushed, and a rollup per project.
type aggWriter struct {
	agg      *Aggregator
	data     []byte // the aggregates section: parts back to back
	blocks   []aggRef
	projects []aggRef
	rollup   map[AggKey]int // key -> index in rollupEntries, for the current project
	entries  []AggEntry
	rollData []byte   // the LLM rollups section (agg_rollup.go)
	rolls    []aggRef // two per project: coarse rollup, session table
}

func newAggWriter() *aggWriter {
	return &aggWriter{agg: NewAggregator(), rollup: make(map[AggKey]int)}
}

// part compresses one entry list onto the section and returns its reference.
func (a *aggWriter) part(w *Writer, entries []AggEntry) aggRef {
	if len(entries) == 0 {
		return aggRef{Offset: uint64(len(a.data))}
	}
	raw := encodeAggPart(nil, entries)
	start := len(a.data)
	var codec uint32
	a.data, codec = compressInto(w.enc.enc, a.data, raw)
	return aggRef{Codec: codec, Offset: uint64(start), Length: uint64(len(a.data) - start), RawLen: uint64(len(raw)),
		CRC: crc(a.data[start:])}
}

// addBlock aggregates the spans of a block being flushed.
func (a *aggWriter) addBlock(w *Writer) {
	a.agg.Reset()
	for i := range w.block {
		a.agg.Add(&w.block[i])
	}
	entries := a.agg.Entries()
	a.blocks = append(a.blocks, a.part(w, entries))
	for i := range entries {
		// The block's entries are encoded; the rollup takes their sketches over.
		if j, ok := a.rollup[entries[i].Key]; ok {
			a.entries[j].M.Merge(&entries[i].M)
		} else {
			// The key's strings point into the block's decoded columns
			// when the spans come from a segment (a merge): copy them, or
			// the rollup would keep a whole input block alive per key.
			e := entries[i]
			e.Key = e.Key.clone()
			a.rollup[e.Key] = len(a.entries)
			a.entries = append(a.entries, e)
		}
	}
}

// endProject writes the rollup of the project whose blocks were just added.
func (a *aggWriter) endProject(w *Writer) {
	sort.Slice(a.entries, func(i, j int) bool { return compareAggKeys(&a.entries[i].Key, &a.entries[j].Key) < 0 })
	a.projects = append(a.projects, a.part(w, a.entries))
	a.addRollups(w, a.entries)
	clear(a.rollup)
	clear(a.entries)
	a.entries = a.entries[:0]
}

// encodeAggDir: uvarint n blocks | n x ref | uvarint n projects | n x ref;
// ref = uvarint codec | uvarint offset | uvarint length | uvarint raw length | crc32c u32 LE.
func encodeAggDir(blocks, projects []aggRef) []byte {
	var b []byte
	for _, refs := range [][]aggRef{blocks, projects} {
		b = appendUvarints(b, uint64(len(refs)))
		for _, r := range refs {
			b = appendUvarints(b, uint64(r.Codec), r.Offset, r.Length, r.RawLen)
			b = le.AppendUint32(b, r.CRC)
		}
	}
	return b
}

func decodeAggDir(s string, nBlocks, nProjects int, sectionLen uint64) (blocks, projects []aggRef, err error) {
	d := dec{s: s}
	read := func(want int, what string) []aggRef {
		n := d.count(8)
		if d.err == nil && n != want {
			d.failf(fmt.Sprintf("%d %s entries, the segment has %d", n, what, want))
		}
		if d.err != nil {
			return nil
		}
		refs := make([]aggRef, n)
		for i := range refs {
			r := &refs[i]
			r.Codec = d.u32()
			r.Offset = d.uvarint()
			r.Length = d.uvarint()
			r.RawLen = d.uvarint()
			r.CRC = d.u32le()
			if d.err == nil && (r.Offset > sectionLen || r.Length > sectionLen-r.Offset) {
				d.failf(fmt.Sprintf("%s part %d lies outside the aggregates section", what, i))
			}
		}
		return refs
	}
	blocks = read(nBlocks, "block")
	projects = read(nProjects, "project")
	if d.err == nil && d.remaining() != 0 {
		d.failf(fmt.Sprintf("%d trailing bytes", d.remaining()))
	}
	return blocks, projects, d.err
}

// HasAggregates reports whether the segment was written with LLM aggregates
// (sections 6 and 10). Segments written before them have none: the caller
// computes the aggregates from rows with an Aggregator. When it returns true,
// a block or project with no LLM spans has no entries, and damage is
// reported by BlockAggregates and SegmentAggregates.
func (r *Reader) HasAggregates() bool { return r.aggs.present }

// BlockAggregates returns the LLM aggregates of block i, sorted by key, as
// the Aggregator computes them from the block's spans. It reads and verifies
// the block's part of the aggregates section on each call (nothing is
// cached). It returns nil for a segment without aggregates; damage is a
// *CorruptionError that leaves the rest of the segment readable.
func (r *Reader) BlockAggregates(i int) ([]AggEntry, error) {
	if i < 0 || i >= len(r.blocks) {
		return nil, fmt.Errorf("read segment %s: block %d out of range [0, %d)", r.path, i, len(r.blocks))
	}
	if !r.aggs.present {
		return nil, nil
	}
	if r.aggs.err != nil {
		return nil, r.aggs.err
	}
	return r.readAggPart(r.aggs.blocks[i], fmt.Sprintf("block %d", i))
}

// SegmentAggregates returns the rollup of a project's LLM aggregates over
// all its blocks in this segment: the block entries merged by key, with
// Traces summed. Like BlockAggregates it reads on demand; an unknown project
// has no entries.
func (r *Reader) SegmentAggregates(project string) ([]AggEntry, error) {
	if !r.aggs.present {
		return nil, nil
	}
	if r.aggs.err != nil {
		return nil, r.aggs.err
	}
	pi := sort.Search(len(r.info.Projects), func(i int) bool { return r.info.Projects[i].Name >= project })
	if pi == len(r.info.Projects) || r.info.Projects[pi].Name != project {
		return nil, nil
	}
	return r.readAggPart(r.aggs.projects[pi], fmt.Sprintf("project %q rollup", project))
}

func (r *Reader) readAggPart(ref aggRef, what string) ([]AggEntry, error) {
	s, off, err := r.readPart(&r.aggs, ref, "LLM aggregates of "+what)
	if err != nil || s == "" {
		return nil, err
	}
	entries, err := decodeAggPart(s)
	if err != nil {
		return nil, r.corrupt(off, "LLM aggregates of %s: %v", what, err)
	}
	return entries, nil
}

// readPart reads, checks and decompresses one part of a parts section; an
// empty part is "".
func (r *Reader) readPart(x *aggIndex, ref aggRef, what string) (string, int64, error) {
	if ref.Length == 0 {
		return "", 0, nil
	}
	off := x.offset + int64(ref.Offset)
	b, err := r.readAt(off, int64(ref.Length))
	if err != nil {
		return "", off, err
	}
	if crc(b) != ref.CRC {
		return "", off, r.corrupt(off, "%s: checksum mismatch", what)
	}
	s, err := decompress(ref.Codec, b, ref.RawLen)
	if err != nil {
		return "", off, r.corrupt(off, "%s: %v", what, err)
	}
	return s, off, nil
}
