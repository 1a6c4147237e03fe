package engine

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
)

// chunkRows is the number of rows in one memtable chunk. Chunks never move
// once allocated, so readers can hold row pointers without a lock.
const chunkRows = 4096

// pageBytes is the size of one page of the buffer's arena (a span larger
// than a quarter of it gets a page of its own size).
const pageBytes = 256 << 10

// slot is one span in the write buffer: its ids and times, and where the
// rest of it is encoded in the buffer's arena (memtable_codec.go). A slot
// holds no pointer, so neither do the chunks: the collector does not scan
// the buffer, and the decoded request is garbage once it is inserted.
type slot struct {
	traceID    model.TraceID
	spanID     model.SpanID
	start, end uint64
	// supersededBy is 1 + the index of the row holding the next newer copy
	// of the same (trace id, span id), or 0. A reader that loaded n
	// published rows treats the row as superseded only when the newer row is
	// among its n: otherwise it would see neither copy while a re-send is
	// being published. Following it from a span's first row reaches its
	// newest copy.
	supersededBy atomic.Int64
	// nextInTrace is 1 + the index of the next row of the same trace (first
	// copies only; see memtable.byTrace), or 0; tailInTrace, in a trace's
	// first row, is 1 + the index of its last, and traceSpans the number of
	// rows in the chain. Written and read under memtable.mu.
	nextInTrace, tailInTrace int64
	traceSpans               int32
	// trace numbers the row's (project, trace id) in this buffer, densely
	// from 0 in order of first appearance, so that a seal can keep a
	// figure per trace in a slice rather than a map.
	trace uint32
	// project is the project's number in the buffer (memtable.projects).
	project uint32
	// page, off and size locate the encoding in the arena.
	page, off, size uint32
	// sig is the row's entry signature: rowSigBits of the value-set hashes
	// of its service, span name and top-level span attributes (not its
	// resource's), written before the row is published. A row lacking a
	// bit of an entry lacks the entry: the row filter skips it without
	// reading its encoding.
	sig uint64
}

// liveFor reports whether the row is the newest copy among the first n rows.
func (r *slot) liveFor(n int64) bool {
	s := r.supersededBy.Load()
	return s == 0 || s-1 >= n
}

// row is a buffered span as readers see it: its project and the span,
// materialised from its slot. A row from scan is valid only during the
// callback; one from traceRows is the caller's.
type row struct {
	project string
	span    *model.Span
}

// chunk is 4,096 rows with their start-time bounds and the summary of
// their values (memtable_summary.go), the unit a search prunes and orders
// like a segment block.
type chunk struct {
	rows [chunkRows]slot
	// Bounds of the span start times written into this chunk, maintained by
	// the writer before it publishes rows. A reader may see bounds that already
	// include unpublished rows: wider, so still safe for pruning.
	minStart, maxStart atomic.Uint64
	maxDuration        atomic.Uint64
	sum                chunkSummary
}

type spanKey struct {
	project string
	trace   model.TraceID
	span    model.SpanID
}

type traceKey struct {
	project string
	trace   model.TraceID
}

// bufSpanKey and bufTraceKey are the memtable's lookup keys; they name a
// project by its number in the memtable (memtable.projects): fixed-size
// keys hash faster than strings.
type bufSpanKey struct {
	project uint32
	trace   model.TraceID
	span    model.SpanID
}

type bufTraceKey struct {
	project uint32
	trace   model.TraceID
}

// memtable is the in-memory write buffer. One writer (the WAL commit
// goroutine) appends; any number of readers scan concurrently without
// blocking it:
//
//   - rows are written into fixed chunks and their encodings into the
//     arena's pages, then published by storing n (release); readers load n
//     (acquire) and read rows [0, n) lock-free. Everything a row refers to
//     (its page, resource, scope, project name) is published before it;
//   - a re-sent span is appended as a new row and the older row is marked
//     dead, so the newest copy wins and readers never see both;
//   - mu guards only the lookup maps, held briefly by the writer per batch
//     and by trace lookups to copy a row list.
type memtable struct {
	created time.Time
	// walEnd is the first WAL file sequence NOT covered by this memtable,
	// set when it is frozen (records in files < walEnd live here or earlier).
	walEnd uint64

	chunks atomic.Pointer[[]*chunk]
	n      atomic.Int64 // published rows
	bytes  atomic.Int64 // estimated resident bytes of published rows
	live   atomic.Int64 // published rows not marked dead

	// The arena: pages of encoded spans, appended to and never changed
	// once a row refers to them; the decoded resources and scopes rows
	// refer to by number; the projects' names by number. Copy-on-write
	// slices, stored before the rows that use them are published.
	pages     atomic.Pointer[[][]byte]
	resources atomic.Pointer[[]*model.Resource]
	scopes    atomic.Pointer[[]*model.Scope]
	names     atomic.Pointer[[]string]

	// The writer's own state (only the writer touches it).
	page   []byte // the last page, its length the bytes used
	enc    []byte // scratch for one encoding
	resKey map[string]int
	scoKey map[string]int
	sum    summaryWriter

	// Chunks searches ruled out on their summaries, chunks they read, and
	// rows they decoded (for tests and benchmarks).
	chunksPruned, chunksScanned, rowsDecoded atomic.Int64
	// chunkTokensHint is the distinct token count of the last full chunk
	// whose token filter was built: the size of an open chunk's filter.
	chunkTokensHint atomic.Int64

	mu sync.Mutex
	// projects numbers the buffer's projects (project -> uint32, in order
	// of first row; names holds them by number). Written by insert under
	// mu, read without it: a search looks its project up and must not wait
	// while insert holds mu for a request's spans.
	projects sync.Map
	// perProject counts live rows and distinct traces by project number,
	// for statistics without a scan.
	perProject []projectCounts
	// byKey is the index of a span's newest row, for the spans of traces of
	// at least chainedTrace spans only: a re-send in a smaller trace is
	// found by walking the trace's chain, which costs less than keeping a
	// map entry for every span.
	byKey map[bufSpanKey]int64
	// byTrace is 1 + the index of a trace's first row; its other first-copy
	// rows chain through slot.nextInTrace (no per-trace slice to grow).
	byTrace map[bufTraceKey]int64
	// traceBits is a Bloom filter of the buffer's (project, trace id)
	// keys (traceProbes), set by the writer before a trace's first row is
	// published and read without a lock, so that a lookup of a trace the
	// buffer does not hold (most lookups: traces older than a seal) never
	// waits for mu. A power of two of words, sized for the previous
	// buffer's traces; counted in the estimate with the first row.
	traceBits []atomic.Uint64
}

// traceBitsPerTrace is the filter's bits per trace of the previous buffer:
// with traceProbes' 3 probes about 0.5% false positives while the buffer
// holds no more traces than that one.
const traceBitsPerTrace = 16

// traceProbes calls fn with the 3 bit positions of tk in a filter of
// 64*words bits (a power of two).
func traceProbes(tk bufTraceKey, words int, fn func(bit uint64) bool) bool {
	h := maphash.Comparable(summarySeed, tk)
	step := mix64(h) | 1
	mask := uint64(words)*64 - 1
	for range 3 {
		if !fn(h & mask) {
			return false
		}
		h += step
	}
	return true
}

// mayHoldTrace reports whether the buffer may hold a row of tk; false is
// certain.
func (m *memtable) mayHoldTrace(tk bufTraceKey) bool {
	return traceProbes(tk, len(m.traceBits), func(bit uint64) bool {
		return m.traceBits[bit>>6].Load()&(1<<(bit&63)) != 0
	})
}

// chainedTrace is the number of spans from which a trace's spans are
// indexed in memtable.byKey; below it a re-send is found by walking the
// trace's chain (at most chainedTrace-1 rows, all in the row chunks).
const chainedTrace = 16

// newMemtable makes an empty write buffer whose lookup maps are sized for
// the previous buffer's rows and traces (prev nil: small), so a buffer that
// fills like the last one never grows them.
func newMemtable(now time.Time, prev *memtable) *memtable {
	var rows, traces int
	if prev != nil {
		prev.mu.Lock()
		rows, traces = len(prev.byKey), len(prev.byTrace)
		prev.mu.Unlock()
	}
	words := 8192 // 64 KiB: about 25,000 traces at 0.25% before a first seal sizes it
	for words*64 < traces*traceBitsPerTrace {
		words *= 2
	}
	m := &memtable{
		created:   now,
		traceBits: make([]atomic.Uint64, words),
		byKey:     make(map[bufSpanKey]int64, rows),
		byTrace:   make(map[bufTraceKey]int64, traces),
		resKey:    make(map[string]int),
		scoKey:    make(map[string]int),
	}
	// The maps' room is counted as rows fill it (spanKeyBytes and
	// traceKeyBytes allow for it), not up front: an empty buffer must never
	// count as full, or appends would be refused with nothing to seal.
	m.chunks.Store(&[]*chunk{})
	m.pages.Store(&[][]byte{})
	m.resources.Store(&[]*model.Resource{})
	m.scopes.Store(&[]*model.Scope{})
	m.names.Store(&[]string{})
	return m
}

func (m *memtable) row(i int64) *slot {
	cs := *m.chunks.Load()
	return &cs[i/chunkRows].rows[i%chunkRows]
}

// store copies an encoding into the arena and returns where it is, and
// the bytes of any page it had to allocate. Writer only. The page list
// holds each page at its full length, so the writer fills a page in place
// and readers reach every byte of it that a published row refers to.
func (m *memtable) store(b []byte) (page, off uint32, added int64) {
	if len(m.page)+len(b) > cap(m.page) {
		size := pageBytes
		if len(b) > pageBytes/4 {
			size = len(b) // a large span gets a page of its own
		}
		m.page = make([]byte, 0, size)
		ps := *m.pages.Load()
		grown := make([][]byte, len(ps), len(ps)+1)
		copy(grown, ps)
		grown = append(grown, m.page[:size])
		m.pages.Store(&grown)
		added = int64(size)
	}
	off = uint32(len(m.page))
	m.page = append(m.page, b...)
	return uint32(len(*m.pages.Load()) - 1), off, added
}

// resourceOf returns the number of a resource in the buffer, adding it.
// Writer only; res nil is -1.
func (m *memtable) resourceOf(res *model.Resource, added *int64) int {
	if res == nil {
		return -1
	}
	m.enc = appendResource(m.enc[:0], res)
	if i, ok := m.resKey[string(m.enc)]; ok {
		return i
	}
	var d spanDecoder
	page, off, a := m.store(m.enc)
	stored := (*m.pages.Load())[page][off : int(off)+len(m.enc)]
	list := append(*m.resources.Load(), d.decodeResource(stored))
	m.resources.Store(&list)
	i := len(list) - 1
	m.resKey[string(m.enc)] = i
	*added += a + int64(len(m.enc))*2 + resourceSize + kvsHeapBytes((list)[i].Attributes) + mapEntryBytes
	return i
}

// scopeOf is resourceOf for instrumentation scopes.
func (m *memtable) scopeOf(sc *model.Scope, added *int64) int {
	if sc == nil {
		return -1
	}
	m.enc = appendScope(m.enc[:0], sc)
	if i, ok := m.scoKey[string(m.enc)]; ok {
		return i
	}
	var d spanDecoder
	page, off, a := m.store(m.enc)
	stored := (*m.pages.Load())[page][off : int(off)+len(m.enc)]
	list := append(*m.scopes.Load(), d.decodeScope(stored))
	m.scopes.Store(&list)
	i := len(list) - 1
	m.scoKey[string(m.enc)] = i
	*added += a + int64(len(m.enc))*2 + scopeSize + kvsHeapBytes((list)[i].Attributes) + mapEntryBytes
	return i
}

// insertRun is the most spans insert publishes under one hold of mu.
// Trace lookups take mu: a request of a thousand spans inserted whole held
// it for about half a millisecond of CPU, and for as long as the kernel
// left the writer's thread waiting while it held the lock.
const insertRun = 128

// insert appends spans of one project. The buffer encodes what it keeps of
// them (memtable_codec.go) and holds nothing of the request afterwards: the
// spans and their body (bodyBytes, unused now) are garbage once it returns.
// Only the WAL commit goroutine calls it (or replay before serving), so
// appends are single-writer. It publishes the spans insertRun at a time
// (a reader may see the first of a request's spans before the others, as it
// may see one request before another).
func (m *memtable) insert(project string, spans []model.Span, bodyBytes int64) {
	_ = bodyBytes
	for len(spans) > 0 {
		n := min(len(spans), insertRun)
		m.insertRun(project, spans[:n])
		spans = spans[n:]
	}
}

// insertRun inserts and publishes spans under mu.
func (m *memtable) insertRun(project string, spans []model.Span) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pid, ok := m.projectID(project)
	if !ok {
		pid = uint32(len(m.perProject))
		name := strings.Clone(project) // the request's string is not kept
		m.projects.Store(name, pid)
		m.perProject = append(m.perProject, projectCounts{})
		names := append(*m.names.Load(), name)
		m.names.Store(&names)
	}
	pc := &m.perProject[pid]
	n := m.n.Load()
	cs := *m.chunks.Load()
	addBytes, addLive := int64(0), int64(0)
	if n == 0 {
		addBytes += int64(len(m.traceBits)) * 8
	}
	var lastTrace bufTraceKey
	var lastFirst int64
	// The spans of one request share a few resources and scopes.
	var lastRes *model.Resource
	var lastScope *model.Scope
	resIdx, scopeIdx := -1, -1
	for i := range spans {
		if int(n/chunkRows) >= len(cs) {
			grown := make([]*chunk, len(cs), len(cs)+1)
			copy(grown, cs)
			grown = append(grown, new(chunk))
			m.chunks.Store(&grown)
			cs = grown
			addBytes += chunkBytes
		}
		c := cs[n/chunkRows]
		r := &c.rows[n%chunkRows]
		s := &spans[i]
		if s.Resource != lastRes || resIdx < 0 {
			lastRes, resIdx = s.Resource, m.resourceOf(s.Resource, &addBytes)
		}
		if s.Scope != lastScope || scopeIdx < 0 {
			lastScope, scopeIdx = s.Scope, m.scopeOf(s.Scope, &addBytes)
		}
		m.enc = appendSpan(m.enc[:0], s, resIdx, scopeIdx)
		page, off, added := m.store(m.enc)
		addBytes += added
		r.traceID, r.spanID, r.start, r.end = s.TraceID, s.SpanID, s.StartTimeUnixNano, s.EndTimeUnixNano
		r.project, r.page, r.off, r.size = pid, page, off, uint32(len(m.enc))
		r.supersededBy.Store(0)
		r.nextInTrace, r.tailInTrace, r.traceSpans = 0, 0, 0
		if n%chunkRows == 0 || s.StartTimeUnixNano < c.minStart.Load() {
			c.minStart.Store(s.StartTimeUnixNano)
		}
		if s.StartTimeUnixNano > c.maxStart.Load() {
			c.maxStart.Store(s.StartTimeUnixNano)
		}
		if d := s.Duration(); d > c.maxDuration.Load() {
			c.maxDuration.Store(d)
		}
		m.summarise(c, int(n%chunkRows), pid, s, resIdx, &addBytes)
		tk := bufTraceKey{pid, s.TraceID}
		var first int64
		if tk == lastTrace && lastFirst != 0 {
			first = lastFirst // a trace's spans often come together
		} else {
			first = m.byTrace[tk]
		}
		var f *slot
		old, dup := int64(0), false
		if first != 0 { // a span of a new trace cannot be a re-send
			f = m.row(first - 1)
			r.trace = f.trace
			if f.traceSpans < chainedTrace {
				old, dup = m.findInChain(first, s.SpanID)
			} else {
				old, dup = m.byKey[bufSpanKey{pid, s.TraceID, s.SpanID}]
			}
		}
		switch {
		case dup:
			m.row(old).supersededBy.Store(n + 1)
			cs[old/chunkRows].sum.dead.Add(1)
			addLive--
		case first == 0:
			r.trace = uint32(len(m.byTrace))
			m.byTrace[tk] = n + 1
			traceProbes(tk, len(m.traceBits), func(bit uint64) bool {
				m.traceBits[bit>>6].Or(1 << (bit & 63))
				return true
			})
			first = n + 1
			r.tailInTrace, r.traceSpans = n+1, 1
			addBytes += traceKeyBytes
			pc.traces++
		default:
			m.row(f.tailInTrace - 1).nextInTrace = n + 1
			f.tailInTrace = n + 1
			f.traceSpans++
			if f.traceSpans == chainedTrace {
				// The trace has grown past walking: index the spans
				// chained so far (this one is indexed below).
				for j := first; j != 0 && j != n+1; j = m.row(j - 1).nextInTrace {
					m.byKey[bufSpanKey{pid, s.TraceID, m.row(j - 1).spanID}] = m.newest(j - 1)
					addBytes += spanKeyBytes
				}
			}
		}
		lastTrace, lastFirst = tk, first
		if !dup {
			pc.spans++
		}
		if f != nil && f.traceSpans >= chainedTrace {
			if !dup {
				addBytes += spanKeyBytes
			}
			m.byKey[bufSpanKey{pid, s.TraceID, s.SpanID}] = n
		}
		addLive++
		if n%chunkRows == chunkRows-1 {
			m.finishChunk(c, &addBytes)
		}
		n++
	}
	pc.bytes += addBytes
	m.bytes.Add(addBytes)
	m.live.Add(addLive)
	m.n.Store(n) // publish
}

// findInChain looks for a span in the chain of the trace whose first row is
// first-1, returning the index of its newest row.
func (m *memtable) findInChain(first int64, id model.SpanID) (int64, bool) {
	for j := first; j != 0; {
		r := m.row(j - 1)
		if r.spanID == id {
			return m.newest(j - 1), true
		}
		j = r.nextInTrace
	}
	return 0, false
}

// newest follows supersededBy from row i to the newest copy of its span.
// Under mu (rows being inserted count: the caller is the writer or holds
// mu, which insert holds until it has published).
func (m *memtable) newest(i int64) int64 {
	for {
		s := m.row(i).supersededBy.Load()
		if s == 0 {
			return i
		}
		i = s - 1
	}
}

type projectCounts struct{ spans, traces, bytes int64 }

// projectShare returns the part of the buffer's estimate project's inserts
// added, what every project's inserts added (the estimate less what queries
// built over the rows, such as content filters), and how many projects have
// rows here.
func (m *memtable) projectShare(project string) (mine, rows int64, projects int) {
	pid, ok := m.projectID(project)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, pc := range m.perProject {
		rows += pc.bytes
		if ok && uint32(i) == pid {
			mine = pc.bytes
		}
	}
	return mine, rows, len(m.perProject)
}

// projectID returns a project's number in the buffer (false: it has no
// rows here).
func (m *memtable) projectID(project string) (uint32, bool) {
	v, ok := m.projects.Load(project)
	if !ok {
		return 0, false
	}
	return v.(uint32), true
}

// counts returns a project's live rows and distinct traces.
func (m *memtable) counts(project string) (spans, traces int64) {
	pid, ok := m.projectID(project)
	if !ok {
		return 0, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.perProject[pid].spans, m.perProject[pid].traces
}

// traceRows returns the live rows of one trace, in insertion order, each
// with a span of its own.
func (m *memtable) traceRows(project string, id model.TraceID) []*row {
	pid, ok := m.projectID(project)
	if !ok || !m.mayHoldTrace(bufTraceKey{pid, id}) {
		return nil
	}
	m.mu.Lock()
	var idx []int64
	for i := m.byTrace[bufTraceKey{pid, id}]; i != 0; {
		// The chain holds each span's first row; supersededBy leads to its
		// newest copy.
		idx = append(idx, m.newest(i-1))
		i = m.row(i - 1).nextInTrace
	}
	m.mu.Unlock()
	if len(idx) == 0 {
		return nil
	}
	out := make([]*row, len(idx))
	spans := make([]model.Span, len(idx))
	var d spanDecoder
	for k, i := range idx {
		m.materialise(m.row(i), &spans[k], &d)
		out[k] = &row{project: project, span: &spans[k]}
	}
	return out
}

// materialise fills s with the span of a published row (every field: s's
// previous contents do not matter), its arrays from d.
func (m *memtable) materialise(r *slot, s *model.Span, d *spanDecoder) {
	a := m.arena()
	a.materialise(r, s, d)
}

// arenaView is what rows refer to, loaded once: enough for every row
// published before it was taken.
type arenaView struct {
	pages     [][]byte
	resources []*model.Resource
	scopes    []*model.Scope
}

func (m *memtable) arena() arenaView {
	return arenaView{*m.pages.Load(), *m.resources.Load(), *m.scopes.Load()}
}

func (a *arenaView) materialise(r *slot, s *model.Span, d *spanDecoder) {
	*s = model.Span{TraceID: r.traceID, SpanID: r.spanID, StartTimeUnixNano: r.start, EndTimeUnixNano: r.end}
	if d.reuse {
		d.slab = d.slab[:0]
	}
	d.decode(a.pages[r.page][r.off:r.off+r.size], s, a.resources, a.scopes)
}

// scan calls fn for each live published row until fn returns false. The
// row and its span are scratch, valid only during the call: fn copies what
// it keeps beyond that (the span's strings may be kept; its arrays may
// not).
func (m *memtable) scan(fn func(r *row) bool) {
	n := m.n.Load()
	cs := *m.chunks.Load()
	a := m.arena()
	names := *m.names.Load()
	d := spanDecoder{reuse: true}
	view := row{span: &d.s}
	for i := int64(0); i < n; i++ {
		r := &cs[i/chunkRows].rows[i%chunkRows]
		if !r.liveFor(n) {
			continue
		}
		a.materialise(r, &d.s, &d)
		view.project = names[r.project]
		if !fn(&view) {
			return
		}
	}
}

// chunkView is a published part of one chunk, for block-like pruning.
type chunkView struct {
	c    *chunk
	rows int   // published rows in this chunk
	n    int64 // published rows in the whole memtable when the view was taken
}

// chunkViews returns the chunks with their published row counts.
func (m *memtable) chunkViews() []chunkView {
	n := m.n.Load()
	cs := *m.chunks.Load()
	var out []chunkView
	for i := 0; int64(i)*chunkRows < n; i++ {
		out = append(out, chunkView{cs[i], int(min(n-int64(i)*chunkRows, chunkRows)), n})
	}
	return out
}

// sealRows returns the live rows that drop does not remove, grouped by
// project, each with its trace's minimum start among them, for sealing
// (the source materialises them for the segment writer). drop sees a span
// with its ids and times only. The buffer numbers its traces, so the
// minimums are kept in a slice.
func (m *memtable) sealRows(drop func(project string, s *model.Span) bool) (map[string][]segment.RowRef, *sealSource) {
	m.mu.Lock()
	traces := len(m.byTrace)
	m.mu.Unlock()
	n := m.n.Load()
	cs := *m.chunks.Load()
	names := *m.names.Load()
	mins := make([]uint64, traces)
	for i := range mins {
		mins[i] = math.MaxUint64
	}
	kept := make([]uint64, (n+63)/64) // bit i: row i is written
	counts := make([]int, len(names))
	var probe model.Span
	for i := int64(0); i < n; i++ {
		r := &cs[i/chunkRows].rows[i%chunkRows]
		if !r.liveFor(n) {
			continue
		}
		probe = model.Span{TraceID: r.traceID, SpanID: r.spanID, StartTimeUnixNano: r.start, EndTimeUnixNano: r.end}
		if drop(names[r.project], &probe) {
			continue
		}
		kept[i/64] |= 1 << (i % 64)
		counts[r.project]++
		mins[r.trace] = min(mins[r.trace], r.start)
	}
	refs := make([][]segment.RowRef, len(names))
	for p, c := range counts {
		refs[p] = make([]segment.RowRef, 0, c)
	}
	for i := int64(0); i < n; i++ {
		if kept[i/64]&(1<<(i%64)) == 0 {
			continue
		}
		r := &cs[i/chunkRows].rows[i%chunkRows]
		refs[r.project] = append(refs[r.project], segment.RowRef{TraceMin: mins[r.trace], Row: uint32(i)})
	}
	out := make(map[string][]segment.RowRef, len(names))
	for p, rs := range refs {
		if len(rs) > 0 {
			out[names[p]] = rs
		}
	}
	return out, &sealSource{m: m}
}

// sealSource hands a frozen buffer's rows to the segment writer.
type sealSource struct {
	m *memtable
	d *spanDecoder
	s *model.Span
}

// Key returns the rest of a row's segment order key.
func (s *sealSource) Key(i uint32) (model.TraceID, uint64, model.SpanID) {
	r := s.m.row(int64(i))
	return r.traceID, r.start, r.spanID
}

// Span materialises a row. The writer copies the Span struct and keeps
// its arrays until their block is written, so the struct is scratch and
// the arrays come from the decoder's slabs, which are reused once the
// writer releases their spans (Released).
func (s *sealSource) Span(i uint32) *model.Span {
	if s.d == nil {
		s.d, s.s = &spanDecoder{ring: &slabRing{}}, &model.Span{}
	}
	s.d.ring.spans++
	s.m.materialise(s.m.row(int64(i)), s.s, s.d)
	return s.s
}

// Released implements segment.RowReleaser: the first n spans Span returned
// are no longer held, and their slabs may take later spans' attributes.
// Only the writer calls Span, so its count and the ring's agree.
func (s *sealSource) Released(n uint64) {
	if s.d != nil {
		s.d.ring.released(n)
	}
}

// Memory accounting. A buffer's bytes estimate what it holds on the heap
// (TestBufferBytesMatchHeap checks it within 25%): its chunks of rows and
// its arena's pages (whole, counted when allocated), its resources and
// scopes (the encoding that keys them, the decoded copy), and the lookup
// maps' entries. Nothing of the requests stays.
var (
	chunkBytes   = int64(unsafe.Sizeof(chunk{}))
	kvSize       = int64(unsafe.Sizeof(model.KeyValue{}))
	valSize      = int64(unsafe.Sizeof(model.Value{}))
	resourceSize = int64(unsafe.Sizeof(model.Resource{}))
	scopeSize    = int64(unsafe.Sizeof(model.Scope{}))
	// A map entry costs its key and value over the swiss table's 7/8 load,
	// plus a control byte, and maps sized for the previous buffer run
	// about half full.
	spanKeyBytes  = (int64(unsafe.Sizeof(bufSpanKey{})) + 8 + 1) * 8 / 7 * 3 / 2
	traceKeyBytes = (int64(unsafe.Sizeof(bufTraceKey{})) + 8 + 1) * 8 / 7 * 3 / 2
	// A resource or scope map entry: a string header and an int.
	mapEntryBytes = int64(16+8+1) * 8 / 7
)

func kvsHeapBytes(kvs []model.KeyValue) int64 {
	b := int64(cap(kvs)) * kvSize
	for i := range kvs {
		if kvs[i].Value.List != nil {
			b += listHeapBytes(kvs[i].Value.List)
		}
	}
	return b
}

func listHeapBytes(l *model.List) int64 {
	b := int64(unsafe.Sizeof(model.List{})) + int64(cap(l.Array))*valSize + kvsHeapBytes(l.KvList)
	for i := range l.Array {
		if l.Array[i].List != nil {
			b += listHeapBytes(l.Array[i].List)
		}
	}
	return b
}
