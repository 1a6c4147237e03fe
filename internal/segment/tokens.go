package segment

import (
	"fmt"
	"math"
	"math/bits"
)

// Full-text token filters (sections 7 and 8, docs/format/segment.md).
//
// The writer is given the 64-bit hashes of each span's searchable tokens (by
// WriterOptions.ContentTokens) and never sees the text. Both the per-block
// filters and the per-segment summary are classic bloom filters over those
// hashes: w 64-bit words (m = 64w bits), k probes derived from the hash by
// double hashing, each probe mapped to [0, m) by a multiply-shift
// ("fastrange"), so m need not be a power of two.

// Limits and defaults of the token filters.
const (
	// DefaultTokenFilterFP is the default target false-positive rate of a
	// per-block token filter (WriterOptions.TokenFilterFP): 1/64, a binary
	// fuse filter of 6-bit slots, about 7.8 bits a token. Rare words are
	// answered by the token map without block filters, so these serve
	// words in several blocks, where a false block costs proportionally
	// less.
	DefaultTokenFilterFP = 1.0 / 64
	// summaryFP is the false-positive rate the summary is sized for when it
	// fits its budget; it is resident and consulted first, so it gets more
	// bits per token than a block filter.
	summaryFP = 0.001
	// residentTokenBudget bounds the resident memory of a segment's token
	// index: summary bits plus the directory of the block filters.
	residentTokenBudget = 32 << 10
	// tokenDirEntryBytes is the resident cost of one block in the directory
	// (u64 offset, u32 crc).
	tokenDirEntryBytes = 12
	// summaryMinWords: below this budget the summary is not worth keeping
	// and is written saturated (it passes everything).
	summaryMinWords = 8
	// summaryMaxTokens bounds the writer's set of the segment's distinct
	// tokens (4 MiB of table). Beyond it a 32 KiB summary would hold less
	// than one bit per token (over 60% false positives): it is written
	// saturated instead.
	summaryMaxTokens = residentTokenBudget * 8
	// maxTokenK bounds the probes of a filter (writer and reader).
	maxTokenK = 16
	// maxBlockTokenFilterWords bounds one block's filter (1 MiB): enough for
	// 870k distinct tokens at 1%; a block with more gets a higher rate.
	maxBlockTokenFilterWords = 1 << 17
	// maxSummaryWords is what a reader accepts for the summary (1 MiB), far
	// beyond what a writer produces (the budget), to bound memory on
	// hostile input.
	maxSummaryWords = 1 << 17
)

// tokenBloom is a bloom filter over 64-bit token hashes.
type tokenBloom struct {
	k     int
	words []uint64
}

// bloomWordsFor returns the number of 64-bit words a bloom filter needs to
// hold n keys at false-positive rate fp (optimal k).
func bloomWordsFor(n int, fp float64) int {
	if n <= 0 {
		return 0
	}
	bitsNeeded := -float64(n) * math.Log(fp) / (math.Ln2 * math.Ln2)
	return int(math.Ceil(bitsNeeded / 64))
}

// bloomK returns the optimal number of probes for n keys in w words.
func bloomK(n, w int) int {
	if n <= 0 || w <= 0 {
		return 1
	}
	k := int(math.Round(math.Ln2 * float64(64*w) / float64(n)))
	return min(max(k, 1), maxTokenK)
}

// bloomFP estimates the false-positive rate of a bloom filter of w words
// and k probes holding n distinct keys: (1 - e^(-kn/m))^k.
func bloomFP(n, w, k int) float64 {
	if n <= 0 {
		return 0
	}
	if w <= 0 {
		return 1
	}
	return math.Pow(1-math.Exp(-float64(k)*float64(n)/float64(64*w)), float64(k))
}

// probeStep derives the double-hashing step from the hash: a splitmix64
// finaliser, forced odd.
func probeStep(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h | 1
}

func newTokenBloom(w, k int) tokenBloom {
	return tokenBloom{k: k, words: make([]uint64, w)}
}

func (f *tokenBloom) add(h uint64) {
	m := uint64(len(f.words)) * 64
	step := probeStep(h)
	for i := 0; i < f.k; i++ {
		bit, _ := bits.Mul64(h, m)
		f.words[bit>>6] |= 1 << (bit & 63)
		h += step
	}
}

// appendTokenBloom encodes a filter: uvarint distinct | uvarint k | uvarint w | w x u64 LE.
func appendTokenBloom(b []byte, distinct int, f *tokenBloom) []byte {
	b = appendUvarints(b, uint64(distinct), uint64(f.k), uint64(len(f.words)))
	for _, x := range f.words {
		b = le.AppendUint64(b, x)
	}
	return b
}

// bloomView is a decoded filter over its stored bits: the little-endian
// words of appendTokenBloom are one little-endian bit string, so bit p is
// bit p&7 of byte p>>3. Testing needs no copy of the bits.
type bloomView struct {
	k    int
	bits string // 8w bytes
}

// test reports whether h may have been added. An empty filter holds nothing.
func (f *bloomView) test(h uint64) bool {
	m := uint64(len(f.bits)) * 8
	if m == 0 {
		return false
	}
	step := probeStep(h)
	for i := 0; i < f.k; i++ {
		bit, _ := bits.Mul64(h, m)
		if f.bits[bit>>3]&(1<<(bit&7)) == 0 {
			return false
		}
		h += step
	}
	return true
}

// testAll reports whether every hash may have been added.
func (f *bloomView) testAll(hashes []uint64) bool {
	for _, h := range hashes {
		if !f.test(h) {
			return false
		}
	}
	return true
}

// decodeTokenBloom reads a filter written by appendTokenBloom from d,
// accepting at most maxWords words. A filter with words has 1..maxTokenK
// probes and at least one distinct token (callers check the converse, which
// a saturated summary breaks). The view aliases d's string.
func decodeTokenBloom(d *dec, maxWords int) (distinct int, f bloomView) {
	n := d.uvarint()
	k := d.uvarint()
	w := d.uvarint()
	if d.err != nil {
		return 0, bloomView{}
	}
	switch {
	case w > uint64(maxWords):
		d.failf(fmt.Sprintf("token filter of %d words exceeds the limit of %d", w, maxWords))
	case w > uint64(d.remaining()/8):
		d.fail(errShort)
	case w > 0 && (k < 1 || k > maxTokenK):
		d.failf(fmt.Sprintf("token filter with %d probes", k))
	case w > 0 && n == 0:
		d.failf("token filter with bits but no tokens")
	case n > math.MaxInt32:
		d.failf("token count exceeds 32 bits")
	}
	if d.err != nil {
		return 0, bloomView{}
	}
	return int(n), bloomView{k: int(k), bits: d.fixed(int(8 * w))}
}
