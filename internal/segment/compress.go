package segment

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/zstd"
)

// Encoders and the decoder are shared by every Writer and Reader of the
// process: EncodeAll and DecodeAll are safe for concurrent use, and sharing
// keeps their (large) internal state allocated once.
var (
	encMu    sync.Mutex
	encoders = map[zstd.EncoderLevel]*zstd.Encoder{}

	decOnce sync.Once
	decoder *zstd.Decoder
	decErr  error
)

func encoderFor(level zstd.EncoderLevel) (*zstd.Encoder, error) {
	encMu.Lock()
	defer encMu.Unlock()
	if e, ok := encoders[level]; ok {
		return e, nil
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true))
	if err != nil {
		return nil, fmt.Errorf("create zstd encoder: %w", err)
	}
	encoders[level] = e
	return e, nil
}

func sharedDecoder() (*zstd.Decoder, error) {
	decOnce.Do(func() {
		decoder, decErr = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxColumnRawBytes),
			zstd.IgnoreChecksum(true), zstd.WithDecoderConcurrency(0))
		if decErr != nil {
			decErr = fmt.Errorf("create zstd decoder: %w", decErr)
		}
	})
	return decoder, decErr
}

// compressInto appends raw to dst, zstd-compressed when that is smaller, and
// reports the codec used.
func compressInto(enc *zstd.Encoder, dst, raw []byte) ([]byte, uint32) {
	start := len(dst)
	dst = enc.EncodeAll(raw, dst)
	if len(dst)-start < len(raw) {
		return dst, codecZstd
	}
	return append(dst[:start], raw...), codecNone
}

// decompress returns the raw bytes of a stored part as a string. The result
// owns fresh memory (or aliases stored when codec is none, which the caller
// must then never modify).
func decompress(codec uint32, stored []byte, rawLen uint64) (string, error) {
	if rawLen > maxColumnRawBytes {
		return "", fmt.Errorf("raw length %d exceeds the limit", rawLen)
	}
	switch codec {
	case codecNone:
		if uint64(len(stored)) != rawLen {
			return "", fmt.Errorf("raw length %d differs from stored length %d", rawLen, len(stored))
		}
		return bytesToString(stored), nil
	case codecZstd:
		d, err := sharedDecoder()
		if err != nil {
			return "", err
		}
		out, err := d.DecodeAll(stored, make([]byte, 0, rawLen))
		if err != nil {
			return "", fmt.Errorf("zstd: %w", err)
		}
		if uint64(len(out)) != rawLen {
			return "", fmt.Errorf("decompressed %d bytes, expected %d", len(out), rawLen)
		}
		return bytesToString(out), nil
	}
	return "", fmt.Errorf("unknown codec %d", codec)
}

// bytesToString views b as a string without copying. Callers hand over b:
// it is never modified afterwards.
func bytesToString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
