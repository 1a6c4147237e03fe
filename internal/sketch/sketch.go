// Package sketch implements a mergeable quantile sketch for durations in
// nanoseconds, in the style of DDSketch (Masson, Rim and Lee, "DDSketch: a
// fast and fully-mergeable quantile sketch with relative-error guarantees",
// VLDB 2019).
//
// A value v >= 1 is counted in bucket i = ceil(log_gamma(v)) with
// gamma = (1+Alpha)/(1-Alpha); bucket i covers (gamma^(i-1), gamma^i]. A
// quantile is answered with 2*gamma^i/(gamma+1), which is within Alpha (1%)
// of every value of the bucket, hence of the exact quantile. Zero durations
// are counted apart and answered exactly. Min and Max are exact, and every
// answer is clamped to [Min, Max].
//
// Memory is bounded: a sketch keeps at most MaxBuckets contiguous buckets
// (about 2 KiB of counts per 256 buckets in use, 16 KiB at most). The whole
// uint64 range needs about 2,220 buckets, so the bound only bites when one
// sketch holds values spread over more than 17 orders of magnitude; then the
// lowest buckets are collapsed into the lowest kept one, and only quantiles
// that fall in the collapsed range lose their guarantee (they are answered
// too high, never above the true value by more than the collapsed range).
//
// Merging is exact: the sketch of a union equals the merge of the sketches
// of its parts, bucket for bucket, in any order (collapsing aside).
//
// A Sketch is not safe for concurrent use.
package sketch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Alpha is the relative accuracy of Quantile: for a sketch that did not
// collapse buckets, the answer x for a quantile whose exact value is v
// satisfies |x - v| <= Alpha*v.
const Alpha = 0.01

// MaxBuckets bounds the number of buckets one sketch keeps.
const MaxBuckets = 2048

var (
	gamma       = (1 + Alpha) / (1 - Alpha)
	invLogGamma = 1 / math.Log(gamma)
	// maxIndex is the bucket of math.MaxUint64; indexes lie in [0, maxIndex].
	maxIndex = bucketIndex(math.MaxUint64)
)

// encodingVersion is the first byte of AppendBinary's output.
const encodingVersion = 1

// Sketch is a quantile sketch of uint64 values. The zero value is an empty
// sketch ready to use.
type Sketch struct {
	count  uint64
	zeros  uint64
	min    uint64
	max    uint64
	offset int      // bucket index of counts[0]
	counts []uint64 // counts of buckets offset .. offset+len(counts)-1
}

// New returns an empty sketch.
func New() *Sketch { return &Sketch{} }

// Reset empties the sketch, keeping its buckets' memory for reuse (the
// bucket code writes every bucket it extends into, so old counts beyond
// the length never show).
func (s *Sketch) Reset() { *s = Sketch{counts: s.counts[:0]} }

func bucketIndex(v uint64) int {
	if v <= 1 {
		return 0
	}
	return int(math.Ceil(math.Log(float64(v)) * invLogGamma))
}

// Add counts one value.
func (s *Sketch) Add(v uint64) { s.AddN(v, 1) }

// AddN counts n occurrences of v. n = 0 does nothing.
func (s *Sketch) AddN(v, n uint64) {
	if n == 0 {
		return
	}
	if s.count == 0 || v < s.min {
		s.min = v
	}
	if s.count == 0 || v > s.max {
		s.max = v
	}
	s.count += n
	if v == 0 {
		s.zeros += n
		return
	}
	s.addBucket(bucketIndex(v), n)
}

// addBucket adds n to bucket i, growing the bucket range and collapsing its
// low end beyond MaxBuckets.
func (s *Sketch) addBucket(i int, n uint64) {
	if len(s.counts) == 0 {
		s.offset = i
		s.counts = append(s.counts[:0], n)
		return
	}
	if i < s.offset {
		hi := s.offset + len(s.counts) - 1
		if hi-i+1 > MaxBuckets {
			// Beyond the bound: the value joins the lowest kept bucket.
			lo := hi - MaxBuckets + 1
			s.extendLow(lo)
			s.counts[0] += n
			return
		}
		s.extendLow(i)
	} else if i >= s.offset+len(s.counts) {
		s.extendHigh(i)
	}
	s.counts[i-s.offset] += n
}

// extendLow makes lo the lowest bucket index (lo < offset). It leaves some
// empty buckets below lo (within MaxBuckets, never below index 0) so that a
// run of ever smaller values does not reallocate each time.
func (s *Sketch) extendLow(lo int) {
	if lo >= s.offset {
		return
	}
	grow := s.offset - lo
	slack := min(lo, max(grow, len(s.counts)/2, 8), MaxBuckets-len(s.counts)-grow)
	slack = max(slack, 0)
	shift, n := slack+grow, slack+grow+len(s.counts)
	if n <= cap(s.counts) {
		// Room in the array (a sketch reused after Reset): shift in place.
		old := len(s.counts)
		s.counts = s.counts[:n]
		copy(s.counts[shift:], s.counts[:old])
		clear(s.counts[:shift])
	} else {
		c := make([]uint64, n, n+8)
		copy(c[shift:], s.counts)
		s.counts = c
	}
	s.offset = lo - slack
}

// extendHigh makes hi a valid bucket index, collapsing the lowest buckets
// when the range would exceed MaxBuckets.
func (s *Sketch) extendHigh(hi int) {
	for len(s.counts) < hi-s.offset+1 {
		s.counts = append(s.counts, 0)
	}
	if over := len(s.counts) - MaxBuckets; over > 0 {
		var sum uint64
		for _, c := range s.counts[:over+1] {
			sum += c
		}
		s.counts = append(s.counts[:0], s.counts[over:]...)
		s.counts[0] = sum
		s.offset += over
	}
}

// Merge adds every value counted by o to s. o is not modified; o may be nil.
func (s *Sketch) Merge(o *Sketch) {
	if o == nil || o.count == 0 {
		return
	}
	if s.count == 0 || o.min < s.min {
		s.min = o.min
	}
	if s.count == 0 || o.max > s.max {
		s.max = o.max
	}
	s.count += o.count
	s.zeros += o.zeros
	if len(o.counts) == 0 {
		return
	}
	// Grow to the top first, so collapsing (if any) happens once.
	s.addBucket(o.offset+len(o.counts)-1, 0)
	for j, c := range o.counts {
		if c != 0 {
			s.addBucket(o.offset+j, c)
		}
	}
}

// Clone returns an independent copy of s (nil for nil).
func (s *Sketch) Clone() *Sketch {
	if s == nil {
		return nil
	}
	c := *s
	c.counts = append([]uint64(nil), s.counts...)
	return &c
}

// Count returns the number of values added.
func (s *Sketch) Count() uint64 { return s.count }

// Min returns the smallest value added (0 for an empty sketch).
func (s *Sketch) Min() uint64 { return s.min }

// Max returns the largest value added (0 for an empty sketch).
func (s *Sketch) Max() uint64 { return s.max }

// Quantile returns an estimate of the q-quantile (0 <= q <= 1): the value of
// rank floor(q*(Count-1)) in sorted order, within Alpha relative error. It
// returns NaN for an empty sketch or q outside [0, 1]. Quantile(0) and
// Quantile(1) are exactly Min and Max.
func (s *Sketch) Quantile(q float64) float64 {
	if s.count == 0 || !(q >= 0 && q <= 1) {
		return math.NaN()
	}
	if q == 0 {
		return float64(s.min)
	}
	if q == 1 {
		return float64(s.max)
	}
	rank := uint64(q * float64(s.count-1))
	if rank < s.zeros {
		return 0
	}
	seen := s.zeros
	for j, c := range s.counts {
		seen += c
		if seen > rank {
			v := 2 * math.Pow(gamma, float64(s.offset+j)) / (gamma + 1)
			return math.Min(math.Max(v, float64(s.min)), float64(s.max))
		}
	}
	return float64(s.max)
}

// Quantiles is Quantile for several quantiles in ascending order, in one
// pass over the buckets; out[i] answers qs[i]. It panics if qs is not
// ascending.
func (s *Sketch) Quantiles(out []float64, qs ...float64) []float64 {
	out = out[:0]
	for i, q := range qs {
		if i > 0 && q < qs[i-1] {
			panic("sketch: Quantiles needs ascending quantiles")
		}
	}
	seen, j := s.zeros, 0
	for _, q := range qs {
		if s.count == 0 || !(q >= 0 && q <= 1) || q == 0 || q == 1 {
			out = append(out, s.Quantile(q))
			continue
		}
		rank := uint64(q * float64(s.count-1))
		if rank < s.zeros {
			out = append(out, 0)
			continue
		}
		for j < len(s.counts) && seen+s.counts[j] <= rank {
			seen += s.counts[j]
			j++
		}
		if j == len(s.counts) {
			out = append(out, float64(s.max))
			continue
		}
		v := 2 * math.Pow(gamma, float64(s.offset+j)) / (gamma + 1)
		out = append(out, math.Min(math.Max(v, float64(s.min)), float64(s.max)))
	}
	return out
}

// AppendBinary appends the sketch's encoding to dst:
//
//	version byte (1) | uvarint count | uvarint zeros | uvarint min | uvarint max - min |
//	uvarint n (non-empty buckets) | n x (uvarint index delta | uvarint count)
//
// The first bucket's delta is its index; later deltas are from the previous
// non-empty bucket and are >= 1. An empty sketch encodes as 2 bytes.
func (s *Sketch) AppendBinary(dst []byte) []byte {
	dst = append(dst, encodingVersion)
	dst = binary.AppendUvarint(dst, s.count)
	if s.count == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, s.zeros)
	dst = binary.AppendUvarint(dst, s.min)
	dst = binary.AppendUvarint(dst, s.max-s.min)
	n := 0
	for _, c := range s.counts {
		if c != 0 {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	prev := 0
	for j, c := range s.counts {
		if c == 0 {
			continue
		}
		i := s.offset + j
		dst = binary.AppendUvarint(dst, uint64(i-prev))
		dst = binary.AppendUvarint(dst, c)
		prev = i
	}
	return dst
}

// ErrCorrupt is wrapped by every Decode error.
var ErrCorrupt = errors.New("corrupt sketch encoding")

// Decode parses an encoding written by AppendBinary. It checks every count
// and index (the total must equal the bucket sum, indexes must increase and
// stay in range, min must not exceed max) and never panics; trailing bytes
// are an error.
func Decode(b []byte) (*Sketch, error) {
	s, n, err := DecodePrefix(b)
	if err != nil {
		return nil, err
	}
	if n != len(b) {
		return nil, fmt.Errorf("sketch: %d trailing bytes: %w", len(b)-n, ErrCorrupt)
	}
	return s, nil
}

// DecodePrefix is Decode for an encoding at the start of b; it returns the
// number of bytes the encoding took.
func DecodePrefix(b []byte) (*Sketch, int, error) {
	fail := func(msg string) (*Sketch, int, error) {
		return nil, 0, fmt.Errorf("sketch: %s: %w", msg, ErrCorrupt)
	}
	if len(b) == 0 {
		return fail("empty input")
	}
	if b[0] != encodingVersion {
		return fail(fmt.Sprintf("unknown version %d", b[0]))
	}
	off := 1
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return 0, false
		}
		off += n
		return v, true
	}
	s := &Sketch{}
	var ok bool
	if s.count, ok = next(); !ok {
		return fail("truncated count")
	}
	if s.count == 0 {
		return s, off, nil
	}
	var span, n uint64
	if s.zeros, ok = next(); !ok {
		return fail("truncated header")
	}
	if s.min, ok = next(); !ok {
		return fail("truncated header")
	}
	if span, ok = next(); !ok || span > math.MaxUint64-s.min {
		return fail("bad max")
	}
	s.max = s.min + span
	if n, ok = next(); !ok {
		return fail("truncated bucket count")
	}
	if s.zeros > s.count || n > MaxBuckets || n > uint64(len(b)-off)/2 {
		return fail("counts out of range")
	}
	if (s.zeros > 0) != (s.min == 0) || (s.zeros < s.count) != (n > 0) {
		return fail("zero count disagrees with min or buckets")
	}
	if n == 0 {
		return s, off, nil
	}
	idx := make([]int, n)
	cnt := make([]uint64, n)
	total := s.zeros
	prev := uint64(0)
	for k := range idx {
		d, ok1 := next()
		c, ok2 := next()
		if !ok1 || !ok2 {
			return fail("truncated bucket")
		}
		if (k > 0 && d == 0) || c == 0 || d > uint64(maxIndex) || prev+d > uint64(maxIndex) {
			return fail("bucket index or count out of range")
		}
		prev += d
		if c > s.count-total {
			return fail("bucket counts exceed the total")
		}
		total += c
		idx[k], cnt[k] = int(prev), c
	}
	if total != s.count {
		return fail("bucket counts do not add up to the total")
	}
	if idx[n-1]-idx[0]+1 > MaxBuckets {
		return fail("bucket range exceeds the bound")
	}
	// The top bucket is never collapsed, so it is max's; min's bucket is at
	// or below the lowest kept one.
	if bucketIndex(s.max) != idx[n-1] || (s.min > 0 && bucketIndex(s.min) > idx[0]) {
		return fail("min or max outside the buckets")
	}
	s.offset = idx[0]
	s.counts = make([]uint64, idx[n-1]-idx[0]+1)
	for k := range idx {
		s.counts[idx[k]-s.offset] = cnt[k]
	}
	return s, off, nil
}

// HeatmapStep is the number of sketch buckets that make one heatmap bucket:
// gamma^35 is about 2.014, so heatmap buckets are about a factor of two wide
// and their boundaries are sketch-bucket boundaries. That makes a heatmap
// computed from merged sketches equal, cell for cell, to one computed from
// the raw durations with HeatmapBucket.
const HeatmapStep = 35

// HeatmapBucket returns the heatmap bucket of duration v: 0 for v <= 1, else
// ceil(bucketIndex(v) / HeatmapStep).
func HeatmapBucket(v uint64) int {
	return (bucketIndex(v) + HeatmapStep - 1) / HeatmapStep
}

// heatmapBounds[h] is the smallest value of heatmap bucket h.
var heatmapBounds = func() []uint64 {
	n := HeatmapBucket(math.MaxUint64) + 1
	b := make([]uint64, n)
	for h := 1; h < n; h++ {
		// Start near gamma^(35(h-1)) and settle on the first value whose
		// bucket is h, with the same arithmetic HeatmapBucket uses.
		v := uint64(2)
		if f := math.Pow(gamma, float64(HeatmapStep*(h-1))); f > 2 && f < 1.8e19 {
			v = uint64(f)
		}
		for v > 2 && HeatmapBucket(v-1) >= h {
			v--
		}
		for HeatmapBucket(v) < h && v < math.MaxUint64 {
			v++
		}
		b[h] = v
	}
	return b
}()

// HeatmapBounds returns the lower bounds of the heatmap buckets: bucket h
// holds the values in [bounds[h], bounds[h+1]) (the last bucket is
// unbounded above). bounds[0] is 0. The slice must not be modified.
func HeatmapBounds() []uint64 { return heatmapBounds }

// Heatmap calls fn with the count of each non-empty heatmap bucket, in
// increasing order. Buckets collapsed by the MaxBuckets bound are counted in
// the lowest kept bucket's heatmap bucket.
func (s *Sketch) Heatmap(fn func(h int, n uint64)) {
	cur, sum := 0, s.zeros
	for j, c := range s.counts {
		if c == 0 {
			continue
		}
		h := (s.offset + j + HeatmapStep - 1) / HeatmapStep
		if h != cur && sum > 0 {
			fn(cur, sum)
			sum = 0
		}
		cur = h
		sum += c
	}
	if sum > 0 {
		fn(cur, sum)
	}
}
