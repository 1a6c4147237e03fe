package engine

import (
	"context"
	"slices"
	"sort"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// Sessions summarises every session of the LLM spans matching f, in no
// particular order (callers sort). Summaries carry no latency percentiles
// (M.Latency and M.TTFT are nil).
func (e *Engine) Sessions(ctx context.Context, project string, f *query.Filter) ([]store.SessionSummary, store.Result, error) {
	var res queryResult
	p := newProjection([]string{"session", "user"}, false)
	p.noSketches, p.sessionList = true, true
	entries, err := e.llmEntries(ctx, project, f, p, &res)
	if err != nil {
		return nil, res.Result, err
	}
	byID := make(map[string]int, len(entries)) // session -> index in out
	out := make([]store.SessionSummary, 0, len(entries))
	for i := range entries {
		en := &entries[i]
		if en.Key.Session == "" {
			continue
		}
		j, ok := byID[en.Key.Session]
		if !ok {
			j = len(out)
			byID[en.Key.Session] = j
			out = append(out, store.SessionSummary{ID: en.Key.Session})
		}
		s := &out[j]
		if en.M.Spans > 0 { // else the entry only names a user (sessionEntries)
			m := measures(&en.M) // no sketches (p.noSketches): counts only
			s.M.AddCounts(&m)
		}
		if u := en.Key.User; u != "" && !slices.Contains(s.Users, u) {
			s.Users = append(s.Users, u)
		}
	}
	for i := range out {
		slices.Sort(out[i].Users)
	}
	return finish(out, &res)
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
