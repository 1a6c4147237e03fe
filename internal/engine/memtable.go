package engine

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
)

// chunkRows is the number of rows in one memtable chunk. Chunks never move
// once allocated, so readers can hold row pointers without a lock.
const chunkRows = 4096

// row is one span in the write buffer.
type row struct {
	project string
	span    model.Span
	// supersededBy is 1 + the index of the row holding a newer copy of the
	// same (trace id, span id), or 0. A reader that loaded n published rows
	// treats the row as superseded only when the newer row is among its n:
	// otherwise it would see neither copy while a re-send is being published.
	supersededBy atomic.Int64
	// nextInTrace is 1 + the index of the next row of the same trace (first
	// copies only; see memtable.byTrace), or 0; tailInTrace, in a trace's
	// first row, is 1 + the index of its last. Written and read under
	// memtable.mu.
	nextInTrace, tailInTrace int64
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
	byKey      map[bufSpanKey]int64
	// byTrace is 1 + the index of a trace's first row; its other first-copy
	// rows chain through row.nextInTrace (no per-trace slice to grow).
	byTrace map[bufTraceKey]int64
}

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
	addBytes, addLive := bodyBytes, int64(0)
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
		r.project = project
		r.span = spans[i]
		s := &r.span
		if n%chunkRows == 0 || s.StartTimeUnixNano < c.minStart.Load() {
			c.minStart.Store(s.StartTimeUnixNano)
		}
		if s.StartTimeUnixNano > c.maxStart.Load() {
			c.maxStart.Store(s.StartTimeUnixNano)
		}
		if d := s.Duration(); d > c.maxDuration.Load() {
			c.maxDuration.Store(d)
		}
		k := bufSpanKey{pid, s.TraceID, s.SpanID}
		tk := bufTraceKey{pid, s.TraceID}
		first := m.byTrace[tk]
		old, dup := int64(0), false
		if first != 0 { // a span of a new trace cannot be a re-send
			old, dup = m.byKey[k]
		}
		switch {
		case dup:
			cs[old/chunkRows].rows[old%chunkRows].supersededBy.Store(n + 1)
			addLive--
		case first == 0:
			m.byTrace[tk] = n + 1
			r.tailInTrace = n + 1
			addBytes += traceKeyBytes
			pc.traces++
		default:
			f := m.row(first - 1)
			m.row(f.tailInTrace - 1).nextInTrace = n + 1
			f.tailInTrace = n + 1
		}
		if !dup {
			addBytes += spanKeyBytes
			pc.spans++
		}
		m.byKey[k] = n
		addBytes += spanHeapBytes(s)
		addLive++
		n++
	}
	m.bytes.Add(addBytes)
	m.live.Add(addLive)
	m.n.Store(n) // publish
}

type projectCounts struct{ spans, traces int64 }

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
		// The chain holds each span's first row; follow byKey to the newest copy.
		first := m.row(i - 1)
		r := first
		if cur := m.byKey[bufSpanKey{pid, id, r.span.SpanID}]; cur != i-1 {
			r = m.row(cur)
		}
		out = append(out, r)
		i = first.nextInTrace
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

// byProject returns the live spans grouped by project, for sealing: pointers
// into the rows, which stay put while the memtable is frozen.
func (m *memtable) byProject() map[string][]*model.Span {
	counts := map[string]int{}
	m.scan(func(r *row) bool {
		counts[r.project]++
		return true
	})
	out := make(map[string][]*model.Span, len(counts))
	for p, n := range counts {
		out[p] = make([]*model.Span, 0, n)
	}
	m.scan(func(r *row) bool {
		out[r.project] = append(out[r.project], &r.span)
		return true
	})
	return out
}

// Memory accounting. A buffer's bytes estimate what it holds on the heap
// (TestBufferBytesMatchHeap checks it within 25%): its chunks of rows
// (whole chunks, allocated at once), the request bodies its spans' strings
// point into, the arrays the decoder made for each span (attributes,
// events, links, nested values, LLM fields), and the lookup maps' entries.
var (
	chunkBytes = int64(unsafe.Sizeof(chunk{}))
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
