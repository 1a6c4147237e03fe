package segment

import (
	"fmt"
	"math"
	"math/bits"
)

// A binary fuse map (Graf and Lemire, "Binary Fuse Filters: Fast and Smaller
// Than Xor Filters", 2022) with w-bit slots: every key of the set it was
// built from maps to the value it was given, as the XOR of three slots and
// a fingerprint of the key; any other key maps to a value that is uniformly
// random in [0, 2^w). It costs about 1.13-1.25 w bits per key and three slot
// reads per lookup. With all values 0 it is a filter with a false-positive
// rate of 2^-w; with values in [0, c) a key outside the set decodes to a
// valid value with probability c/2^w, which callers treat like a false
// positive (the token map, section 11, relies on that: an absent token may
// be sent to one group of rows, never a present one to the wrong group).
//
// Slots are packed into 64-byte pages, floor(512/w) slots a page, so that a
// slot never straddles a page and a paged, checksummed copy (section 11)
// reads one page per slot.

// fuseShape is what a lookup needs besides the slots.
type fuseShape struct {
	seed     uint64
	segLen   uint32 // slots per fuse segment, a power of two
	segCount uint32 // segments the first position ranges over
	slots    uint32 // total slots: (segCount + 2) * segLen
	w        uint32 // bits per slot, 1..32
}

const (
	fusePageBytes = 64
	fusePageBits  = 8 * fusePageBytes
	// maxFuseSlots bounds what a reader accepts (2^28 slots).
	maxFuseSlots = 1 << 28
	maxFuseSeg   = 1 << 18
)

// fuseMix is splitmix64's finaliser: a bijection of 64-bit values.
func fuseMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func (s *fuseShape) slotsPerPage() uint32 { return fusePageBits / s.w }

// pages is the number of 64-byte pages of the slots.
func (s *fuseShape) pages() int {
	spp := s.slotsPerPage()
	return int((s.slots + spp - 1) / spp)
}

// positions returns the key's mixed hash and its three slots.
func (s *fuseShape) positions(key uint64) (h uint64, p [3]uint32) {
	h = fuseMix(key + s.seed)
	hi, _ := bits.Mul64(h, uint64(s.segCount)*uint64(s.segLen))
	p[0] = uint32(hi)
	p[1] = p[0] + s.segLen
	p[2] = p[1] + s.segLen
	mask := s.segLen - 1
	p[1] ^= uint32(h>>18) & mask
	p[2] ^= uint32(h) & mask
	return h, p
}

func (s *fuseShape) mask() uint32 { return uint32(1<<s.w - 1) }

// fingerprint is the part of a key's value hidden by its slots.
func (s *fuseShape) fingerprint(h uint64) uint32 { return uint32(h^h>>32) & s.mask() }

// slotAt locates slot k: its page and bit offset within the page.
func (s *fuseShape) slotAt(k uint32) (page int, bit uint32) {
	spp := s.slotsPerPage()
	return int(k / spp), (k % spp) * s.w
}

// getBits reads w bits at bit offset off of a 64-byte page (little-endian
// bit order: bit p is bit p&7 of byte p>>3).
func getBits[T string | []byte](page T, off, w uint32) uint32 {
	var v uint64
	b := off >> 3
	for i := uint32(0); i < 5 && b+i < uint32(len(page)); i++ {
		v |= uint64(page[b+i]) << (8 * i)
	}
	return uint32(v>>(off&7)) & uint32(1<<w-1)
}

func setBits(page []byte, off, w, val uint32) {
	v := uint64(val) << (off & 7)
	for i := uint32(0); v != 0; i++ {
		page[off>>3+i] |= byte(v)
		v >>= 8
	}
}

// value returns the decoded value of key from the three slot values.
func (s *fuseShape) value(h uint64, a, b, c uint32) uint32 { return s.fingerprint(h) ^ a ^ b ^ c }

// fuseLookup decodes key from pages held in memory (pages back to back, 64
// bytes each, as written by buildFuse).
func fuseLookup[T string | []byte](s *fuseShape, pages T, key uint64) uint32 {
	h, p := s.positions(key)
	var v [3]uint32
	for j, k := range p {
		pg, bit := s.slotAt(k)
		v[j] = getBits(pages[pg*fusePageBytes:(pg+1)*fusePageBytes], bit, s.w)
	}
	return s.value(h, v[0], v[1], v[2])
}

// newFuseShape sizes a map of n keys with w-bit slots (before the seed).
func newFuseShape(n int, w uint32) fuseShape {
	segLen := 4
	if n > 0 {
		segLen = 1 << int(math.Floor(math.Log(float64(n))/math.Log(3.33)+2.25))
	}
	segLen = min(segLen, maxFuseSeg)
	capacity := 0
	if n > 1 {
		factor := max(1.125, 0.875+0.25*math.Log(1e6)/math.Log(float64(n)))
		capacity = int(math.Round(float64(n) * factor))
	}
	segCount := (capacity+segLen-1)/segLen - 2
	if segCount < 1 {
		segCount = 1
	}
	return fuseShape{segLen: uint32(segLen), segCount: uint32(segCount), slots: uint32((segCount + 2) * segLen), w: w}
}

// buildFuse builds a map of the distinct keys to vals (nil: all 0; each
// value < 2^w), returning its shape and its pages. It fails only for
// duplicate keys (peeling then never completes) or more keys than
// maxFuseSlots allows.
func buildFuse(keys []uint64, vals []uint32, w uint32) (fuseShape, []byte, error) {
	if w < 1 || w > 32 {
		return fuseShape{}, nil, fmt.Errorf("fuse map: slot width %d outside [1, 32]", w)
	}
	s := newFuseShape(len(keys), w)
	if uint64(s.slots)*11/10 > maxFuseSlots {
		return fuseShape{}, nil, fmt.Errorf("fuse map: %d keys exceed the limit", len(keys))
	}
	type peeled struct{ key, pos uint32 }
	var (
		count []uint32
		xor   []uint32
		queue []uint32
		stack = make([]peeled, 0, len(keys))
		rng   = uint64(0x9e3779b97f4a7c15)
	)
	for attempt := 0; ; attempt++ {
		if attempt == 100 {
			return fuseShape{}, nil, fmt.Errorf("fuse map: %d keys did not peel in %d attempts (duplicate keys?)", len(keys), attempt)
		}
		if attempt > 0 && attempt%10 == 0 {
			s.segCount++ // small sets fail more often: give them room
			s.slots += s.segLen
		}
		rng += 0x9e3779b97f4a7c15
		s.seed = fuseMix(rng)
		count = make([]uint32, s.slots)
		xor = make([]uint32, s.slots)
		for i, k := range keys {
			_, p := s.positions(k)
			for _, q := range p {
				count[q]++
				xor[q] ^= uint32(i)
			}
		}
		queue = queue[:0]
		for q, c := range count {
			if c == 1 {
				queue = append(queue, uint32(q))
			}
		}
		stack = stack[:0]
		for len(queue) > 0 {
			q := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			if count[q] != 1 {
				continue
			}
			i := xor[q]
			stack = append(stack, peeled{key: i, pos: q})
			_, p := s.positions(keys[i])
			for _, r := range p {
				count[r]--
				xor[r] ^= i
				if count[r] == 1 {
					queue = append(queue, r)
				}
			}
		}
		if len(stack) == len(keys) {
			break
		}
	}
	pages := make([]byte, s.pages()*fusePageBytes)
	slot := func(k uint32) ([]byte, uint32) {
		pg, bit := s.slotAt(k)
		return pages[pg*fusePageBytes : (pg+1)*fusePageBytes], bit
	}
	for j := len(stack) - 1; j >= 0; j-- {
		e := stack[j]
		h, p := s.positions(keys[e.key])
		var v uint32
		if vals != nil {
			v = vals[e.key]
		}
		v ^= s.fingerprint(h)
		for _, q := range p {
			if q != e.pos {
				pg, bit := slot(q)
				v ^= getBits(pg, bit, w)
			}
		}
		pg, bit := slot(e.pos)
		setBits(pg, bit, w, v&s.mask())
	}
	return s, pages, nil
}
