package metricstore

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"sort"

	"github.com/rastro-dev/rastro/internal/store"
)

// A chunk holds one series' samples compressed as in Facebook's Gorilla
// paper and Prometheus' XOR chunks (docs/format/metrics.md):
//
//	sample 0: time as a signed varint, value as 64 raw bits
//	sample 1: time delta as an unsigned varint, value XOR-encoded
//	sample n: delta of deltas in '0' | '10'+14 bits | '110'+17 bits |
//	          '1110'+20 bits | '1111'+64 bits; value XOR-encoded
//	value XOR with the previous: '0' when equal; otherwise '1' then '0'
//	and the meaningful bits within the previous leading/trailing zeros, or
//	'1', 5 bits of leading zeros, 6 bits of meaningful length (0 = 64) and
//	the meaningful bits.
//
// The count of samples is kept beside the chunk, not in it.

// bstream is an append-only bit stream.
type bstream struct {
	b     []byte
	count uint8 // free bits in the last byte
}

func (s *bstream) writeBit(bit bool) {
	if s.count == 0 {
		s.b = append(s.b, 0)
		s.count = 8
	}
	if bit {
		s.b[len(s.b)-1] |= 1 << (s.count - 1)
	}
	s.count--
}

func (s *bstream) writeBits(u uint64, n int) {
	u <<= 64 - uint(n)
	for n >= 8 && s.count == 0 {
		s.b = append(s.b, byte(u>>56))
		u <<= 8
		n -= 8
	}
	for n > 0 {
		s.writeBit(u>>63 == 1)
		u <<= 1
		n--
	}
}

func (s *bstream) writeByte(c byte) { s.writeBits(uint64(c), 8) }

// appender encodes samples into a chunk.
type appender struct {
	s        bstream
	n        int
	t        int64
	tDelta   uint64
	v        float64
	leading  uint8
	trailing uint8
	// marks are decoder states every markEvery samples, kept in memory
	// beside a chunk being written (a head series'), so that a read of the
	// newest samples starts at the last mark before its window instead of
	// decoding the chunk from its first sample (not part of the format).
	marks []chunkMark
}

// chunkMark is the state a decoder has after sample i-1, before sample i.
type chunkMark struct {
	pos               uint64 // bit position of sample i
	i                 int
	t                 int64 // time of sample i-1
	tDelta            uint64
	v                 float64
	leading, trailing uint8
}

// markEvery is the samples between marks: about 40 bytes per 128 samples.
const markEvery = 128

func (a *appender) append(t int64, v float64) {
	var buf [binary.MaxVarintLen64]byte
	if a.n >= 2 && a.n%markEvery == 0 {
		l := a.leading
		if l == 0xff {
			l = 0 // no value written with its own widths yet: the decoder starts at 0
		}
		a.marks = append(a.marks, chunkMark{pos: uint64(len(a.s.b))*8 - uint64(a.s.count), i: a.n, t: a.t, tDelta: a.tDelta,
			v: a.v, leading: l, trailing: a.trailing})
	}
	switch a.n {
	case 0:
		for _, c := range buf[:binary.PutVarint(buf[:], t)] {
			a.s.writeByte(c)
		}
		a.s.writeBits(math.Float64bits(v), 64)
		a.leading = 0xff
	case 1:
		tDelta := uint64(t - a.t)
		for _, c := range buf[:binary.PutUvarint(buf[:], tDelta)] {
			a.s.writeByte(c)
		}
		a.writeValue(v)
		a.tDelta = tDelta
	default:
		tDelta := uint64(t - a.t)
		dod := int64(tDelta - a.tDelta)
		switch {
		case dod == 0:
			a.s.writeBit(false)
		case fits(dod, 14):
			a.s.writeBits(0b10, 2)
			a.s.writeBits(uint64(dod), 14)
		case fits(dod, 17):
			a.s.writeBits(0b110, 3)
			a.s.writeBits(uint64(dod), 17)
		case fits(dod, 20):
			a.s.writeBits(0b1110, 4)
			a.s.writeBits(uint64(dod), 20)
		default:
			a.s.writeBits(0b1111, 4)
			a.s.writeBits(uint64(dod), 64)
		}
		a.writeValue(v)
		a.tDelta = tDelta
	}
	a.t, a.v = t, v
	a.n++
}

// fits reports whether x fits in n bits as two's complement, with
// Prometheus' asymmetric ranges (-(2^(n-1)-1) .. 2^(n-1)).
func fits(x int64, n uint8) bool {
	return -((1<<(n-1))-1) <= x && x <= 1<<(n-1)
}

func (a *appender) writeValue(v float64) {
	delta := math.Float64bits(v) ^ math.Float64bits(a.v)
	if delta == 0 {
		a.s.writeBit(false)
		return
	}
	a.s.writeBit(true)
	leading := uint8(bits.LeadingZeros64(delta))
	trailing := uint8(bits.TrailingZeros64(delta))
	if leading >= 32 {
		leading = 31 // 5 bits
	}
	if a.leading != 0xff && leading >= a.leading && trailing >= a.trailing {
		a.s.writeBit(false)
		a.s.writeBits(delta>>a.trailing, 64-int(a.leading)-int(a.trailing))
		return
	}
	a.leading, a.trailing = leading, trailing
	a.s.writeBit(true)
	a.s.writeBits(uint64(leading), 5)
	sig := 64 - leading - trailing
	a.s.writeBits(uint64(sig), 6) // 64 wraps to 0
	a.s.writeBits(delta>>trailing, int(sig))
}

// bytes is the chunk so far (shared; the appender may still append to it).
func (a *appender) bytes() []byte { return a.s.b }

var errChunk = errors.New("truncated or malformed chunk")

// breader reads a bstream.
type breader struct {
	b   []byte
	pos uint64 // bit position
}

func (r *breader) readBit() (bool, error) {
	if r.pos>>3 >= uint64(len(r.b)) {
		return false, errChunk
	}
	bit := r.b[r.pos>>3]&(0x80>>(r.pos&7)) != 0
	r.pos++
	return bit, nil
}

func (r *breader) readBits(n int) (uint64, error) {
	// Fast path: the n bits lie within 8 bytes that are all there.
	if i := r.pos >> 3; i+8 <= uint64(len(r.b)) && uint64(n)+r.pos&7 <= 64 {
		if n == 0 {
			return 0, nil
		}
		w := binary.BigEndian.Uint64(r.b[i:]) << (r.pos & 7)
		r.pos += uint64(n)
		return w >> (64 - uint(n)), nil
	}
	var u uint64
	for n > 0 {
		if r.pos&7 == 0 && n >= 8 {
			if r.pos>>3 >= uint64(len(r.b)) {
				return 0, errChunk
			}
			u = u<<8 | uint64(r.b[r.pos>>3])
			r.pos += 8
			n -= 8
			continue
		}
		bit, err := r.readBit()
		if err != nil {
			return 0, err
		}
		u <<= 1
		if bit {
			u |= 1
		}
		n--
	}
	return u, nil
}

func (r *breader) ReadByte() (byte, error) {
	u, err := r.readBits(8)
	return byte(u), err
}

// samples appends the chunk's samples with mint <= t <= maxt to out,
// decoding from the last mark before mint.
func (a *appender) samples(mint, maxt int64, out []store.Sample) ([]store.Sample, error) {
	k := sort.Search(len(a.marks), func(k int) bool { return a.marks[k].t >= mint }) - 1
	if k < 0 {
		return decodeChunk(a.s.b, a.n, mint, maxt, out)
	}
	return decodeFrom(a.s.b, a.n, &a.marks[k], mint, maxt, out)
}

// decodeChunk appends the n samples of chunk b with mint <= t <= maxt to out.
func decodeChunk(b []byte, n int, mint, maxt int64, out []store.Sample) ([]store.Sample, error) {
	return decodeFrom(b, n, &chunkMark{}, mint, maxt, out)
}

// decodeFrom decodes samples m.i .. n-1 of chunk b from the decoder state m
// (the zero mark: from the first sample), appending those with
// mint <= t <= maxt to out.
func decodeFrom(b []byte, n int, m *chunkMark, mint, maxt int64, out []store.Sample) ([]store.Sample, error) {
	if out == nil {
		out = make([]store.Sample, 0, max(0, n-m.i))
	}
	r := &breader{b: b, pos: m.pos}
	t, tDelta, v, leading, trailing := m.t, m.tDelta, m.v, m.leading, m.trailing
	for i := m.i; i < n; i++ {
		switch i {
		case 0:
			x, err := binary.ReadVarint(r)
			if err != nil {
				return out, errChunk
			}
			vb, err := r.readBits(64)
			if err != nil {
				return out, err
			}
			t, v = x, math.Float64frombits(vb)
		case 1:
			d, err := binary.ReadUvarint(r)
			if err != nil {
				return out, errChunk
			}
			tDelta = d
			t += int64(d)
			if v, leading, trailing, err = readValue(r, v, leading, trailing); err != nil {
				return out, err
			}
		default:
			var prefix int
			for prefix < 4 {
				bit, err := r.readBit()
				if err != nil {
					return out, err
				}
				if !bit {
					break
				}
				prefix++
			}
			var dod int64
			if prefix > 0 {
				sz := [...]int{0, 14, 17, 20, 64}[prefix]
				u, err := r.readBits(sz)
				if err != nil {
					return out, err
				}
				if sz < 64 && u > 1<<(sz-1) {
					u -= 1 << sz // sign
				}
				dod = int64(u)
			}
			tDelta = uint64(int64(tDelta) + dod)
			t += int64(tDelta)
			var err error
			if v, leading, trailing, err = readValue(r, v, leading, trailing); err != nil {
				return out, err
			}
		}
		if t > maxt {
			break
		}
		if t >= mint {
			out = append(out, store.Sample{T: t, V: v})
		}
	}
	return out, nil
}

func readValue(r *breader, prev float64, leading, trailing uint8) (float64, uint8, uint8, error) {
	bit, err := r.readBit()
	if err != nil || !bit {
		return prev, leading, trailing, err
	}
	ctrl, err := r.readBit()
	if err != nil {
		return 0, 0, 0, err
	}
	if ctrl {
		l, err := r.readBits(5)
		if err != nil {
			return 0, 0, 0, err
		}
		sig, err := r.readBits(6)
		if err != nil {
			return 0, 0, 0, err
		}
		if sig == 0 {
			sig = 64
		}
		leading, trailing = uint8(l), uint8(64-l-sig)
	}
	sig := 64 - int(leading) - int(trailing)
	if sig <= 0 {
		return 0, 0, 0, errChunk
	}
	u, err := r.readBits(sig)
	if err != nil {
		return 0, 0, 0, err
	}
	return math.Float64frombits(math.Float64bits(prev) ^ u<<trailing), leading, trailing, nil
}
