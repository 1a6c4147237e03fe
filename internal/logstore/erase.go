package logstore

import (
	"errors"
	"fmt"
	"io/fs"
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

func (e *erasure) covers(project string, trace model.TraceID, seq uint64) bool {
	return seq < e.Before && trace == e.TraceID && project == e.Project
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

// erased reports whether a pending erasure covers the record.
func (s *Store) erased(project string, trace model.TraceID, seq uint64) bool {
	if trace.IsZero() {
		return false
	}
	for i := range s.man.Erased {
		if s.man.Erased[i].covers(project, trace, seq) {
			return true
		}
	}
	return false
}

// liveEntries is es without the records a pending erasure covers (a new
// slice; es is not changed). The caller holds sealMu or mu.
func (s *Store) liveEntries(project string, es []entry) []entry {
	out := make([]entry, 0, len(es))
	for _, e := range es {
		if !s.erased(project, e.rec.TraceID, e.seq) {
			out = append(out, e)
		}
	}
	return out
}

// EraseTrace removes every record of trace in project acknowledged before
// the call: the erasure is written to the manifest first (so that a crash
// cannot bring the records back from the WAL), the records leave the write
// buffer, every segment that may hold them is rewritten without them, and a
// seal removes the WAL files that held them. It returns how many records it removed from segments and the buffer.
func (s *Store) EraseTrace(project string, trace model.TraceID) (int, error) {
	if trace.IsZero() {
		return 0, errors.New("logstore: erase: no trace id")
	}
	s.sealMu.Lock()
	defer s.sealMu.Unlock()

	s.mu.Lock()
	e := erasure{Project: project, TraceID: trace, Before: s.nextSeq}
	m := s.man
	m.Erased = append(slices.Clone(m.Erased), e)
	s.mu.Unlock()
	if err := s.writeManifest(m); err != nil {
		return 0, err
	}
	removed := 0
	s.mu.Lock()
	s.man = m
	if pb, ok := s.bufs[project]; ok {
		live := s.liveEntries(project, pb.es)
		removed += len(pb.es) - len(live)
		s.bufs[project] = newProjBuf(live)
	}
	segs := slices.Clone(s.segs)
	s.mu.Unlock()

	for _, seg := range segs {
		if seg.project != project || !seg.mayHoldTrace(trace) {
			continue
		}
		n, err := s.rewriteWithout(seg)
		removed += n
		if err != nil {
			return removed, err
		}
	}
	// The WAL files still hold the records: a seal moves the buffer into
	// segments and removes them, and with them the erasure's entry.
	if err := s.sealLocked(); err != nil {
		return removed, err
	}
	return removed, nil
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
	var all []entry
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
		all = append(all, es...)
	}
	live := s.liveEntries(seg.project, all)
	if len(live) == len(all) {
		return 0, nil // a filter false positive
	}
	m := s.man
	m.Segments = slices.DeleteFunc(slices.Clone(m.Segments), func(n string) bool { return n == seg.name })
	var made *segment
	if len(live) > 0 {
		name := fmt.Sprintf("%016d.rlog", m.NextFile)
		m.NextFile++
		var err error
		if made, err = writeSegment(s.fs, s.opts.Dir, name, seg.project, live); err != nil {
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
	if err := s.fs.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.opts.Logf("logstore: remove %s: %v", seg.path, err)
	}
	return len(all) - len(live), s.fs.SyncDir(s.opts.Dir)
}
