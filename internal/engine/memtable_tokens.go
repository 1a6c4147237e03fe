package engine

import (
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
)

// chunkTokens is a Bloom filter over the full-text tokens (text.SpanTokens)
// of a full chunk's rows, every project's: a content query skips a full
// chunk whose filter lacks one of the words every match must hold, without
// decoding a row. It is built on the first content query that reaches the
// chunk (one decoding and tokenising of its rows, what a scan of it costs
// anyway), kept in the chunk's summary and counted in the buffer's size
// estimate; the chunk's rows never change after that (a superseded row
// only leaves a token that no longer has to be there: a false positive).
type chunkTokens struct {
	k     int
	words []uint64 // nil: the chunk holds no token
	// For a filter filled row by row (an open chunk's): the tokens it was
	// sized for, and how many it took that set a new bit (about the
	// distinct ones: a repeated token sets none).
	planned, distinct int
}

// chunkTokensFP is the filter's false-positive rate per word, as the
// segment's row-group filters.
const chunkTokensFP = 0.01

// chunkMayHoldTokens reports whether a chunk may hold a row with every
// token of hashes. Only full chunks have a filter; the chunk being filled
// is scanned. tokens is the engine's tokeniser (nil: no content index, no
// filter).
func (m *memtable) chunkMayHoldTokens(cv chunkView, hashes []uint64, tokens func(*model.Span, func(uint64))) bool {
	if len(hashes) == 0 || tokens == nil {
		return true
	}
	if cv.rows < chunkRows {
		return m.openChunkMayHoldTokens(cv, hashes, tokens)
	}
	ct := cv.c.sum.tokens.Load()
	if ct == nil {
		ct = m.buildChunkTokens(cv, tokens)
	}
	return ct.hasAll(hashes)
}

// openChunkMayHoldTokens answers for a chunk still being filled from its
// partial filter, after adding the rows published since the last content
// query. The partial filter is sized for the distinct tokens of the last
// full chunk built (one and a half times, at least 4,096): a chunk that
// outgrows it only admits more false positives.
func (m *memtable) openChunkMayHoldTokens(cv chunkView, hashes []uint64, tokens func(*model.Span, func(uint64))) bool {
	sum := &cv.c.sum
	if ct := sum.tokens.Load(); ct != nil {
		return ct.hasAll(hashes) // filled since the caller's view: its filter covers the view's rows
	}
	sum.tokMu.Lock()
	defer sum.tokMu.Unlock()
	if sum.partial == nil {
		sum.partial = newChunkTokens(max(4096, int(m.chunkTokensHint.Load())*3/2))
		m.bytes.Add(sum.partial.heapBytes())
	}
	m.topUp(cv.c, cv.rows, tokens)
	return sum.partial.hasAll(hashes)
}

// topUp adds the tokens of rows [tokRows, rows) of c to its partial filter.
// The caller holds c.sum.tokMu.
func (m *memtable) topUp(c *chunk, rows int, tokens func(*model.Span, func(uint64))) {
	sum := &c.sum
	if sum.tokRows >= rows {
		return
	}
	a := m.arena()
	d := spanDecoder{reuse: true}
	p := sum.partial
	add := func(h uint64) {
		if p.add(h) {
			p.distinct++
		}
	}
	for i := sum.tokRows; i < rows; i++ {
		a.materialise(&c.rows[i], &d.s, &d)
		tokens(&d.s, add)
	}
	sum.tokRows = rows
}

// buildChunkTokens makes a full chunk's filter and publishes it (a
// concurrent builder's copy may win: they hold the same tokens). A partial
// filter (content queries ran while the chunk filled) is topped up with
// the remaining rows and becomes the filter, unless it took over a quarter
// more tokens than it was sized for: then the chunk is tokenised again
// into a filter of the right size.
func (m *memtable) buildChunkTokens(cv chunkView, tokens func(*model.Span, func(uint64))) *chunkTokens {
	c := cv.c
	c.sum.tokMu.Lock()
	partial := c.sum.partial
	if partial != nil {
		m.topUp(c, chunkRows, tokens)
		c.sum.partial, c.sum.tokRows = nil, 0
	}
	c.sum.tokMu.Unlock()
	if partial != nil {
		if partial.distinct <= partial.planned*5/4 {
			m.chunkTokensHint.Store(int64(partial.distinct))
			if c.sum.tokens.CompareAndSwap(nil, partial) {
				return partial // already counted in the estimate
			}
		}
		m.bytes.Add(-partial.heapBytes())
		if ct := c.sum.tokens.Load(); ct != nil {
			return ct
		}
	}
	a := m.arena()
	d := spanDecoder{reuse: true}
	var hs []uint64
	emit := func(h uint64) { hs = append(hs, h) }
	for i := range c.rows {
		a.materialise(&c.rows[i], &d.s, &d)
		tokens(&d.s, emit)
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	m.chunkTokensHint.Store(int64(len(hs)))
	ct := &chunkTokens{}
	if len(hs) > 0 {
		ct = newChunkTokens(len(hs))
		for _, h := range hs {
			ct.add(h)
		}
	}
	if c.sum.tokens.CompareAndSwap(nil, ct) {
		m.bytes.Add(ct.heapBytes()) // the buffer's estimate holds what it keeps
	}
	return c.sum.tokens.Load()
}

// newChunkTokens returns an empty filter sized for n distinct tokens at
// chunkTokensFP: m = -n ln p / ln² 2 bits and k = m/n ln 2 probes.
func newChunkTokens(n int) *chunkTokens {
	mbits := max(64, int(math.Ceil(-float64(n)*math.Log(chunkTokensFP)/(math.Ln2*math.Ln2))))
	ct := &chunkTokens{words: make([]uint64, (mbits+63)/64), planned: n}
	ct.k = max(1, int(math.Round(float64(len(ct.words)*64)/float64(n)*math.Ln2)))
	return ct
}

// heapBytes is what the filter holds.
func (ct *chunkTokens) heapBytes() int64 {
	return int64(unsafe.Sizeof(*ct)) + int64(cap(ct.words))*8
}

// probes walks the k bit positions of h (double hashing over a remixed
// step, as the segment's token filters do).
func (ct *chunkTokens) probes(h uint64, fn func(bit uint64) bool) bool {
	m := uint64(len(ct.words)) * 64
	step := h
	step ^= step >> 30
	step *= 0xbf58476d1ce4e5b9
	step ^= step >> 27
	step *= 0x94d049bb133111eb
	step ^= step >> 31
	step |= 1
	for range ct.k {
		bit, _ := bits.Mul64(h, m)
		if !fn(bit) {
			return false
		}
		h += step
	}
	return true
}

// add sets h's bits; it reports whether one of them was not set.
func (ct *chunkTokens) add(h uint64) (fresh bool) {
	ct.probes(h, func(bit uint64) bool {
		w := &ct.words[bit>>6]
		fresh = fresh || *w&(1<<(bit&63)) == 0
		*w |= 1 << (bit & 63)
		return true
	})
	return fresh
}

// hasAll reports whether every hash may be in the filter.
func (ct *chunkTokens) hasAll(hashes []uint64) bool {
	if ct.words == nil {
		return false
	}
	for _, h := range hashes {
		if !ct.probes(h, func(bit uint64) bool { return ct.words[bit>>6]&(1<<(bit&63)) != 0 }) {
			return false
		}
	}
	return true
}
