package engine

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/sketch"
	"github.com/rastro-dev/rastro/internal/store"
)

var _ store.ServiceReader = (*Engine)(nil)

// opsCache holds a segment's decoded service-aggregate rollups (one per
// project asked for). Block parts are not cached: they are read only for
// blocks at a window's edge, and caching them would hold every block's
// entries of a large store over time.
type opsCache struct {
	mu      sync.Mutex
	project map[string]segment.OpsAggregates
	proj    map[string]segment.OpsAggregates // projections of the rollups, see opsProjected
	held    int64                            // entries held, counted in budget
	budget  *atomic.Int64                    // the engine's opsCacheEntries, while entries are held
}

// maxOpsCacheEntries bounds the rollup entries cached across all segments
// (an entry is about 100-200 bytes with its sketch). Past it, rollups are
// decoded on each query that needs them.
const maxOpsCacheEntries = 1 << 20

// release returns the handle's cached entries to the engine's budget; the
// handle is being closed.
func (c *opsCache) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.budget != nil {
		c.budget.Add(-c.held)
	}
	c.project, c.proj, c.held, c.budget = nil, nil, 0, nil
}

// opsAggregates returns the stored service aggregates of block i, or of
// the whole segment for project when i < 0 (cached within budget).
func (e *Engine) opsAggregates(s *segHandle, i int, project string) (segment.OpsAggregates, error) {
	if i >= 0 {
		return s.r.BlockOps(i)
	}
	s.ops.mu.Lock()
	a, ok := s.ops.project[project]
	s.ops.mu.Unlock()
	if ok {
		return a, nil
	}
	v, err, _ := e.decoding.Do("ops|"+s.name+"|"+project, func() (any, error) {
		a, err := s.r.SegmentOps(project)
		if err == nil {
			e.keepOps(s, &s.ops.project, project, a, 0)
		}
		return a, err
	})
	if err != nil {
		return segment.OpsAggregates{}, err
	}
	return v.(segment.OpsAggregates), nil
}

// keepOps caches a in *m[key] of segment s when the engine's budget
// allows; a map holding limit entries or more (0: no limit) is emptied
// first.
func (e *Engine) keepOps(s *segHandle, m *map[string]segment.OpsAggregates, key string, a segment.OpsAggregates, limit int) {
	size := func(a *segment.OpsAggregates) int64 { return int64(len(a.Ops) + len(a.Errors)) }
	n := size(&a)
	if e.opsCacheEntries.Add(n) > maxOpsCacheEntries {
		e.opsCacheEntries.Add(-n)
		return
	}
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	if _, dup := (*m)[key]; dup || s.retiring.Load() {
		e.opsCacheEntries.Add(-n)
		return
	}
	if *m == nil || (limit > 0 && len(*m) >= limit) {
		for _, old := range *m {
			e.opsCacheEntries.Add(-size(&old))
			s.ops.held -= size(&old)
		}
		*m = map[string]segment.OpsAggregates{}
	}
	(*m)[key] = a
	s.ops.held += n
	s.ops.budget = &e.opsCacheEntries
}

// opsProjected returns the rollup of a segment for project projected for
// q (service and name filters, step) and proj, cached per segment within
// the same budget as the rollups.
func (e *Engine) opsProjected(s *segHandle, project string, q *store.OpsQuery, proj opsProjection) (segment.OpsAggregates, error) {
	proj.totals = false // totals are made once, from the merged parts
	key := fmt.Sprintf("%q|%q|%q|%d|%v", project, q.Service, q.Name, q.Step, proj)
	s.ops.mu.Lock()
	a, ok := s.ops.proj[key]
	s.ops.mu.Unlock()
	if ok {
		return a, nil
	}
	v, err, _ := e.decoding.Do("opsproj|"+s.name+"|"+key, func() (any, error) {
		raw, err := e.opsAggregates(s, -1, project)
		if err != nil {
			return segment.OpsAggregates{}, err
		}
		a := proj.apply(q, []segment.OpsAggregates{raw})
		e.keepOps(s, &s.ops.proj, key, a, maxOpsProjections)
		return a, nil
	})
	if err != nil {
		return segment.OpsAggregates{}, err
	}
	return v.(segment.OpsAggregates), nil
}

// maxOpsProjections bounds the projections cached per segment.
const maxOpsProjections = 64

// opsParts gathers service aggregates covering exactly the spans of project
// in q's window, projected by proj: stored aggregates for segments and
// blocks wholly inside it, aggregation of rows elsewhere (the write buffer,
// blocks at the window's edges, blocks holding erased traces, segments
// written before service aggregates existed). The segments' part is
// immutable, so it is merged once and cached per (segment list, query).
func (e *Engine) opsParts(ctx context.Context, project string, q *store.OpsQuery, proj opsProjection, res *queryResult) ([]segment.OpsAggregates, error) {
	if q.Filter != nil {
		if err := noTraceConditions(q.Filter); err != nil {
			return nil, err
		}
	}
	v := e.view()
	defer v.release()
	// A query with a span filter reads rows: its answer is not cached.
	cached := opsUsable(q)
	key := opsCacheKey(v.segs, project, q, proj) + "|" + strconv.FormatUint(e.hidden().gen, 10)
	seg, ok := segment.OpsAggregates{}, false
	if cached {
		seg, ok = e.opsResults.get(key)
	}
	if !ok {
		parts, err := e.opsScan(ctx, view{segs: v.segs}, project, q, proj, res)
		if err != nil {
			return nil, err
		}
		seg = proj.apply(q, parts)
		if res.ioErr != nil {
			return nil, nil // the query fails with res.ioErr; nothing is cached
		}
		if cached && len(res.Warnings) == 0 {
			e.opsResults.put(key, seg)
		}
	}
	mem, err := e.opsScan(ctx, view{mems: v.mems}, project, q, proj, res)
	if err != nil {
		return nil, err
	}
	return []segment.OpsAggregates{seg, proj.apply(q, mem)}, nil
}

// opsScan collects the aggregates of one part of a view; see opsParts.
func (e *Engine) opsScan(ctx context.Context, v view, project string, q *store.OpsQuery, proj opsProjection, res *queryResult) ([]segment.OpsAggregates, error) {
	f := &query.Filter{Start: q.Start, End: q.End, Service: q.Service, Name: q.Name}
	usable := opsUsable(q)
	if q.Filter != nil {
		g := *q.Filter
		g.Start, g.End, g.Limit = q.Start, q.End, 0
		f = &g
	}
	rows := segment.NewOpsAggregator()
	var parts []segment.OpsAggregates
	stored := func(s *segHandle, i int, project string) bool {
		if !usable || !s.r.HasOpsAggregates() {
			return false
		}
		var a segment.OpsAggregates
		var err error
		if i < 0 {
			// A segment wholly inside the window: its projection does not
			// depend on the window's bounds, so a sliding window ("the
			// last hour") reuses it.
			a, err = e.opsProjected(s, project, q, proj)
		} else {
			a, err = e.opsAggregates(s, i, project)
		}
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
		func(s *model.Span) {
			if opsMatch(q, s.Service, s.Name) {
				rows.Add(s)
			}
		})
	if err != nil {
		return nil, err
	}
	return append(parts, rows.Aggregates()), nil
}

// opsProjection is what a query keeps of the ops entries: the service, the
// span name, and the time bucket (Minute then holds the bucket's start in
// seconds); error groups are kept whole.
type opsProjection struct {
	service, name, ops, errors bool
	// totals adds, per projected series, an entry over the whole window
	// (Minute = totalMinute), so that a cached part carries its series
	// totals merged once rather than on every query.
	totals bool
}

// totalMinute marks a projected entry holding a series' whole window.
const totalMinute = math.MinInt64

// apply merges parts into one, keeping the entries that match q's service
// and name, with their keys projected.
func (p opsProjection) apply(q *store.OpsQuery, parts []segment.OpsAggregates) segment.OpsAggregates {
	var out segment.OpsAggregates
	if p.ops {
		idx := map[segment.OpsKey]int{}
		// A key met once keeps its input's sketch (inputs are immutable and
		// outlive the result); a second input makes it a merged copy.
		var owned []bool
		add := func(k segment.OpsKey, m *segment.OpsMeasures) {
			if x, ok := idx[k]; ok {
				o := &out.Ops[x].M
				o.Spans += m.Spans
				o.Errors += m.Errors
				if !owned[x] {
					o.Latency, owned[x] = o.Latency.Clone(), true
				}
				o.Latency.Merge(m.Latency)
				return
			}
			idx[k] = len(out.Ops)
			out.Ops = append(out.Ops, segment.OpsEntry{Key: k, M: segment.OpsMeasures{Spans: m.Spans, Errors: m.Errors, Latency: m.Latency}})
			owned = append(owned, false)
		}
		for i := range parts {
			for j := range parts[i].Ops {
				en := &parts[i].Ops[j]
				if en.Key.Minute == totalMinute || !opsMatch(q, en.Key.Service, en.Key.Name) {
					continue
				}
				k := segment.OpsKey{Minute: int64(bucketStart(en.Key.Minute, q.Step) / 1e9)}
				if p.service {
					k.Service = en.Key.Service
				}
				if p.name {
					k.Name = en.Key.Name
				}
				add(k, &en.M)
			}
		}
		if p.totals {
			// Series totals from the buckets: one merge per bucket, here
			// rather than in every query that reads this part.
			for x, n := 0, len(out.Ops); x < n; x++ {
				k := out.Ops[x].Key
				k.Minute = totalMinute
				add(k, &out.Ops[x].M)
			}
		}
	}
	if p.errors {
		idx := map[segment.ErrKey]int{}
		for i := range parts {
			for j := range parts[i].Errors {
				en := &parts[i].Errors[j]
				if !opsMatch(q, en.Key.Service, en.Key.Name) {
					continue
				}
				if x, ok := idx[en.Key]; ok {
					out.Errors[x].M.Merge(&en.M)
					continue
				}
				idx[en.Key] = len(out.Errors)
				out.Errors = append(out.Errors, *en)
			}
		}
	}
	return out
}

func opsCacheKey(segs []*segHandle, project string, q *store.OpsQuery, p opsProjection) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q|%q|%q|%d|%d|%d|%v", project, q.Service, q.Name, q.Start, q.End, q.Step, p)
	for _, s := range segs {
		b.WriteByte('|')
		b.WriteString(s.name)
	}
	return b.String()
}

// opsResultCache keeps the merged segment parts of recent service queries
// (a page refresh repeats them). Keyed by the segment list, so a seal or a
// merge makes old entries unreachable; they age out in LRU order. Bounded
// by the entries held.
type opsResultCache struct {
	mu      sync.Mutex
	max     int
	held    int
	order   []string // oldest first
	entries map[string]segment.OpsAggregates
}

func (c *opsResultCache) get(key string) (segment.OpsAggregates, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.entries[key]
	return got, ok
}

func (c *opsResultCache) put(key string, a segment.OpsAggregates) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(a.Ops) + len(a.Errors)
	if n > c.max/4 {
		return
	}
	if c.entries == nil {
		c.entries = map[string]segment.OpsAggregates{}
	}
	if _, ok := c.entries[key]; ok {
		return
	}
	c.entries[key] = a
	c.order = append(c.order, key)
	c.held += n
	for c.held > c.max && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		c.held -= len(c.entries[old].Ops) + len(c.entries[old].Errors)
		delete(c.entries, old)
	}
}

// opsUsable reports whether q can be answered from stored aggregates: its
// span filter, if any, asks for nothing beyond the service and span name.
func opsUsable(q *store.OpsQuery) bool {
	if q.Filter == nil {
		return true
	}
	f := *q.Filter
	f.Start, f.End = 0, 0
	svc, name := f.Service, f.Name
	f.Service, f.Name = "", ""
	return aggregatesUsable(&f) && (svc == "" || svc == q.Service) && (name == "" || name == q.Name)
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
	parts, err := e.opsParts(ctx, project, q, opsProjection{service: !(q.ByOperation && q.NameOnly), name: q.ByOperation, ops: true, totals: true}, &res)
	if err != nil {
		return nil, res.Result, err
	}
	// acc sums measures; a bucket met once (the usual case: the projected
	// parts hold one entry per series and bucket each) reads its sketch in
	// place, and only a second entry makes it a merged copy.
	type acc struct {
		calls, errors int64
		lat           *sketch.Sketch
		owned         bool
	}
	add := func(a *acc, m *segment.OpsMeasures) {
		a.calls += m.Spans
		a.errors += m.Errors
		switch {
		case a.lat == nil:
			a.lat = m.Latency
		case !a.owned:
			a.lat, a.owned = a.lat.Clone(), true
			fallthrough
		default:
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
			k := [2]string{en.Key.Service, en.Key.Name}
			g := groups[k]
			if g == nil {
				g = &series{buckets: map[uint64]*acc{}}
				groups[k] = g
			}
			if en.Key.Minute == totalMinute {
				add(&g.total, &en.M)
				continue
			}
			t := uint64(en.Key.Minute) * 1e9
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
	parts, err := e.opsParts(ctx, project, q, opsProjection{ops: true}, &res)
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
			t := uint64(en.Key.Minute) * 1e9
			en.M.Latency.Heatmap(func(h int, n uint64) { counts[cell{t, h}] += int64(n) })
		}
	}
	out := store.Heatmap{Bounds: sketch.HeatmapBounds(), Cells: make([]store.HeatCell, 0, len(counts))}
	for c, n := range counts {
		out.Cells = append(out.Cells, store.HeatCell{Start: c.t, Bucket: c.h, Count: n})
	}
	slices.SortFunc(out.Cells, func(a, b store.HeatCell) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Bucket, b.Bucket))
	})
	return finish(out, &res)
}

// ErrorGroups returns the error groups of the window, largest first.
func (e *Engine) ErrorGroups(ctx context.Context, project string, q *store.OpsQuery, limit int) ([]store.ErrorGroup, store.Result, error) {
	var res queryResult
	parts, err := e.opsParts(ctx, project, q, opsProjection{errors: true}, &res)
	if err != nil {
		return nil, res.Result, err
	}
	groups := map[segment.ErrKey]*segment.ErrMeasures{}
	for p := range parts {
		for i := range parts[p].Errors {
			en := &parts[p].Errors[i]
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
