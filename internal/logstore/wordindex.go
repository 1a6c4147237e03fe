package logstore

import (
	"encoding/binary"
	"errors"
	"slices"
)

// A block's word index (column colWords, segment version 2) maps each word
// of the block's bodies and string attributes to the records that hold it,
// so that a word search decodes only those records of a block its Bloom
// filter passes instead of decoding and tokenising all of them:
//
//	uvarint W (the number of keys)
//	W x u32 key, ascending: the word hash's high 32 bits
//	W x uvarint n, the number of records under each key
//	for each key in turn, n x u16 record index in the block, ascending
//
// Two words whose hashes share the high 32 bits share a key (their records
// merged): the index may name a record that lacks the word, never miss one
// that has it, and the query checks every record it decodes.

func wordKey(h uint64) uint32 { return uint32(h >> 32) }

// keyHash is what a version-2 block's word filter holds for a word: its key,
// spread over 64 bits, so that the filter is built from the index's keys
// without sorting the words' full hashes a second time.
func keyHash(k uint32) uint64 { return uint64(k) * 0x9e3779b97f4a7c15 }

// sortPairs sorts a block's (key << 16 | record index) pairs, given in
// record order, by key with a stable radix sort (four passes of 8 bits),
// which leaves each key's records in order; tmp is scratch space (used when
// large enough). Pairs not in record order are sorted by slices.Sort instead.
func sortPairs(pairs, tmp []uint64) {
	if !slices.IsSortedFunc(pairs, func(a, b uint64) int { return int(a&0xffff) - int(b&0xffff) }) {
		slices.Sort(pairs)
		return
	}
	if cap(tmp) < len(pairs) {
		tmp = make([]uint64, len(pairs))
	}
	src, dst := pairs, tmp[:len(pairs)]
	for shift := 16; shift < 48; shift += 8 {
		var count [256]int
		for _, v := range src {
			count[(v>>shift)&0xff]++
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, v := range src {
			d := (v >> shift) & 0xff
			dst[count[d]] = v
			count[d]++
		}
		src, dst = dst, src
	}
	// Four passes: the result is back in pairs.
}

// wordIndex builds the index from the (key << 16 | record index) pairs of
// a block, which it sorts (sortPairs); it returns the index and the number
// of keys.
func wordIndex(dst []byte, pairs, tmp []uint64) ([]byte, int) {
	sortPairs(pairs, tmp)
	pairs = slices.Compact(pairs)
	w := 0
	for i := range pairs {
		if i == 0 || pairs[i]>>16 != pairs[i-1]>>16 {
			w++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(w))
	for i := range pairs {
		if i == 0 || pairs[i]>>16 != pairs[i-1]>>16 {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(pairs[i]>>16))
		}
	}
	for i := 0; i < len(pairs); {
		j := i + 1
		for j < len(pairs) && pairs[j]>>16 == pairs[i]>>16 {
			j++
		}
		dst = binary.AppendUvarint(dst, uint64(j-i))
		i = j
	}
	for _, p := range pairs {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(p))
	}
	return dst, w
}

var errWordIndex = errors.New("bad word index")

// lookupWords returns the indexes (ascending) of the block's records that
// the index lists under every one of hashes.
func lookupWords(ix []byte, hashes []uint64, n int) ([]int, error) {
	d := &dec{b: ix}
	w := d.uvarint("word count")
	if d.err != nil || w > uint64(len(ix))/4 {
		return nil, errWordIndex
	}
	keys := d.bytes("word keys", 4*w)
	counts := make([]uint64, w)
	total := uint64(0)
	for i := range counts {
		counts[i] = d.uvarint("word record count")
		total += counts[i]
	}
	if d.err != nil || total > uint64(len(d.b))/2 || uint64(len(d.b)) != 2*total {
		return nil, errWordIndex
	}
	postings := d.b
	var out []int
	for qi, h := range hashes {
		k := wordKey(h)
		lo, hi := 0, int(w)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if binary.LittleEndian.Uint32(keys[4*mid:]) < k {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo == int(w) || binary.LittleEndian.Uint32(keys[4*lo:]) != k {
			return nil, nil
		}
		start := uint64(0)
		for _, c := range counts[:lo] {
			start += c
		}
		var recs []int
		for p := start; p < start+counts[lo]; p++ {
			i := int(binary.LittleEndian.Uint16(postings[2*p:]))
			if i >= n || (len(recs) > 0 && i <= recs[len(recs)-1]) {
				return nil, errWordIndex // out of the block, or not ascending
			}
			recs = append(recs, i)
		}
		if qi == 0 {
			out = recs
			continue
		}
		out = slices.DeleteFunc(out, func(i int) bool {
			_, found := slices.BinarySearch(recs, i)
			return !found
		})
		if len(out) == 0 {
			return nil, nil
		}
	}
	return out, nil
}
