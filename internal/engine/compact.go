package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// Compaction policy (docs/operations.md). Seals write one segment per write
// buffer; a filtered query probes every segment, so compaction merges
// adjacent segments into larger ones:
//
//   - A segment of at least half of CompactionMaxSegmentBytes is full and
//     never merged again (except rewritten alone by retention or erasure).
//   - The others fall into size tiers: tier 0 below max/fanout^3, then one
//     tier per factor of fanout. When fanout adjacent segments of one tier
//     exist, they are merged (fewer if their sum would pass the cap). Merges
//     therefore rewrite each span about once per tier: log_fanout of the cap
//     over the seal size.
//   - Compact (POST /api/v1/admin/compact) ignores tiers: it merges any run of
//     two or more adjacent non-full segments, up to fanout at a time and the
//     cap, until none is left.
//
// Only adjacent segments merge, and the output takes their place in the
// manifest's order, so that "the newest copy of a re-sent span wins" keeps
// meaning the same across a merge.

// Compaction defaults.
const (
	DefaultCompactionMaxSegmentBytes = 1 << 30
	DefaultCompactionFanout          = 8
	// DefaultMergeDeferSegments is the default Options.MergeDeferSegments.
	DefaultMergeDeferSegments = 128
)

// tier returns the size tier of a segment of n bytes.
func (e *Engine) tier(n int64) int {
	fan := float64(e.opts.CompactionFanout)
	base := float64(e.opts.CompactionMaxSegmentBytes) / (fan * fan * fan)
	if float64(n) < base {
		return 0
	}
	return 1 + int(math.Log(float64(n)/base)/math.Log(fan))
}

// planMerge returns the next run of segments to merge, oldest first, or nil.
func (e *Engine) planMerge(force bool) []*segHandle {
	e.mu.RLock()
	segs := slices.Clone(e.segs)
	e.mu.RUnlock()
	e.pubMu.Lock()
	order := slices.Clone(e.manifest.Segments)
	e.pubMu.Unlock()
	pos := make(map[string]int, len(order))
	for i, n := range order {
		pos[n] = i
	}
	maxBytes, fan := e.opts.CompactionMaxSegmentBytes, e.opts.CompactionFanout
	mergeable := func(h *segHandle) bool {
		return h.info.Bytes < maxBytes/2 && !e.mergeFailed[h.name]
	}
	// adjacent: next to each other in the manifest too (a quarantined
	// segment between two served ones keeps them apart).
	adjacent := func(a, b *segHandle) bool { return pos[b.name] == pos[a.name]+1 }
	window := func(run []*segHandle) []*segHandle {
		var total int64
		n := 0
		for n < len(run) && n < fan && total+run[n].info.Bytes <= maxBytes {
			total += run[n].info.Bytes
			n++
		}
		if n < 2 {
			return nil
		}
		return run[:n]
	}
	for i := 0; i < len(segs); {
		if !mergeable(segs[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(segs) && mergeable(segs[j]) && adjacent(segs[j-1], segs[j]) {
			j++
		}
		run := segs[i:j]
		if force {
			if w := window(run); w != nil {
				return w
			}
		} else {
			for a := 0; a < len(run); {
				t := e.tier(run[a].info.Bytes)
				b := a + 1
				for b < len(run) && e.tier(run[b].info.Bytes) == t {
					b++
				}
				if b-a >= fan {
					if w := window(run[a:b]); w != nil {
						return w
					}
				}
				a = b
			}
		}
		i = j
	}
	return nil
}

// Compact merges segments until the policy, ignoring tiers, finds nothing
// more to merge (see the policy above). It waits for a background merge in
// progress and holds off the next one.
func (e *Engine) Compact(ctx context.Context) (store.CompactResult, error) {
	e.lcMu.Lock()
	defer e.lcMu.Unlock()
	start := time.Now()
	res := store.CompactResult{SegmentsBefore: e.segmentCount()}
	for {
		n, bytes, err := e.compactOnceLocked(ctx, true)
		res.Merges += n
		res.BytesWritten += bytes
		if err != nil {
			res.SegmentsAfter, res.Took = e.segmentCount(), time.Since(start)
			return res, err
		}
		if n == 0 {
			break
		}
	}
	if _, err := e.collectValues(false); err != nil {
		e.log.Warn("value collection after compaction failed", "err", err)
	}
	if res.Merges > 0 {
		e.mergesDone()
	}
	res.SegmentsAfter, res.Took = e.segmentCount(), time.Since(start)
	return res, nil
}

// mergesWait reports whether a background merge waits now: ingest is
// pressed and at most Options.MergeDeferSegments segments are still to
// merge. Why: under a flood the merges took a quarter of the server's CPU
// from the ingest that the senders were refused for, and stopping them
// let it accept every span its saturation rate allows (docs/operations.md,
// "A flood is refused, not held"); the bound keeps the segments a query
// probes, and the debt to catch up, from growing without end.
func (e *Engine) mergesWait() bool {
	b := e.opts.Background
	if b == nil || e.opts.MergeDeferSegments < 0 || !b.Pressed() {
		return false
	}
	maxBytes := e.opts.CompactionMaxSegmentBytes
	e.mu.RLock()
	defer e.mu.RUnlock()
	open := 0
	for _, h := range e.segs {
		if h.info.Bytes < maxBytes/2 {
			open++
		}
	}
	return open <= e.opts.MergeDeferSegments
}

func (e *Engine) segmentCount() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.segs)
}

// compactOnceLocked performs at most one merge. Callers hold lcMu.
func (e *Engine) compactOnceLocked(ctx context.Context, force bool) (merges int, bytes int64, err error) {
	run := e.planMerge(force)
	if run == nil {
		return 0, 0, nil
	}
	if !force && e.mergesWait() {
		e.m.mergesDeferred.Add(1)
		return 0, 0, nil
	}
	res, err := e.rewrite(ctx, run, e.dropper())
	if err != nil {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) {
			// Do not retry these inputs until restart: a damaged block or
			// value would fail every attempt.
			for _, h := range run {
				e.mergeFailed[h.name] = true
			}
			e.m.mergeErrors.Add(1)
		}
		return 0, 0, err
	}
	e.m.merges.Add(1)
	e.m.segmentsMerged.Add(int64(len(run)))
	return 1, res.info.Bytes, nil
}

// rewrite merges run into one new segment (leaving out what drop reports)
// and publishes it in the run's place. It returns once the inputs are
// retired. Callers hold lcMu.
func (e *Engine) rewrite(ctx context.Context, run []*segHandle, drop dropFunc) (mergeResult, error) {
	if e.closed.Load() {
		return mergeResult{}, ErrClosed
	}
	name := e.allocSegmentName()
	var res mergeResult
	var err error
	e.runMerge(func() { res, err = e.merge(ctx, run, name, drop) })
	if err != nil {
		e.fs.Remove(filepath.Join(e.dir, name))
		return res, err
	}
	e.m.mergeBytes.Add(res.info.Bytes)
	e.m.mergeNanos.Add(res.took.Nanoseconds())
	if err := e.replaceSegments(run, res.h); err != nil {
		if res.h != nil {
			res.h.r.Close()
		}
		return res, err
	}
	e.log.Info("segments rewritten", "inputs", res.inputIDs, "output", name, "spans", res.info.Spans,
		"dropped", res.dropped, "duplicates", res.dupes, "bytes_in", res.bytesIn, "bytes_out", res.info.Bytes,
		"took", res.took.String())
	return res, nil
}

// allocSegmentName reserves the next segment number. A crash before the
// manifest names the file leaves an unpublished file that Open removes.
func (e *Engine) allocSegmentName() string {
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	n := e.manifest.NextSegment
	e.manifest.NextSegment++
	return fmt.Sprintf("%016d.seg", n)
}

// replaceSegments publishes out (nil: nothing) in place of run, which must be
// adjacent in the manifest, through one manifest write, then swaps the read
// view in one step (queries see either the inputs or the output, never both
// or neither) and retires the inputs.
func (e *Engine) replaceSegments(run []*segHandle, out *segHandle) error {
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	at := slices.Index(e.manifest.Segments, run[0].name)
	if at < 0 || at+len(run) > len(e.manifest.Segments) {
		return fmt.Errorf("replace segments: %s is not published", run[0].name)
	}
	for i, h := range run {
		if e.manifest.Segments[at+i] != h.name {
			return fmt.Errorf("replace segments: %s and %s are not adjacent in the manifest", run[0].name, h.name)
		}
	}
	e.mu.RLock()
	i := slices.Index(e.segs, run[0])
	served := i >= 0 && i+len(run) <= len(e.segs) && slices.Equal(e.segs[i:i+len(run)], run)
	e.mu.RUnlock()
	if !served {
		return fmt.Errorf("replace segments: %s..%s are not served together", run[0].name, run[len(run)-1].name)
	}
	next := e.manifest
	next.Segments = slices.Clone(e.manifest.Segments[:at])
	if out != nil {
		next.Segments = append(next.Segments, out.name)
	}
	next.Segments = append(next.Segments, e.manifest.Segments[at+len(run):]...)
	renamed, err := writeManifestFS(e.fs, e.opts.Dir, next)
	if err != nil && !renamed {
		return err
	}
	e.manifest = next
	e.mu.Lock()
	var segs []*segHandle
	segs = append(segs, e.segs[:i]...)
	if out != nil {
		segs = append(segs, out)
	}
	segs = append(segs, e.segs[i+len(run):]...)
	e.segs = segs
	e.mu.Unlock()
	// With the manifest's rename not known durable, a crash may bring back
	// the old manifest: keep the inputs' files then (the next Open removes
	// whichever set the surviving manifest does not name).
	e.retire(run, err == nil)
	if err != nil {
		return fmt.Errorf("manifest published but not synced: %w", err)
	}
	return nil
}

// retire takes segments out of service: their cached blocks are dropped and
// their files removed (with remove), while the open descriptors stay valid
// for the queries whose views hold them; each is closed when the last of
// those views is released (at once when none holds it), so a merge's inputs
// do not outlive the queries that were reading them.
func (e *Engine) retire(hs []*segHandle, remove bool) {
	for _, h := range hs {
		e.cache.dropSegment(h)
		if remove {
			if err := e.fs.Remove(filepath.Join(e.dir, h.name)); err != nil {
				e.log.Warn("could not remove retired segment", "segment", h.name, "err", err)
			}
		}
		h.retire()
	}
}

// runMerge runs merge through the process's policy (Options.Background), or
// as it is without one.
func (e *Engine) runMerge(merge func()) {
	if b := e.opts.Background; b != nil {
		b.RunMerge(e.ingestActive, merge)
		return
	}
	merge()
}

// runSeal runs seal through the process's policy, or as it is without one.
func (e *Engine) runSeal(seal func()) {
	if b := e.opts.Background; b != nil {
		b.RunSeal(seal)
		return
	}
	seal()
}

// mergesDone tells the process's policy that a run of merges has ended.
func (e *Engine) mergesDone() {
	if b := e.opts.Background; b != nil {
		b.MergesDone()
	}
}
