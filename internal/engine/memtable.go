package engine

import (
	"sync"
	"sync/atomic"
	"time"

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

	mu      sync.Mutex
	byKey   map[spanKey]int64
	byTrace map[traceKey][]int64
}

func newMemtable(now time.Time) *memtable {
	m := &memtable{
		created: now,
		byKey:   make(map[spanKey]int64),
		byTrace: make(map[traceKey][]int64),
	}
	m.chunks.Store(&[]*chunk{})
	return m
}

func (m *memtable) row(i int64) *row {
	cs := *m.chunks.Load()
	return &cs[i/chunkRows].rows[i%chunkRows]
}

// insert appends spans of one project. Only the WAL commit goroutine calls it
// (or replay before serving), so appends are single-writer.
func (m *memtable) insert(project string, spans []model.Span) {
	if len(spans) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.n.Load()
	cs := *m.chunks.Load()
	var addBytes, addLive int64
	for i := range spans {
		if int(n/chunkRows) >= len(cs) {
			grown := make([]*chunk, len(cs), len(cs)+1)
			copy(grown, cs)
			grown = append(grown, new(chunk))
			m.chunks.Store(&grown)
			cs = grown
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
		k := spanKey{project, s.TraceID, s.SpanID}
		if old, dup := m.byKey[k]; dup {
			cs[old/chunkRows].rows[old%chunkRows].supersededBy.Store(n + 1)
			addLive--
		} else {
			tk := traceKey{project, s.TraceID}
			m.byTrace[tk] = append(m.byTrace[tk], n)
		}
		m.byKey[k] = n
		addBytes += spanBytes(s)
		addLive++
		n++
	}
	m.bytes.Add(addBytes)
	m.live.Add(addLive)
	m.n.Store(n) // publish
}

// traceRows returns the live rows of one trace.
func (m *memtable) traceRows(project string, id model.TraceID) []*row {
	m.mu.Lock()
	idx := m.byTrace[traceKey{project, id}]
	var out []*row
	for _, i := range idx {
		// the trace list holds each span's first row; follow byKey to the newest copy
		r := m.row(i)
		if cur := m.byKey[spanKey{project, r.span.TraceID, r.span.SpanID}]; cur != i {
			r = m.row(cur)
		}
		out = append(out, r)
	}
	m.mu.Unlock()
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

// byProject returns the live spans grouped by project, for sealing.
func (m *memtable) byProject() map[string][]model.Span {
	out := map[string][]model.Span{}
	m.scan(func(r *row) bool {
		out[r.project] = append(out[r.project], r.span)
		return true
	})
	return out
}

// spanBytes estimates the resident size of a span for seal thresholds.
func spanBytes(s *model.Span) int64 {
	b := int64(200 + len(s.Name) + len(s.StatusMessage) + len(s.TraceState))
	b += kvBytes(s.Attributes)
	for i := range s.Events {
		b += 48 + int64(len(s.Events[i].Name)) + kvBytes(s.Events[i].Attributes)
	}
	for i := range s.Links {
		b += 64 + kvBytes(s.Links[i].Attributes)
	}
	return b
}

func kvBytes(kvs []model.KeyValue) int64 {
	var b int64
	for i := range kvs {
		b += 48 + int64(len(kvs[i].Key)) + valueBytes(kvs[i].Value)
	}
	return b
}

func valueBytes(v model.Value) int64 {
	b := int64(len(v.Str)) // strings and bytes values both live in Str
	for _, e := range v.Elems() {
		b += 48 + valueBytes(e)
	}
	return b + kvBytes(v.Fields())
}
