package text

import (
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/rastro-dev/rastro/internal/model"
)

// SpanTokens calls emit once for the Hash of each distinct token of the
// span's texts (see Sources; minLen as there). Token filters are built
// from these hashes; a query's Hashes are all among them when it matches.
func SpanTokens(s *model.Span, minLen int, emit func(hash uint64)) {
	var sc *scratch
	walk(s, minLen, func(_, text string, escaped bool) bool {
		if sc == nil {
			sc = getScratch()
		}
		// A long text: its hashes from the cache, or kept for next time.
		var e *tokenCacheEntry
		if len(text) >= tokenCacheMin && len(text) <= tokenCacheMax {
			if e = &sc.cache[xxhash.Sum64String(text)%tokenCacheSlots]; e.escaped == escaped && e.text == text {
				for _, h := range e.hashes {
					if sc.seen.insert(h) {
						emit(h)
					}
				}
				return true
			}
			e.text, e.hashes = "", e.hashes[:0]
		}
		ok := tokenize(text, escaped, sc, func(tok string, _ bool) bool {
			h := xxhash.Sum64String(tok)
			if e != nil {
				e.hashes = append(e.hashes, h)
			}
			if sc.seen.insert(h) {
				emit(h)
			}
			return true
		})
		if e != nil {
			e.text, e.escaped = strings.Clone(text), escaped
		}
		return ok
	})
	if sc != nil {
		putScratch(sc)
	}
}

// A long text that repeats from span to span (the system prompt and tool
// schema an LLM application sends on every call, a few KB each) is
// tokenised once: each scratch keeps the token hashes of the last long
// texts it tokenised, in a small direct-mapped cache keyed by the text's
// hash, and gives them again when the same text comes back. In a merge of
// the llm-sessions corpus tokenising was a third of the CPU, and about half
// of a span's text is its shared system prompt
// (docs/benchmarks/conversations.md).
const (
	tokenCacheMin   = 1 << 10
	tokenCacheMax   = 64 << 10
	tokenCacheSlots = 16
)

// tokenCacheEntry is one text and the hash of each token of it, in order:
// SpanTokens gives the same hashes in the same order from the cache as
// from tokenising. The text is a copy: a caller's string may view a buffer
// it reuses.
type tokenCacheEntry struct {
	text    string
	escaped bool
	hashes  []uint64
}

// hashSet is an open-addressing set of hashes, reused through the scratch
// pool. Slot value 0 means empty; the hash 0 is tracked apart.
type hashSet struct {
	slots []uint64
	n     int
	zero  bool
}

const (
	minSetSize = 256
	maxKeptSet = 1 << 13 // larger tables are dropped rather than pooled
)

// insert adds h and reports whether it was new.
func (hs *hashSet) insert(h uint64) bool {
	if h == 0 {
		if hs.zero {
			return false
		}
		hs.zero = true
		return true
	}
	if hs.slots == nil {
		hs.slots = make([]uint64, minSetSize)
	}
	if 2*(hs.n+1) > len(hs.slots) {
		hs.grow()
	}
	mask := uint64(len(hs.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch hs.slots[i] {
		case h:
			return false
		case 0:
			hs.slots[i] = h
			hs.n++
			return true
		}
	}
}

func (hs *hashSet) grow() {
	old := hs.slots
	hs.slots = make([]uint64, 2*len(old))
	mask := uint64(len(hs.slots) - 1)
	for _, h := range old {
		if h == 0 {
			continue
		}
		i := h & mask
		for hs.slots[i] != 0 {
			i = (i + 1) & mask
		}
		hs.slots[i] = h
	}
}

// release empties the set for reuse.
func (hs *hashSet) release() {
	if len(hs.slots) > maxKeptSet {
		hs.slots = nil
	} else if hs.n > 0 {
		clear(hs.slots)
	}
	hs.n, hs.zero = 0, false
}
