package logstore

import "math/bits"

// bloom is a Bloom filter over 64-bit hashes (double hashing, k probes).
// With 16 bits per key and k = 11 the false-positive rate is about 0.05%: a
// block or chunk that passes is read and checked record by record, which
// costs milliseconds, so a query over 1,000 blocks must pass few by chance
// (at 10 bits per key and 1%, an absent word read about 10 of them).
type bloom []uint64

const (
	bloomBitsPerKey = 16
	bloomProbes     = 11
)

func newBloom(keys int) bloom {
	words := (keys*bloomBitsPerKey + 63) / 64
	return make(bloom, max(words, 1))
}

func (b bloom) add(h uint64) {
	n := uint64(len(b)) * 64
	h1, h2 := h, bits.RotateLeft64(h, 32)|1
	for i := range uint64(bloomProbes) {
		p := (h1 + i*h2) % n
		b[p/64] |= 1 << (p % 64)
	}
}

func (b bloom) has(h uint64) bool {
	if len(b) == 0 {
		return false
	}
	n := uint64(len(b)) * 64
	h1, h2 := h, bits.RotateLeft64(h, 32)|1
	for i := range uint64(bloomProbes) {
		p := (h1 + i*h2) % n
		if b[p/64]&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}
