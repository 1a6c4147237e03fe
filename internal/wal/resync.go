package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// After a damaged record, Replay looks for the next offset where an intact
// record starts (resynchronisation): a plausible length whose CRC matches.
//
// Checking a candidate naively costs its length in CRC work, and in random
// bytes about one offset in 64 has a length that fits a 64 MiB file, so a
// scan over garbage would cost terabytes of CRC. Instead the scanner records
// the CRC of every file prefix ending at a multiple of crcStride, and gets the
// CRC of any byte range from two prefix CRCs with CRC arithmetic (as zlib's
// crc32_combine does), reading at most crcStride bytes per range end. A full
// scan thus costs one pass over the file plus O(crcStride) per candidate.

const (
	crcStride  = 1 << 10 // bytes between prefix-CRC checkpoints
	scanWindow = 1 << 16 // bytes read at a time while scanning for headers
	// castagnoliReversed is the CRC-32C polynomial in reflected bit order.
	castagnoliReversed = 0x82F63B78
)

// x2nTable[k] is x^(2^k) modulo the CRC-32C polynomial (reflected).
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = gfMul(p, p)
	}
	return t
}()

// gfMul multiplies two polynomials modulo the CRC-32C polynomial, in the
// reflected representation CRC values use (bit 31 is x^0).
func gfMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return p
}

// crcShift returns the term that crc, the CRC-32C of some bytes A, contributes
// to the CRC-32C of A followed by n more bytes B:
// crc32c(A||B) = crcShift(crc32c(A), len(B)) ^ crc32c(B).
func crcShift(crc uint32, n int64) uint32 {
	p := uint32(1) << 31      // x^0
	for k := 3; n != 0; k++ { // x^(8n) = product of x^(2^k) over the bits of n, shifted by 3
		if n&1 != 0 {
			p = gfMul(x2nTable[k&31], p)
		}
		n >>= 1
	}
	return gfMul(p, crc)
}

// scanner finds intact records in one open log file after damage.
type scanner struct {
	f    io.ReaderAt
	path string
	size int64
	// cps[i] is the CRC-32C of the file's bytes [0, i*crcStride); built on
	// the first full scan of the file.
	cps []uint32
	// win holds the file's bytes [winOff, winOff+len(win)).
	win    []byte
	winOff int64
	tmp    []byte
	// checked counts candidates whose CRC was computed (tests read it).
	checked int
}

func newScanner(f io.ReaderAt, path string, size int64) *scanner {
	return &scanner{f: f, path: path, size: size}
}

func (s *scanner) readAt(p []byte, off int64) error {
	if _, err := s.f.ReadAt(p, off); err != nil {
		return fmt.Errorf("wal replay: read %s at offset %d: %w", s.path, off, err)
	}
	return nil
}

// header returns the 10 bytes at off (length, crc, type, plen), which must
// lie within the file.
func (s *scanner) header(off int64) ([]byte, error) {
	if off < s.winOff || off+recordHeaderSize+2 > s.winOff+int64(len(s.win)) {
		n := min(int64(scanWindow), s.size-off)
		if cap(s.win) < scanWindow {
			s.win = make([]byte, scanWindow)
		}
		s.win = s.win[:n]
		s.winOff = off
		if err := s.readAt(s.win, off); err != nil {
			return nil, err
		}
	}
	i := off - s.winOff
	return s.win[i : i+recordHeaderSize+2], nil
}

// plausible reports whether a record header h at off could start an intact
// record: a length within bounds and within the file, and a project that fits.
func (s *scanner) plausible(h []byte, off int64) bool {
	n := int64(binary.LittleEndian.Uint32(h[0:4]))
	return n >= 2 && n <= MaxRecordBytes && n <= s.size-off-recordHeaderSize && 2+int64(h[9]) <= n
}

// valid reports whether an intact record starts at off: a plausible header
// whose CRC matches.
func (s *scanner) valid(off int64) (bool, error) {
	if off < 0 || s.size-off < recordHeaderSize+2 {
		return false, nil
	}
	h, err := s.header(off)
	if err != nil || !s.plausible(h, off) {
		return false, err
	}
	n := int64(binary.LittleEndian.Uint32(h[0:4]))
	sum := binary.LittleEndian.Uint32(h[4:8])
	s.checked++
	var body uint32 // crc32c of the n bytes after the crc field
	if n <= 2*crcStride || s.cps == nil {
		if body, err = s.crcDirect(off+recordHeaderSize, n); err != nil {
			return false, err
		}
	} else {
		a, err := s.prefixCRC(off + recordHeaderSize)
		if err != nil {
			return false, err
		}
		b, err := s.prefixCRC(off + recordHeaderSize + n)
		if err != nil {
			return false, err
		}
		body = b ^ crcShift(a, n)
	}
	lenCRC := crc32.Checksum(h[0:4], castagnoli)
	return crcShift(lenCRC, n)^body == sum, nil
}

// crcDirect returns the CRC-32C of the file's bytes [off, off+n).
func (s *scanner) crcDirect(off, n int64) (uint32, error) {
	var crc uint32
	for n > 0 {
		k := min(n, scanWindow)
		if int64(cap(s.tmp)) < k {
			s.tmp = make([]byte, k)
		}
		p := s.tmp[:k]
		if err := s.readAt(p, off); err != nil {
			return 0, err
		}
		crc = crc32.Update(crc, castagnoli, p)
		off += k
		n -= k
	}
	return crc, nil
}

// buildCheckpoints computes cps in one pass over the file.
func (s *scanner) buildCheckpoints() error {
	s.cps = make([]uint32, 1, s.size/crcStride+1)
	var crc uint32
	for off := int64(0); off+crcStride <= s.size; {
		k := min(s.size-off, scanWindow) / crcStride * crcStride
		if int64(cap(s.tmp)) < k {
			s.tmp = make([]byte, k)
		}
		p := s.tmp[:k]
		if err := s.readAt(p, off); err != nil {
			s.cps = nil
			return err
		}
		for i := int64(0); i < k; i += crcStride {
			crc = crc32.Update(crc, castagnoli, p[i:i+crcStride])
			s.cps = append(s.cps, crc)
		}
		off += k
	}
	return nil
}

// prefixCRC returns the CRC-32C of the file's bytes [0, x), from the
// checkpoint at or below x and at most crcStride more bytes.
func (s *scanner) prefixCRC(x int64) (uint32, error) {
	i := x / crcStride
	crc := s.cps[i]
	if r := x - i*crcStride; r > 0 {
		if cap(s.tmp) < crcStride {
			s.tmp = make([]byte, crcStride)
		}
		p := s.tmp[:r]
		if err := s.readAt(p, i*crcStride); err != nil {
			return 0, err
		}
		crc = crc32.Update(crc, castagnoli, p)
	}
	return crc, nil
}

// next returns the first offset >= from where an intact record starts, or
// -1 if none does. hint, if >= from, is tried first: it is where the damaged
// record would end if its length field is right (the usual case when the
// damage is in its body), which spares scanning through that body.
func (s *scanner) next(from, hint int64) (int64, error) {
	if hint >= from {
		ok, err := s.valid(hint)
		if err != nil || ok {
			return hint, err
		}
	}
	if s.cps == nil && s.size-from > 4*crcStride {
		if err := s.buildCheckpoints(); err != nil {
			return -1, err
		}
	}
	for off := from; s.size-off >= recordHeaderSize+2; off++ {
		ok, err := s.valid(off)
		if err != nil {
			return -1, err
		}
		if ok {
			return off, nil
		}
	}
	return -1, nil
}
