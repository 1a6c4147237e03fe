package engine

import (
	"math"
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

// row is one span in the write buffer. The span itself stays where the
// decoder put it (the request's span array, which the engine owns once
// Append is called): a row is small and appending one copies no span.
type row struct {
	span    *model.Span
	project string
	// spanID is span.SpanID, kept in the row so that a trace's chain can be
	// searched for a re-sent span without touching the spans.
	spanID model.SpanID
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
}

// liveFor reports whether the row is the newest copy among the first n rows.
func (r *row) liveFor(n int64) bool {
	s := r.supersededBy.Load()
	return s == 0 || s-1 >= n
}

type chunk struct {
	rows [chunkRows]row
	// Bounds of the span start times written into this chunk, maintained by
	// the writer before it publishes rows. A reader may see bounds that already
	// include unpublished rows: wider, so still safe for pruning.
	minStart, maxStart atomic.Uint64
	maxDuration        atomic.Uint64
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
//   - rows are written into fixed chunks, then published by storing n
//     (release); readers load n (acquire) and read rows [0, n) lock-free;
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

	mu       sync.Mutex
	projects map[string]uint32
	// perProject counts live rows and distinct traces by project number,
	// for statistics without a scan.
	perProject []projectCounts
	// byKey is the index of a span's newest row, for the spans of traces of
	// at least chainedTrace spans only: a re-send in a smaller trace is
	// found by walking the trace's chain, which costs less than keeping a
	// map entry for every span.
	byKey map[bufSpanKey]int64
	// byTrace is 1 + the index of a trace's first row; its other first-copy
	// rows chain through row.nextInTrace (no per-trace slice to grow).
	byTrace map[bufTraceKey]int64
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
	m := &memtable{
		created:  now,
		projects: make(map[string]uint32),
		byKey:    make(map[bufSpanKey]int64, rows),
		byTrace:  make(map[bufTraceKey]int64, traces),
	}
	// The maps' room is counted as rows fill it (spanKeyBytes and
	// traceKeyBytes allow for it), not up front: an empty buffer must never
	// count as full, or appends would be refused with nothing to seal.
	m.chunks.Store(&[]*chunk{})
	return m
}

func (m *memtable) row(i int64) *row {
	cs := *m.chunks.Load()
	return &cs[i/chunkRows].rows[i%chunkRows]
}

// insert appends spans of one project, decoded from a request body of
// bodyBytes (the spans' strings point into it, so the buffer holds it).
// Only the WAL commit goroutine calls it (or replay before serving), so
// appends are single-writer.
func (m *memtable) insert(project string, spans []model.Span, bodyBytes int64) {
	if len(spans) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pid, ok := m.projects[project]
	if !ok {
		pid = uint32(len(m.projects))
		m.projects[project] = pid
		m.perProject = append(m.perProject, projectCounts{})
	}
	pc := &m.perProject[pid]
	n := m.n.Load()
	cs := *m.chunks.Load()
	// The rows point into spans: its whole array stays with the buffer.
	addBytes, addLive := bodyBytes+int64(cap(spans))*spanSize, int64(0)
	var lastTrace bufTraceKey
	var lastFirst int64
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
		r.span, r.project, r.spanID = s, project, s.SpanID
		if n%chunkRows == 0 || s.StartTimeUnixNano < c.minStart.Load() {
			c.minStart.Store(s.StartTimeUnixNano)
		}
		if s.StartTimeUnixNano > c.maxStart.Load() {
			c.maxStart.Store(s.StartTimeUnixNano)
		}
		if d := s.Duration(); d > c.maxDuration.Load() {
			c.maxDuration.Store(d)
		}
		tk := bufTraceKey{pid, s.TraceID}
		var first int64
		if tk == lastTrace && lastFirst != 0 {
			first = lastFirst // a trace's spans often come together
		} else {
			first = m.byTrace[tk]
		}
		var f *row
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
			addLive--
		case first == 0:
			r.trace = uint32(len(m.byTrace))
			m.byTrace[tk] = n + 1
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
		addBytes += spanHeapBytes(s)
		addLive++
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

// projectBytes returns the part of the buffer's estimate a project's
// inserts added.
func (m *memtable) projectBytes(project string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pid, ok := m.projects[project]; ok {
		return m.perProject[pid].bytes
	}
	return 0
}

// counts returns a project's live rows and distinct traces.
func (m *memtable) counts(project string) (spans, traces int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pid, ok := m.projects[project]; ok {
		return m.perProject[pid].spans, m.perProject[pid].traces
	}
	return 0, 0
}

// traceRows returns the live rows of one trace, in insertion order.
func (m *memtable) traceRows(project string, id model.TraceID) []*row {
	m.mu.Lock()
	defer m.mu.Unlock()
	pid, ok := m.projects[project]
	if !ok {
		return nil
	}
	var out []*row
	for i := m.byTrace[bufTraceKey{pid, id}]; i != 0; {
		// The chain holds each span's first row; supersededBy leads to its
		// newest copy.
		out = append(out, m.row(m.newest(i-1)))
		i = m.row(i - 1).nextInTrace
	}
	return out
}

// scan calls fn for each live published row until fn returns false.
func (m *memtable) scan(fn func(r *row) bool) {
	n := m.n.Load()
	cs := *m.chunks.Load()
	for i := int64(0); i < n; i++ {
		r := &cs[i/chunkRows].rows[i%chunkRows]
		if !r.liveFor(n) {
			continue
		}
		if !fn(r) {
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

// sealRefs returns the live spans that drop does not remove, grouped by
// project, each with its trace's minimum start among them, for sealing:
// pointers to the spans, which stay put while the memtable is frozen. The
// buffer numbers its traces, so the minimums are kept in a slice.
func (m *memtable) sealRefs(drop func(project string, s *model.Span) bool) map[string][]segment.SpanRef {
	m.mu.Lock()
	traces := len(m.byTrace)
	m.mu.Unlock()
	n := m.n.Load()
	cs := *m.chunks.Load()
	mins := make([]uint64, traces)
	for i := range mins {
		mins[i] = math.MaxUint64
	}
	kept := make([]uint64, (n+63)/64) // bit i: row i is written
	type group struct {
		n    int
		refs []segment.SpanRef
	}
	groups := map[string]*group{}
	var last *group
	var lastName string
	groupOf := func(p string) *group {
		// Rows come in runs of one project: compare before hashing.
		if last == nil || p != lastName {
			if last = groups[p]; last == nil {
				last = &group{}
				groups[p] = last
			}
			lastName = p
		}
		return last
	}
	for i := int64(0); i < n; i++ {
		r := &cs[i/chunkRows].rows[i%chunkRows]
		if !r.liveFor(n) || drop(r.project, r.span) {
			continue
		}
		kept[i/64] |= 1 << (i % 64)
		groupOf(r.project).n++
		mins[r.trace] = min(mins[r.trace], r.span.StartTimeUnixNano)
	}
	out := make(map[string][]segment.SpanRef, len(groups))
	for _, g := range groups {
		g.refs = make([]segment.SpanRef, 0, g.n)
	}
	for i := int64(0); i < n; i++ {
		if kept[i/64]&(1<<(i%64)) == 0 {
			continue
		}
		r := &cs[i/chunkRows].rows[i%chunkRows]
		g := groupOf(r.project)
		g.refs = append(g.refs, segment.SpanRef{TraceMin: mins[r.trace], Span: r.span})
	}
	for p, g := range groups {
		if len(g.refs) > 0 {
			out[p] = g.refs
		}
	}
	return out
}

// Memory accounting. A buffer's bytes estimate what it holds on the heap
// (TestBufferBytesMatchHeap checks it within 25%): its chunks of rows
// (whole chunks, allocated at once), the requests' span arrays the rows
// point into, the request bodies the spans' strings point into, the arrays
// the decoder made for each span (attributes, events, links, nested values,
// LLM fields), and the lookup maps' entries.
var (
	chunkBytes = int64(unsafe.Sizeof(chunk{}))
	spanSize   = int64(unsafe.Sizeof(model.Span{}))
	kvSize     = int64(unsafe.Sizeof(model.KeyValue{}))
	valSize    = int64(unsafe.Sizeof(model.Value{}))
	eventSize  = int64(unsafe.Sizeof(model.Event{}))
	linkSize   = int64(unsafe.Sizeof(model.Link{}))
	llmSize    = int64(unsafe.Sizeof(model.LLM{}))
	// A map entry costs its key and value over the swiss table's 7/8 load,
	// plus a control byte, and maps sized for the previous buffer run
	// about half full.
	spanKeyBytes  = (int64(unsafe.Sizeof(bufSpanKey{})) + 8 + 1) * 8 / 7 * 3 / 2
	traceKeyBytes = (int64(unsafe.Sizeof(bufTraceKey{})) + 8 + 1) * 8 / 7 * 3 / 2
)

// spanHeapBytes is what a stored span holds beyond its row and the request
// body: the arrays behind it.
func spanHeapBytes(s *model.Span) int64 {
	b := kvsHeapBytes(s.Attributes)
	if cap(s.Events) > 0 {
		b += int64(cap(s.Events)) * eventSize
		for i := range s.Events {
			b += kvsHeapBytes(s.Events[i].Attributes)
		}
	}
	if cap(s.Links) > 0 {
		b += int64(cap(s.Links)) * linkSize
		for i := range s.Links {
			b += kvsHeapBytes(s.Links[i].Attributes)
		}
	}
	if s.LLM != nil {
		b += llmSize
	}
	return b
}

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
