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
// decoding a row; and a signature of each row's tokens (rowSigBits), so that
// in a chunk that passes only the rows that may hold every word are decoded
// (a word in one span of a few hundred would otherwise decode them all).
// It is built on the first content query that reaches the chunk (one
// decoding and tokenising of its rows, what a scan of it costs
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
	// rows are the rows' token signatures, by row number: chunkRows of
	// them, those below the tokenised rows final (a reader may keep a
	// prefix without the lock).
	rows []uint64
}

// rowSigBits is a token's two bits in a row's 64-bit signature (the low
// bits of the hash; the filter's probes use its high bits). A row holds
// every word of a query only if its signature has all their bits: with
// the few tokens of a plain span (a status message, an exception) nearly
// every other row is ruled out, and a row with many (an LLM prompt) sets
// most bits and is decoded, as without signatures.
func rowSigBits(h uint64) uint64 { return 1<<(h&63) | 1<<(h>>6&63) }

// rowSigMask is the bits every row that may hold all of hashes has.
func rowSigMask(hashes []uint64) uint64 {
	var m uint64
	for _, h := range hashes {
		m |= rowSigBits(h)
	}
	return m
}

// chunkTokensFP is the filter's false-positive rate per word, as the
// segment's row-group filters.
const chunkTokensFP = 0.01

// chunkMayHoldTokens reports whether a chunk may hold a row with every
// token of hashes, and if it may, the token signatures of its first
// len(sigs) rows (nil: none known, every row may). tokens is the engine's
// tokeniser (nil: no content index, no filter).
func (m *memtable) chunkMayHoldTokens(cv chunkView, hashes []uint64, tokens func(*model.Span, func(uint64))) (may bool, sigs []uint64) {
	if len(hashes) == 0 || tokens == nil {
		return true, nil
	}
	if cv.rows < chunkRows {
		return m.openChunkMayHoldTokens(cv, hashes, tokens)
	}
	ct := cv.c.sum.tokens.Load()
	if ct == nil {
		ct = m.buildChunkTokens(cv, tokens)
	}
	if !ct.hasAll(hashes) {
		return false, nil
	}
	return true, ct.rows
}

// openChunkMayHoldTokens answers for a chunk still being filled from its
// partial filter, after adding the rows published since the last content
// query. The partial filter is sized for the distinct tokens of the last
// full chunk built (one and a half times, at least 4,096): a chunk that
// outgrows it only admits more false positives.
func (m *memtable) openChunkMayHoldTokens(cv chunkView, hashes []uint64, tokens func(*model.Span, func(uint64))) (bool, []uint64) {
	sum := &cv.c.sum
	if ct := sum.tokens.Load(); ct != nil { // filled since the caller's view: its filter covers the view's rows
		if !ct.hasAll(hashes) {
			return false, nil
		}
		return true, ct.rows
	}
	sum.tokMu.Lock()
	defer sum.tokMu.Unlock()
	if sum.partial == nil {
		sum.partial = newChunkTokens(max(4096, int(m.chunkTokensHint.Load())*3/2))
		sum.partial.rows = make([]uint64, chunkRows)
		m.bytes.Add(sum.partial.heapBytes())
	}
	m.topUp(cv.c, cv.rows, tokens)
	if !sum.partial.hasAll(hashes) {
		return false, nil
	}
	return true, sum.partial.rows[:sum.tokRows]
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
	var sig uint64
	add := func(h uint64) {
		sig |= rowSigBits(h)
		if p.add(h) {
			p.distinct++
		}
	}
	for i := sum.tokRows; i < rows; i++ {
		a.materialise(&c.rows[i], &d.s, &d)
		sig = 0
		tokens(&d.s, add)
		p.rows[i] = sig
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
	rows := make([]uint64, chunkRows)
	var sig uint64
	emit := func(h uint64) {
		hs = append(hs, h)
		sig |= rowSigBits(h)
	}
	for i := range c.rows {
		a.materialise(&c.rows[i], &d.s, &d)
		sig = 0
		tokens(&d.s, emit)
		rows[i] = sig
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	m.chunkTokensHint.Store(int64(len(hs)))
	ct := &chunkTokens{} // no token: no row may match, no signature is read
	if len(hs) > 0 {
		ct = newChunkTokens(len(hs))
		ct.rows = rows
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
	return int64(unsafe.Sizeof(*ct)) + int64(cap(ct.words)+cap(ct.rows))*8
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
