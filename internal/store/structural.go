package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// QueryBudget bounds the work of a whole-trace query (QueryTraces).
type QueryBudget struct {
	Traces int           // candidate traces read whole; 0 = 20,000
	Time   time.Duration // 0 = 10 s
}

// QueryStats says what a whole-trace query read, and whether it stopped
// early on its budget (the answer is then partial: the traces found so far).
type QueryStats struct {
	CandidateSpans  int    // spans of the candidate filter read
	TracesInspected int    // traces read whole and evaluated
	Partial         bool   // the budget ran out before the candidates did
	Reason          string // why it is partial
	Candidate       string // the spanset filter that chose the candidate traces
}

// TraceMatch is one trace of a whole-trace query's answer.
type TraceMatch struct {
	Summary  TraceSummary
	Spans    []model.Span // the spans of the result spansets, by start time
	Spansets []query.Spanset
	All      []model.Span // every span of the trace (Spansets index into it)
}

// QueryTraces answers a TraceQL query that is more than one spanset filter
// (structural operators, pipelines) on any Reader: candidate traces are the
// traces with a span, started in f's window, that matches the query's most
// selective required filter; each is read whole and the query evaluated on
// all its spans. The newest candidates come first; it stops at limit
// matching traces (0: 20) or when the budget runs out (Partial). f carries the
// window; its other conditions are not allowed with such a query.
func QueryTraces(ctx context.Context, r Reader, project string, q *query.Query, f *query.Filter, limit int, budget QueryBudget) ([]TraceMatch, QueryStats, Result, error) {
	var stats QueryStats
	var res Result
	if f.Service != "" || f.Name != "" || f.HasStatus || f.MinDuration != 0 || f.MaxDuration != 0 || f.Content != nil {
		return nil, stats, res, fmt.Errorf("%w: service, name, status, min_duration, max_duration and content cannot be combined with a structural or pipeline query; put the conditions inside its { } filters", ErrBadRequest)
	}
	if limit <= 0 {
		limit = 20
	}
	if budget.Traces <= 0 {
		budget.Traces = 20000
	}
	if budget.Time <= 0 {
		budget.Time = 10 * time.Second
	}
	deadline := time.Now().Add(budget.Time)
	cand := candidate(q)
	stats.Candidate = cand.String()
	cf := query.Filter{Expr: cand, Start: f.Start, End: f.End}
	seen := map[model.TraceID]bool{}
	var out []TraceMatch
	var cur *Cursor
	// Candidate pages start small and grow: a span search's cost grows
	// with the spans it must find, and the first few candidates often
	// answer (a page of 1,000 cost 300 ms where 40 cost 3 ms, at 1M spans).
	page := min(max(2*limit, 16), 1000)
	for len(out) < limit {
		spans, next, r1, err := r.SearchSpans(ctx, project, &cf, page, cur)
		page = min(page*4, 1000)
		res.Warnings = append(res.Warnings, r1.Warnings...)
		if err != nil {
			return nil, stats, res, err
		}
		stats.CandidateSpans += len(spans)
		for i := range spans {
			id := spans[i].TraceID
			if seen[id] {
				continue
			}
			seen[id] = true
			if stats.TracesInspected >= budget.Traces || time.Now().After(deadline) {
				stats.Partial = true
				stats.Reason = fmt.Sprintf("stopped after %d candidate traces (budget %d traces, %v)", stats.TracesInspected, budget.Traces, budget.Time)
				return out, stats, res, nil
			}
			trace, r2, err := r.Trace(ctx, project, id)
			res.Warnings = append(res.Warnings, r2.Warnings...)
			if err != nil {
				return nil, stats, res, err
			}
			stats.TracesInspected++
			sets, err := q.Eval(trace)
			if err != nil {
				return nil, stats, res, fmt.Errorf("%w: %v", ErrBadRequest, err)
			}
			if len(sets) == 0 {
				continue
			}
			m := TraceMatch{Summary: Summarize(id, trace), Spansets: sets, All: trace}
			var idx []int
			for _, ss := range sets {
				idx = append(idx, ss.Spans...)
			}
			slices.Sort(idx)
			for _, x := range slices.Compact(idx) {
				m.Spans = append(m.Spans, trace[x])
			}
			m.Summary.Matched = len(m.Spans)
			out = append(out, m)
			if len(out) >= limit {
				break
			}
		}
		if next == nil {
			break
		}
		cur = next
	}
	return out, stats, res, nil
}

// candidate picks the filter that chooses candidate traces: of the
// filters every answer trace must have a span of, the one with the most
// conditions (a rough measure of selectivity); when there is none (|| at
// the top), every span.
func candidate(q *query.Query) query.Expr {
	var best query.Expr
	score := -1
	for _, e := range q.Required() {
		if query.UsesStructure(e) {
			continue // span:childCount cannot be matched span by span
		}
		s := e.String()
		n := strings.Count(s, "&&") + 1
		if s == "{ }" {
			n = 0
		}
		if n > score {
			best, score = e, n
		}
	}
	if best == nil {
		e, _ := query.ParseTraceQL("{ }")
		return e
	}
	return best
}
