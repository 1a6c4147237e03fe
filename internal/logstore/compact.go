package logstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/store"
)

// Compaction (docs/logs.md). Every seal writes one segment per project it
// holds records of, and a search looks at every segment of its project, so
// compaction merges a project's segments into larger ones. The policy is
// the span engine's (internal/engine/compact.go), per project:
//
//   - A segment of at least half of CompactionMaxSegmentBytes is full and
//     never merged again (an erasure may still rewrite it alone).
//   - The others fall into size tiers: tier 0 below max/fanout^3, then one
//     tier per factor of fanout. When fanout adjacent segments of one tier
//     exist, they are merged (fewer if their sum would pass the cap), so a
//     record is rewritten about once per tier.
//   - Compact(ctx, true) (rastro compact, POST /api/v1/admin/compact)
//     ignores tiers: it merges any run of two or more adjacent non-full
//     segments, up to fanout at a time and the cap, until none is left.
//
// Adjacent means next to each other among the project's segments in the
// manifest's order (the order seals wrote them); the output takes the
// place of the first input. Records keep their sequence numbers, so a
// cursor taken before a merge pages the same after it.
//
// A merge streams: it holds one decoded block per input and the output
// block being filled, which it writes through the seals' segment writer
// (segWriter), so block summaries, Bloom filters and the word index are
// rebuilt. Records of erased traces (pending erasures) and records older
// than their project's retention are left out. The merge reads and writes
// without a lock ingest or queries take; only its publication holds sealMu
// (one manifest write, then the read view swaps under mu in one step). A
// query that took the inputs before the swap keeps reading them: they are
// removed when it lets go (Store.release). A crash leaves the old manifest
// or the new one; Open removes the segment files the manifest does not list
// (an unpublished output, or inputs not yet removed).

// Compaction defaults: the span engine's.
const (
	DefaultCompactionMaxSegmentBytes = 1 << 30
	DefaultCompactionFanout          = 8
)

// errMergeStale: an input of a merge was replaced (by an erasure's rewrite
// or retention) while the merge ran; its output is dropped and the run
// planned again.
var errMergeStale = errors.New("logstore: merge inputs replaced meanwhile")

// tier returns the size tier of a segment of n bytes.
func (s *Store) tier(n int64) int {
	fan := float64(s.opts.CompactionFanout)
	base := float64(s.opts.CompactionMaxSegmentBytes) / (fan * fan * fan)
	if float64(n) < base {
		return 0
	}
	return 1 + int(math.Log(float64(n)/base)/math.Log(fan))
}

// planMerge returns the next run of one project's segments to merge, in
// manifest order, or nil. The caller holds compactMu.
func (s *Store) planMerge(full bool) []*segment {
	s.mu.RLock()
	segs := s.segs // in manifest order; replaced, never changed in place
	s.mu.RUnlock()
	byProject := map[string][]*segment{}
	var projects []string
	for _, seg := range segs {
		if _, ok := byProject[seg.project]; !ok {
			projects = append(projects, seg.project)
		}
		byProject[seg.project] = append(byProject[seg.project], seg)
	}
	maxBytes, fan := s.opts.CompactionMaxSegmentBytes, s.opts.CompactionFanout
	mergeable := func(seg *segment) bool { return seg.bytes < maxBytes/2 && !s.mergeFailed[seg.name] }
	window := func(run []*segment) []*segment {
		var total int64
		n := 0
		for n < len(run) && n < fan && total+run[n].bytes <= maxBytes {
			total += run[n].bytes
			n++
		}
		if n < 2 {
			return nil
		}
		return run[:n]
	}
	for _, p := range projects {
		ps := byProject[p]
		for i := 0; i < len(ps); {
			if !mergeable(ps[i]) {
				i++
				continue
			}
			j := i + 1
			for j < len(ps) && mergeable(ps[j]) {
				j++
			}
			run := ps[i:j]
			if full {
				if w := window(run); w != nil {
					return w
				}
			}
			for a := 0; !full && a < len(run); {
				t := s.tier(run[a].bytes)
				b := a + 1
				for b < len(run) && s.tier(run[b].bytes) == t {
					b++
				}
				if b-a >= fan {
					if w := window(run[a:b]); w != nil {
						return w
					}
				}
				a = b
			}
			i = j
		}
	}
	return nil
}

// Compact merges segments as the policy above says: with full, ignoring
// the tiers, until no two adjacent non-full segments of a project are
// left. It waits for a merge in progress. A merge whose inputs are damaged
// is reported and not tried again until a restart.
func (s *Store) Compact(ctx context.Context, full bool) (store.CompactResult, error) {
	start := time.Now()
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.mu.RLock()
	closed := s.closed
	res := store.CompactResult{SegmentsBefore: len(s.segs)}
	s.mu.RUnlock()
	if closed {
		return res, ErrClosed
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		run := s.planMerge(full)
		if run == nil {
			break
		}
		n, err := s.merge(ctx, run)
		if errors.Is(err, errMergeStale) {
			continue
		}
		if err != nil {
			if errors.Is(err, durable.ErrCorruption) {
				for _, seg := range run {
					s.mergeFailed[seg.name] = true
				}
			}
			return res, err
		}
		res.Merges++
		res.BytesWritten += n
	}
	s.mu.RLock()
	res.SegmentsAfter = len(s.segs)
	s.mu.RUnlock()
	res.Took = time.Since(start)
	return res, nil
}

// compactor merges by the policy after seals (Options.Compaction). Open
// starts it; Close stops it (done, and stopCompact ends a merge in
// progress) and waits for it (wg).
func (s *Store) compactor() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case <-s.compactCh:
		}
		if _, err := s.Compact(s.compactCtx, false); err != nil && s.compactCtx.Err() == nil {
			s.opts.Logf("logstore: compaction failed (the segments stay as they were): %v", err)
		}
	}
}

// mergeInput reads one input of a merge, one decoded block at a time.
type mergeInput struct {
	seg *segment
	bi  int     // the next block to read
	es  []entry // the current block's records
	pos int
}

// cur is the input's next record, nil at its end.
func (in *mergeInput) cur() (*entry, error) {
	for in.pos == len(in.es) {
		if in.bi == len(in.seg.blocks) {
			return nil, nil
		}
		blk, err := in.seg.readBlock(in.bi)
		if err != nil {
			return nil, err
		}
		hs, err := blk.headers()
		if err != nil {
			return nil, err
		}
		idx := make([]int, len(hs))
		for i := range idx {
			idx[i] = i
		}
		if in.es, err = blk.records(hs, idx); err != nil {
			return nil, err
		}
		in.bi, in.pos = in.bi+1, 0
	}
	return &in.es[in.pos], nil
}

// before orders records as a segment does: by time, then sequence number.
func before(a, b *entry) bool {
	ta, tb := a.rec.Time(), b.rec.Time()
	return ta < tb || (ta == tb && a.seq < b.seq)
}

// merge writes run (segments of one project) as one segment and publishes
// it in their place. It returns the bytes written.
func (s *Store) merge(ctx context.Context, run []*segment) (int64, error) {
	project := run[0].project
	// Hold the inputs, reserve the output's name, and take the erasures
	// and the retention cutoff the merge applies.
	s.sealMu.Lock()
	s.mu.Lock()
	for _, seg := range run {
		if !slices.Contains(s.segs, seg) {
			s.mu.Unlock()
			s.sealMu.Unlock()
			return 0, errMergeStale
		}
	}
	acquire(run)
	name := fmt.Sprintf("%016d.rlog", s.man.NextFile)
	s.man.NextFile++ // written with the next manifest; a crash before that leaves only an unlisted file
	erased := erasedIn(s.man.Erased, project)
	s.mu.Unlock()
	s.sealMu.Unlock()
	defer func() {
		for _, seg := range run {
			s.release(seg)
		}
	}()
	var cutoff uint64
	if s.opts.Retention != nil {
		if d := s.opts.Retention(project); d > 0 {
			cutoff = uint64(max(0, s.opts.Now().Add(-d).UnixNano()))
		}
	}

	ins := make([]*mergeInput, len(run))
	for i, seg := range run {
		ins[i] = &mergeInput{seg: seg}
	}
	var w *segWriter
	out := newProjBuf()
	tabs := out.tables()
	order := make([]int32, 0, BlockRecords)
	flush := func() error {
		if out.n == 0 {
			return nil
		}
		if w == nil {
			var err error
			if w, err = newSegWriter(s.fs, s.opts.Dir, name, project); err != nil {
				return err
			}
		}
		order = order[:0]
		for i := range out.n {
			order = append(order, int32(i))
		}
		if err := w.addBlock(out, order); err != nil {
			return err
		}
		out = newProjBuf()
		tabs = out.tables()
		return ctx.Err()
	}
	err := func() error {
		for {
			var next *entry
			var from *mergeInput
			for _, in := range ins {
				e, err := in.cur()
				if err != nil {
					return err
				}
				if e != nil && (next == nil || before(e, next)) {
					next, from = e, in
				}
			}
			if next == nil {
				return flush()
			}
			from.pos++
			if isErased(erased, next.rec.TraceID, next.seq) || next.rec.Time() < cutoff {
				continue
			}
			if err := out.push(tabs, &next.rec, next.seq, nil); err != nil {
				return err
			}
			if out.n == BlockRecords {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}()
	if err != nil {
		if w != nil {
			w.abort()
		}
		return 0, fmt.Errorf("merge logs segments of project %q: %w", project, err)
	}
	var made *segment
	if w != nil {
		if made, err = w.finish(); err != nil {
			return 0, err
		}
	}
	return s.publishMerge(run, made)
}

// publishMerge replaces run by made (nil: the inputs held no record to
// keep) in the manifest and the read view, and lets go of the inputs.
func (s *Store) publishMerge(run []*segment, made *segment) (int64, error) {
	drop := func() {
		if made != nil {
			s.release(made) // never listed: removes the file
		}
	}
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	s.mu.RLock()
	m := s.man
	segs := s.segs
	s.mu.RUnlock()
	for _, seg := range run {
		if !slices.Contains(segs, seg) {
			drop()
			return 0, errMergeStale
		}
	}
	newSegs := make([]*segment, 0, len(segs))
	for _, seg := range segs {
		switch {
		case seg == run[0] && made != nil:
			newSegs = append(newSegs, made) // in the first input's place
		case !slices.Contains(run, seg):
			newSegs = append(newSegs, seg)
		}
	}
	m.Segments = make([]string, len(newSegs))
	for i, seg := range newSegs {
		m.Segments[i] = seg.name
	}
	if err := s.writeManifest(m); err != nil {
		drop()
		return 0, err
	}
	s.mu.Lock()
	s.man, s.segs = m, newSegs
	s.mu.Unlock()
	for _, seg := range run {
		s.release(seg) // the store's reference; the file goes when no query holds it
	}
	if made == nil {
		return 0, nil
	}
	return made.bytes, nil
}
