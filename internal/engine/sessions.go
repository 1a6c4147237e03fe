package engine

import (
	"context"
	"slices"
	"sort"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
)

// SessionSummary describes one LLM session (or conversation).
type SessionSummary struct {
	ID    string
	Users []string
	M     segment.AggMeasures // First = M.MinStart, Last = M.MaxEnd
}

// Sessions summarises every session of the LLM spans matching f. Summaries
// carry no latency percentiles (M.Latency and M.TTFT are nil).
func (e *Engine) Sessions(ctx context.Context, project string, f *query.Filter) ([]SessionSummary, Result, error) {
	var res Result
	p := newProjection([]string{"session", "user"}, false)
	p.noSketches = true
	entries, err := e.llmEntries(ctx, project, f, p, &res)
	if err != nil {
		return nil, res, err
	}
	byID := map[string]*SessionSummary{}
	users := map[string]map[string]bool{}
	for i := range entries {
		en := &entries[i]
		if en.Key.Session == "" {
			continue
		}
		s := byID[en.Key.Session]
		if s == nil {
			s = &SessionSummary{ID: en.Key.Session}
			byID[en.Key.Session] = s
			users[en.Key.Session] = map[string]bool{}
		}
		mergeMeasures(&s.M, &en.M)
		if en.Key.User != "" {
			users[en.Key.Session][en.Key.User] = true
		}
	}
	out := make([]SessionSummary, 0, len(byID))
	for id, s := range byID {
		for u := range users[id] {
			s.Users = append(s.Users, u)
		}
		slices.Sort(s.Users)
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].M.MaxEnd != out[j].M.MaxEnd {
			return out[i].M.MaxEnd > out[j].M.MaxEnd
		}
		return out[i].ID < out[j].ID
	})
	return out, res, nil
}

// SessionTraces returns the traces that hold a span of session id, oldest
// first, each with all its spans. Blocks whose stored aggregates do not name
// the session are not read.
func (e *Engine) SessionTraces(ctx context.Context, project, id string, f *query.Filter) ([][]model.Span, Result, error) {
	var res Result
	traces := map[model.TraceID]bool{}
	err := e.llmScan(ctx, e.view(), project, f, &res,
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
		return nil, res, err
	}
	var out [][]model.Span
	for t := range traces {
		spans, r, err := e.Trace(ctx, project, t)
		res.Warnings = append(res.Warnings, r.Warnings...)
		if err != nil {
			return nil, res, err
		}
		if len(spans) > 0 {
			out = append(out, spans)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0].StartTimeUnixNano < out[j][0].StartTimeUnixNano })
	return out, res, nil
}
