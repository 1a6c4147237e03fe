package valuestore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Format version 2 stores values in frames: one record holds one or more
// values, compressed together, so that zstd sees the vocabulary they share.
// The record does not repeat the values' hashes (the pack index holds them;
// a scan recomputes them). docs/format/values.md has the layout.

const (
	// frameFixedSize is the part of a frame header before its varints:
	// header crc, body crc, codec.
	frameFixedSize = 9
	// maxFrameValues bounds the values of one frame, so that a header is
	// at most maxFrameHeader bytes.
	maxFrameValues = 1024
	maxFrameHeader = frameFixedSize + 2*binary.MaxVarintLen32 + maxFrameValues*binary.MaxVarintLen32
)

// frameHeader is the decoded header of a version-2 record.
type frameHeader struct {
	codec     uint8
	storedLen uint32
	lens      []uint32 // raw length of each value, in order
	rawLen    uint64   // sum of lens
	hdrLen    int
	bodyCRC   uint32
}

func (h frameHeader) size() int64 { return int64(h.hdrLen) + int64(h.storedLen) }

// encodeFrame returns the record of vals: zstd-compressed together when that
// saves at least 1/32 of the bytes, otherwise as they are.
func encodeFrame(enc *zstd.Encoder, vals [][]byte) []byte {
	var raw []byte
	if len(vals) == 1 {
		raw = vals[0]
	} else {
		n := 0
		for _, v := range vals {
			n += len(v)
		}
		raw = make([]byte, 0, n)
		for _, v := range vals {
			raw = append(raw, v...)
		}
	}
	hdr := make([]byte, frameFixedSize, frameFixedSize+2*binary.MaxVarintLen32+len(vals)*3)
	codec := uint8(codecNone)
	var body []byte
	if enc != nil && len(raw) >= minCompressBytes {
		body = enc.EncodeAll(raw, nil)
		if len(body) < len(raw)-len(raw)/32 {
			codec = codecZstd
		}
	}
	if codec == codecNone {
		body = raw
	}
	hdr = binary.AppendUvarint(hdr, uint64(len(body)))
	hdr = binary.AppendUvarint(hdr, uint64(len(vals)))
	for _, v := range vals {
		hdr = binary.AppendUvarint(hdr, uint64(len(v)))
	}
	le.PutUint32(hdr[4:], crc(body))
	hdr[8] = codec
	le.PutUint32(hdr[0:], crc(hdr[4:]))
	return append(hdr, body...)
}

// parseFrameHeader decodes and validates the frame header at the start of b
// (b may hold more than the header; a header cut short is "truncated").
func parseFrameHeader(b []byte) (frameHeader, error) {
	var h frameHeader
	if len(b) < frameFixedSize {
		return h, errors.New("truncated record header")
	}
	p := frameFixedSize
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return 0, false
		}
		p += n
		return v, true
	}
	stored, ok1 := next()
	count, ok2 := next()
	if !ok1 || !ok2 {
		return h, errors.New("truncated record header")
	}
	if count == 0 || count > maxFrameValues {
		return h, fmt.Errorf("record claims %d values", count)
	}
	if stored > MaxValueBytes {
		return h, fmt.Errorf("stored length %d exceeds the limit", stored)
	}
	h.lens = make([]uint32, count)
	for i := range h.lens {
		v, ok := next()
		if !ok {
			return h, errors.New("truncated record header")
		}
		if v > MaxValueBytes {
			return h, fmt.Errorf("value %d of the record has raw length %d, over the limit", i, v)
		}
		h.lens[i] = uint32(v)
		h.rawLen += v
	}
	if h.rawLen > MaxValueBytes {
		return h, fmt.Errorf("raw length %d exceeds the limit", h.rawLen)
	}
	if crc(b[4:p]) != le.Uint32(b) {
		return h, errors.New("record header checksum mismatch")
	}
	h.hdrLen = p
	h.bodyCRC = le.Uint32(b[4:])
	h.codec = b[8]
	h.storedLen = uint32(stored)
	switch {
	case h.codec == codecNone && uint64(h.storedLen) != h.rawLen:
		return h, fmt.Errorf("uncompressed record with stored length %d != raw length %d", h.storedLen, h.rawLen)
	case h.codec == codecZstd && uint64(h.storedLen) >= h.rawLen:
		return h, fmt.Errorf("stored length %d exceeds raw length %d", h.storedLen, h.rawLen)
	case h.codec != codecNone && h.codec != codecZstd:
		return h, fmt.Errorf("unknown codec %d", h.codec)
	}
	return h, nil
}

// decodeFrame returns the raw bytes of a frame body whose checksum passed.
func decodeFrame(h frameHeader, body []byte) ([]byte, error) {
	return decodeBody(recordHeader{codec: h.codec, rawLen: uint32(h.rawLen)}, body)
}

// members calls fn with the raw offset and length of each value of h.
func (h frameHeader) members(fn func(rawOff, rawLen uint32)) {
	var off uint32
	for _, n := range h.lens {
		fn(off, n)
		off += n
	}
}

// shares splits a record of size bytes among its values in proportion to
// their raw lengths; the shares sum to size exactly.
func shares(size int64, lens []uint32) []uint32 {
	var total uint64
	for _, n := range lens {
		total += uint64(n)
	}
	out := make([]uint32, len(lens))
	var cum uint64
	prev := uint64(0)
	for i, n := range lens {
		cum += uint64(n)
		var upto uint64
		if total == 0 {
			upto = uint64(size) * uint64(i+1) / uint64(len(lens))
		} else {
			upto = uint64(size) * cum / total
		}
		out[i] = uint32(upto - prev)
		prev = upto
	}
	return out
}
