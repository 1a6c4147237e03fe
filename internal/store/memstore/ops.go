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
	"github.com/rastro-dev/rastro/internal/sketch"
	"github.com/rastro-dev/rastro/internal/store"
)

var _ store.ServiceReader = (*Store)(nil)

func (s *Store) opsSpans(ctx context.Context, project string, q *store.OpsQuery, needStep bool) ([]model.Span, error) {
	if needStep && (q.Step < time.Minute || q.Step%time.Minute != 0) {
		return nil, fmt.Errorf("%w: step %v must be a whole number of minutes", store.ErrBadRequest, q.Step)
	}
	if q.Filter == nil {
		return s.matching(ctx, project, &query.Filter{Start: q.Start, End: q.End, Service: q.Service, Name: q.Name})
	}
	f := *q.Filter
	f.Start, f.End = q.Start, q.End
	spans, err := s.matching(ctx, project, &f)
	return slices.DeleteFunc(spans, func(sp model.Span) bool {
		return q.Service != "" && sp.Service != q.Service || q.Name != "" && sp.Name != q.Name
	}), err
}

// bucketOf is the start of the step-wide bucket of a span: buckets start at
// multiples of step since the epoch, and spans are placed by the whole
// minute of their start (as the engine's per-minute aggregates do).
func bucketOf(start uint64, step time.Duration) uint64 {
	minute := start / 60e9 * 60e9
	return minute - minute%uint64(step)
}

// RED computes rate, errors and exact duration percentiles span by span.
func (s *Store) RED(ctx context.Context, project string, q *store.OpsQuery) ([]store.REDSeries, store.Result, error) {
	spans, err := s.opsSpans(ctx, project, q, true)
	if err != nil {
		return nil, store.Result{}, err
	}
	type acc struct {
		calls, errors int64
		durations     []uint64
	}
	type series struct {
		total   acc
		buckets map[uint64]*acc
	}
	add := func(a *acc, sp *model.Span) {
		a.calls++
		if sp.StatusCode == model.StatusError {
			a.errors++
		}
		a.durations = append(a.durations, sp.Duration())
	}
	groups := map[[2]string]*series{}
	for i := range spans {
		sp := &spans[i]
		k := [2]string{sp.Service, ""}
		if q.ByOperation {
			k[1] = sp.Name
			if q.NameOnly {
				k[0] = ""
			}
		}
		g := groups[k]
		if g == nil {
			g = &series{buckets: map[uint64]*acc{}}
			groups[k] = g
		}
		add(&g.total, sp)
		t := bucketOf(sp.StartTimeUnixNano, q.Step)
		if g.buckets[t] == nil {
			g.buckets[t] = &acc{}
		}
		add(g.buckets[t], sp)
	}
	var out []store.REDSeries
	for k, g := range groups {
		rs := store.REDSeries{Service: k[0], Operation: k[1], Calls: g.total.calls, Errors: g.total.errors, Latency: *quantiles(g.total.durations)}
		for t, b := range g.buckets {
			rs.Buckets = append(rs.Buckets, store.REDPoint{Start: t, Calls: b.calls, Errors: b.errors, Latency: *quantiles(b.durations)})
		}
		slices.SortFunc(rs.Buckets, func(a, b store.REDPoint) int { return cmp.Compare(a.Start, b.Start) })
		out = append(out, rs)
	}
	slices.SortFunc(out, func(a, b store.REDSeries) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), strings.Compare(a.Service, b.Service), strings.Compare(a.Operation, b.Operation))
	})
	return out, store.Result{}, nil
}

// Heatmap places each span in its duration bucket directly.
func (s *Store) Heatmap(ctx context.Context, project string, q *store.OpsQuery) (store.Heatmap, store.Result, error) {
	spans, err := s.opsSpans(ctx, project, q, true)
	if err != nil {
		return store.Heatmap{}, store.Result{}, err
	}
	type cell struct {
		t uint64
		h int
	}
	counts := map[cell]int64{}
	for i := range spans {
		counts[cell{bucketOf(spans[i].StartTimeUnixNano, q.Step), sketch.HeatmapBucket(spans[i].Duration())}]++
	}
	out := store.Heatmap{Bounds: sketch.HeatmapBounds(), Cells: make([]store.HeatCell, 0, len(counts))}
	for c, n := range counts {
		out.Cells = append(out.Cells, store.HeatCell{Start: c.t, Bucket: c.h, Count: n})
	}
	slices.SortFunc(out.Cells, func(a, b store.HeatCell) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Bucket, b.Bucket))
	})
	return out, store.Result{}, nil
}

// ErrorGroups groups the error spans by service, name, type and message.
func (s *Store) ErrorGroups(ctx context.Context, project string, q *store.OpsQuery, limit int) ([]store.ErrorGroup, store.Result, error) {
	spans, err := s.opsSpans(ctx, project, q, false)
	if err != nil {
		return nil, store.Result{}, err
	}
	groups := map[[4]string]*store.ErrorGroup{}
	for i := range spans {
		sp := &spans[i]
		if sp.StatusCode != model.StatusError {
			continue
		}
		typ, msg := sp.ErrorGroup()
		k := [4]string{sp.Service, sp.Name, typ, msg}
		g := groups[k]
		if g == nil {
			g = &store.ErrorGroup{Service: k[0], Operation: k[1], Type: typ, Message: msg, First: sp.StartTimeUnixNano}
			groups[k] = g
		}
		g.Count++
		g.First = min(g.First, sp.StartTimeUnixNano)
		// The sample is the latest span; among equal starts, the smallest ids.
		if g.Count == 1 || sp.StartTimeUnixNano > g.Last || sp.StartTimeUnixNano == g.Last &&
			cmp.Or(slices.Compare(sp.TraceID[:], g.Trace[:]), slices.Compare(sp.SpanID[:], g.Span[:])) < 0 {
			g.Last, g.Trace, g.Span = sp.StartTimeUnixNano, sp.TraceID, sp.SpanID
		}
	}
	out := make([]store.ErrorGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	store.SortErrorGroups(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, store.Result{}, nil
}
