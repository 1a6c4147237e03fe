package valuestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
)

// On-disk format: packs and indexes are written in version 2 (frames of
// values, varint index entries) and read in versions 1 and 2; the manifest is
// unchanged (version 1). docs/format/values.md is the specification.
const (
	formatVersion   = 2
	manifestVersion = 1

	packMagic     = "RVPK"
	idxMagic      = "RVIX"
	manifestMagic = "RVMF"

	packHeaderSize     = 16
	recordHeaderSize   = 52
	idxHeaderSize      = 24 // version 1
	idxEntrySize       = 44 // version 1
	idxHeaderSizeV2    = 28
	manifestHeaderSize = 24

	codecNone = 0
	codecZstd = 1

	manifestName = "MANIFEST"
	tmpSuffix    = ".tmp"
	packSuffix   = ".pack"
	idxSuffix    = ".idx"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var le = binary.LittleEndian

// errVersion marks a well-formed header with a version this code does not know.
var errVersion = errors.New("unsupported version")

func packName(seq uint32) string { return fmt.Sprintf("%010d%s", seq, packSuffix) }
func idxName(seq uint32) string  { return fmt.Sprintf("%010d%s", seq, idxSuffix) }

// parseSeqName returns the sequence of a pack or index file name.
func parseSeqName(name, suffix string) (uint32, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 10 {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || v == 0 {
		return 0, false
	}
	return uint32(v), true
}

// --- pack header -----------------------------------------------------------

func appendPackHeader(dst []byte, seq uint32) []byte {
	start := len(dst)
	dst = append(dst, packMagic...)
	dst = append(dst, formatVersion, 0, 0, 0)
	dst = le.AppendUint32(dst, seq)
	return le.AppendUint32(dst, crc(dst[start:]))
}

// checkPackHeader validates a pack header; it returns the offset of the first
// bad field and what is wrong, or errVersion.
func checkPackHeader(b []byte, seq uint32) (int64, error) {
	if len(b) < packHeaderSize {
		return 0, fmt.Errorf("file is %d bytes, shorter than the %d-byte header", len(b), packHeaderSize)
	}
	if string(b[:4]) != packMagic {
		return 0, errors.New("bad magic")
	}
	if crc(b[:12]) != le.Uint32(b[12:]) {
		return 12, errors.New("header checksum mismatch")
	}
	if b[4] != 1 && b[4] != formatVersion {
		return 4, fmt.Errorf("%w %d", errVersion, b[4])
	}
	if b[5]|b[6]|b[7] != 0 {
		return 5, errors.New("reserved header bytes are not zero")
	}
	if got := le.Uint32(b[8:]); seq != 0 && got != seq {
		return 8, fmt.Errorf("header names pack %d, file name says %d", got, seq)
	}
	return 0, nil
}

// --- record ----------------------------------------------------------------

// recordHeader is the fixed part in front of every value in a pack.
type recordHeader struct {
	ref       Ref
	rawLen    uint32
	storedLen uint32
	codec     uint8
	bodyCRC   uint32
}

func (h recordHeader) size() int64 { return recordHeaderSize + int64(h.storedLen) }

// put encodes h into b[:recordHeaderSize].
func (h recordHeader) put(b []byte) {
	copy(b[0:32], h.ref[:])
	le.PutUint32(b[32:], h.rawLen)
	le.PutUint32(b[36:], h.storedLen)
	b[40], b[41], b[42], b[43] = h.codec, 0, 0, 0
	le.PutUint32(b[44:], h.bodyCRC)
	le.PutUint32(b[48:], crc(b[:48]))
}

// parseRecordHeader decodes and validates a record header (not its body).
func parseRecordHeader(b []byte) (recordHeader, error) {
	var h recordHeader
	if len(b) < recordHeaderSize {
		return h, errors.New("truncated record header")
	}
	if crc(b[:48]) != le.Uint32(b[48:]) {
		return h, errors.New("record header checksum mismatch")
	}
	copy(h.ref[:], b[:32])
	h.rawLen = le.Uint32(b[32:])
	h.storedLen = le.Uint32(b[36:])
	h.codec = b[40]
	h.bodyCRC = le.Uint32(b[44:])
	switch {
	case b[41]|b[42]|b[43] != 0:
		return h, errors.New("reserved record bytes are not zero")
	case h.rawLen > MaxValueBytes:
		return h, fmt.Errorf("raw length %d exceeds the limit", h.rawLen)
	case h.storedLen > h.rawLen:
		return h, fmt.Errorf("stored length %d exceeds raw length %d", h.storedLen, h.rawLen)
	case h.codec == codecNone && h.storedLen != h.rawLen:
		return h, fmt.Errorf("uncompressed record with stored length %d != raw length %d", h.storedLen, h.rawLen)
	case h.codec != codecNone && h.codec != codecZstd:
		return h, fmt.Errorf("unknown codec %d", h.codec)
	}
	return h, nil
}

// --- pack index --------------------------------------------------------------

// idxEntry locates one value of a pack: its record (offset and size in
// bytes, header included) and its place in the record's raw bytes. Version 1
// records hold one value each; their entries have rawOff and rawLen 0.
type idxEntry struct {
	ref    Ref
	off    uint64
	size   uint32
	rawOff uint32
	rawLen uint32
	at     int64 // where the entry lies in the index file (set by decodeIndex)
}

// maxRecordBytes bounds a record's size (header and body).
const maxRecordBytes = MaxValueBytes + maxFrameHeader

// encodeIndex encodes a version-2 index of entries (sorted by offset, then
// raw offset); total is the number of values in the covered records, live or
// not.
func encodeIndex(seq uint32, covered int64, total int, entries []idxEntry) []byte {
	b := make([]byte, 0, idxHeaderSizeV2+len(entries)*40+4)
	b = append(b, idxMagic...)
	b = append(b, formatVersion, 0, 0, 0)
	b = le.AppendUint32(b, seq)
	b = le.AppendUint32(b, uint32(len(entries)))
	b = le.AppendUint64(b, uint64(covered))
	b = le.AppendUint32(b, uint32(total))
	var prev uint64
	for _, e := range entries {
		b = append(b, e.ref[:]...)
		b = binary.AppendUvarint(b, e.off-prev)
		b = binary.AppendUvarint(b, uint64(e.size))
		b = binary.AppendUvarint(b, uint64(e.rawOff))
		b = binary.AppendUvarint(b, uint64(e.rawLen))
		prev = e.off
	}
	return le.AppendUint32(b, crc(b))
}

// decodeIndex decodes a pack index file of either version; total is the
// number of values in the covered records (-1 when a version-1 index does not
// say). On damage it returns the offset of the damaged part and a description
// (errVersion for an unknown version).
func decodeIndex(b []byte, seq uint32) (covered int64, total int, entries []idxEntry, badOff int64, err error) {
	if len(b) < idxHeaderSize+4 {
		return 0, 0, nil, 0, fmt.Errorf("file is %d bytes, shorter than header and checksum", len(b))
	}
	if string(b[:4]) != idxMagic {
		return 0, 0, nil, 0, errors.New("bad magic")
	}
	if b[4] == formatVersion {
		return decodeIndexV2(b, seq)
	}
	covered, entries, badOff, err = decodeIndexV1(b, seq)
	return covered, -1, entries, badOff, err
}

func decodeIndexV2(b []byte, seq uint32) (covered int64, total int, entries []idxEntry, badOff int64, err error) {
	if len(b) < idxHeaderSizeV2+4 {
		return 0, 0, nil, 0, fmt.Errorf("file is %d bytes, shorter than header and checksum", len(b))
	}
	end := len(b) - 4
	if crc(b[:end]) != le.Uint32(b[end:]) {
		return 0, 0, nil, int64(end), errors.New("index checksum mismatch")
	}
	if b[5]|b[6]|b[7] != 0 {
		return 0, 0, nil, 5, errors.New("reserved bytes are not zero")
	}
	if got := le.Uint32(b[8:]); got != seq {
		return 0, 0, nil, 8, fmt.Errorf("index names pack %d, file name says %d", got, seq)
	}
	count := uint64(le.Uint32(b[12:]))
	if count > uint64(end)/33 {
		return 0, 0, nil, 12, fmt.Errorf("entry count %d does not fit in %d bytes", count, len(b))
	}
	cov := le.Uint64(b[16:])
	if cov < packHeaderSize || cov > 1<<40 {
		return 0, 0, nil, 16, fmt.Errorf("covered length %d is impossible", cov)
	}
	total = int(le.Uint32(b[24:]))
	if uint64(total) < count {
		return 0, 0, nil, 24, fmt.Errorf("%d values in the pack, fewer than the %d entries", total, count)
	}
	entries = make([]idxEntry, count)
	p := idxHeaderSizeV2
	var prev uint64
	for i := range entries {
		start := p
		e := &entries[i]
		e.at = int64(start)
		if end-p < 32 {
			return 0, 0, nil, int64(start), fmt.Errorf("entry %d is truncated", i)
		}
		copy(e.ref[:], b[p:p+32])
		p += 32
		var v [4]uint64
		for j := range v {
			x, n := binary.Uvarint(b[p:end])
			if n <= 0 {
				return 0, 0, nil, int64(start), fmt.Errorf("entry %d is truncated", i)
			}
			v[j], p = x, p+n
		}
		e.off = prev + v[0]
		prev = e.off
		if v[1] > maxRecordBytes || v[2] > MaxValueBytes || v[3] > MaxValueBytes || v[2]+v[3] > MaxValueBytes {
			return 0, 0, nil, int64(start), fmt.Errorf("entry %d has impossible lengths", i)
		}
		e.size, e.rawOff, e.rawLen = uint32(v[1]), uint32(v[2]), uint32(v[3])
		if e.off < packHeaderSize || e.off > cov || uint64(e.size) > cov-e.off {
			return 0, 0, nil, int64(start), fmt.Errorf("entry %d (offset %d, %d bytes) lies outside the covered %d bytes", i, e.off, e.size, cov)
		}
	}
	if p != end {
		return 0, 0, nil, int64(p), fmt.Errorf("%d bytes after the last entry", end-p)
	}
	return int64(cov), total, entries, 0, nil
}

func decodeIndexV1(b []byte, seq uint32) (covered int64, entries []idxEntry, badOff int64, err error) {
	count := uint64(le.Uint32(b[12:]))
	want := uint64(idxHeaderSize) + count*idxEntrySize + 4
	if want != uint64(len(b)) {
		return 0, nil, 12, fmt.Errorf("entry count %d needs %d bytes, file has %d", count, want, len(b))
	}
	end := len(b) - 4
	if crc(b[:end]) != le.Uint32(b[end:]) {
		return 0, nil, int64(end), errors.New("index checksum mismatch")
	}
	if b[4] != 1 {
		return 0, nil, 4, fmt.Errorf("%w %d", errVersion, b[4])
	}
	if b[5]|b[6]|b[7] != 0 {
		return 0, nil, 5, errors.New("reserved bytes are not zero")
	}
	if got := le.Uint32(b[8:]); got != seq {
		return 0, nil, 8, fmt.Errorf("index names pack %d, file name says %d", got, seq)
	}
	cov := le.Uint64(b[16:])
	if cov < packHeaderSize || cov > 1<<40 {
		return 0, nil, 16, fmt.Errorf("covered length %d is impossible", cov)
	}
	entries = make([]idxEntry, count)
	for i := range entries {
		p := idxHeaderSize + i*idxEntrySize
		e := &entries[i]
		copy(e.ref[:], b[p:p+32])
		e.at = int64(p)
		e.off = le.Uint64(b[p+32:])
		stored := le.Uint32(b[p+40:])
		if e.off < packHeaderSize || e.off+recordHeaderSize+uint64(stored) > cov || stored > MaxValueBytes {
			return 0, nil, int64(p), fmt.Errorf("entry %d (offset %d, stored %d) lies outside the covered %d bytes", i, e.off, stored, cov)
		}
		e.size = recordHeaderSize + stored
	}
	return int64(cov), entries, 0, nil
}

// --- manifest ------------------------------------------------------------------

// manifest is the published list of live packs.
type manifest struct {
	gen     uint64
	nextSeq uint32
	packs   []uint32 // ascending
}

func encodeManifest(m manifest) []byte {
	b := make([]byte, 0, manifestHeaderSize+4*len(m.packs)+4)
	b = append(b, manifestMagic...)
	b = append(b, manifestVersion, 0, 0, 0)
	b = le.AppendUint64(b, m.gen)
	b = le.AppendUint32(b, m.nextSeq)
	b = le.AppendUint32(b, uint32(len(m.packs)))
	for _, s := range m.packs {
		b = le.AppendUint32(b, s)
	}
	return le.AppendUint32(b, crc(b))
}

func decodeManifest(b []byte) (m manifest, badOff int64, err error) {
	if len(b) < manifestHeaderSize+4 {
		return m, 0, fmt.Errorf("file is %d bytes, shorter than header and checksum", len(b))
	}
	if string(b[:4]) != manifestMagic {
		return m, 0, errors.New("bad magic")
	}
	count := uint64(le.Uint32(b[20:]))
	if want := uint64(manifestHeaderSize) + 4*count + 4; want != uint64(len(b)) {
		return m, 20, fmt.Errorf("pack count %d needs %d bytes, file has %d", count, want, len(b))
	}
	end := len(b) - 4
	if crc(b[:end]) != le.Uint32(b[end:]) {
		return m, int64(end), errors.New("manifest checksum mismatch")
	}
	if b[4] != manifestVersion {
		return m, 4, fmt.Errorf("%w %d", errVersion, b[4])
	}
	if b[5]|b[6]|b[7] != 0 {
		return m, 5, errors.New("reserved bytes are not zero")
	}
	m.gen = le.Uint64(b[8:])
	m.nextSeq = le.Uint32(b[16:])
	m.packs = make([]uint32, count)
	for i := range m.packs {
		m.packs[i] = le.Uint32(b[manifestHeaderSize+4*i:])
		if m.packs[i] == 0 || (i > 0 && m.packs[i] <= m.packs[i-1]) || m.packs[i] >= m.nextSeq {
			return m, int64(manifestHeaderSize + 4*i), fmt.Errorf("pack %d out of order or not below next sequence %d", m.packs[i], m.nextSeq)
		}
	}
	if !slices.IsSorted(m.packs) {
		return m, manifestHeaderSize, errors.New("packs not sorted")
	}
	return m, 0, nil
}
