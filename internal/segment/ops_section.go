package segment

import (
	"fmt"
	"sort"
)

// opsWriter collects the service aggregates of a segment while it is
// written: one part per block and a rollup per project, laid out like the
// LLM aggregates (agg_section.go) and sharing their directory format.
type opsWriter struct {
	agg      *OpsAggregator
	rollup   *opsRollup
	data     []byte
	blocks   []aggRef
	projects []aggRef
}

func newOpsWriter() *opsWriter { return &opsWriter{agg: NewOpsAggregator(), rollup: newOpsRollup()} }

func (o *opsWriter) part(w *Writer, a *OpsAggregates) aggRef {
	if len(a.Ops) == 0 && len(a.Errors) == 0 {
		return aggRef{Offset: uint64(len(o.data))}
	}
	raw := encodeOpsPart(nil, a)
	start := len(o.data)
	var codec uint32
	o.data, codec = compressInto(w.enc.enc, o.data, raw)
	return aggRef{Codec: codec, Offset: uint64(start), Length: uint64(len(o.data) - start), RawLen: uint64(len(raw)),
		CRC: crc(o.data[start:])}
}

// addBlock aggregates the spans of a block being flushed.
func (o *opsWriter) addBlock(w *Writer) {
	o.agg.Recycle() // the previous block's entries were encoded and cloned into the rollup
	for i := range w.block {
		o.agg.Add(&w.block[i])
	}
	a := o.agg.Aggregates()
	o.blocks = append(o.blocks, o.part(w, &a))
	o.rollup.add(&a)
}

// endProject writes the rollup of the project whose blocks were just added.
func (o *opsWriter) endProject(w *Writer) {
	a := o.rollup.take()
	o.projects = append(o.projects, o.part(w, &a))
}

// HasOpsAggregates reports whether the segment was written with service
// aggregates (sections 14 and 15). Segments written before them have none:
// the caller computes them from rows with an OpsAggregator.
func (r *Reader) HasOpsAggregates() bool { return r.ops.present }

// BlockOps returns the service aggregates of block i, as the OpsAggregator
// computes them from the block's spans. It reads and verifies the block's
// part on each call; damage is a *CorruptionError that leaves the rest of
// the segment readable. A segment without them returns empty aggregates.
func (r *Reader) BlockOps(i int) (OpsAggregates, error) {
	if i < 0 || i >= len(r.blocks) {
		return OpsAggregates{}, fmt.Errorf("read segment %s: block %d out of range [0, %d)", r.path, i, len(r.blocks))
	}
	if !r.ops.present {
		return OpsAggregates{}, nil
	}
	if r.ops.err != nil {
		return OpsAggregates{}, r.ops.err
	}
	return r.readOpsPart(r.ops.blocks[i], fmt.Sprintf("block %d", i))
}

// SegmentOps returns the rollup of a project's service aggregates over all
// its blocks in this segment (block parts merged by key). An unknown
// project has none.
func (r *Reader) SegmentOps(project string) (OpsAggregates, error) {
	if !r.ops.present {
		return OpsAggregates{}, nil
	}
	if r.ops.err != nil {
		return OpsAggregates{}, r.ops.err
	}
	pi := sort.Search(len(r.info.Projects), func(i int) bool { return r.info.Projects[i].Name >= project })
	if pi == len(r.info.Projects) || r.info.Projects[pi].Name != project {
		return OpsAggregates{}, nil
	}
	return r.readOpsPart(r.ops.projects[pi], fmt.Sprintf("project %q rollup", project))
}

func (r *Reader) readOpsPart(ref aggRef, what string) (OpsAggregates, error) {
	s, off, err := r.readPart(&r.ops, ref, "service aggregates of "+what)
	if err != nil || s == "" {
		return OpsAggregates{}, err
	}
	a, err := decodeOpsPart(s)
	if err != nil {
		return OpsAggregates{}, r.corrupt(off, "service aggregates of %s: %v", what, err)
	}
	return a, nil
}
