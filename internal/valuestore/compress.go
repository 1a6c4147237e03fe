package valuestore

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Encoders and the decoder are shared by every Store of the process: EncodeAll
// and DecodeAll are safe for concurrent use, and their state is large.
var (
	encMu    sync.Mutex
	encoders = map[int]*zstd.Encoder{}

	decOnce sync.Once
	decoder *zstd.Decoder
	decErr  error
)

// minCompressBytes: shorter values are stored as they are.
const minCompressBytes = 64

// zstdEncoder is the shared encoder type.
type zstdEncoder = zstd.Encoder

func encoderFor(level int) (*zstd.Encoder, error) {
	if level < 0 {
		return nil, nil
	}
	encMu.Lock()
	defer encMu.Unlock()
	if e, ok := encoders[level]; ok {
		return e, nil
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderCRC(false))
	if err != nil {
		return nil, fmt.Errorf("create zstd encoder: %w", err)
	}
	encoders[level] = e
	return e, nil
}

func sharedDecoder() (*zstd.Decoder, error) {
	decOnce.Do(func() {
		decoder, decErr = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxValueBytes),
			zstd.IgnoreChecksum(true), zstd.WithDecoderConcurrency(0))
		if decErr != nil {
			decErr = fmt.Errorf("create zstd decoder: %w", decErr)
		}
	})
	return decoder, decErr
}

// encodeRecord returns the record (header and body) for value v with hash ref:
// zstd-compressed when that saves at least 1/32 of the bytes, otherwise as is.
func encodeRecord(enc *zstd.Encoder, ref Ref, v []byte) []byte {
	rec := make([]byte, recordHeaderSize, recordHeaderSize+len(v))
	codec := uint8(codecNone)
	if enc != nil && len(v) >= minCompressBytes {
		rec = enc.EncodeAll(v, rec)
		if stored := len(rec) - recordHeaderSize; stored < len(v)-len(v)/32 {
			codec = codecZstd
		} else {
			rec = rec[:recordHeaderSize]
		}
	}
	if codec == codecNone {
		rec = append(rec, v...)
	}
	body := rec[recordHeaderSize:]
	recordHeader{ref: ref, rawLen: uint32(len(v)), storedLen: uint32(len(body)), codec: codec, bodyCRC: crc(body)}.put(rec)
	return rec
}

// decodeBody returns the raw value of a record body whose checksum passed.
func decodeBody(h recordHeader, body []byte) ([]byte, error) {
	switch h.codec {
	case codecNone:
		return body, nil
	case codecZstd:
		d, err := sharedDecoder()
		if err != nil {
			return nil, err
		}
		out, err := d.DecodeAll(body, make([]byte, 0, h.rawLen))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		if uint32(len(out)) != h.rawLen {
			return nil, fmt.Errorf("decompressed %d bytes, header says %d", len(out), h.rawLen)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown codec %d", h.codec)
}
