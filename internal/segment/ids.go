package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Codec 3 stores a column of fixed-width ids (trace, span and parent span
// ids) without compressing it. A block's spans are grouped by trace, so the
// trace id column is runs of one id, and the parent id column is zeros (the
// roots) between ids; other ids are random bytes no compressor shrinks.
// Saying so costs two bits a record, where zstd found the same repeats
// with a match search over every byte (most of a seal's compression time
// on telemetrygen's two-span traces):
//
//	ids column (codec 3) = uvarint width | ceil(n/4) tag bytes | literal records
//
// n is the raw length over width. Record i's tag is bits 2(i%4) and
// 2(i%4)+1 of tag byte i/4: 0 an all-zero record, 1 the previous record
// again (never the first), 2 the next literal record, 3 invalid. The
// unused bits of the last tag byte are zero.
const (
	idZero    = 0
	idRepeat  = 1
	idLiteral = 2

	maxIDWidth = 64
)

// appendIDs appends raw, records of width bytes, in codec 3 and returns
// the result and whether it holds at most maxStored bytes; when not, dst
// is returned unchanged. len(raw) is a multiple of width.
func appendIDs(dst, raw []byte, width, maxStored int) ([]byte, bool) {
	start := len(dst)
	n := len(raw) / width
	dst = binary.AppendUvarint(dst, uint64(width))
	tags := len(dst)
	dst = append(dst, make([]byte, (n+3)/4)...)
	var prev []byte
	for i := 0; i < n; i++ {
		rec := raw[i*width : (i+1)*width]
		tag := byte(idLiteral)
		switch {
		case prev != nil && string(rec) == string(prev):
			tag = idRepeat
		case isZero(rec):
			tag = idZero
		default:
			if len(dst)-start+width > maxStored {
				return dst[:start], false
			}
			dst = append(dst, rec...)
		}
		dst[tags+i/4] |= tag << (2 * (i % 4))
		prev = rec
	}
	if len(dst)-start > maxStored {
		return dst[:start], false
	}
	return dst, true
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeIDs returns the rawLen raw bytes of a codec-3 column, in fresh
// memory. Any inconsistency is an error, never a panic.
func decodeIDs(stored []byte, rawLen uint64) (string, error) {
	out, err := decodeIDsInto(nil, stored, rawLen)
	if err != nil {
		return "", err
	}
	return bytesToString(out), nil
}

// appendDecodedIDs appends the rawLen raw bytes of a codec-3 column to dst
// (a partial read's pooled scratch, as decompressAppend does for zstd). On
// error dst is returned as it was.
func appendDecodedIDs(dst, stored []byte, rawLen uint64) ([]byte, error) {
	out, err := decodeIDsInto(dst, stored, rawLen)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// decodeIDsInto appends the column to dst, growing it only once the tags
// are known to describe rawLen bytes (so a damaged raw length allocates at
// most 256 times the stored bytes).
func decodeIDsInto(dst, stored []byte, rawLen uint64) ([]byte, error) {
	if rawLen > maxColumnRawBytes {
		return nil, fmt.Errorf("raw length %d exceeds the limit", rawLen)
	}
	w, k := binary.Uvarint(stored)
	switch {
	case k <= 0:
		return nil, errors.New("ids column: bad width")
	case w == 0 || w > maxIDWidth:
		return nil, fmt.Errorf("ids column: width %d out of range [1, %d]", w, maxIDWidth)
	case rawLen%w != 0:
		return nil, fmt.Errorf("ids column: raw length %d is not a multiple of width %d", rawLen, w)
	}
	width, n := int(w), int(rawLen/w)
	stored = stored[k:]
	if len(stored) < (n+3)/4 {
		return nil, fmt.Errorf("ids column: %d tag bytes for %d records, want %d", len(stored), n, (n+3)/4)
	}
	tags, lits := stored[:(n+3)/4], stored[(n+3)/4:]
	start := len(dst)
	dst = slices.Grow(dst, int(rawLen))[:start+int(rawLen)]
	out := dst[start:]
	clear(out)
	for i := 0; i < n; i++ {
		rec := out[i*width : (i+1)*width]
		switch tags[i/4] >> (2 * (i % 4)) & 3 {
		case idZero:
		case idRepeat:
			if i == 0 {
				return nil, errors.New("ids column: the first record repeats none")
			}
			copy(rec, out[(i-1)*width:i*width])
		case idLiteral:
			if len(lits) < width {
				return nil, fmt.Errorf("ids column: literal record %d is cut short", i)
			}
			copy(rec, lits[:width])
			lits = lits[width:]
		default:
			return nil, fmt.Errorf("ids column: record %d has invalid tag 3", i)
		}
	}
	if n%4 != 0 && tags[len(tags)-1]>>(2*(n%4)) != 0 {
		return nil, errors.New("ids column: unused tag bits are set")
	}
	if len(lits) != 0 {
		return nil, fmt.Errorf("ids column: %d bytes after the last record", len(lits))
	}
	return dst, nil
}
