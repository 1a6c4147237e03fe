package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/sketch"
	"github.com/rastro-dev/rastro/internal/store"
)

// aggregatesUsable reports whether stored aggregates can answer f: they
// summarise every LLM span of a block, so only a filter that constrains
// nothing but the time window can use them.
func aggregatesUsable(f *query.Filter) bool {
	return f.Expr == nil && f.Content == nil && f.Service == "" && f.Name == "" && !f.HasStatus &&
		f.MinDuration == 0 && f.MaxDuration == 0
}

// inWindow reports whether [lo, hi] lies inside [start, end) (0 = unbounded).
func inWindow(lo, hi, start, end uint64) bool {
	return (start == 0 || lo >= start) && (end == 0 || hi < end)
}

// overlaps reports whether [lo, hi] meets [start, end).
func overlaps(lo, hi, start, end uint64) bool {
	return (end == 0 || lo < end) && (start == 0 || hi >= start)
}

// llmEntries gathers aggregate entries covering exactly the LLM spans of
// project matching f: stored aggregates for whole segments or blocks inside
// the window when the filter allows (and rows is false), row aggregation
// elsewhere. bucket, when not nil, splits row aggregation by time bucket (for
// time series finer than the stored hourly keys).
//
// Entries come projected onto p: key fields outside it are blanked and
// entries merged, so later grouping touches few entries. Projections of
// stored aggregates are cached per segment.
func (e *Engine) llmEntries(ctx context.Context, project string, f *query.Filter, p projection, res *queryResult) ([]segment.AggEntry, error) {
	v := e.view()
	defer v.release()
	return e.llmEntriesIn(ctx, v, project, f, p, res)
}

// llmEntriesIn is llmEntries over the view v (a query that reads twice
// reads one view).
func (e *Engine) llmEntriesIn(ctx context.Context, v view, project string, f *query.Filter, p projection, res *queryResult) ([]segment.AggEntry, error) {
	seg, mem, _, err := e.llmParts(ctx, v, project, f, p, res)
	if err != nil || seg == nil && mem == nil {
		return nil, err
	}
	return append(slices.Clip(seg), mem...), nil
}

// llmParts returns the entries of llmEntriesIn in two parts: the
// segments' (projected, read-only: it may be shared with the result
// cache) and the write buffer's. key, when not empty, is the cache key
// of the segments' part: a query that derives more from that part (a
// ranking, a list) may cache what it derives under key plus a suffix.
func (e *Engine) llmParts(ctx context.Context, v view, project string, f *query.Filter, p projection, res *queryResult) (seg, mem []segment.AggEntry, key string, err error) {
	if err := noTraceConditions(f); err != nil {
		return nil, nil, "", err
	}
	f = e.visible(project, f)
	usable := aggregatesUsable(f)
	// The segments' part: immutable, so with stored aggregates usable it is
	// cached per (segment list, project, projection, window).
	if usable {
		key = llmCacheKey(v.segs, project, p, f) + "|" + strconv.FormatUint(e.hidden().gen, 10)
		if got, ok := e.llmCache.get(key); ok {
			mem, err := e.llmPart(ctx, view{mems: v.mems}, project, f, p, false, res)
			return got, mem, key, err
		}
	}
	seg, err = e.llmPart(ctx, view{segs: v.segs}, project, f, p, usable, res)
	if err != nil {
		return nil, nil, "", err
	}
	// Entries are merged by their projected keys before they are cached,
	// but for the session projections: their every consumer merges by
	// session again (gatherGroups, newSessionList), and the merge here was
	// a third of a cold group by session.
	if !p.bySession() {
		seg = p.apply(seg)
	}
	if res.ioErr != nil {
		return nil, nil, "", nil // the query fails with res.ioErr; nothing is cached
	}
	if !usable || len(res.Warnings) > 0 || !e.llmCache.put(key, seg, len(seg)) {
		key = "" // not cached: nothing may be derived under its key
	}
	mem, err = e.llmPart(ctx, view{mems: v.mems}, project, f, p, false, res)
	return seg, mem, key, err
}

// llmPart gathers the entries of one part of a view; see llmEntries.
func (e *Engine) llmPart(ctx context.Context, v view, project string, f *query.Filter, p projection, usable bool, res *queryResult) ([]segment.AggEntry, error) {
	if len(v.segs) == 0 {
		return e.llmBufferPart(ctx, v.mems, project, f, p) // chunk aggregates, see there
	}
	rows := segment.NewAggregator()
	var parts [][]segment.AggEntry // joined once at the end: a session table is ~1,000 entries a segment
	// Segments written before aggregates existed are read row by row.
	err := e.llmScan(ctx, v, project, f, res, func(s *segHandle, project string) bool {
		if !usable || !s.r.HasAggregates() {
			return false
		}
		agg, err := e.projected(s, -1, project, p)
		if err != nil {
			e.readFailed(res, s.name, err) // fall back to blocks
			return false
		}
		parts = append(parts, agg)
		return true
	}, func(s *segHandle, i int) bool {
		if !usable || !s.r.HasAggregates() {
			return false
		}
		agg, err := e.projected(s, i, project, p)
		if err != nil {
			e.readFailed(res, s.name, err) // fall back to the rows
			return false
		}
		parts = append(parts, agg)
		return true
	}, rows.Add)
	if err != nil {
		return nil, err
	}
	parts = append(parts, p.apply(rows.Entries()))
	n := 0
	for _, part := range parts {
		n += len(part)
	}
	out := make([]segment.AggEntry, 0, n)
	for _, part := range parts {
		out = append(out, part...)
	}
	return out, nil
}

// llmCacheKey identifies the segments' part of an LLM query: the project,
// the projection, the window and the segment list. When no segment of
// project straddles an edge of the window, the part does not depend on
// where the edges lie, only on which segments lie inside (each counts
// whole), so the key names those segments and not the window: a listing's
// default window (the last 24 hours, which moves with the clock) or a
// retention cutoff then finds the part a previous request cached. Without
// this every such request merged every segment's part again.
func llmCacheKey(segs []*segHandle, project string, p projection, f *query.Filter) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%t|%t|%t|%t", project, p.dims, p.hour, p.day, p.noSketches, p.sessionList)
	straddled := false
	for _, s := range segs {
		if pi := s.projectInfo(project); pi != nil && overlaps(pi.MinStart, pi.MaxStart, f.Start, f.End) &&
			!inWindow(pi.MinStart, pi.MaxStart, f.Start, f.End) {
			straddled = true
			break
		}
	}
	if straddled {
		fmt.Fprintf(&b, "|window %d %d", f.Start, f.End)
	} else {
		b.WriteString("|whole")
	}
	for _, s := range segs {
		if pi := s.projectInfo(project); straddled || (pi != nil && overlaps(pi.MinStart, pi.MaxStart, f.Start, f.End)) {
			b.WriteByte('|')
			b.WriteString(s.name)
		}
	}
	return b.String()
}

// llmResultCache keeps the merged segment parts of recent LLM queries (a
// dashboard repeats the same ones) and what queries derive from them (the
// ranked groups of a page, the sessions list). Entries are keyed by the
// segment list, so a seal or any change of segments makes old entries
// unreachable; they age out by LRU order. Bounded by a weight per entry
// (aggregate entries, groups or sessions held). Values are read-only.
type llmResultCache struct {
	mu      sync.Mutex
	max     int // weight held at most
	held    int
	order   []string // oldest first
	entries map[string]cachedResult
}

type cachedResult struct {
	v      any
	weight int
}

// get returns the aggregate entries cached under key.
func (c *llmResultCache) get(key string) ([]segment.AggEntry, bool) {
	v, ok := c.getAny(key)
	got, _ := v.([]segment.AggEntry)
	return got, ok
}

func (c *llmResultCache) getAny(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.entries[key]
	return got.v, ok
}

// put caches v of weight under key, and reports whether it is held (an
// entry heavier than a quarter of the cache is not).
func (c *llmResultCache) put(key string, v any, weight int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if weight > c.max/4 {
		return false
	}
	if c.entries == nil {
		c.entries = map[string]cachedResult{}
	}
	if _, ok := c.entries[key]; ok {
		return true
	}
	c.entries[key] = cachedResult{v, weight}
	c.order = append(c.order, key)
	c.held += weight
	for c.held > c.max && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		c.held -= c.entries[old].weight
		delete(c.entries, old)
	}
	_, ok := c.entries[key]
	return ok
}

// projection is the set of aggregate key fields a query keeps.
type projection struct {
	dims string // sorted group-by dimensions joined by ','
	hour bool   // keep the hour (time series, or grouping by hour)
	day  bool   // keep the hour truncated to the day
	// noSketches drops latency sketches: for answers that show no
	// percentiles (the sessions list), merging sketches is most of the cost.
	noSketches bool
	// sessionList (with dims "session,user"): the sessions list, which
	// wants each session's users but no measures per user. Entries may then
	// carry no spans: they only name a user of their session (see
	// sessionEntries).
	sessionList bool
}

// coarse reports whether p keeps neither session nor user: segments'
// coarse rollups answer it.
func (p projection) coarse() bool {
	for _, d := range strings.Split(p.dims, ",") {
		if d == "session" || d == "user" {
			return false
		}
	}
	return true
}

// bySession reports whether segments' session tables answer p: grouping
// by session alone over the whole window, or the sessions list.
func (p projection) bySession() bool {
	return !p.hour && !p.day && (p.sessionList || p.dims == "session")
}

func newProjection(groupBy []string, keepHour bool) projection {
	d := slices.Clone(groupBy)
	slices.Sort(d)
	p := projection{dims: strings.Join(d, ","), hour: keepHour || slices.Contains(d, "hour")}
	p.day = !p.hour && slices.Contains(d, "day")
	return p
}

func (p projection) key(k segment.AggKey) segment.AggKey {
	out := segment.AggKey{}
	for _, d := range strings.Split(p.dims, ",") {
		switch d {
		case "model":
			out.Model = k.Model
		case "provider":
			out.Provider = k.Provider
		case "service":
			out.Service = k.Service
		case "operation":
			out.Operation = k.Operation
		case "session":
			out.Session = k.Session
		case "user":
			out.User = k.User
		case "agent":
			out.Agent = k.Agent
		}
	}
	switch {
	case p.hour:
		out.Hour = k.Hour
	case p.day:
		out.Hour = k.Hour - k.Hour%86400
	}
	return out
}

// apply merges entries by their projected keys. An output entry of one
// input entry shares its sketches (entries are read, never merged into,
// once built: a merge clones first), so that projecting entries that are
// already distinct (session tables, a cached part and a few buffer rows)
// copies no sketch.
func (p projection) apply(entries []segment.AggEntry) []segment.AggEntry {
	// Grouping by session alone (the costliest: one key per session) keys
	// its map by the id; other projections by the projected key.
	bySession := p.dims == "session" && !p.hour && !p.day
	var idx map[segment.AggKey]int
	var sidx map[string]int
	if bySession {
		sidx = make(map[string]int, len(entries))
	} else {
		idx = make(map[segment.AggKey]int, len(entries))
	}
	out := make([]segment.AggEntry, 0, len(entries))
	var merged []bool // out index -> owns its sketches
	for i := range entries {
		var k segment.AggKey
		var j int
		var ok bool
		if bySession {
			k.Session = entries[i].Key.Session
			j, ok = sidx[k.Session]
		} else {
			k = p.key(entries[i].Key)
			j, ok = idx[k]
		}
		m := entries[i].M
		if p.noSketches {
			m.Latency, m.TTFT = nil, nil
		}
		if !ok {
			if bySession {
				sidx[k.Session] = len(out)
			} else {
				idx[k] = len(out)
			}
			out = append(out, segment.AggEntry{Key: k, M: m})
			continue
		}
		if merged == nil {
			merged = make([]bool, len(entries))
		}
		if !merged[j] {
			merged[j] = true
			out[j].M.Latency, out[j].M.TTFT = cloneSketch(out[j].M.Latency), cloneSketch(out[j].M.TTFT)
		}
		mergeMeasures(&out[j].M, &m)
	}
	if cap(out) > 2*len(out) {
		return slices.Clone(out) // results are cached: hold no spare room
	}
	return out
}

// maxProjections bounds the projections cached per segment.
const maxProjections = 8192

// projected returns the stored aggregates of block i (or of the whole
// segment for project when i < 0), projected onto p, cached.
func (e *Engine) projected(s *segHandle, i int, project string, p projection) ([]segment.AggEntry, error) {
	key := fmt.Sprintf("%d|%s|%s|%t|%t|%t|%t", i, project, p.dims, p.hour, p.day, p.noSketches, p.sessionList)
	s.aggs.mu.Lock()
	got, ok := s.aggs.proj[key]
	s.aggs.mu.Unlock()
	if ok {
		return got, nil
	}
	v, err, _ := e.decoding.Do("llmproj|"+s.name+"|"+key, func() (any, error) {
		var raw []segment.AggEntry
		var err error
		projected := false
		if i < 0 {
			raw, projected, err = e.segmentEntries(s, project, p)
		} else {
			raw, err = e.blockAggregates(s, i)
		}
		if err != nil {
			return []segment.AggEntry(nil), err
		}
		got := raw
		if !projected {
			got = p.apply(raw)
		}
		s.aggs.mu.Lock()
		if s.aggs.proj == nil || len(s.aggs.proj) >= maxProjections {
			s.aggs.proj = map[string][]segment.AggEntry{}
		}
		s.aggs.proj[key] = got
		s.aggs.mu.Unlock()
		return got, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]segment.AggEntry), nil
}

// llmScan visits the LLM spans of project matching f. For each segment wholly
// inside the window it first offers wholeSeg, then for each block wholly
// inside the window wholeBlock; when the offer is taken (true), those spans
// are accounted for and not visited. Everything else goes to span.
func (e *Engine) llmScan(ctx context.Context, v view, project string, f *query.Filter, res *queryResult,
	wholeSeg func(s *segHandle, project string) bool, wholeBlock func(s *segHandle, i int) bool, span func(s *model.Span)) error {
	return e.aggScan(ctx, v, project, f, res, true, wholeSeg, wholeBlock, span)
}

// aggScan is llmScan over every span (llmOnly false) or the LLM spans only.
func (e *Engine) aggScan(ctx context.Context, v view, project string, f *query.Filter, res *queryResult, llmOnly bool,
	wholeSeg func(s *segHandle, project string) bool, wholeBlock func(s *segHandle, i int) bool, span func(s *model.Span)) error {
	f = e.visible(project, f)
	hs := e.hidden()
	rv := e.newResolver(&res.Result)
	visit := func(s *model.Span) {
		if (llmOnly && s.LLM == nil) || hs.has(project, s.TraceID) {
			return
		}
		if _, ok := rv.match(f, s); ok {
			span(s)
		}
	}
	for _, m := range v.mems {
		m.scanRows(project, f.Start, f.End, llmOnly, visit)
	}
	for _, s := range v.segs {
		if err := ctx.Err(); err != nil {
			return err
		}
		pi := s.projectInfo(project)
		if pi == nil || !overlaps(pi.MinStart, pi.MaxStart, f.Start, f.End) {
			continue
		}
		// Stored aggregates include erased spans until the erasure pass
		// rewrites the segment: read the blocks holding them row by row.
		tainted, taintFailed := e.taintedBlocks(s, project)
		if len(tainted) == 0 && !taintFailed && inWindow(pi.MinStart, pi.MaxStart, f.Start, f.End) && wholeSeg(s, project) {
			if llmOnly {
				e.m.llmAggSegments.Add(1)
			}
			continue
		}
		for i := range s.blocks {
			b := &s.blocks[i]
			if b.Project != project || !overlaps(b.MinStart, b.MaxStart, f.Start, f.End) {
				continue
			}
			if !tainted[i] && !taintFailed && inWindow(b.MinStart, b.MaxStart, f.Start, f.End) && wholeBlock(s, i) {
				if llmOnly {
					e.m.llmAggBlocks.Add(1)
				}
				continue
			}
			if llmOnly {
				e.m.llmRowBlocks.Add(1)
			}
			var spans []model.Span
			var err error
			if llmOnly && !inWindow(b.MinStart, b.MaxStart, f.Start, f.End) {
				spans, err = e.readWindowRows(s, i, f.Start, f.End)
			} else {
				spans, err = e.readBlock(s, i)
			}
			if err != nil {
				e.readFailed(res, s.name, err)
				continue
			}
			for j := range spans {
				visit(&spans[j])
			}
		}
	}
	return nil
}

// readWindowRows returns the spans of block i starting in [start, end), or
// more (a superset the caller filters): the block from the block cache when
// it is there, else only its rows in the window (the window's edge cuts the
// block; decoding every row of such blocks was most of a cold windowed LLM
// query). The partial read is not cached.
func (e *Engine) readWindowRows(s *segHandle, i int, start, end uint64) ([]model.Span, error) {
	if spans, ok := e.cache.get(blockRef{s, i}); ok {
		return spans, nil
	}
	ranges, err := s.r.BlockRowsStartingIn(i, start, end)
	if err != nil {
		return nil, err
	}
	return s.r.ReadBlockRows(i, ranges)
}

func (s *segHandle) projectInfo(project string) *segment.ProjectInfo {
	for i := range s.info.Projects {
		if s.info.Projects[i].Name == project {
			return &s.info.Projects[i]
		}
	}
	return nil
}

// aggCache holds a segment's decoded aggregates; they are small (one entry
// per distinct key per block) and immutable.
type aggCache struct {
	mu      sync.Mutex
	blocks  map[int][]segment.AggEntry
	project map[string][]segment.AggEntry
	proj    map[string][]segment.AggEntry // projections, see (*Engine).projected
	// sessions: per project, the session table (sections 16 and 17) with
	// its sketches left encoded, see (*Engine).sessionTable.
	sessions map[string]*segment.SessionTable
}

func (e *Engine) blockAggregates(s *segHandle, i int) ([]segment.AggEntry, error) {
	s.aggs.mu.Lock()
	a, ok := s.aggs.blocks[i]
	s.aggs.mu.Unlock()
	if ok {
		return a, nil
	}
	if !s.r.HasAggregates() {
		return nil, fmt.Errorf("segment %s has no stored aggregates", s.name)
	}
	a, err := s.r.BlockAggregates(i)
	if err != nil {
		return nil, err
	}
	s.aggs.mu.Lock()
	if s.aggs.blocks == nil {
		s.aggs.blocks = map[int][]segment.AggEntry{}
	}
	s.aggs.blocks[i] = a
	s.aggs.mu.Unlock()
	return a, nil
}

func (e *Engine) segmentAggregates(s *segHandle, project string) ([]segment.AggEntry, error) {
	s.aggs.mu.Lock()
	a, ok := s.aggs.project[project]
	s.aggs.mu.Unlock()
	if ok {
		return a, nil
	}
	if !s.r.HasAggregates() {
		return nil, fmt.Errorf("segment %s has no stored aggregates", s.name)
	}
	v, err, _ := e.decoding.Do("llm|"+s.name+"|"+project, func() (any, error) {
		a, err := s.r.SegmentAggregates(project)
		if err != nil {
			return []segment.AggEntry(nil), err
		}
		s.aggs.mu.Lock()
		if s.aggs.project == nil {
			s.aggs.project = map[string][]segment.AggEntry{}
		}
		s.aggs.project[project] = a
		s.aggs.mu.Unlock()
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]segment.AggEntry), nil
}

// segmentEntries returns the stored entries of project's whole segment
// that p is computed from: the coarse rollup or the session table when they
// answer p (segment.Reader.HasRollups), else the project rollup, whose
// entries are keyed down to session, user and hour. The first two are not
// cached (p's projection of them is, by projected). projected reports
// entries already projected onto p with distinct keys (the session table's).
func (e *Engine) segmentEntries(s *segHandle, project string, p projection) (entries []segment.AggEntry, projected bool, err error) {
	if s.r.HasRollups() {
		switch {
		case p.coarse():
			entries, err = s.r.CoarseAggregates(project)
			return entries, false, err
		case p.bySession():
			t, err := e.sessionTable(s, project)
			if err != nil || t == nil {
				return nil, true, err
			}
			entries := sessionEntries(t.Rows, p.sessionList)
			if !p.noSketches && !p.sessionList {
				for i := range entries { // one entry per row
					m := &entries[i].M
					if m.Latency, m.TTFT, err = t.Sketches(i); err != nil {
						return nil, false, err
					}
				}
			}
			return entries, true, nil
		}
	}
	entries, err = e.segmentAggregates(s, project)
	return entries, false, err
}

// sessionTable returns project's session table in segment s (nil without
// one), read once and kept: its counts decoded, its sketches decoded per
// row on demand (segment.SessionTable).
func (e *Engine) sessionTable(s *segHandle, project string) (*segment.SessionTable, error) {
	s.aggs.mu.Lock()
	t, ok := s.aggs.sessions[project]
	s.aggs.mu.Unlock()
	if ok {
		return t, nil
	}
	v, err, _ := e.decoding.Do("llmsessions|"+s.name+"|"+project, func() (any, error) {
		t, err := s.r.OpenSessionTable(project)
		if err != nil {
			return (*segment.SessionTable)(nil), err
		}
		s.aggs.mu.Lock()
		if s.aggs.sessions == nil {
			s.aggs.sessions = map[string]*segment.SessionTable{}
		}
		s.aggs.sessions[project] = t
		s.aggs.mu.Unlock()
		return t, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*segment.SessionTable), nil
}

// sessionEntries converts session-table rows to entries keyed by session.
// With users (the sessions list), a row's measures go to the entry of its
// first user, and each further user has an entry without spans that only
// names the user (merging it adds nothing: mergeMeasures).
func sessionEntries(rows []segment.SessionEntry, users bool) []segment.AggEntry {
	out := make([]segment.AggEntry, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		k := segment.AggKey{Session: r.ID}
		if users && len(r.Users) > 0 {
			k.User = r.Users[0]
		}
		out = append(out, segment.AggEntry{Key: k, M: r.M})
		if users && len(r.Users) > 1 {
			for _, u := range r.Users[1:] {
				out = append(out, segment.AggEntry{Key: segment.AggKey{Session: r.ID, User: u}})
			}
		}
	}
	return out
}

// groupValue projects an aggregate key onto one group-by dimension.
func groupValue(k *segment.AggKey, dim string) string {
	switch dim {
	case "model":
		return k.Model
	case "provider":
		return k.Provider
	case "service":
		return k.Service
	case "operation":
		return k.Operation
	case "session":
		return k.Session
	case "user":
		return k.User
	case "agent":
		return k.Agent
	case "hour":
		return time.Unix(k.Hour, 0).UTC().Format(time.RFC3339)
	case "day":
		return time.Unix(k.Hour, 0).UTC().Truncate(24 * time.Hour).Format("2006-01-02")
	}
	return ""
}

// mergeMeasures adds o into m (sketches merged, bounds widened); an entry
// without spans adds nothing.
func mergeMeasures(m *segment.AggMeasures, o *segment.AggMeasures) {
	if o.Spans == 0 {
		return
	}
	if m.Spans == 0 {
		m.MinStart, m.MaxEnd = o.MinStart, o.MaxEnd
	} else {
		m.MinStart = min(m.MinStart, o.MinStart)
		m.MaxEnd = max(m.MaxEnd, o.MaxEnd)
	}
	m.Spans += o.Spans
	m.Errors += o.Errors
	m.Counted += o.Counted
	m.InputTokens += o.InputTokens
	m.OutputTokens += o.OutputTokens
	m.CacheReadTokens += o.CacheReadTokens
	m.CacheCreationTokens += o.CacheCreationTokens
	m.ReasoningTokens += o.ReasoningTokens
	m.CostNanoUSD += o.CostNanoUSD
	m.Traces += o.Traces
	m.Latency = mergeSketch(m.Latency, o.Latency)
	m.TTFT = mergeSketch(m.TTFT, o.TTFT)
}

func mergeSketch(a, b *sketch.Sketch) *sketch.Sketch {
	if b == nil {
		return a
	}
	if a == nil {
		return b.Clone()
	}
	a.Merge(b)
	return a
}

// LLMStats groups the LLM spans matching q by q.GroupBy. Groups come sorted
// by cost, then spans, descending.
func (e *Engine) LLMStats(ctx context.Context, project string, q *store.LLMQuery) (store.LLMStats, error) {
	var res queryResult
	if err := checkGroupBy(q.GroupBy); err != nil {
		return store.LLMStats{}, err
	}
	if q.Top > 0 {
		return e.llmTop(ctx, project, q, &res)
	}
	entries, err := e.llmEntries(ctx, project, &q.Filter, newProjection(q.GroupBy, false), &res)
	if err != nil {
		return store.LLMStats{Result: res.Result}, err
	}
	return llmAnswer(groupEntries(entries, q.GroupBy, nil), &res)
}

// noTraceConditions refuses trace-level conditions (rootServiceName,
// traceDuration, ...) where spans are aggregated without their traces.
func noTraceConditions(f *query.Filter) error {
	if f.NeedsTrace() {
		return fmt.Errorf("trace-level conditions (traceDuration, rootName, rootServiceName) are not supported here; use them in span and trace searches: %w", store.ErrBadRequest)
	}
	return nil
}

// checkGroupBy refuses a dimension that is not one of store.LLMGroupKeys.
func checkGroupBy(groupBy []string) error {
	for _, g := range groupBy {
		if !store.ValidLLMGroupKey(g) {
			return fmt.Errorf("unknown group_by %q (use %v): %w", g, store.LLMGroupKeys, store.ErrBadRequest)
		}
	}
	return nil
}

// llmGroup is one group of LLM statistics while a query gathers it.
type llmGroup struct {
	Key    map[string]string // group-by dimension -> value
	Bucket int64             // time series only: bucket start, Unix seconds
	M      segment.AggMeasures
}

// llmAnswer converts groups to the store's form, or returns the I/O error
// that failed the query.
func llmAnswer(groups []llmGroup, res *queryResult) (store.LLMStats, error) {
	out := store.LLMStats{Result: res.Result, QuantileError: sketch.Alpha}
	if res.ioErr != nil {
		return out, res.ioErr
	}
	out.Groups = make([]store.LLMGroup, len(groups))
	for i := range groups {
		out.Groups[i] = store.LLMGroup{Key: groups[i].Key, Bucket: groups[i].Bucket, M: measures(&groups[i].M)}
	}
	return out, nil
}

// measures converts stored aggregate measures to the store's form: the
// sketches become the quantiles the API reports.
func measures(m *segment.AggMeasures) store.Measures {
	return store.Measures{
		Spans: m.Spans, Counted: m.Counted, Errors: m.Errors, Traces: m.Traces,
		InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, CacheReadTokens: m.CacheReadTokens,
		CacheCreationTokens: m.CacheCreationTokens, ReasoningTokens: m.ReasoningTokens,
		CostNanoUSD: m.CostNanoUSD, MinStart: m.MinStart, MaxEnd: m.MaxEnd,
		Latency: quantiles(m.Latency), TTFT: quantiles(m.TTFT),
	}
}

func quantiles(s *sketch.Sketch) *store.Quantiles {
	if s == nil || s.Count() == 0 {
		return nil
	}
	var buf [3]float64
	q := s.Quantiles(buf[:0], 0.5, 0.95, 0.99)
	return &store.Quantiles{P50: q[0], P95: q[1], P99: q[2], Max: float64(s.Max())}
}

// groupEntries merges entries by their projection onto groupBy, plus a time
// bucket when bucket is not nil. Groups come sorted by cost, then spans,
// descending, then by key. A group of one entry shares that entry's sketches
// (entries may come from a cache: the groups only read them); a group of
// several merges clones.
func groupEntries(entries []segment.AggEntry, groupBy []string, bucket func(k *segment.AggKey) int64) []llmGroup {
	gs := gatherGroups(entries, groupBy, bucket)
	// Sort positions, not the groups (large structs), then place them.
	order := make([]int32, len(gs.groups))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, gs.compare)
	return gs.take(order)
}

// llmGroups are the groups of entries while a query gathers them: their
// Key maps are made only for the groups an answer returns (take). Groups
// gathered from the segments' part are cached (read-only) and extended by
// the write buffer's entries per query (extend).
type llmGroups struct {
	entries []segment.AggEntry
	more    []segment.AggEntry // entries added by extend; first counts them after entries
	groupBy []string
	bucket  func(k *segment.AggKey) int64
	groups  []llmGroup // Key unset
	keys    []string   // group -> its map key, for the order of ties
	first   []int32    // group -> its first entry (in entries, then more), whose key it has
	idx     map[string]int32
	base    map[string]int32 // read-only index of the groups extend copied
	merged  []bool           // group -> owns its sketches (several entries merged)
	keyBuf  []byte
}

// gatherGroups merges entries by their projection onto groupBy (and
// bucket), unsorted; see groupEntries.
func gatherGroups(entries []segment.AggEntry, groupBy []string, bucket func(k *segment.AggKey) int64) *llmGroups {
	n := min(len(entries), 1<<16)
	gs := &llmGroups{entries: entries, groupBy: groupBy, bucket: bucket,
		groups: make([]llmGroup, 0, n), keys: make([]string, 0, n), first: make([]int32, 0, n),
		idx: make(map[string]int32, n), keyBuf: make([]byte, 0, 128)}
	for i := range entries {
		gs.add(&entries[i], int32(i))
	}
	gs.merged, gs.keyBuf = nil, nil // held by the cache: extend starts its own
	return gs
}

// extend returns the groups of gs with entries more merged in. gs is left
// as it was (it may be cached and shared): its groups are copied, its index
// only read, and groups new in more are indexed apart.
func (gs *llmGroups) extend(more []segment.AggEntry) *llmGroups {
	if len(more) == 0 {
		return gs
	}
	out := &llmGroups{entries: gs.entries, more: more, groupBy: gs.groupBy, bucket: gs.bucket,
		groups: slices.Clone(gs.groups), keys: slices.Clone(gs.keys), first: slices.Clone(gs.first),
		idx: map[string]int32{}, base: gs.idx, keyBuf: make([]byte, 0, 128)}
	for i := range more {
		out.add(&more[i], int32(len(gs.entries)+i))
	}
	return out
}

// add merges entry en (number i) into its group.
func (gs *llmGroups) add(en *segment.AggEntry, i int32) {
	// One dimension that is a key field needs no key of its own (a
	// session id, a model): the map takes the field's string.
	direct := gs.bucket == nil && len(gs.groupBy) == 1 && gs.groupBy[0] != "hour" && gs.groupBy[0] != "day"
	var k string
	if direct {
		k = groupValue(&en.Key, gs.groupBy[0])
	} else {
		gs.keyBuf = gs.keyBuf[:0]
		if gs.bucket != nil {
			gs.keyBuf = strconv.AppendInt(gs.keyBuf, gs.bucket(&en.Key), 10)
			gs.keyBuf = append(gs.keyBuf, 0)
		}
		for _, d := range gs.groupBy {
			gs.keyBuf = append(gs.keyBuf, groupValue(&en.Key, d)...)
			gs.keyBuf = append(gs.keyBuf, 0)
		}
	}
	var j int32
	var ok bool
	if direct {
		if j, ok = gs.base[k]; !ok {
			j, ok = gs.idx[k]
		}
	} else if j, ok = gs.base[string(gs.keyBuf)]; !ok {
		j, ok = gs.idx[string(gs.keyBuf)]
	}
	if !ok {
		g := llmGroup{M: en.M}
		if gs.bucket != nil {
			g.Bucket = gs.bucket(&en.Key)
		}
		if !direct {
			k = string(gs.keyBuf)
		}
		gs.idx[k] = int32(len(gs.groups))
		gs.groups, gs.keys, gs.first = append(gs.groups, g), append(gs.keys, k), append(gs.first, i)
		return
	}
	if gs.merged == nil {
		gs.merged = make([]bool, len(gs.groups), cap(gs.groups))
	}
	for len(gs.merged) < len(gs.groups) {
		gs.merged = append(gs.merged, false)
	}
	g := &gs.groups[j]
	if !gs.merged[j] {
		gs.merged[j] = true
		g.M.Latency, g.M.TTFT = cloneSketch(g.M.Latency), cloneSketch(g.M.TTFT)
	}
	mergeMeasures(&g.M, &en.M)
}

// key returns the aggregate key of group j (its first entry's).
func (gs *llmGroups) key(j int32) *segment.AggKey {
	if i := int(gs.first[j]); i >= len(gs.entries) {
		return &gs.more[i-len(gs.entries)].Key
	}
	return &gs.entries[gs.first[j]].Key
}

// compare orders groups a and b by cost, then spans, descending, then key.
func (gs *llmGroups) compare(a, b int32) int {
	x, y := &gs.groups[a].M, &gs.groups[b].M
	return cmp.Or(cmp.Compare(y.CostNanoUSD, x.CostNanoUSD), cmp.Compare(y.Spans, x.Spans), strings.Compare(gs.keys[a], gs.keys[b]))
}

// take returns the groups at positions order, in that order, with their keys.
func (gs *llmGroups) take(order []int32) []llmGroup {
	out := make([]llmGroup, len(order))
	for i, j := range order {
		g := gs.groups[j]
		k := gs.key(j)
		g.Key = make(map[string]string, len(gs.groupBy))
		for _, d := range gs.groupBy {
			g.Key[d] = groupValue(k, d)
		}
		out[i] = g
	}
	return out
}

func cloneSketch(s *sketch.Sketch) *sketch.Sketch {
	if s == nil {
		return nil
	}
	return s.Clone()
}

// LLMTimeseries returns the LLM statistics of q in time buckets of step
// (aligned to the Unix epoch), one group per (bucket, group-by key), sorted
// by bucket. Steps that are whole hours are answered from stored
// aggregates where possible; finer steps read the spans.
func (e *Engine) LLMTimeseries(ctx context.Context, project string, q *store.LLMQuery, step time.Duration) (store.LLMStats, error) {
	var res queryResult
	if step < time.Second || step%time.Second != 0 {
		return store.LLMStats{}, fmt.Errorf("step %s is not a whole number of seconds of at least 1s: %w", step, store.ErrBadRequest)
	}
	if err := checkGroupBy(q.GroupBy); err != nil {
		return store.LLMStats{}, err
	}
	if err := noTraceConditions(&q.Filter); err != nil {
		return store.LLMStats{}, err
	}
	var groups []llmGroup
	if step%time.Hour == 0 {
		entries, err := e.llmEntries(ctx, project, &q.Filter, newProjection(q.GroupBy, true), &res)
		if err != nil {
			return store.LLMStats{Result: res.Result}, err
		}
		stepSec := int64(step / time.Second)
		groups = groupEntries(entries, q.GroupBy, func(k *segment.AggKey) int64 { return k.Hour - k.Hour%stepSec })
	} else {
		// Finer than the stored hourly keys: aggregate rows per bucket.
		byBucket := map[int64]*segment.Aggregator{}
		v := e.view()
		defer v.release()
		err := e.llmScan(ctx, v, project, &q.Filter, &res,
			func(*segHandle, string) bool { return false }, func(*segHandle, int) bool { return false },
			func(s *model.Span) {
				b := int64(s.StartTimeUnixNano) / int64(step) * int64(step/time.Second)
				a := byBucket[b]
				if a == nil {
					a = segment.NewAggregator()
					byBucket[b] = a
				}
				a.Add(s)
			})
		if err != nil {
			return store.LLMStats{Result: res.Result}, err
		}
		for b, a := range byBucket {
			for _, g := range groupEntries(a.Entries(), q.GroupBy, nil) {
				g.Bucket = b
				groups = append(groups, g)
			}
		}
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].Bucket < groups[j].Bucket })
	return llmAnswer(groups, &res)
}
