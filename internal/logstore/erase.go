package logstore

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
)

// erasure removes the records of one trace acknowledged before it: those
// numbered below Before.
type erasure struct {
	Project string        `json:"project"`
	TraceID model.TraceID `json:"trace_id"`
	Before  uint64        `json:"before"`
}

// pendingErasures keeps the erasures that may still cover records in the
// WAL: those whose Before is above the first sequence number the WAL still
// replays (nextSeq); the others' records are all in rewritten segments.
func pendingErasures(es []erasure, nextSeq uint64) []erasure {
	var out []erasure
	for _, e := range es {
		if e.Before > nextSeq {
			out = append(out, e)
		}
	}
	return out
}

// erasedIn indexes the project's pending erasures: for each trace, the
// sequence number below which its records are erased (the highest Before).
// Nil when there is none.
func erasedIn(es []erasure, project string) map[model.TraceID]uint64 {
	var idx map[model.TraceID]uint64
	for i := range es {
		if es[i].Project != project {
			continue
		}
		if idx == nil {
			idx = make(map[model.TraceID]uint64)
		}
		idx[es[i].TraceID] = max(idx[es[i].TraceID], es[i].Before)
	}
	return idx
}

// isErased reports whether an erasure of idx covers the record.
func isErased(idx map[model.TraceID]uint64, trace model.TraceID, seq uint64) bool {
	if idx == nil || trace.IsZero() {
		return false
	}
	before, ok := idx[trace]
	return ok && seq < before
}

// liveRows is the order (time, then sequence) of pb's rows that no pending
// erasure covers. The caller holds sealMu or mu.
func (s *Store) liveRows(project string, pb *projBuf) []int32 {
	idx := erasedIn(s.man.Erased, project)
	if idx == nil {
		return pb.order(nil)
	}
	return pb.order(func(r *row) bool { return !isErased(idx, r.traceID, r.seq) })
}

// EraseTrace removes every record of trace in project acknowledged before
// the call (EraseTraces with one trace).
func (s *Store) EraseTrace(project string, trace model.TraceID) (int, error) {
	return s.EraseTraces(project, []model.TraceID{trace})
}

// EraseTraces removes every record of the traces in project acknowledged
// before the call: the erasures are written to the manifest first (so that
// a crash cannot bring the records back from the WAL), the records leave the
// write buffer, every segment that may hold one is rewritten without them,
// and a seal removes the WAL files that held them. It returns how many
// records it removed from segments and the buffer.
func (s *Store) EraseTraces(project string, traces []model.TraceID) (int, error) {
	for _, t := range traces {
		if t.IsZero() {
			return 0, errors.New("logstore: erase: no trace id")
		}
	}
	if len(traces) == 0 {
		return 0, nil
	}
	s.sealMu.Lock()
	defer s.sealMu.Unlock()

	s.mu.Lock()
	m := s.man
	m.Erased = slices.Clone(m.Erased)
	for _, t := range traces {
		m.Erased = append(m.Erased, erasure{Project: project, TraceID: t, Before: s.nextSeq})
	}
	s.mu.Unlock()
	if err := s.writeManifest(m); err != nil {
		return 0, err
	}
	removed := 0
	s.mu.Lock()
	s.man = m
	if pb, ok := s.bufs[project]; ok {
		idx := erasedIn(s.man.Erased, project)
		live, err := pb.keep(func(r *row) bool { return !isErased(idx, r.traceID, r.seq) })
		if err != nil {
			s.mu.Unlock()
			return 0, err
		}
		removed += pb.n - live.n
		s.bufs[project] = live
	}
	segs := slices.Clone(s.segs)
	s.mu.Unlock()

	for _, seg := range segs {
		if seg.project != project || !seg.mayHoldAny(traces) {
			continue
		}
		n, err := s.rewriteWithout(seg)
		removed += n
		if err != nil {
			return removed, err
		}
	}
	// The WAL files still hold the records: a seal moves the buffer into
	// segments and removes them, and with them the erasures' entries.
	if err := s.sealLocked(); err != nil {
		return removed, err
	}
	return removed, nil
}

func (seg *segment) mayHoldAny(traces []model.TraceID) bool {
	for _, t := range traces {
		if seg.mayHoldTrace(t) {
			return true
		}
	}
	return false
}

func (seg *segment) mayHoldTrace(trace model.TraceID) bool {
	for i := range seg.blocks {
		if seg.blocks[i].traces.has(traceHash(trace)) {
			return true
		}
	}
	return false
}

// rewriteWithout replaces seg by a segment without the records the pending
// erasures cover (none at all when every record goes). The caller holds
// sealMu.
func (s *Store) rewriteWithout(seg *segment) (int, error) {
	all := newProjBuf()
	tabs := all.tables()
	for bi := range seg.blocks {
		blk, err := seg.readBlock(bi)
		if err != nil {
			return 0, err
		}
		hs, err := blk.headers()
		if err != nil {
			return 0, err
		}
		idx := make([]int, len(hs))
		for i := range idx {
			idx[i] = i
		}
		es, err := blk.records(hs, idx)
		if err != nil {
			return 0, err
		}
		for i := range es {
			if err := all.push(tabs, &es[i].rec, es[i].seq, nil); err != nil {
				return 0, err
			}
		}
	}
	live := s.liveRows(seg.project, all)
	if len(live) == all.n {
		return 0, nil // a filter false positive
	}
	m := s.man
	m.Segments = slices.DeleteFunc(slices.Clone(m.Segments), func(n string) bool { return n == seg.name })
	var made *segment
	if len(live) > 0 {
		name := fmt.Sprintf("%016d.rlog", m.NextFile)
		m.NextFile++
		var err error
		if made, err = writeSegment(s.fs, s.opts.Dir, name, seg.project, all, live); err != nil {
			return 0, err
		}
		m.Segments = append(m.Segments, name)
	}
	if err := s.writeManifest(m); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.man = m
	s.segs = slices.DeleteFunc(slices.Clone(s.segs), func(x *segment) bool { return x == seg })
	if made != nil {
		s.segs = append(s.segs, made)
	}
	s.mu.Unlock()
	s.release(seg)
	return all.n - len(live), s.fs.SyncDir(s.opts.Dir)
}
