package segment

import (
	"errors"
	"math"
)

// dec reads the encodings of this package from a string. The string is
// usually a whole decompressed column, so decoded strings are substrings of
// it and cost no allocation. The first failure sticks in err and every later
// read returns zero values; callers check err once at the end.
type dec struct {
	s   string
	off int
	err error
}

var errShort = errors.New("unexpected end of data")

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.off = len(d.s)
}

func (d *dec) failf(msg string) { d.fail(errors.New(msg)) }

func (d *dec) remaining() int { return len(d.s) - d.off }

func (d *dec) uvarint() uint64 {
	var x uint64
	var shift uint
	for i := 0; i < 10; i++ {
		if d.off >= len(d.s) {
			d.fail(errShort)
			return 0
		}
		c := d.s[d.off]
		d.off++
		if c < 0x80 {
			if i == 9 && c > 1 {
				d.failf("varint overflows 64 bits")
				return 0
			}
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	d.failf("varint overflows 64 bits")
	return 0
}

func (d *dec) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// u32 reads a uvarint that must fit in 32 bits.
func (d *dec) u32() uint32 {
	v := d.uvarint()
	if v > math.MaxUint32 {
		d.failf("value exceeds 32 bits")
		return 0
	}
	return uint32(v)
}

// i64 reads a uvarint that must fit in an int64.
func (d *dec) i64() int64 {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.failf("value exceeds 63 bits")
		return 0
	}
	return int64(v)
}

// count reads an element count and checks it against the bytes left, given
// that each element takes at least minSize bytes. This bounds allocations by
// the input size.
func (d *dec) count(minSize int) int {
	v := d.uvarint()
	if d.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if v > uint64(d.remaining()/minSize) {
		d.failf("element count exceeds the data")
		return 0
	}
	return int(v)
}

func (d *dec) byte1() byte {
	if d.off >= len(d.s) {
		d.fail(errShort)
		return 0
	}
	c := d.s[d.off]
	d.off++
	return c
}

func (d *dec) fixed(n int) string {
	if n < 0 || n > d.remaining() {
		d.fail(errShort)
		return ""
	}
	s := d.s[d.off : d.off+n]
	d.off += n
	return s
}

func (d *dec) u32le() uint32 {
	s := d.fixed(4)
	if len(s) < 4 {
		return 0
	}
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

func (d *dec) u64le() uint64 {
	s := d.fixed(8)
	if len(s) < 8 {
		return 0
	}
	return uint64(d.u32at(s, 0)) | uint64(d.u32at(s, 4))<<32
}

func (d *dec) u32at(s string, i int) uint32 {
	return uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
}

// str reads a uvarint length and that many bytes.
func (d *dec) str() string {
	n := d.uvarint()
	if n > uint64(d.remaining()) {
		d.fail(errShort)
		return ""
	}
	return d.fixed(int(n))
}

func (d *dec) skipStr() {
	n := d.uvarint()
	if n > uint64(d.remaining()) {
		d.fail(errShort)
		return
	}
	d.off += int(n)
}

// strs reads a count and that many strings (a dictionary).
func (d *dec) strs() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

// index reads a uvarint that must be < n.
func (d *dec) index(n int) int {
	v := d.uvarint()
	if v >= uint64(n) {
		if d.err == nil {
			d.failf("dictionary index out of range")
		}
		return 0
	}
	return int(v)
}
