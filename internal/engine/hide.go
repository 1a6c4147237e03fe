package engine

import (
	"sync/atomic"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// What queries must not show although it may still be stored: spans older
// than the retention cutoff (until the sweep removes them) and the traces of
// acknowledged erasures (until the erasure pass removes them). Seals and
// merges leave both out of what they write (dropper).

// hideSet is an immutable set of erased traces; a change publishes a new set
// with a new generation (part of cache keys).
type hideSet struct {
	gen    uint64
	traces map[traceKey]*atomic.Int64 // erased trace -> spans physically removed so far
}

func (h *hideSet) has(project string, id model.TraceID) bool {
	if len(h.traces) == 0 {
		return false
	}
	_, ok := h.traces[traceKey{project, id}]
	return ok
}

// hidden returns the current set (never nil once Open returned).
func (e *Engine) hidden() *hideSet { return e.hide.Load() }

// setHidden publishes a set of erased traces built by edit from a copy of
// the current one. Callers hold erMu.
func (e *Engine) setHidden(edit func(map[traceKey]*atomic.Int64)) {
	old := e.hide.Load()
	next := &hideSet{gen: old.gen + 1, traces: make(map[traceKey]*atomic.Int64, len(old.traces))}
	for k, v := range old.traces {
		next.traces[k] = v
	}
	edit(next.traces)
	e.hide.Store(next)
}

// retentionFor returns the retention of a project (0 = keep everything).
func (e *Engine) retentionFor(project string) time.Duration {
	if d, ok := e.opts.ProjectRetention[project]; ok {
		return d
	}
	return e.opts.Retention
}

// cutoff returns the start time (unix ns) below which a project's spans
// have expired, or 0. It moves by whole minutes, so that results cached by
// window stay valid for a minute.
func (e *Engine) cutoff(project string) uint64 {
	d := e.retentionFor(project)
	if d <= 0 {
		return 0
	}
	return uint64(e.now().Add(-d).Truncate(time.Minute).UnixNano())
}

// visible returns f with its window start raised to the retention cutoff
// (f itself when retention does not cut it).
func (e *Engine) visible(project string, f *query.Filter) *query.Filter {
	c := e.cutoff(project)
	if c == 0 || f.Start >= c {
		return f
	}
	g := *f
	g.Start = c
	if g.End != 0 && g.End <= c {
		g.End = c // an empty window
	}
	return &g
}

// dropper reports the spans a seal or merge leaves out: expired ones and
// those of erased traces (counted for the erasure's report).
func (e *Engine) dropper() dropFunc {
	hs := e.hidden()
	cutoffs := map[string]uint64{}
	return func(project string, s *model.Span) bool {
		c, ok := cutoffs[project]
		if !ok {
			c = e.cutoff(project)
			cutoffs[project] = c
		}
		if c != 0 && s.StartTimeUnixNano < c {
			return true
		}
		if n, ok := hs.traces[traceKey{project, s.TraceID}]; ok {
			n.Add(1)
			return true
		}
		return false
	}
}

// taintedBlocks returns, for the LLM statistics of a project, the blocks of
// s holding erased traces (their stored aggregates include the erased spans,
// so they must be read row by row) and whether the lookup failed (then no
// aggregate of s may be used). It is cached per hide-set generation.
func (e *Engine) taintedBlocks(s *segHandle, project string) (map[int]bool, bool) {
	hs := e.hidden()
	if len(hs.traces) == 0 {
		return nil, false
	}
	s.taintMu.Lock()
	defer s.taintMu.Unlock()
	if s.taintGen == hs.gen && s.taint != nil {
		t, ok := s.taint[project]
		if ok {
			return t.blocks, t.failed
		}
	} else {
		s.taintGen, s.taint = hs.gen, map[string]taint{}
	}
	var t taint
	for k := range hs.traces {
		if k.project != project {
			continue
		}
		blocks, err := s.r.TraceBlocks(project, k.trace)
		if err != nil {
			t.failed = true
			break
		}
		for _, b := range blocks {
			if t.blocks == nil {
				t.blocks = map[int]bool{}
			}
			t.blocks[b] = true
		}
	}
	s.taint[project] = t
	return t.blocks, t.failed
}

type taint struct {
	blocks map[int]bool
	failed bool
}
