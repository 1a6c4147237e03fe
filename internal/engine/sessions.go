package engine

import (
	"context"
	"slices"
	"sort"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
)

// Sessions summarises every session of the LLM spans matching f, in no
// particular order (callers sort). Summaries carry no latency percentiles
// (M.Latency and M.TTFT are nil). The returned slice and the summaries'
// Users may be shared with the engine's result cache: callers only read
// them.
//
// The summaries of the segments' part are cached with that part (see
// llmParts); a query adds the write buffer's sessions to a copy of them,
// so that a repeated list neither merges every segment's sessions nor
// summarises them again.
func (e *Engine) Sessions(ctx context.Context, project string, f *query.Filter) ([]store.SessionSummary, store.Result, error) {
	var res queryResult
	p := newProjection([]string{"session", "user"}, false)
	p.noSketches, p.sessionList = true, true
	v := e.view()
	defer v.release()
	seg, mem, key, err := e.llmParts(ctx, v, project, f, p, &res)
	if err != nil {
		return nil, res.Result, err
	}
	var out []store.SessionSummary
	if key != "" {
		skey := key + "|sessions"
		got, ok := e.llmCache.getAny(skey)
		if !ok {
			l := newSessionList(seg)
			e.llmCache.put(skey, l, len(l.out))
			got = l
		}
		out = got.(*sessionList).extend(mem)
	} else {
		out = newSessionList(append(slices.Clip(seg), mem...)).out
	}
	return finish(out, &res)
}

// sessionList is the sessions of a list of entries (projected for the
// sessions list), with an index by id.
type sessionList struct {
	out  []store.SessionSummary
	byID map[string]int // session -> index in out
}

func newSessionList(entries []segment.AggEntry) *sessionList {
	l := &sessionList{byID: make(map[string]int, len(entries)), out: make([]store.SessionSummary, 0, len(entries))}
	for i := range entries {
		l.add(&entries[i], nil)
	}
	for i := range l.out {
		slices.Sort(l.out[i].Users)
	}
	if cap(l.out) > 2*len(l.out) {
		l.out = slices.Clip(slices.Clone(l.out)) // cached: hold no spare room
	}
	return l
}

// extend returns the summaries of l with entries more added, leaving l
// (cached, shared) unchanged: without more, l's own slice.
func (l *sessionList) extend(more []segment.AggEntry) []store.SessionSummary {
	if len(more) == 0 {
		return l.out
	}
	out := &sessionList{out: slices.Clone(l.out), byID: l.byID}
	added := map[string]int{}
	for i := range more {
		out.add(&more[i], added)
	}
	return out.out
}

// add merges entry en into its session's summary. With added (extend),
// l.byID is read-only, sessions new to l are indexed in added, and a user
// is added to a copy of the summary's Users (which may be the cached
// summary's), kept sorted.
func (l *sessionList) add(en *segment.AggEntry, added map[string]int) {
	id := en.Key.Session
	if id == "" {
		return
	}
	j, ok := l.byID[id]
	if !ok && added != nil {
		j, ok = added[id]
	}
	if !ok {
		j = len(l.out)
		if added != nil {
			added[id] = j
		} else {
			l.byID[id] = j
		}
		l.out = append(l.out, store.SessionSummary{ID: id})
	}
	s := &l.out[j]
	if en.M.Spans > 0 { // else the entry only names a user (sessionEntries)
		m := measures(&en.M) // no sketches (p.noSketches): counts only
		s.M.AddCounts(&m)
	}
	if u := en.Key.User; u != "" && !slices.Contains(s.Users, u) {
		if added != nil {
			s.Users = slices.Clone(s.Users) // may be the cached summary's
		}
		s.Users = append(s.Users, u)
		if added != nil {
			slices.Sort(s.Users)
		}
	}
}

// SessionTraces returns the traces that hold a span of session id, oldest
// first, each with all its spans. Blocks whose stored aggregates do not name
// the session are not read.
func (e *Engine) SessionTraces(ctx context.Context, project, id string, f *query.Filter) ([][]model.Span, store.Result, error) {
	var res queryResult
	if err := noTraceConditions(f); err != nil {
		return nil, res.Result, err
	}
	traces := map[model.TraceID]bool{}
	v := e.view()
	defer v.release()
	err := e.llmScan(ctx, v, project, f, &res,
		func(*segHandle, string) bool { return false },
		func(s *segHandle, i int) bool {
			// Taken (skipped) when the block's aggregates prove the session absent.
			agg, err := e.blockAggregates(s, i)
			if err != nil {
				return false
			}
			for j := range agg {
				if agg[j].Key.Session == id {
					return false
				}
			}
			return true
		},
		func(s *model.Span) {
			if s.LLM.SessionID == id {
				traces[s.TraceID] = true
			}
		})
	if err != nil {
		return nil, res.Result, err
	}
	var out [][]model.Span
	for t := range traces {
		spans, r, err := e.Trace(ctx, project, t)
		res.Warnings = append(res.Warnings, r.Warnings...)
		if err != nil {
			return nil, res.Result, err
		}
		if len(spans) > 0 {
			out = append(out, spans)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0].StartTimeUnixNano < out[j][0].StartTimeUnixNano })
	return finish(out, &res)
}
