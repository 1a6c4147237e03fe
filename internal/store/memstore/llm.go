package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// dimension is the value of an LLM span for one group-by key.
func dimension(sp *model.Span, dim string) string {
	l := sp.LLM
	switch dim {
	case "model":
		return l.Model()
	case "provider":
		return l.Provider
	case "service":
		return sp.Service
	case "operation":
		return l.Operation
	case "session":
		return l.SessionID
	case "user":
		return l.UserID
	case "agent":
		return l.AgentName
	case "hour":
		return time.Unix(0, int64(sp.StartTimeUnixNano)).UTC().Truncate(time.Hour).Format(time.RFC3339)
	case "day":
		return time.Unix(0, int64(sp.StartTimeUnixNano)).UTC().Truncate(24 * time.Hour).Format("2006-01-02")
	}
	return ""
}

// group gathers the measures of one group of LLM spans.
type group struct {
	key       map[string]string
	bucket    int64
	m         store.Measures
	traces    map[model.TraceID]bool
	latencies []uint64
	ttfts     []uint64
	users     []string
}

func (g *group) add(sp *model.Span) {
	l, m := sp.LLM, &g.m
	if m.Spans == 0 || sp.StartTimeUnixNano < m.MinStart {
		m.MinStart = sp.StartTimeUnixNano
	}
	m.MaxEnd = max(m.MaxEnd, sp.EndTimeUnixNano)
	m.Spans++
	if sp.StatusCode == model.StatusError {
		m.Errors++
	}
	if l.Counted {
		m.Counted++
		// A negative count means "not reported" (model.LLM): it adds nothing.
		m.InputTokens += max(l.InputTokens, 0)
		m.OutputTokens += max(l.OutputTokens, 0)
		m.CacheReadTokens += max(l.CacheReadTokens, 0)
		m.CacheCreationTokens += max(l.CacheCreationTokens, 0)
		m.ReasoningTokens += max(l.ReasoningTokens, 0)
		m.CostNanoUSD += max(l.CostNanoUSD, 0)
	}
	if !g.traces[sp.TraceID] {
		g.traces[sp.TraceID] = true
		m.Traces++
	}
	g.latencies = append(g.latencies, sp.Duration())
	if l.TimeToFirstTokenNanos != 0 {
		g.ttfts = append(g.ttfts, l.TimeToFirstTokenNanos)
	}
	if l.UserID != "" && !slices.Contains(g.users, l.UserID) {
		g.users = append(g.users, l.UserID)
	}
}

// groups groups the project's LLM spans matching f by the dimensions, and
// by time bucket of step when step is positive.
func (s *Store) groups(ctx context.Context, project string, f *query.Filter, dims []string, step time.Duration) ([]*group, error) {
	for _, d := range dims {
		if !store.ValidLLMGroupKey(d) {
			return nil, fmt.Errorf("unknown group_by %q (use %v): %w", d, store.LLMGroupKeys, store.ErrBadRequest)
		}
	}
	if f.NeedsTrace() {
		return nil, fmt.Errorf("trace-level conditions are not supported in LLM statistics: %w", store.ErrBadRequest)
	}
	spans, err := s.matching(ctx, project, f)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*group{}
	var out []*group
	for i := range spans {
		sp := &spans[i]
		if sp.LLM == nil {
			continue
		}
		var b int64
		if step > 0 {
			b = int64(sp.StartTimeUnixNano) / int64(step) * int64(step/time.Second)
		}
		parts := []string{fmt.Sprint(b)}
		for _, d := range dims {
			parts = append(parts, dimension(sp, d))
		}
		k := strings.Join(parts, "\x00")
		g := byKey[k]
		if g == nil {
			g = &group{key: map[string]string{}, bucket: b, traces: map[model.TraceID]bool{}}
			for _, d := range dims {
				g.key[d] = dimension(sp, d)
			}
			byKey[k] = g
			out = append(out, g)
		}
		g.add(sp)
	}
	return out, nil
}

func (s *Store) llmStats(ctx context.Context, project string, q *store.LLMQuery, step time.Duration) (store.LLMStats, error) {
	gs, err := s.groups(ctx, project, &q.Filter, q.GroupBy, step)
	if err != nil {
		return store.LLMStats{}, err
	}
	out := store.LLMStats{Groups: make([]store.LLMGroup, 0, len(gs))} // exact quantiles: QuantileError 0
	for _, g := range gs {
		g.m.Latency, g.m.TTFT = quantiles(g.latencies), quantiles(g.ttfts)
		out.Groups = append(out.Groups, store.LLMGroup{Key: g.key, Bucket: g.bucket, M: g.m})
	}
	slices.SortStableFunc(out.Groups, func(a, b store.LLMGroup) int {
		if step > 0 {
			return cmp.Compare(a.Bucket, b.Bucket)
		}
		return cmp.Or(cmp.Compare(b.M.CostNanoUSD, a.M.CostNanoUSD), cmp.Compare(b.M.Spans, a.M.Spans))
	})
	return out, nil
}

// LLMStats groups the LLM spans matching q.
func (s *Store) LLMStats(ctx context.Context, project string, q *store.LLMQuery) (store.LLMStats, error) {
	return s.llmStats(ctx, project, q, 0)
}

// LLMTimeseries groups the LLM spans matching q per bucket of step.
func (s *Store) LLMTimeseries(ctx context.Context, project string, q *store.LLMQuery, step time.Duration) (store.LLMStats, error) {
	if step < time.Second || step%time.Second != 0 {
		return store.LLMStats{}, fmt.Errorf("step %s is not a whole number of seconds of at least 1s: %w", step, store.ErrBadRequest)
	}
	return s.llmStats(ctx, project, q, step)
}

// Sessions summarises the sessions of the LLM spans matching f.
func (s *Store) Sessions(ctx context.Context, project string, f *query.Filter) ([]store.SessionSummary, store.Result, error) {
	gs, err := s.groups(ctx, project, f, []string{"session"}, 0)
	if err != nil {
		return nil, store.Result{}, err
	}
	var out []store.SessionSummary
	for _, g := range gs {
		if id := g.key["session"]; id != "" {
			slices.Sort(g.users)
			out = append(out, store.SessionSummary{ID: id, Users: g.users, M: g.m})
		}
	}
	return out, store.Result{}, nil
}

// SessionTraces returns the traces holding a matching span of the session,
// oldest first.
func (s *Store) SessionTraces(ctx context.Context, project, id string, f *query.Filter) ([][]model.Span, store.Result, error) {
	if f.NeedsTrace() {
		return nil, store.Result{}, fmt.Errorf("trace-level conditions are not supported in sessions: %w", store.ErrBadRequest)
	}
	spans, err := s.matching(ctx, project, f)
	if err != nil {
		return nil, store.Result{}, err
	}
	seen := map[model.TraceID]bool{}
	var out [][]model.Span
	for i := range spans {
		sp := &spans[i]
		if sp.LLM == nil || sp.LLM.SessionID != id || seen[sp.TraceID] {
			continue
		}
		seen[sp.TraceID] = true
		out = append(out, s.trace(project, sp.TraceID))
	}
	slices.SortFunc(out, func(a, b []model.Span) int {
		return cmp.Compare(a[0].StartTimeUnixNano, b[0].StartTimeUnixNano)
	})
	return out, store.Result{}, nil
}
