package engine

import (
	"github.com/rastro-dev/rastro/internal/model"
)

// shadower answers, for one query, whether a span read from one source has a
// newer copy in a newer source of the view (the same trace id and span id,
// re-sent later). Only the newest copy of a span may appear in results, so
// that a re-send is idempotent. Lookups are memoised per (source, trace).
type shadower struct {
	e       *Engine
	v       view
	project string
	res     *queryResult
	memo    map[shadowKey]map[model.SpanID]struct{}
}

type shadowKey struct {
	rank  int
	trace model.TraceID
}

func newShadower(e *Engine, v view, project string, res *queryResult) *shadower {
	return &shadower{e: e, v: v, project: project, res: res, memo: map[shadowKey]map[model.SpanID]struct{}{}}
}

// shadowCheck is the question scan hands emit with each span: is there a
// newer copy of it? A value, not a closure, so that asking costs nothing
// for the spans emit does not keep (a closure per matching span was a
// tenth of a search's allocations).
type shadowCheck struct {
	sh   *shadower
	rank int
	s    *model.Span
}

// shadowed reports whether a newer source holds a copy of the span.
func (c shadowCheck) shadowed() bool { return c.sh.shadowed(c.rank, c.s) }

// shadowed reports whether a source newer than rank holds a copy of s.
func (sh *shadower) shadowed(rank int, s *model.Span) bool {
	for j := 0; j < rank; j++ {
		if _, ok := sh.spanIDs(j, s.TraceID)[s.SpanID]; ok {
			return true
		}
	}
	return false
}

// spanIDs returns the span ids that source rank holds for a trace (nil if none).
func (sh *shadower) spanIDs(rank int, trace model.TraceID) map[model.SpanID]struct{} {
	k := shadowKey{rank, trace}
	if ids, ok := sh.memo[k]; ok {
		return ids
	}
	var ids map[model.SpanID]struct{}
	if rank < len(sh.v.mems) {
		for _, r := range sh.v.mems[rank].traceRows(sh.project, trace) {
			if ids == nil {
				ids = map[model.SpanID]struct{}{}
			}
			ids[r.span.SpanID] = struct{}{}
		}
	} else {
		seg := sh.v.segs[rank-len(sh.v.mems)]
		has, err := seg.r.ContainsTrace(sh.project, trace)
		if err == nil && has {
			var spans []model.Span
			spans, err = seg.r.FindTrace(sh.project, trace)
			for i := range spans {
				if ids == nil {
					ids = map[model.SpanID]struct{}{}
				}
				ids[spans[i].SpanID] = struct{}{}
			}
		}
		if err != nil {
			sh.e.readFailed(sh.res, seg.name, err)
		}
	}
	sh.memo[k] = ids
	return ids
}
