package engine

import (
	"context"
	"errors"
	"slices"
	"time"
)

// The lifecycle loop: one goroutine that runs, one at a time (lcMu), due
// erasure passes, retention sweeps and compaction merges. It never holds a
// lock that ingest or queries wait on while it reads or writes segments.

// retentionSweepEvery is how often retention looks for expired segments.
const retentionSweepEvery = time.Minute

// rewriteExpiredFraction: a segment straddling the retention cutoff is
// rewritten once this fraction of its blocks has expired (until then its
// expired spans are hidden from queries, not yet removed).
const rewriteExpiredFraction = 0.25

func (e *Engine) kickLifecycle() {
	select {
	case e.lcKick <- struct{}{}:
	default:
	}
}

func (e *Engine) lifecycleLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.opts.LifecycleInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-e.lcKick:
		case <-t.C:
		}
		e.lifecycleOnce(e.lcCtx)
	}
}

// lifecycleOnce runs whatever is due.
func (e *Engine) lifecycleOnce(ctx context.Context) {
	e.lcMu.Lock()
	defer e.lcMu.Unlock()
	logErr := func(what string, err error) {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) {
			e.log.Error(what+" failed; retrying later", "err", err)
		}
	}
	logErr("erasure pass", e.erasePassLocked(ctx, false))
	if e.hasRetention() && time.Since(e.lastSweep) >= retentionSweepEvery {
		e.lastSweep = time.Now()
		logErr("retention sweep", e.sweepRetentionLocked(ctx))
	}
	if !e.opts.NoCompaction {
		merged := false
		for ctx.Err() == nil {
			n, _, err := e.compactOnceLocked(ctx, false)
			logErr("compaction", err)
			if err != nil || n == 0 {
				break
			}
			merged = true
		}
		if merged {
			_, err := e.collectValues(false)
			logErr("value collection", err)
			e.mergesDone()
		}
	}
}

func (e *Engine) hasRetention() bool {
	if e.opts.Retention > 0 {
		return true
	}
	for _, d := range e.opts.ProjectRetention {
		if d > 0 {
			return true
		}
	}
	return false
}

// SweepRetention drops the segments whose every span has expired (from their
// resident summary, without reading them) and rewrites those of which at
// least a quarter of the blocks has expired, then collects the stored values
// left unreferenced. The lifecycle loop runs it every minute.
func (e *Engine) SweepRetention(ctx context.Context) error {
	e.lcMu.Lock()
	defer e.lcMu.Unlock()
	return e.sweepRetentionLocked(ctx)
}

func (e *Engine) sweepRetentionLocked(ctx context.Context) error {
	if !e.hasRetention() {
		return nil
	}
	e.mu.RLock()
	segs := slices.Clone(e.segs)
	e.mu.RUnlock()
	changed := false
	for _, h := range segs {
		if err := ctx.Err(); err != nil {
			return err
		}
		all, some := true, false
		for _, p := range h.info.Projects {
			c := e.cutoff(p.Name)
			if c == 0 || p.MaxStart >= c {
				all = false
			}
			if c != 0 && p.MinStart < c {
				some = true
			}
		}
		switch {
		case all:
			if err := e.replaceSegments([]*segHandle{h}, nil); err != nil {
				return err
			}
			e.m.retentionDropped.Add(1)
			e.log.Info("retention dropped a segment", "segment", h.name, "spans", h.info.Spans)
			changed = true
		case some && e.expiredFraction(h) >= rewriteExpiredFraction:
			res, err := e.rewrite(ctx, []*segHandle{h}, e.dropper())
			if err != nil {
				return err
			}
			e.m.retentionRewritten.Add(1)
			e.log.Info("retention rewrote a segment", "segment", h.name, "expired_spans", res.dropped)
			changed = true
		}
	}
	if changed {
		_, err := e.collectValues(false)
		return err
	}
	return nil
}

// expiredFraction is the fraction of a segment's blocks wholly expired.
func (e *Engine) expiredFraction(h *segHandle) float64 {
	if len(h.blocks) == 0 {
		return 0
	}
	n := 0
	for i := range h.blocks {
		b := &h.blocks[i]
		if c := e.cutoff(b.Project); c != 0 && b.MaxStart < c {
			n++
		}
	}
	return float64(n) / float64(len(h.blocks))
}
