package engine

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"iter"
	"slices"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/sketch"
	"github.com/rastro-dev/rastro/internal/store"
)

// llmTop answers LLMStats with q.Top > 0: every group is counted (the
// totals and the number of groups stay exact), only the first q.Top in
// the order of q.Sort are returned, and only theirs get percentiles.
//
// Grouping by session alone reads in two passes over one view: the
// groups' counts first, without sketches (segments answer from their
// session tables' count columns), then the latency sketches of the kept
// sessions only (sessionSketches). Over a corpus of many sessions the
// sketches are most of what a session table holds, and merging and
// summarising one per session was most of the query's time.
func (e *Engine) llmTop(ctx context.Context, project string, q *store.LLMQuery, res *queryResult) (store.LLMStats, error) {
	rank, ok := store.LLMSorts[cmp.Or(q.Sort, "cost")]
	if !ok {
		return store.LLMStats{}, fmt.Errorf("unknown sort %q (use cost, tokens, calls, spans or errors): %w", q.Sort, store.ErrBadRequest)
	}
	p := newProjection(q.GroupBy, false)
	twoPass := p.dims == "session" && !p.hour && !p.day
	p.noSketches = twoPass
	v := e.view()
	defer v.release()
	seg, mem, key, err := e.llmParts(ctx, v, project, &q.Filter, p, res)
	if err != nil {
		return store.LLMStats{Result: res.Result}, err
	}
	// The segments' part gathered into groups is cached with that part, and
	// so is the answer when the write buffer adds nothing: a repeated page
	// (a dashboard) neither regroups every session nor ranks them again.
	var gs *llmGroups
	var answerKey string
	if key != "" {
		gkey := key + "|groups|" + strings.Join(q.GroupBy, ",")
		if len(mem) == 0 {
			answerKey = fmt.Sprintf("%s|answer|%s|%d", gkey, q.Sort, q.Top)
			if got, ok := e.llmCache.getAny(answerKey); ok {
				out := got.(store.LLMStats)
				out.Result = res.Result
				out.Groups = slices.Clone(out.Groups)
				return out, nil
			}
		}
		base, ok := e.llmCache.getAny(gkey)
		if !ok {
			b := gatherGroups(seg, q.GroupBy, nil)
			e.llmCache.put(gkey, b, len(b.groups))
			base = b
		}
		gs = base.(*llmGroups).extend(mem)
	} else {
		gs = gatherGroups(append(slices.Clip(seg), mem...), q.GroupBy, nil)
	}
	var total store.Measures
	counts := make([]store.Measures, len(gs.groups))
	for i := range gs.groups {
		m := &gs.groups[i].M
		counts[i] = store.Measures{Spans: m.Spans, Counted: m.Counted, Errors: m.Errors, Traces: m.Traces,
			InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, CacheReadTokens: m.CacheReadTokens,
			CacheCreationTokens: m.CacheCreationTokens, ReasoningTokens: m.ReasoningTokens,
			CostNanoUSD: m.CostNanoUSD, MinStart: m.MinStart, MaxEnd: m.MaxEnd}
		total.AddCounts(&counts[i])
	}
	// The first Top groups by rank, ties in groupEntries' order (cost,
	// spans, key): a bounded heap, not a sort of every group.
	keep := store.FirstPositions(len(gs.groups), q.Top, func(i, j int32) bool {
		if a, b := rank(&counts[i]), rank(&counts[j]); a != b {
			return a > b
		}
		return gs.compare(i, j) < 0
	})
	kept := gs.take(keep)
	if twoPass && len(kept) > 0 {
		ids := make(map[string]int, len(kept))
		for i := range kept {
			ids[kept[i].Key["session"]] = i
		}
		sk, err := e.sessionSketches(ctx, v, project, &q.Filter, ids, res)
		if err != nil {
			return store.LLMStats{Result: res.Result}, err
		}
		for i := range kept {
			kept[i].M.Latency, kept[i].M.TTFT = sk[i].Latency, sk[i].TTFT
		}
	}
	out, err := llmAnswer(kept, res)
	out.TotalGroups, out.Totals = len(gs.groups), total
	if err == nil && answerKey != "" && len(res.Warnings) == 0 {
		cached := out
		cached.Result = store.Result{}
		e.llmCache.put(answerKey, cached, len(out.Groups))
		out.Groups = slices.Clone(out.Groups)
	}
	return out, err
}

// sessionSketches returns the latency and time-to-first-token sketches of
// the sessions ids (id -> position in the answer) over the LLM spans of
// project matching f in view v: the same parts llmEntriesIn reads, so
// that each sketch counts its session's spans. The segments' part is
// cached by the segment list, the window and the ids.
func (e *Engine) sessionSketches(ctx context.Context, v view, project string, f *query.Filter, ids map[string]int, res *queryResult) ([]segment.AggMeasures, error) {
	f = e.visible(project, f)
	usable := aggregatesUsable(f)
	out := make([]segment.AggMeasures, len(ids))
	add := func(parts []segment.AggEntry) {
		for i := range parts {
			if j, ok := ids[parts[i].Key.Session]; ok {
				m := &out[j]
				m.Latency = mergeSketch(m.Latency, parts[i].M.Latency)
				m.TTFT = mergeSketch(m.TTFT, parts[i].M.TTFT)
			}
		}
	}
	var key string
	if usable {
		sorted := make([]string, 0, len(ids))
		for id := range ids {
			sorted = append(sorted, id)
		}
		slices.Sort(sorted)
		h := fnv.New128a()
		for _, id := range sorted {
			h.Write([]byte(id))
			h.Write([]byte{0})
		}
		key = fmt.Sprintf("%s|sketches|%d|%x|%d", llmCacheKey(v.segs, project, projection{dims: "session"}, f), len(sorted), h.Sum(nil), e.hidden().gen)
	}
	seg, ok := []segment.AggEntry(nil), false
	if usable {
		seg, ok = e.llmCache.get(key)
	}
	if !ok {
		var err error
		if seg, err = e.sessionSketchPart(ctx, view{segs: v.segs}, project, f, ids, usable, res); err != nil {
			return nil, err
		}
		if res.ioErr != nil {
			return out, nil // the query fails with res.ioErr; nothing is cached
		}
		if usable && len(res.Warnings) == 0 {
			e.llmCache.put(key, seg, len(seg))
		}
	}
	add(seg)
	mem, err := e.sessionSketchPart(ctx, view{mems: v.mems}, project, f, ids, false, res)
	if err != nil {
		return nil, err
	}
	add(mem)
	return out, nil
}

// sessionSketchPart gathers, for one part of a view, one entry per session
// of ids that has spans there, keyed by session, holding only its merged
// sketches: from session tables, stored rollups and block aggregates where
// usable (as llmPart takes them), else from the spans.
func (e *Engine) sessionSketchPart(ctx context.Context, v view, project string, f *query.Filter, ids map[string]int, usable bool, res *queryResult) ([]segment.AggEntry, error) {
	by := map[string]*segment.AggMeasures{}
	add := func(id string, lat, ttft *sketch.Sketch) {
		m := by[id]
		if m == nil {
			m = &segment.AggMeasures{}
			by[id] = m
		}
		// mergeSketch clones into a nil sketch: inputs (cached) are only read.
		m.Latency, m.TTFT = mergeSketch(m.Latency, lat), mergeSketch(m.TTFT, ttft)
	}
	addEntries := func(agg []segment.AggEntry) {
		for i := range agg {
			if _, ok := ids[agg[i].Key.Session]; ok {
				add(agg[i].Key.Session, agg[i].M.Latency, agg[i].M.TTFT)
			}
		}
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	slices.Sort(sorted)
	rows := segment.NewAggregator()
	err := e.llmScan(ctx, v, project, f, res, func(s *segHandle, project string) bool {
		switch {
		case !usable || !s.r.HasAggregates():
			return false
		case s.r.HasRollups():
			t, err := e.sessionTable(s, project)
			if err != nil {
				e.readFailed(res, s.name, err) // fall back to blocks
				return false
			}
			if t == nil {
				return true
			}
			type found struct {
				id        string
				lat, ttft *sketch.Sketch
			}
			var got []found // all or nothing: a damaged row falls back to blocks
			for i := range rowsOf(t, sorted) {
				lat, ttft, err := t.Sketches(i)
				if err != nil {
					e.readFailed(res, s.name, err)
					return false
				}
				got = append(got, found{t.Rows[i].ID, lat, ttft})
			}
			for _, g := range got {
				add(g.id, g.lat, g.ttft)
			}
			return true
		default: // aggregates written before the rollups
			agg, err := e.segmentAggregates(s, project)
			if err != nil {
				e.readFailed(res, s.name, err)
				return false
			}
			addEntries(agg)
			return true
		}
	}, func(s *segHandle, i int) bool {
		if !usable || !s.r.HasAggregates() {
			return false
		}
		agg, err := e.blockAggregates(s, i)
		if err != nil {
			e.readFailed(res, s.name, err) // fall back to the rows
			return false
		}
		addEntries(agg)
		return true
	}, func(sp *model.Span) {
		if _, ok := ids[sp.LLM.SessionID]; ok {
			rows.Add(sp)
		}
	})
	if err != nil {
		return nil, err
	}
	addEntries(rows.Entries())
	out := make([]segment.AggEntry, 0, len(by))
	for id, m := range by {
		out = append(out, segment.AggEntry{Key: segment.AggKey{Session: id}, M: *m})
	}
	slices.SortFunc(out, func(a, b segment.AggEntry) int { return strings.Compare(a.Key.Session, b.Key.Session) })
	return out, nil
}

// rowsOf yields the rows of t whose session is one of ids (sorted), in
// order: by a binary search per id when ids are few, else by one walk of
// both sorted lists (a page of 1,000 sessions against a table of a few
// thousand: fewer comparisons, in memory order).
func rowsOf(t *segment.SessionTable, ids []string) iter.Seq[int] {
	return func(yield func(int) bool) {
		if len(ids)*16 < len(t.Rows) {
			for _, id := range ids {
				if i := t.Find(id); i >= 0 && !yield(i) {
					return
				}
			}
			return
		}
		for i, j := 0, 0; i < len(t.Rows) && j < len(ids); {
			switch c := strings.Compare(t.Rows[i].ID, ids[j]); {
			case c < 0:
				i++
			case c > 0:
				j++
			default:
				if !yield(i) {
					return
				}
				i++
				j++
			}
		}
	}
}
