package text

import (
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
		return tokenize(text, escaped, sc, func(tok string, _ bool) bool {
			h := xxhash.Sum64String(tok)
			if sc.seen.insert(h) {
				emit(h)
			}
			return true
		})
	})
	if sc != nil {
		putScratch(sc)
	}
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
