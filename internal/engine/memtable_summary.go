package engine

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/sketch"
	"github.com/rastro-dev/rastro/internal/store"
)

// Per-chunk summaries of the write buffer (issue 23): what a segment block's
// resident metadata and filters say about its spans, kept for each chunk of
// 4,096 rows as the writer appends them, so that a search prunes chunks as
// it prunes blocks (chunkMayMatch, with the same query.Hints as
// blockMayMatch) and LLM statistics read a full chunk's partial aggregates
// instead of decoding its rows.
//
// Everything here follows the buffer's discipline: the single writer updates
// a chunk's summary before it publishes the rows it covers (memtable.n), and
// readers load n first, so a reader sees a summary at least as wide as its
// rows (never narrower: pruning stays safe while the chunk fills). Counters
// and masks are atomics; the value set is a table of atomic slots while the
// chunk is open, replaced by an immutable sorted list or Bloom filter when the chunk is
// full; the LLM aggregates are published once, when the chunk is full.

// chunkSummary is the part of a chunk that describes its rows (the start
// bounds and maximum duration are in chunk itself).
type chunkSummary struct {
	minDuration atomic.Uint64
	errors      atomic.Int32  // rows with StatusCode == model.StatusError
	kinds       atomic.Uint32 // bit k: a row of model.SpanKind(k) (kinds 0..7, as segment blocks)
	// dead counts the chunk's rows superseded by a re-send: their chunk's
	// aggregates counted them, so they are not used when dead > 0.
	dead atomic.Int32
	// llm has bit i set when row i has LLM fields: LLM statistics decode
	// only those rows of a chunk they read row by row.
	llm [chunkRows / 64]atomic.Uint64
	// values holds the hashes of (project, entry) for the chunk's services,
	// span names and top-level string attributes (entries: valueEntry).
	values atomic.Pointer[valueSet]
	// aggs are the partial LLM aggregates of a full chunk, per project
	// (nil until the chunk is full).
	aggs atomic.Pointer[[]projectAggs]
	// cats are the discovery catalogs of a full chunk, per project number,
	// built on the first discovery that reads the chunk whole
	// (memtable.chunkCatalogs), and then counted in the buffer's size
	// estimate (catalog.heapBytes).
	cats atomic.Pointer[map[uint32]*catalog]
	// tokens is the full-text token filter of a full chunk, built on the
	// first content query that reaches it (memtable.chunkMayHoldTokens) and
	// then counted in the buffer's size estimate.
	tokens atomic.Pointer[chunkTokens]
	// While the chunk fills, a content query adds the rows published since
	// the last one to partial (under tokMu), so the open chunk is not
	// decoded whole by every content query (memtable.openChunkMayHoldTokens).
	tokMu   sync.Mutex
	tokRows int // rows tokenised into partial
	partial *chunkTokens
}

// projectAggs are one project's LLM aggregates in a chunk, as
// segment.Aggregator computes them for a block (Traces counts distinct
// traces per chunk, as it does per block), but coarse: without session and
// user in their keys, like a segment's coarse rollup. Keyed by session the
// llm corpus's chunks held an entry, with its latency sketch, for every
// few spans (TestBufferBytesMatchHeap: 845 -> 988 B per span); coarse they
// cost a few bytes per span, and a query grouping by session or user reads
// the chunk's LLM rows.
type projectAggs struct {
	project uint32
	entries []segment.AggEntry
}

// summaryWriter is the writer's state for the open chunk (only the writer
// touches it).
type summaryWriter struct {
	buf  []byte
	res  map[uint64]struct{}            // (project, resource) pairs already added to the open chunk
	aggs map[uint32]*segment.Aggregator // the open chunk's LLM aggregates, per project
	// intern keeps one copy of each LLM key string the aggregates hold: a
	// request's strings must not outlive Append.
	intern map[string]string
	span   model.Span
	llm    model.LLM
	chunks uint64 // chunks finished (their Bloom filters' salt)
}

var summarySeed = maphash.MakeSeed()

// Entry tags: an attribute entry starts with 's' or 'r' (its scope, as in
// a segment block's filter), a service with 'v', a span name with 'n'.
const (
	entryService = 'v'
	entryName    = 'n'
	// tagString and tagInt are segment's type tags of a string and an int
	// value in filter entries.
	tagString = 1
	tagInt    = 3
)

// attrEntry appends the filter entry of a string attribute: the encoding of
// segment block filters (internal/segment/block_write.go appendBloomStr),
// scope byte, key, 0, type tag, value.
func attrEntry(b []byte, resource bool, key, value string) []byte {
	return append(attrEntryStart(b, resource, key, tagString), value...)
}

// attrIntEntry appends the filter entry of an int attribute, or of a double
// equal to an integer of magnitude at most 2^53, entered as that int (as
// segment block filters do: appendBloomEntry there).
func attrIntEntry(b []byte, resource bool, key string, value int64) []byte {
	return binary.LittleEndian.AppendUint64(attrEntryStart(b, resource, key, tagInt), uint64(value))
}

func attrEntryStart(b []byte, resource bool, key string, tag byte) []byte {
	if resource {
		b = append(b, 'r')
	} else {
		b = append(b, 's')
	}
	b = append(b, key...)
	return append(b, 0, tag)
}

// entryHash is the hash a value set holds for an entry of a project; never 0
// (an empty slot).
func entryHash(b []byte) uint64 {
	h := maphash.Bytes(summarySeed, b)
	if h == 0 {
		h = 1
	}
	return h
}

// valueSet is a chunk's set of entry hashes. While the chunk fills it is an
// open-addressing table (slots) that the writer adds to and readers probe
// at the same time: a slot, once set, never changes, and a table past half
// full is replaced by a copy twice its size, published before the rows
// whose entries it holds. When the chunk is full the writer replaces it with
// an immutable set sized for its entries: up to exactEntries of them, the
// sorted hashes (exact: 8 bytes an entry, at most 4 per span); more, a Bloom
// filter (bits) of bloomBitsPerEntry bits and bloomProbes probes an entry,
// a false-positive rate of at most 0.82% (between 10 and 20 bits per entry:
// 0.82% to 0.05%). A Bloom filter's probes are salted per chunk, so that a
// value one chunk's filter passes by chance is not passed by every chunk
// with much the same values (the cause of absent values that were slow
// every time, issue 23).
type valueSet struct {
	slots []atomic.Uint64
	used  int // slots set (writer only)
	exact []uint64
	bits  []uint64
	salt  uint64
}

const (
	bloomBitsPerEntry = 10
	bloomProbes       = 7
	exactEntries      = 2048
	openSlots         = 1024 // a new chunk's table
)

// mix64 is SplitMix64's finaliser: it spreads a salted hash over all bits.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	return z ^ z>>31
}

func newValueSet(slots int) *valueSet { return &valueSet{slots: make([]atomic.Uint64, slots)} }

func (v *valueSet) bytes() int64 {
	return int64(unsafe.Sizeof(*v)) + int64(len(v.slots))*8 + int64(len(v.exact)+len(v.bits))*8
}

// has reports whether h may be in the set (a Bloom filter's false
// positives aside, exactly).
func (v *valueSet) has(h uint64) bool {
	if v.exact != nil {
		_, ok := slices.BinarySearch(v.exact, h)
		return ok
	}
	if v.bits != nil {
		h = mix64(h ^ v.salt)
		mask := uint64(len(v.bits))*64 - 1
		h2 := h>>32 | 1
		for i := uint64(0); i < bloomProbes; i++ {
			b := (h + i*h2) & mask
			if v.bits[b/64]&(1<<(b%64)) == 0 {
				return false
			}
		}
		return true
	}
	mask := uint64(len(v.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch v.slots[i].Load() {
		case h:
			return true
		case 0:
			return false
		}
	}
}

// add puts h in an open set (writer only). It returns false when the table
// is half full: the caller grows it first.
func (v *valueSet) add(h uint64) bool {
	mask := uint64(len(v.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch v.slots[i].Load() {
		case h:
			return true
		case 0:
			if 2*(v.used+1) > len(v.slots) {
				return false
			}
			v.slots[i].Store(h)
			v.used++
			return true
		}
	}
}

// grown returns a copy of an open set with twice the slots.
func (v *valueSet) grown() *valueSet {
	g := newValueSet(2 * len(v.slots))
	for i := range v.slots {
		if h := v.slots[i].Load(); h != 0 {
			g.add(h)
		}
	}
	return g
}

// finished returns the immutable set of an open set's hashes: their sorted
// list, or when there are more than exactEntries, their Bloom filter with
// probes salted by salt.
func (v *valueSet) finished(salt uint64) *valueSet {
	if v.used <= exactEntries {
		exact := make([]uint64, 0, max(v.used, 1)) // never nil
		for i := range v.slots {
			if h := v.slots[i].Load(); h != 0 {
				exact = append(exact, h)
			}
		}
		slices.Sort(exact)
		return &valueSet{exact: exact}
	}
	words := 1
	if n := v.used * bloomBitsPerEntry; n > 64 {
		words = 1 << bits.Len(uint(n-1)) / 64 // a power of two of at least n bits
	}
	f := &valueSet{bits: make([]uint64, words), salt: salt}
	mask := uint64(words)*64 - 1
	for i := range v.slots {
		h := v.slots[i].Load()
		if h == 0 {
			continue
		}
		h = mix64(h ^ salt)
		h2 := h>>32 | 1
		for p := uint64(0); p < bloomProbes; p++ {
			b := (h + p*h2) & mask
			f.bits[b/64] |= 1 << (b % 64)
		}
	}
	return f
}

// addEntry adds the entry in w.buf (after its 4-byte project prefix) to
// the open chunk's value set and returns its hash.
func (m *memtable) addEntry(c *chunk, added *int64) uint64 {
	h := entryHash(m.sum.buf)
	vs := c.sum.values.Load()
	for !vs.add(h) {
		g := vs.grown()
		*added += g.bytes() - vs.bytes()
		c.sum.values.Store(g)
		vs = g
	}
	return h
}

// entryStart starts an entry of project pid in the writer's buffer.
func entryStart(b []byte, pid uint32) []byte { return binary.LittleEndian.AppendUint32(b[:0], pid) }

// summarise adds span s, written as row i of chunk c for project pid, to
// the chunk's summary. Writer only, before the row is published.
func (m *memtable) summarise(c *chunk, i int, pid uint32, s *model.Span, res int, added *int64) {
	w := &m.sum
	sum := &c.sum
	if i == 0 {
		vs := newValueSet(openSlots)
		sum.values.Store(vs)
		*added += vs.bytes()
		clear(w.res)
		clear(w.aggs)
	}
	if d := s.Duration(); i == 0 || d < sum.minDuration.Load() {
		sum.minDuration.Store(d)
	}
	if s.StatusCode == model.StatusError {
		sum.errors.Add(1)
	}
	if s.Kind >= 0 && s.Kind <= 7 {
		sum.kinds.Or(1 << uint(s.Kind))
	}
	w.buf = append(entryStart(w.buf, pid), entryService)
	w.buf = append(w.buf, s.Service...)
	sig := rowSigBits(m.addEntry(c, added))
	w.buf = append(entryStart(w.buf, pid), entryName)
	w.buf = append(w.buf, s.Name...)
	sig |= rowSigBits(m.addEntry(c, added))
	c.rows[i].sig = sig | m.addAttrs(c, pid, false, s.Attributes, added)
	if s.Resource != nil {
		// A resource's attributes are added once per chunk (res is its
		// number in the buffer).
		k := uint64(pid)<<32 | uint64(uint32(res))
		if _, ok := w.res[k]; !ok {
			if w.res == nil {
				w.res = map[uint64]struct{}{}
			}
			w.res[k] = struct{}{}
			m.addAttrs(c, pid, true, s.Resource.Attributes, added)
		}
	}
	if s.LLM != nil {
		sum.llm[i/64].Or(1 << (i % 64))
		m.aggregate(pid, s, added)
	}
}

// addAttrs adds the entries of kvs to the open chunk's value set and
// returns their bits in a row signature.
func (m *memtable) addAttrs(c *chunk, pid uint32, resource bool, kvs []model.KeyValue, added *int64) (sig uint64) {
	for i := range kvs {
		v := &kvs[i].Value
		switch v.Type {
		case model.ValueString:
			m.sum.buf = attrEntry(entryStart(m.sum.buf, pid), resource, kvs[i].Key, v.Str)
		case model.ValueInt:
			m.sum.buf = attrIntEntry(entryStart(m.sum.buf, pid), resource, kvs[i].Key, v.Int)
		case model.ValueDouble:
			n, ok := exactInt(v.Double)
			if !ok {
				continue
			}
			m.sum.buf = attrIntEntry(entryStart(m.sum.buf, pid), resource, kvs[i].Key, n)
		default:
			continue
		}
		sig |= rowSigBits(m.addEntry(c, added))
	}
	return sig
}

// aggregate adds an LLM span to the open chunk's aggregates of its project,
// with its key strings interned (the request's must not be kept).
func (m *memtable) aggregate(pid uint32, s *model.Span, added *int64) {
	w := &m.sum
	a := w.aggs[pid]
	if a == nil {
		if w.aggs == nil {
			w.aggs = map[uint32]*segment.Aggregator{}
		}
		a = segment.NewAggregator()
		w.aggs[pid] = a
	}
	if w.intern == nil {
		w.intern = map[string]string{}
	}
	intern := func(s string) string {
		if s == "" {
			return ""
		}
		if c, ok := w.intern[s]; ok {
			return c
		}
		c := strings.Clone(s)
		w.intern[c] = c
		*added += int64(len(c)) + mapEntryBytes
		return c
	}
	l := &w.llm
	*l = *s.LLM
	l.Provider, l.RequestModel, l.ResponseModel, l.Operation = intern(l.Provider), intern(l.RequestModel), intern(l.ResponseModel), intern(l.Operation)
	// Coarse keys: no session or user (see projectAggs).
	l.SessionID, l.UserID, l.AgentName, l.ToolName = "", "", intern(l.AgentName), ""
	w.span = model.Span{TraceID: s.TraceID, StartTimeUnixNano: s.StartTimeUnixNano, EndTimeUnixNano: s.EndTimeUnixNano,
		StatusCode: s.StatusCode, Service: intern(s.Service), LLM: l}
	a.Add(&w.span)
}

// finishChunk publishes a full chunk's immutable summary: its value set as a
// sorted list or Bloom filter, and its LLM aggregates. Writer only, before the chunk's last
// rows are published.
func (m *memtable) finishChunk(c *chunk, added *int64) {
	open := c.sum.values.Load()
	m.sum.chunks++
	f := open.finished(mix64(m.sum.chunks))
	c.sum.values.Store(f)
	*added += f.bytes() - open.bytes()
	aggs := make([]projectAggs, 0, len(m.sum.aggs))
	for pid, a := range m.sum.aggs {
		entries := a.Entries()
		*added += aggEntriesBytes(entries)
		aggs = append(aggs, projectAggs{pid, entries})
	}
	c.sum.aggs.Store(&aggs)
	clear(m.sum.aggs)
}

// aggEntriesBytes estimates the heap of aggregate entries: the entries and
// their sketches' buckets (key strings are interned, counted there).
func aggEntriesBytes(entries []segment.AggEntry) int64 {
	b := int64(cap(entries)) * int64(unsafe.Sizeof(segment.AggEntry{}))
	for i := range entries {
		b += sketchBytes(entries[i].M.Latency) + sketchBytes(entries[i].M.TTFT)
	}
	return b
}

// sketchBytes estimates a sketch's heap from its range: one 8-byte count
// per bucket between its minimum and maximum, with room to grow.
func sketchBytes(s *sketch.Sketch) int64 {
	if s == nil {
		return 0
	}
	const gammaLog = 0.0200026673 // ln((1+Alpha)/(1-Alpha)), Alpha = 1%
	lo, hi := max(s.Min(), 1), max(s.Max(), 1)
	n := int64(math.Log(float64(hi))/gammaLog-math.Log(float64(lo))/gammaLog) + 2
	n = min(n, sketch.MaxBuckets)
	return int64(unsafe.Sizeof(sketch.Sketch{})) + n*8*5/4
}

// chunkMayMatch prunes a published chunk for a search of project pid as
// blockMayMatch prunes a segment block: by its start and duration bounds,
// errors, kinds, and its value set for services, names and string
// attributes. It counts the chunks it rules out.
func (m *memtable) chunkMayMatch(cv chunkView, pid uint32, h *query.Hints, cursor *store.Cursor) bool {
	if !chunkMayMatch(cv.c, pid, h, cursor) {
		m.chunksPruned.Add(1)
		return false
	}
	return true
}

func chunkMayMatch(c *chunk, pid uint32, h *query.Hints, cursor *store.Cursor) bool {
	minStart, maxStart := c.minStart.Load(), c.maxStart.Load()
	if (h.End != 0 && minStart >= h.End) || (h.Start != 0 && maxStart < h.Start) || (cursor != nil && minStart > cursor.Start) {
		return false
	}
	sum := &c.sum
	if (h.MinDuration != 0 && c.maxDuration.Load() < h.MinDuration) || (h.MaxDuration != 0 && sum.minDuration.Load() > h.MaxDuration) {
		return false
	}
	if h.HasStatus && h.Status == model.StatusError && sum.errors.Load() == 0 {
		return false
	}
	if len(h.Kinds) > 0 {
		kinds, any := sum.kinds.Load(), false
		for _, k := range h.Kinds {
			if k >= 0 && k < 8 && kinds&(1<<uint(k)) != 0 {
				any = true
			}
		}
		if !any {
			return false
		}
	}
	vs := sum.values.Load()
	if vs == nil {
		return true // no row written yet (a reader raced the chunk's first row)
	}
	var buf [256]byte
	anyOf := func(tag byte, want []string) bool {
		for _, w := range want {
			b := append(entryStart(buf[:0], pid), tag)
			if vs.has(entryHash(append(b, w...))) {
				return true
			}
		}
		return false
	}
	if h.Services != nil && !anyOf(entryService, h.Services) {
		return false
	}
	if h.Names != nil && !anyOf(entryName, h.Names) {
		return false
	}
	attr := func(resource bool, a *query.AttrEq) bool {
		return vs.has(entryHash(attrEntry(entryStart(buf[:0], pid), resource, a.Key, a.Value)))
	}
	for i := range h.AttrEquals {
		a := &h.AttrEquals[i]
		switch a.Scope {
		case query.ScopeSpan:
			if !attr(false, a) {
				return false
			}
		case query.ScopeResource:
			if !attr(true, a) {
				return false
			}
		case query.ScopeAny:
			if !attr(false, a) && !attr(true, a) {
				return false
			}
		} // other scopes (events, links): not summarised, as in segment blocks
	}
	for i := range h.AttrAnyOf {
		if !mayHoldOneOf(&h.AttrAnyOf[i], true,
			func(res bool, k, v string) bool {
				return vs.has(entryHash(attrEntry(entryStart(buf[:0], pid), res, k, v)))
			},
			func(res bool, k string, v int64) bool {
				return vs.has(entryHash(attrIntEntry(entryStart(buf[:0], pid), res, k, v)))
			}) {
			return false
		}
	}
	return true
}

// exactInt returns the integer d equals, if its magnitude is at most 2^53.
func exactInt(d float64) (int64, bool) {
	if d != math.Trunc(d) || math.Abs(d) > 1<<53 {
		return 0, false
	}
	return int64(d), true
}

// aggregates returns a full chunk's LLM aggregates of project pid, false
// when the chunk is not full or a row of it was superseded (its aggregates
// count a row the reader must not).
func (cv chunkView) aggregates(pid uint32) ([]segment.AggEntry, bool) {
	if cv.rows < chunkRows || cv.c.sum.dead.Load() != 0 {
		return nil, false
	}
	aggs := cv.c.sum.aggs.Load()
	if aggs == nil {
		return nil, false
	}
	for _, a := range *aggs {
		if a.project == pid {
			return a.entries, true
		}
	}
	return nil, true // no LLM span of the project in the chunk
}

// scanLLMRows calls fn with each live row of project pid in chunk view cv
// that has LLM fields and starts in [start, end) (0: unbounded), decoded
// into scratch (valid during the call); rows without LLM fields are not
// decoded.
func (m *memtable) scanLLMRows(cv chunkView, pid uint32, start, end uint64, d *spanDecoder, fn func(s *model.Span)) {
	a := m.arena()
	for w := 0; w*64 < cv.rows; w++ {
		word := cv.c.sum.llm[w].Load()
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if i >= cv.rows {
				break
			}
			r := &cv.c.rows[i]
			if r.project != pid || !r.liveFor(cv.n) || (start != 0 && r.start < start) || (end != 0 && r.start >= end) {
				continue
			}
			a.materialise(r, &d.s, d)
			fn(&d.s)
		}
	}
}

// traceChunks returns the chunks holding a row (any copy) of one of the
// traces of project (nil when none).
func (m *memtable) traceChunks(project string, ids []model.TraceID) map[int]bool {
	if len(ids) == 0 {
		return nil
	}
	pid, ok := m.projectID(project)
	if !ok {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out map[int]bool
	for _, id := range ids {
		for i := m.byTrace[bufTraceKey{pid, id}]; i != 0; i = m.row(i - 1).nextInTrace {
			for j := i - 1; ; {
				if out == nil {
					out = map[int]bool{}
				}
				out[int(j/chunkRows)] = true
				s := m.row(j).supersededBy.Load()
				if s == 0 {
					break
				}
				j = s - 1
			}
		}
	}
	return out
}
