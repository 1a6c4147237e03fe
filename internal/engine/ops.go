package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/sketch"
	"github.com/rastro-dev/rastro/internal/store"
)

var _ store.ServiceReader = (*Engine)(nil)

// opsCache holds a segment's decoded service aggregates: immutable, and
// small next to the spans (one entry per service, span name and minute).
type opsCache struct {
	mu      sync.Mutex
	blocks  map[int]segment.OpsAggregates
	project map[string]segment.OpsAggregates
}

// opsAggregates returns the stored service aggregates of block i, or of
// the whole segment for project when i < 0, cached.
func (e *Engine) opsAggregates(s *segHandle, i int, project string) (segment.OpsAggregates, error) {
	s.ops.mu.Lock()
	a, ok := s.ops.blocks[i]
	if i < 0 {
		a, ok = s.ops.project[project]
	}
	s.ops.mu.Unlock()
	if ok {
		return a, nil
	}
	var err error
	if i < 0 {
		a, err = s.r.SegmentOps(project)
	} else {
		a, err = s.r.BlockOps(i)
	}
	if err != nil {
		return segment.OpsAggregates{}, err
	}
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	if i < 0 {
		if s.ops.project == nil {
			s.ops.project = map[string]segment.OpsAggregates{}
		}
		s.ops.project[project] = a
	} else {
		if s.ops.blocks == nil {
			s.ops.blocks = map[int]segment.OpsAggregates{}
		}
		s.ops.blocks[i] = a
	}
	return a, nil
}

// opsParts gathers service aggregates covering exactly the spans of project
// in q's window: stored aggregates for segments and blocks wholly inside
// it, aggregation of rows elsewhere (the write buffer, blocks at the
// window's edges, blocks holding erased traces, segments written before
// service aggregates existed). Parts may hold other services and names
// than q's: callers filter the keys.
func (e *Engine) opsParts(ctx context.Context, project string, q *store.OpsQuery, res *queryResult) ([]segment.OpsAggregates, error) {
	f := &query.Filter{Start: q.Start, End: q.End, Service: q.Service, Name: q.Name}
	v := e.view()
	defer v.release()
	rows := segment.NewOpsAggregator()
	var parts []segment.OpsAggregates
	stored := func(s *segHandle, i int, project string) bool {
		if !s.r.HasOpsAggregates() {
			return false
		}
		a, err := e.opsAggregates(s, i, project)
		if err != nil {
			e.readFailed(res, s.name, err) // fall back to blocks, then rows
			return false
		}
		parts = append(parts, a)
		return true
	}
	err := e.aggScan(ctx, v, project, f, res, false,
		func(s *segHandle, project string) bool { return stored(s, -1, project) },
		func(s *segHandle, i int) bool { return stored(s, i, project) },
		rows.Add)
	if err != nil {
		return nil, err
	}
	return append(parts, rows.Aggregates()), nil
}

func opsMatch(q *store.OpsQuery, service, name string) bool {
	return (q.Service == "" || service == q.Service) && (q.Name == "" || name == q.Name)
}

// bucketStart is the start, unix ns, of the step-wide bucket holding minute.
func bucketStart(minute int64, step time.Duration) uint64 {
	ns := uint64(minute) * 1e9
	return ns - ns%uint64(step)
}

func checkStep(step time.Duration) error {
	if step < time.Minute || step%time.Minute != 0 {
		return fmt.Errorf("%w: step %v must be a whole number of minutes", store.ErrBadRequest, step)
	}
	return nil
}

// RED returns rate, errors and duration per service (and span name).
func (e *Engine) RED(ctx context.Context, project string, q *store.OpsQuery) ([]store.REDSeries, store.Result, error) {
	if err := checkStep(q.Step); err != nil {
		return nil, store.Result{}, err
	}
	var res queryResult
	parts, err := e.opsParts(ctx, project, q, &res)
	if err != nil {
		return nil, res.Result, err
	}
	type acc struct {
		calls, errors int64
		lat           *sketch.Sketch
	}
	add := func(a *acc, m *segment.OpsMeasures) {
		a.calls += m.Spans
		a.errors += m.Errors
		if a.lat == nil {
			a.lat = m.Latency.Clone()
		} else {
			a.lat.Merge(m.Latency)
		}
	}
	type series struct {
		total   acc
		buckets map[uint64]*acc
	}
	groups := map[[2]string]*series{}
	for p := range parts {
		for i := range parts[p].Ops {
			en := &parts[p].Ops[i]
			if !opsMatch(q, en.Key.Service, en.Key.Name) {
				continue
			}
			k := [2]string{en.Key.Service, ""}
			if q.ByOperation {
				k[1] = en.Key.Name
			}
			g := groups[k]
			if g == nil {
				g = &series{buckets: map[uint64]*acc{}}
				groups[k] = g
			}
			add(&g.total, &en.M)
			t := bucketStart(en.Key.Minute, q.Step)
			b := g.buckets[t]
			if b == nil {
				b = &acc{}
				g.buckets[t] = b
			}
			add(b, &en.M)
		}
	}
	out := make([]store.REDSeries, 0, len(groups))
	for k, g := range groups {
		s := store.REDSeries{Service: k[0], Operation: k[1], Calls: g.total.calls, Errors: g.total.errors,
			Latency: *quantiles(g.total.lat), Buckets: make([]store.REDPoint, 0, len(g.buckets))}
		for t, b := range g.buckets {
			s.Buckets = append(s.Buckets, store.REDPoint{Start: t, Calls: b.calls, Errors: b.errors, Latency: *quantiles(b.lat)})
		}
		slices.SortFunc(s.Buckets, func(a, b store.REDPoint) int { return cmp.Compare(a.Start, b.Start) })
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b store.REDSeries) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), strings.Compare(a.Service, b.Service), strings.Compare(a.Operation, b.Operation))
	})
	return finish(out, &res)
}

// Heatmap counts spans by time bucket and log-scaled duration bucket. The
// duration buckets are the sketches' own boundaries (sketch.HeatmapStep),
// so counts read from stored sketches are exact.
func (e *Engine) Heatmap(ctx context.Context, project string, q *store.OpsQuery) (store.Heatmap, store.Result, error) {
	if err := checkStep(q.Step); err != nil {
		return store.Heatmap{}, store.Result{}, err
	}
	var res queryResult
	parts, err := e.opsParts(ctx, project, q, &res)
	if err != nil {
		return store.Heatmap{}, res.Result, err
	}
	type cell struct {
		t uint64
		h int
	}
	counts := map[cell]int64{}
	for p := range parts {
		for i := range parts[p].Ops {
			en := &parts[p].Ops[i]
			if !opsMatch(q, en.Key.Service, en.Key.Name) {
				continue
			}
			t := bucketStart(en.Key.Minute, q.Step)
			en.M.Latency.Heatmap(func(h int, n uint64) { counts[cell{t, h}] += int64(n) })
		}
	}
	out := store.Heatmap{Bounds: sketch.HeatmapBounds(), Cells: make([]store.HeatCell, 0, len(counts))}
	for c, n := range counts {
		out.Cells = append(out.Cells, store.HeatCell{Start: c.t, Bucket: c.h, Count: n})
	}
	slices.SortFunc(out.Cells, func(a, b store.HeatCell) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Bucket, b.Bucket)) })
	return finish(out, &res)
}

// ErrorGroups returns the error groups of the window, largest first.
func (e *Engine) ErrorGroups(ctx context.Context, project string, q *store.OpsQuery, limit int) ([]store.ErrorGroup, store.Result, error) {
	var res queryResult
	parts, err := e.opsParts(ctx, project, q, &res)
	if err != nil {
		return nil, res.Result, err
	}
	groups := map[segment.ErrKey]*segment.ErrMeasures{}
	for p := range parts {
		for i := range parts[p].Errors {
			en := &parts[p].Errors[i]
			if !opsMatch(q, en.Key.Service, en.Key.Name) {
				continue
			}
			if m := groups[en.Key]; m != nil {
				m.Merge(&en.M)
			} else {
				m := en.M
				groups[en.Key] = &m
			}
		}
	}
	out := make([]store.ErrorGroup, 0, len(groups))
	for k, m := range groups {
		out = append(out, store.ErrorGroup{Service: k.Service, Operation: k.Name, Type: k.Type, Message: k.Message,
			Count: m.Count, First: m.First, Last: m.Last, Trace: m.Trace, Span: m.Span})
	}
	store.SortErrorGroups(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return finish(out, &res)
}
