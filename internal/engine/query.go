package engine

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
)

// segHandle is an open segment in the read view.
type segHandle struct {
	name   string
	r      *segment.Reader
	info   segment.Info
	blocks []segment.BlockMeta

	catMu sync.Mutex
	cats  map[int]*catalog // per block, built lazily by discovery queries
	// projCats merge the block catalogs of each project's blocks, for
	// discovery windows that hold all of them.
	projCats map[string]*catalog

	orderOnce sync.Once
	order     []int32 // block numbers newest first (newestFirst)

	aggs aggCache // LLM aggregates read so far
	ops  opsCache // service aggregates read so far

	// Blocks holding erased traces, per project, for the hide-set
	// generation taintGen (hide.go).
	taintMu  sync.Mutex
	taintGen uint64
	taint    map[string]taint

	// Lifetime: views hold references; a retired handle's file is closed
	// (and its resident index left to the collector) when the last view
	// holding it is released.
	refs      atomic.Int64
	retiring  atomic.Bool
	closeOnce sync.Once
}

// acquire takes a reference for a view. Callers hold Engine.mu (read), so a
// handle is never acquired once the published list no longer holds it.
func (h *segHandle) acquire() { h.refs.Add(1) }

// release drops a view's reference, closing a retired handle with it.
func (h *segHandle) release() {
	if h.refs.Add(-1) == 0 && h.retiring.Load() {
		h.close()
	}
}

// retire marks a handle that left the published list; it is closed now if
// no view holds it, else by the last release.
func (h *segHandle) retire() {
	h.retiring.Store(true)
	if h.refs.Load() == 0 {
		h.close()
	}
}

func (h *segHandle) close() {
	h.closeOnce.Do(func() {
		h.ops.release()
		h.r.Close()
	})
}

func newSegHandle(name string, r *segment.Reader) *segHandle {
	return &segHandle{name: name, r: r, info: r.Info(), blocks: r.Blocks(), cats: map[int]*catalog{}}
}

// newestFirst returns the segment's block numbers by MaxStart, newest
// first, the later block among equals. Blocks are only roughly
// time-ordered (they are clustered by trace), so the order is sorted once
// per open segment and kept.
func (h *segHandle) newestFirst() []int32 {
	h.orderOnce.Do(func() {
		o := make([]int32, len(h.blocks))
		for i := range o {
			o[i] = int32(len(o) - 1 - i)
		}
		slices.SortStableFunc(o, func(a, b int32) int { return cmp.Compare(h.blocks[b].MaxStart, h.blocks[a].MaxStart) })
		h.order = o
	})
	return h.order
}

// view is a consistent snapshot of what queries read: memtables newest
// first, then segments newest first. Sources earlier in the view hold newer
// copies of a re-sent span. A view holds its segments open until release.
type view struct {
	mems []*memtable
	segs []*segHandle
}

// view takes a snapshot; the caller must call release when done with it.
func (e *Engine) view() view {
	e.mu.RLock()
	defer e.mu.RUnlock()
	v := view{mems: make([]*memtable, 0, 1+len(e.frozen)), segs: make([]*segHandle, 0, len(e.segs))}
	v.mems = append(v.mems, e.active)
	for i := len(e.frozen) - 1; i >= 0; i-- {
		v.mems = append(v.mems, e.frozen[i])
	}
	for i := len(e.segs) - 1; i >= 0; i-- {
		e.segs[i].acquire()
		v.segs = append(v.segs, e.segs[i])
	}
	return v
}

// release lets go of the view's segments.
func (v view) release() {
	for _, h := range v.segs {
		h.release()
	}
}

// segments returns the published segments, oldest first, held open until
// release is called (for work outside a view, such as value collection).
func (e *Engine) segments() (segs []*segHandle, release func()) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	segs = slices.Clone(e.segs)
	for _, h := range segs {
		h.acquire()
	}
	return segs, func() {
		for _, h := range segs {
			h.release()
		}
	}
}

// queryResult is what a query gathers besides its answer: warnings about the
// damaged parts it skipped, and the first read error that was not damage,
// which fails the query.
type queryResult struct {
	store.Result
	ioErr error
}

// finish returns a query's answer, or the I/O error that fails it.
func finish[T any](out T, res *queryResult) (T, store.Result, error) {
	if res.ioErr != nil {
		var zero T
		return zero, res.Result, res.ioErr
	}
	return out, res.Result, nil
}

// readError is what a failed segment read was.
type readError int

const (
	readDamage      readError = iota // errors.Is(err, store.ErrCorruption)
	readUnsupported                  // a part this build cannot read (segment.ErrUnsupported)
	readIO                           // anything else: EIO, a closed or missing file
)

// classifyRead tells what a failed segment read was, and counts damage in
// rastro_corruption_errors_total and I/O failures in rastro_io_errors_total.
func (e *Engine) classifyRead(err error) readError {
	switch {
	case errors.Is(err, store.ErrCorruption):
		e.m.corruptions.Add(1)
		return readDamage
	case errors.Is(err, segment.ErrUnsupported):
		return readUnsupported
	}
	e.m.ioErrors.Add(1)
	return readIO
}

// readFailed handles an error reading segment seg during a query. Damage is
// isolated: the caller skips the part or falls back to reading more, and a
// warning names it. A part this build cannot read (a newer format) is
// skipped with a warning too, but is not damage. An I/O failure fails the
// query when it ends, so a part that could not be read is never left out
// of an answer silently.
func (e *Engine) readFailed(res *queryResult, seg string, err error) {
	switch e.classifyRead(err) {
	case readDamage:
		e.log.Error("segment damaged; part skipped", "segment", seg, "err", err)
	case readUnsupported:
		e.log.Warn("segment part this build cannot read; skipped", "segment", seg, "err", err)
	case readIO:
		e.log.Error("segment read failed: I/O error", "segment", seg, "err", err)
		if res.ioErr == nil {
			res.ioErr = fmt.Errorf("I/O error reading segment %s: %w", seg, err)
		}
		return
	}
	res.Warnings = append(res.Warnings, fmt.Sprintf("segment %s skipped: %v", seg, err))
}

// Trace returns every span of a trace, ordered by start time, each span once
// (the newest copy of a re-sent span), with stored values read back.
func (e *Engine) Trace(ctx context.Context, project string, id model.TraceID) ([]model.Span, store.Result, error) {
	return e.trace(ctx, project, id, true)
}

// trace is Trace; without resolve, spans from segments keep their
// stored-value references (for callers that do not return attributes).
func (e *Engine) trace(ctx context.Context, project string, id model.TraceID, resolve bool) ([]model.Span, store.Result, error) {
	var res queryResult
	if e.hidden().has(project, id) {
		return nil, res.Result, nil
	}
	v := e.view()
	defer v.release()
	seen := map[model.SpanID]bool{}
	var out []model.Span
	for _, m := range v.mems {
		for _, r := range m.traceRows(project, id) {
			if !seen[r.span.SpanID] {
				seen[r.span.SpanID] = true
				out = append(out, *r.span)
			}
		}
	}
	for _, s := range v.segs {
		if err := ctx.Err(); err != nil {
			return nil, res.Result, err
		}
		spans, err := s.r.FindTrace(project, id)
		if err != nil {
			e.readFailed(&res, s.name, err)
			continue
		}
		for i := range spans {
			if !seen[spans[i].SpanID] {
				seen[spans[i].SpanID] = true
				out = append(out, spans[i])
			}
		}
	}
	if c := e.cutoff(project); c != 0 {
		out = slices.DeleteFunc(out, func(s model.Span) bool { return s.StartTimeUnixNano < c })
	}
	sortByStart(out)
	if resolve {
		e.newResolver(&res.Result).spans(out)
	}
	return finish(out, &res)
}

func sortByStart(spans []model.Span) {
	sort.SliceStable(spans, func(i, j int) bool {
		a, b := &spans[i], &spans[j]
		if a.StartTimeUnixNano != b.StartTimeUnixNano {
			return a.StartTimeUnixNano < b.StartTimeUnixNano
		}
		return bytes.Compare(a.SpanID[:], b.SpanID[:]) < 0
	})
}

// before reports whether a sorts before b in result order: newest start
// first, then trace id, then span id.
func before(aStart uint64, aT model.TraceID, aS model.SpanID, bStart uint64, bT model.TraceID, bS model.SpanID) bool {
	if aStart != bStart {
		return aStart > bStart
	}
	if c := bytes.Compare(aT[:], bT[:]); c != 0 {
		return c < 0
	}
	return bytes.Compare(aS[:], bS[:]) < 0
}

// admits reports whether s sorts after cursor c (nil admits every span).
func admits(c *store.Cursor, s *model.Span) bool {
	return c == nil || before(c.Start, c.Trace, c.Span, s.StartTimeUnixNano, s.TraceID, s.SpanID)
}

// topK keeps the k spans that sort first; the worst of them on top of the heap.
type topK struct {
	k     int
	spans []model.Span
}

func (h *topK) Len() int { return len(h.spans) }
func (h *topK) Less(i, j int) bool {
	a, b := &h.spans[i], &h.spans[j]
	return before(b.StartTimeUnixNano, b.TraceID, b.SpanID, a.StartTimeUnixNano, a.TraceID, a.SpanID)
}
func (h *topK) Swap(i, j int) { h.spans[i], h.spans[j] = h.spans[j], h.spans[i] }
func (h *topK) Push(x any)    { h.spans = append(h.spans, x.(model.Span)) }
func (h *topK) Pop() any {
	n := len(h.spans) - 1
	x := h.spans[n]
	h.spans = h.spans[:n]
	return x
}

func (h *topK) full() bool { return len(h.spans) >= h.k }

// wouldKeep reports whether offer(s) would keep s.
func (h *topK) wouldKeep(s *model.Span) bool {
	if !h.full() {
		return true
	}
	w := &h.spans[0]
	return before(s.StartTimeUnixNano, s.TraceID, s.SpanID, w.StartTimeUnixNano, w.TraceID, w.SpanID)
}

// worstStart is the start time of the last span kept; only valid when full.
func (h *topK) worstStart() uint64 { return h.spans[0].StartTimeUnixNano }

func (h *topK) offer(s *model.Span) {
	if !h.full() {
		if h.spans == nil {
			h.spans = make([]model.Span, 0, h.k)
		}
		// Not heap.Push: it would box the span in an interface.
		h.spans = append(h.spans, detach(s, nil))
		heap.Fix(h, len(h.spans)-1)
		return
	}
	w := &h.spans[0]
	if before(s.StartTimeUnixNano, s.TraceID, s.SpanID, w.StartTimeUnixNano, w.TraceID, w.SpanID) {
		// The evicted span's attribute array is the heap's own copy:
		// the newcomer's attributes go into it.
		h.spans[0] = detach(s, w.Attributes[:0])
		heap.Fix(h, 0)
	}
}

// detach copies a span that scan handed over for the duration of a call
// (a write buffer's scratch span): its attribute, event and link arrays are
// copied (the attributes appended to attrs, which may be nil or an array
// of the caller's to reuse); strings and nested lists are never reused, so
// they are shared.
func detach(s *model.Span, attrs []model.KeyValue) model.Span {
	c := *s
	c.Attributes = nil
	if len(s.Attributes) > 0 {
		c.Attributes = append(attrs, s.Attributes...)
	}
	if len(s.Events) > 0 {
		c.Events = slices.Clone(s.Events)
		for i := range c.Events {
			c.Events[i].Attributes = slices.Clone(c.Events[i].Attributes)
		}
	}
	if len(s.Links) > 0 {
		c.Links = slices.Clone(s.Links)
		for i := range c.Links {
			c.Links[i].Attributes = slices.Clone(c.Links[i].Attributes)
		}
	}
	return c
}

// sorted returns the kept spans in result order.
func (h *topK) sorted() []model.Span {
	out := slices.Clone(h.spans)
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		return before(a.StartTimeUnixNano, a.TraceID, a.SpanID, b.StartTimeUnixNano, b.TraceID, b.SpanID)
	})
	return out
}

// candidate is a unit of data a search may read: a segment block or a
// memtable chunk, with the bounds used to order and prune it.
type candidate struct {
	maxStart uint64
	seg      *segHandle // a segment block ...
	segIdx   int        // the segment's index in the view
	block    int
	chunk    *chunk    // ... or a memtable chunk
	mem      *memtable // the chunk's memtable
	pid      uint32    // the project's number in it
	rows     int
	n        int64 // the memtable's published rows when the chunk was listed
	rank     int   // the source's position in the view: lower is newer
}

// SearchSpans returns up to limit spans matching f, newest first, starting
// after cursor (nil for the first page), and the cursor of the next page (nil
// when there is none).
func (e *Engine) SearchSpans(ctx context.Context, project string, f *query.Filter, limit int, cursor *store.Cursor) ([]model.Span, *store.Cursor, store.Result, error) {
	var res queryResult
	if limit <= 0 {
		limit = 20
	}
	// Ask for one extra span to know whether another page exists.
	top := &topK{k: limit + 1}
	err := e.scan(ctx, project, f, cursor, &res, func(s *model.Span, sc shadowCheck) {
		// Check for a newer copy only when the span would enter the result.
		if top.wouldKeep(s) && !sc.shadowed() {
			top.offer(s)
		}
	}, func() (uint64, bool) {
		if top.full() {
			return top.worstStart(), true
		}
		return 0, false
	})
	if err != nil {
		return nil, nil, res.Result, err
	}
	out := top.sorted()
	e.newResolver(&res.Result).spans(out)
	var next *store.Cursor
	if len(out) > limit {
		out = out[:limit]
		last := &out[limit-1]
		next = &store.Cursor{Start: last.StartTimeUnixNano, Trace: last.TraceID, Span: last.SpanID}
	}
	if res.ioErr != nil {
		return nil, nil, res.Result, res.ioErr
	}
	return out, next, res.Result, nil
}

// scan feeds every span of project that matches f and the cursor to emit,
// newest blocks first. A span from a write buffer is scratch: emit copies
// what it keeps beyond the call (its strings may be kept, its arrays may
// not; detach copies a whole span). With each span comes a shadowCheck, whose shadowed reports whether a
// newer source holds another copy of the same span (a re-send): only the
// newest copy of a span may appear in a result. It costs index lookups, so
// emit asks it only for spans it would keep. stopAt, when it reports ok,
// gives a start time below which no further span can change the result,
// letting the scan end early.
func (e *Engine) scan(ctx context.Context, project string, f *query.Filter, cursor *store.Cursor, res *queryResult,
	emit func(s *model.Span, sc shadowCheck), stopAt func() (uint64, bool)) error {
	f = e.visible(project, f)
	if f.NeedsTrace() {
		// Trace-level intrinsics read the whole trace, whatever the window:
		// one trace lookup per trace the scan meets.
		f = query.WithTraces(f, func(id model.TraceID) (query.TraceInfo, bool) {
			spans, r, err := e.trace(ctx, project, id, false)
			// A damaged part of the trace makes its root or extent unsure:
			// the answer says so (an erasure refuses to go on).
			res.Warnings = append(res.Warnings, r.Warnings...)
			if err != nil {
				if res.ioErr == nil {
					res.ioErr = err // an I/O error or the query's end: the scan stops
				}
				return query.TraceInfo{}, false
			}
			return query.TraceInfoOf(spans), len(spans) > 0
		})
	}
	if hs := e.hidden(); len(hs.traces) > 0 {
		inner := emit
		emit = func(s *model.Span, sc shadowCheck) {
			if !hs.has(project, s.TraceID) {
				inner(s, sc)
			}
		}
	}
	v := e.view()
	defer v.release()
	sh := newShadower(e, v, project, res)
	rv := e.newResolver(&res.Result)
	hints := f.Hints()
	brf := blockRowFilter(&hints)
	nc := 0
	for _, m := range v.mems {
		nc += len(*m.chunks.Load())
	}
	cands := make([]candidate, 0, nc) // sized once: a full buffer has hundreds of chunks
	tokens := e.contentTokens()
	for rank, m := range v.mems {
		pid, ok := m.projectID(project)
		if !ok {
			continue // no row of the project
		}
		for _, cv := range m.chunkViews() {
			c := cv.c
			if !m.chunkMayMatch(cv, pid, &hints, cursor) {
				continue
			}

			cands = append(cands, candidate{maxStart: c.maxStart.Load(), chunk: c, mem: m, pid: pid, rows: cv.rows, n: cv.n, rank: rank})
		}
	}
	content := len(hints.ContentHashes) > 0
	cs := contentScan{e: e, res: res, hashes: hints.ContentHashes, check: rowCheckQuery(f), rv: rv}
	if content {
		cs.segs = make([]segContent, len(v.segs))
	}
	// Segments are not listed block by block: each is a cursor over its
	// blocks newest first, merged with the others, and a block's filters
	// are tested only when the scan reaches it, so a search that stops
	// after the newest blocks costs nothing per block of the older
	// segments (issue 23: listing and testing every block of 6M spans took
	// most of a selective filter's time).
	segs := make(segMerge, 0, len(v.segs))
	for si, s := range v.segs {
		// The resident summary rejects a segment without any I/O; the
		// block filters are read only when the scan reaches the segment (a
		// query that stops early never reads them).
		if content && s.r.HasTokenFilters() && !s.r.SegmentMayContainTokens(hints.ContentHashes) {
			e.m.contentSegPruned.Add(1)
			continue
		}
		// The attribute value summary rejects a segment that holds none of
		// the values the filter requires, before any block filter.
		if !segMayMatchAttrs(s, &hints) {
			e.m.attrSegPruned.Add(1)
			continue
		}
		if order := s.newestFirst(); len(order) > 0 {
			segs = append(segs, segCursor{s: s, si: si, rank: len(v.mems) + si, order: order})
		}
	}
	heap.Init(&segs)
	scratch := spanDecoder{reuse: true}
	// The row filter of the buffer whose chunks are being read (its
	// entries are hashed with the project's number in that buffer), and
	// the content words' bits in a row's token signature.
	var rf *rowFilter
	var rfMem *memtable
	tokenMask := rowSigMask(hints.ContentHashes)
	// Newest first; memtables before segments among equals, so that the newest
	// copy of a re-sent span is usually the one seen first.
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.maxStart, a.maxStart) })
	for {
		var c candidate
		switch {
		case len(cands) > 0 && (len(segs) == 0 || cands[0].maxStart >= segs.top()):
			c, cands = cands[0], cands[1:]
		case len(segs) > 0:
			sc := &segs[0]
			if content && cs.segs[sc.si].pruned {
				// The token map ruled the segment out when the scan
				// reached its first block: its other blocks are not
				// walked one by one (a word its resident summary passes
				// but no span holds would visit every block).
				segs.drop()
				continue
			}
			c = candidate{maxStart: segs.top(), seg: sc.s, segIdx: sc.si, block: int(sc.order[sc.next]), rank: sc.rank}
			if sc.next++; sc.next == len(sc.order) {
				segs.drop()
			} else {
				heap.Fix(&segs, 0)
			}
		default:
			return res.ioErr // set by a failed read, or a failed trace lookup of the last block
		}
		if limit, ok := stopAt(); ok && c.maxStart < limit {
			break
		}
		if c.seg != nil && !e.blockReached(c, project, &hints, cursor, &cs) {
			continue
		}
		if res.ioErr != nil {
			return res.ioErr // the query fails: read nothing more
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.chunk != nil {
			// The chunk's token filter is consulted (and built, the first
			// time) only when the scan reaches the chunk: a search that
			// stops early never pays for the chunks it does not read.
			may, sigs := c.mem.chunkMayHoldTokens(chunkView{c.chunk, c.rows, c.n}, hints.ContentHashes, tokens)
			if !may {
				c.mem.chunksPruned.Add(1)
				e.m.contentChunkPruned.Add(1)
				continue
			}
			if c.mem != rfMem {
				rf, rfMem = newRowFilter(&hints, c.pid), c.mem
			}
			e.scanChunk(c, f, &hints, cursor, &scratch, rf, sigs, tokenMask, emit, sh)
			continue
		}
		var spans []model.Span
		var err error
		if content && c.seg.r.HasTokenFilters() {
			var ok bool
			if spans, ok, err = cs.read(c.seg, c.segIdx, c.block); !ok {
				continue
			}
		} else {
			e.m.blocksExamined.Add(1)
			spans, err = e.readMatching(c.seg, c.block, brf)
		}
		if err != nil {
			e.readFailed(res, c.seg.name, err)
			continue
		}
		rank := c.rank // not c: a closure holding c would move it to the heap per block
		// Memtable spans never hold stored-value references; a segment's
		// may, when it lists any (as garbage collection relies on too):
		// without, no span is checked for them.
		refs := c.seg.r.HasValueRefs()
		for i := range spans {
			if !admits(cursor, &spans[i]) {
				continue
			}
			if !refs {
				if sp := &spans[i]; f.Match(sp) {
					emit(sp, shadowCheck{sh, rank, sp})
				}
				continue
			}
			if sp, ok := rv.match(f, &spans[i]); ok {
				emit(sp, shadowCheck{sh, rank, sp})
			}
		}
	}
	return res.ioErr
}

// blockReached decides whether the scan reads segment block c, which it
// has just reached: the block must be of the project and pass its
// metadata and filters, and, for a content search, the segment's token
// map (consulted when the scan first reaches the segment).
func (e *Engine) blockReached(c candidate, project string, hints *query.Hints, cursor *store.Cursor, cs *contentScan) bool {
	s, i := c.seg, c.block
	b := &s.blocks[i]
	if b.Project != project {
		return false
	}
	if len(hints.ContentHashes) > 0 && s.r.HasTokenFilters() {
		// The token map (three small page reads per word) decides at
		// once whether the segment is out, or which few blocks and rows
		// may hold the words.
		st := &cs.segs[c.segIdx]
		if !st.mapped {
			st.mapped = true
			cs.locate(s, st)
		}
		if st.pruned {
			return false
		}
		if st.located && !st.may[i] {
			e.m.contentBlockPruned.Add(1) // ruled out by the token map
			return false
		}
	}
	if !e.blockMayMatch(s, i, b, hints, cursor) {
		e.m.blocksPruned.Add(1)
		return false
	}
	return true
}

// segCursor walks a segment's blocks newest first (segHandle.newestFirst).
type segCursor struct {
	s     *segHandle
	si    int // the segment's index in the view
	rank  int // its position in the view: lower is newer
	order []int32
	next  int // the next block in order
}

// segMerge is a heap of segment cursors: the one whose next block has the
// newest MaxStart on top, the newer segment among equals (the order a
// stable sort of every block, listed newest segment first, would give).
type segMerge []segCursor

func (m segMerge) Len() int { return len(m) }
func (m segMerge) Less(i, j int) bool {
	a, b := m[i].maxStart(), m[j].maxStart()
	if a != b {
		return a > b
	}
	return m[i].rank < m[j].rank
}
func (m segMerge) Swap(i, j int) { m[i], m[j] = m[j], m[i] }
func (m *segMerge) Push(x any)   { *m = append(*m, x.(segCursor)) }
func (m *segMerge) Pop() any {
	old := *m
	x := old[len(old)-1]
	*m = old[:len(old)-1]
	return x
}

// drop removes the cursor on top (heap.Pop would box it).
func (m *segMerge) drop() {
	n := len(*m) - 1
	(*m)[0] = (*m)[n]
	*m = (*m)[:n]
	if n > 0 {
		heap.Fix(m, 0)
	}
}

// top is the MaxStart of the next block of the cursor on top.
func (m segMerge) top() uint64 { return m[0].maxStart() }

func (c *segCursor) maxStart() uint64 { return c.s.blocks[c.order[c.next]].MaxStart }

// scanChunk feeds the spans of a write buffer chunk that match f and the
// cursor to emit. The ids and times in the rows, the rows' token
// signatures (sigs, by row, the first len(sigs) rows: a row whose signature
// lacks a bit of mask lacks a word of the content query) and the row filter
// rf (of c's buffer and project) rule spans out before they are decoded;
// the others are decoded into scratch, which emit gets for the duration of
// the call (see scan).
func (e *Engine) scanChunk(c candidate, f *query.Filter, hints *query.Hints, cursor *store.Cursor, scratch *spanDecoder,
	rf *rowFilter, sigs []uint64, mask uint64, emit func(s *model.Span, sc shadowCheck), sh *shadower) {
	c.mem.chunksScanned.Add(1)
	a := c.mem.arena() // loaded after the rows were counted: covers them
	var decoded int64
	for i := 0; i < c.rows; i++ {
		r := &c.chunk.rows[i]
		if !r.liveFor(c.n) || r.project != c.pid ||
			(hints.Start != 0 && r.start < hints.Start) || (hints.End != 0 && r.start >= hints.End) ||
			(cursor != nil && !before(cursor.Start, cursor.Trace, cursor.Span, r.start, r.traceID, r.spanID)) ||
			(i < len(sigs) && sigs[i]&mask != mask) || !rf.mayMatch(&a, r) {
			continue
		}
		s := &scratch.s
		a.materialise(r, s, scratch)
		decoded++
		if f.Match(s) {
			emit(s, shadowCheck{sh, c.rank, s})
		}
	}
	c.mem.rowsDecoded.Add(decoded)
}

// segContent is a segment's token-filter state within one content scan.
type segContent struct {
	mapped  bool // the token map was consulted (locate)
	checked bool
	pruned  bool   // the token map (or disk summary) rejected the segment
	may     []bool // per block: may hold the words (nil = unknown, scan)
	// located: the token map placed the words in places (ordered by
	// block and row), the only rows of the segment that may hold them;
	// may is then true for their blocks only.
	located bool
	places  []segment.TokenPlace
	// checkRows: the query's words may lie apart in a candidate row (a
	// phrase, or several words), so the texts of the candidate rows are
	// checked before any row is decoded.
	checkRows bool
}

// contentScan consults the token index of a content query: as the scan
// lists a segment's blocks, its token map (three small pages per word),
// which rules the segment out or names the one block and rows that may
// hold the words, so that a rare word decodes one row, and a word in a
// few spans (a phrase's words, also apart in a decoy) those few rows; for
// words spread over more places, when the scan reaches the segment, its block
// filters (batched reads), then the row-group filters of each block that
// passed, where a segment has them. It is adaptive: once the block filters
// have passed most of the blocks they were asked about, the words are
// common and the filters cost more than they save, so the rest of the scan
// reads whole blocks without consulting them.
type contentScan struct {
	e      *Engine
	res    *queryResult
	hashes []uint64
	segs   []segContent
	// check is the content query a located segment's candidate rows are
	// checked against before they are decoded (rowCheckQuery), or nil; rv
	// resolves the stored values of their texts.
	check *text.Query
	rv    *resolver
	// Block filters consulted and passed so far in this scan.
	tested, passed int
}

// commonAfter is how many block-filter answers the scan sees before it may
// decide that the words are common.
const commonAfter = 16

func (cs *contentScan) common() bool {
	return cs.tested >= commonAfter && 2*cs.passed > cs.tested
}

// read returns the spans of block i of s that may hold the words: ok is
// false when the filters rule the block out.
func (cs *contentScan) read(s *segHandle, si, i int) (spans []model.Span, ok bool, err error) {
	e := cs.e
	st := &cs.segs[si]
	if !st.checked {
		st.checked = true
		cs.checkFilters(s, st)
	}
	if st.pruned {
		return nil, false, nil
	}
	if st.may != nil {
		if !st.may[i] {
			e.m.contentBlockPruned.Add(1)
			return nil, false, nil
		}
	}
	e.m.contentBlockExamined.Add(1)
	e.m.blocksExamined.Add(1)
	n := s.blocks[i].Spans
	groups := (n + segment.RowGroupRows - 1) / segment.RowGroupRows
	if st.located {
		return cs.readRows(s, si, i, st.places)
	}
	if st.may == nil || cs.common() || !s.r.HasRowGroupFilters() {
		spans, err = e.readBlock(s, i)
		return spans, true, err
	}
	if cached, hit := e.cache.get(blockRef{s, i}); hit {
		return cached, true, nil
	}
	ranges, gerr := s.r.BlockRowsMayContainTokens(i, cs.hashes)
	if gerr != nil {
		e.readFailed(cs.res, s.name, gerr) // a damaged filter: read the whole block
		spans, err = e.readBlock(s, i)
		return spans, true, err
	}
	rows := 0
	for _, r := range ranges {
		rows += r.Hi - r.Lo
	}
	passed := (rows + segment.RowGroupRows - 1) / segment.RowGroupRows
	e.m.contentGroupExamined.Add(int64(passed))
	e.m.contentGroupPruned.Add(int64(groups - passed))
	switch {
	case rows == 0:
		return nil, false, nil
	case 2*rows > n:
		// Most of the block: read it whole, through the cache.
		spans, err = e.readBlock(s, i)
	default:
		spans, err = s.r.ReadBlockRows(i, ranges)
	}
	return spans, true, err
}

// readRows reads the rows of block i the token map located the words in
// (places, ordered): a row or row group decodes (and decompresses) only
// its rows.
func (cs *contentScan) readRows(s *segHandle, si, i int, places []segment.TokenPlace) ([]model.Span, bool, error) {
	e := cs.e
	n := s.blocks[i].Spans
	var buf [4]segment.RowRange
	ranges, rows, passed := buf[:0], 0, 0
	for _, p := range places {
		if p.Block == i {
			ranges = append(ranges, p.Rows)
			rows += p.Rows.Hi - p.Rows.Lo
			passed += (p.Rows.Hi - p.Rows.Lo + segment.RowGroupRows - 1) / segment.RowGroupRows
		}
	}
	groups := (n + segment.RowGroupRows - 1) / segment.RowGroupRows
	e.m.contentGroupExamined.Add(int64(passed))
	e.m.contentGroupPruned.Add(int64(max(groups-passed, 0)))
	if cached, hit := e.cache.get(blockRef{s, i}); hit {
		return cached, true, nil
	}
	if 2*rows > n {
		spans, err := e.readBlock(s, i)
		return spans, true, err
	}
	if cs.segs[si].checkRows && rows <= maxCheckedRows {
		return cs.checkTexts(s, i, ranges)
	}
	spans, err := s.r.ReadBlockRows(i, ranges)
	return spans, true, err
}

// maxCheckedRows bounds the candidate rows of a block whose texts are
// checked before they are decoded; more are decoded at once (the check
// would cost about as much as the decoding it saves).
const maxCheckedRows = 2 * segment.RowGroupRows

// rowCheckQuery returns the content query of f when the token map's
// answer may leave rows that do not match it: a phrase (or a CJK word, a
// phrase of ideographs) whose words a row holds apart, or several words; a
// single word's rows all hold it. Content conditions inside an expression
// are left to the full match.
func rowCheckQuery(f *query.Filter) *text.Query {
	if q := f.Content; q != nil && (len(q.Phrases) > 0 || len(q.Terms) > 1) {
		return q
	}
	return nil
}

// checkTexts reads only the texts of the candidate rows of block i
// (segment.ReadRowTexts: no ids, times or names decompressed), resolves
// their stored values and decodes in full only the rows that match the
// query: a decoy row that holds a phrase's words apart is rejected without
// being decoded. ok is false when no row matches.
func (cs *contentScan) checkTexts(s *segHandle, i int, ranges []segment.RowRange) ([]model.Span, bool, error) {
	texts, err := s.r.ReadRowTexts(i, ranges)
	if err != nil {
		return nil, true, err
	}
	var out []segment.RowRange
	k := 0
	for _, rg := range ranges {
		for row := rg.Lo; row < rg.Hi && k < len(texts.Spans); row, k = row+1, k+1 {
			sp := &texts.Spans[k]
			if spanHasRefs(sp) {
				r := cs.rv.span(sp)
				sp = &r
			}
			if !cs.check.Matches(sp, 0) {
				cs.e.m.contentRowsRejected.Add(1)
				continue
			}
			if n := len(out); n > 0 && out[n-1].Hi == row {
				out[n-1].Hi++
			} else {
				out = append(out, segment.RowRange{Lo: row, Hi: row + 1})
			}
		}
	}
	if len(out) == 0 {
		return nil, false, nil
	}
	spans, err := texts.Decode(out)
	return spans, true, err
}

// locate consults the token map (or, in older segments, the disk summary)
// of s; the scan calls it once per segment, as it lists the blocks.
func (cs *contentScan) locate(s *segHandle, st *segContent) {
	e := cs.e
	loc, err := s.r.LocateTokens(cs.hashes)
	if err != nil {
		e.readFailed(cs.res, s.name, err) // a damaged page: consult the block filters
	}
	if loc.Absent {
		e.m.contentSegPruned.Add(1)
		e.m.contentSegDiskPruned.Add(1)
		st.pruned = true
		return
	}
	e.m.contentSegExamined.Add(1)
	if loc.Places != nil {
		// The words lie in these few places only: no block filter is read.
		st.located, st.places = true, loc.Places
		st.checked = true
		// Even one candidate row is checked: when the answer lies in
		// another segment, a decoy's segment names the decoy's row only.
		st.checkRows = cs.check != nil
		st.may = make([]bool, len(s.blocks))
		for _, p := range loc.Places {
			st.may[p.Block] = true
		}
	}
}

// checkFilters consults the block filters of s (batched reads) when the
// scan first reaches one of its blocks, unless the words are common by
// then.
func (cs *contentScan) checkFilters(s *segHandle, st *segContent) {
	e := cs.e
	if cs.common() {
		return
	}
	// One batched read of the block filters (neighbours read together).
	may, err := s.r.BlocksMayContainTokens(cs.hashes)
	if err != nil {
		e.readFailed(cs.res, s.name, err) // a damaged filter: scan the blocks
		return
	}
	st.may = may
	for _, m := range may {
		cs.tested++
		if m {
			cs.passed++
		}
	}
}

// blockMayMatch prunes a block with its resident metadata and filters.
func (e *Engine) blockMayMatch(s *segHandle, i int, b *segment.BlockMeta, h *query.Hints, cursor *store.Cursor) bool {
	if h.End != 0 && b.MinStart >= h.End {
		return false
	}
	if h.Start != 0 && b.MaxStart < h.Start {
		return false
	}
	if cursor != nil && b.MinStart > cursor.Start {
		return false
	}
	if h.MinDuration != 0 && b.MaxDuration < h.MinDuration {
		return false
	}
	if h.MaxDuration != 0 && b.MinDuration > h.MaxDuration {
		return false
	}
	if h.HasStatus && h.Status == model.StatusError && b.Errors == 0 {
		return false
	}
	if len(h.Kinds) > 0 {
		any := false
		for _, k := range h.Kinds {
			if k >= 0 && k < 8 && b.Kinds&(1<<uint(k)) != 0 {
				any = true
			}
		}
		if !any {
			return false
		}
	}
	if h.Services != nil && !intersects(b.Services, h.Services) {
		return false
	}
	if h.Names != nil && !intersects(b.Names, h.Names) {
		return false
	}
	for _, a := range h.AttrEquals {
		switch a.Scope {
		case query.ScopeSpan:
			if !s.r.MayContainAttr(i, false, a.Key, a.Value) {
				return false
			}
		case query.ScopeResource:
			if !s.r.MayContainAttr(i, true, a.Key, a.Value) {
				return false
			}
		case query.ScopeAny:
			if !s.r.MayContainAttr(i, false, a.Key, a.Value) && !s.r.MayContainAttr(i, true, a.Key, a.Value) {
				return false
			}
		} // other scopes (events, links): the filters do not cover them
	}
	if len(h.AttrAnyOf) > 0 && s.r.IntEntriesCoverDoubles() {
		for j := range h.AttrAnyOf {
			if !mayHoldOneOf(&h.AttrAnyOf[j], true, func(res bool, k, v string) bool { return s.r.MayContainAttr(i, res, k, v) },
				func(res bool, k string, v int64) bool { return s.r.MayContainIntAttr(i, res, k, v) }) {
				return false
			}
		}
	}
	return true
}

// mayHoldOneOf reports whether a span may have attribute a with one of its
// values, by the membership tests str and num (for a scope: resource or
// span). ints says whether num answers for doubles too (see
// segment.Reader.IntEntriesCoverDoubles); when it does not, a hint with an
// integer rules nothing out. Scopes other than span, resource and any are
// not summarised: they pass.
func mayHoldOneOf(a *query.AttrAnyOf, ints bool, str func(resource bool, key, v string) bool, num func(resource bool, key string, v int64) bool) bool {
	if len(a.Ints) > 0 && !ints {
		return true
	}
	var scopes []bool
	switch a.Scope {
	case query.ScopeSpan:
		scopes = []bool{false}
	case query.ScopeResource:
		scopes = []bool{true}
	case query.ScopeAny:
		scopes = []bool{false, true}
	default:
		return true
	}
	for _, res := range scopes {
		for _, v := range a.Strs {
			if str(res, a.Key, v) {
				return true
			}
		}
		for _, v := range a.Ints {
			if num(res, a.Key, v) {
				return true
			}
		}
	}
	return false
}

// segMayMatchAttrs reports whether segment s may hold a span with every
// attribute value the hints require, from its resident attribute value
// summary (a segment without one may).
func segMayMatchAttrs(s *segHandle, h *query.Hints) bool {
	if len(h.AttrEquals)+len(h.AttrAnyOf) == 0 || !s.r.HasAttrSummary() {
		return true
	}
	for j := range h.AttrAnyOf {
		if !mayHoldOneOf(&h.AttrAnyOf[j], s.r.IntEntriesCoverDoubles(), s.r.SegmentMayContainAttr, s.r.SegmentMayContainIntAttr) {
			return false
		}
	}
	for _, a := range h.AttrEquals {
		switch a.Scope {
		case query.ScopeSpan:
			if !s.r.SegmentMayContainAttr(false, a.Key, a.Value) {
				return false
			}
		case query.ScopeResource:
			if !s.r.SegmentMayContainAttr(true, a.Key, a.Value) {
				return false
			}
		case query.ScopeAny:
			if !s.r.SegmentMayContainAttr(false, a.Key, a.Value) && !s.r.SegmentMayContainAttr(true, a.Key, a.Value) {
				return false
			}
		}
	}
	return true
}

// intersects reports whether sorted set has any of want.
func intersects(set []string, want []string) bool {
	for _, w := range want {
		if _, ok := slices.BinarySearch(set, w); ok {
			return true
		}
	}
	return false
}

// SearchTraces returns up to limit traces having at least one span matching f,
// the traces with the newest matching spans first.
func (e *Engine) SearchTraces(ctx context.Context, project string, f *query.Filter, limit int) ([]store.TraceSummary, store.Result, error) {
	var res queryResult
	if limit <= 0 {
		limit = 20
	}
	newest := map[model.TraceID]uint64{}
	matched := map[model.TraceID]int{}
	var order []model.TraceID
	// bound holds the first-seen matching time of up to limit traces, smallest
	// on top. Its minimum never exceeds the true limit-th newest trace time, so
	// stopping below it is safe.
	bound := &uintHeap{}
	err := e.scan(ctx, project, f, nil, &res, func(s *model.Span, sc shadowCheck) {
		if sc.shadowed() {
			return
		}
		t, ok := newest[s.TraceID]
		if !ok {
			order = append(order, s.TraceID)
			heap.Push(bound, s.StartTimeUnixNano)
			if bound.Len() > limit {
				heap.Pop(bound)
			}
		}
		if !ok || s.StartTimeUnixNano > t {
			newest[s.TraceID] = s.StartTimeUnixNano
		}
		matched[s.TraceID]++
	}, func() (uint64, bool) {
		if bound.Len() < limit {
			return 0, false
		}
		return (*bound)[0], true
	})
	if err != nil {
		return nil, res.Result, err
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := newest[order[i]], newest[order[j]]
		if a != b {
			return a > b
		}
		return bytes.Compare(order[i][:], order[j][:]) < 0
	})
	if len(order) > limit {
		order = order[:limit]
	}
	out := make([]store.TraceSummary, 0, len(order))
	for _, id := range order {
		spans, r, err := e.trace(ctx, project, id, false) // a summary needs no attribute values
		res.Warnings = append(res.Warnings, r.Warnings...)
		if err != nil {
			return nil, res.Result, err
		}
		sum := store.Summarize(id, spans)
		sum.Matched = matched[id]
		out = append(out, sum)
	}
	return finish(out, &res)
}

type uintHeap []uint64

func (h uintHeap) Len() int           { return len(h) }
func (h uintHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h uintHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *uintHeap) Push(x any)        { *h = append(*h, x.(uint64)) }
func (h *uintHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
