package engine

import (
	"context"
	"maps"
	"slices"

	"github.com/rastro-dev/rastro/internal/store"
)

// Status reports the engine's state for GET /api/v1/status: read-only,
// from the same view and counters as Stats, over every project.
func (e *Engine) Status(ctx context.Context) (store.Status, error) {
	if e.closed.Load() {
		return store.Status{}, ErrClosed
	}
	v := e.view()
	defer v.release()
	counts := map[string]*store.ProjectCount{}
	count := func(name string) *store.ProjectCount {
		c := counts[name]
		if c == nil {
			c = &store.ProjectCount{Name: name}
			counts[name] = c
		}
		return c
	}
	var st store.Status
	for _, m := range v.mems {
		m.mu.Lock()
		for pid, name := range *m.names.Load() {
			c := count(name)
			c.Spans += m.perProject[pid].spans
			c.Traces += m.perProject[pid].traces
		}
		created := m.created
		m.mu.Unlock()
		if live := m.live.Load(); live > 0 {
			st.BufferSpans += live
			if st.OldestUnsealed.IsZero() || created.Before(st.OldestUnsealed) {
				st.OldestUnsealed = created
			}
		}
		st.BufferBytes += m.bytes.Load()
	}
	tiers := map[int]*store.TierCount{}
	for _, s := range v.segs {
		st.SegmentBytes += s.info.Bytes
		for _, p := range s.info.Projects {
			c := count(p.Name)
			c.Spans += int64(p.Spans)
			c.Traces += int64(p.Traces)
		}
		t := e.tier(s.info.Bytes)
		if tiers[t] == nil {
			tiers[t] = &store.TierCount{Tier: t}
		}
		tiers[t].Segments++
		tiers[t].Bytes += s.info.Bytes
	}
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		st.Projects = append(st.Projects, *counts[name])
	}
	for _, t := range slices.Sorted(maps.Keys(tiers)) {
		st.Tiers = append(st.Tiers, *tiers[t])
	}
	st.MaxBufferBytes = e.opts.MaxBufferBytes
	st.WALBytes = e.wal.Size()
	st.ValueBytes = e.values.Stats().DiskBytes
	st.DiskBytes = st.SegmentBytes + st.WALBytes + st.ValueBytes
	st.Retention = e.opts.Retention
	st.ProjectRetention = maps.Clone(e.opts.ProjectRetention)
	e.erMu.Lock()
	for _, r := range e.erasures.Erasures {
		switch r.State {
		case store.ErasePending:
			st.ErasuresPending++
		case store.EraseHidden:
			st.ErasuresHidden++
		}
	}
	e.erMu.Unlock()
	e.mu.RLock()
	st.Quarantined = slices.Clone(e.quarantined)
	e.mu.RUnlock()
	if p := e.sealErr.Load(); p != nil {
		st.SealError = (*p).Error()
	}
	return st, nil
}

var _ store.StatusReporter = (*Engine)(nil)
