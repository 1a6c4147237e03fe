package segment

import (
	"github.com/rastro-dev/rastro/internal/model"
)

// TraceIDs calls yield for each (project, trace id) the segment holds, once
// each, in trace-index order: projects by name, then trace ids bytewise. It
// reads the trace index page by page (each checked against its fence
// checksum), so its memory is one page whatever the segment's size.
// Compaction intersects these streams to find traces split over segments.
func (r *Reader) TraceIDs(yield func(project string, id model.TraceID) bool) error {
	var prevProj uint32
	var prev model.TraceID
	have := false
	for p := range r.tix.fences {
		off, n := r.tix.pageBounds(p)
		page, err := r.readAt(off, int64(n)*traceEntryLen)
		if err != nil {
			return err
		}
		if crc(page) != r.tix.fences[p].CRC {
			return r.corrupt(off, "trace index page %d checksum mismatch", p)
		}
		for k := 0; k < n; k++ {
			e := parseTraceEntry(page[k*traceEntryLen:])
			if have && e.Project == prevProj && e.TraceID == prev {
				continue // the same trace in the next block
			}
			if int(e.Project) >= len(r.info.Projects) {
				return r.corrupt(off+int64(k)*traceEntryLen, "trace index entry names project %d of %d", e.Project, len(r.info.Projects))
			}
			have, prevProj, prev = true, e.Project, e.TraceID
			if !yield(r.info.Projects[e.Project].Name, e.TraceID) {
				return nil
			}
		}
	}
	return nil
}

// TraceBlocks returns the indexes of the blocks holding spans of the trace
// in the project (none when the segment does not hold it). Like
// ContainsTrace it reads only the trace index.
func (r *Reader) TraceBlocks(project string, id model.TraceID) ([]int, error) {
	found, err := r.lookupTrace(project, id, false)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(found))
	for _, e := range found {
		out = append(out, int(e.Block))
	}
	return out, nil
}
