package segment

import (
	"encoding/binary"
	"errors"
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

// encoderWindow bounds how far back a zstd match reaches in a part larger
// than a zstd block (128 KiB). Each of an encoder's concurrent states keeps
// a history buffer of about the window, for the life of the process, once
// it has compressed one large part (a trace index, an LLM aggregate part):
// with the library's default of 8 MiB that was 16-24 MiB of heap held
// through sustained ingest (a heap profile, docs/benchmarks/ingest.md). A
// segment of 1M realistic spans came out the same size with either window
// (37.46 bytes a span).
const encoderWindow = 1 << 20

func encoderFor(level zstd.EncoderLevel) (*zstd.Encoder, error) {
	encMu.Lock()
	defer encMu.Unlock()
	if e, ok := encoders[level]; ok {
		return e, nil
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true), zstd.WithWindowSize(encoderWindow), zstd.WithLowerEncoderMem(true))
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
	case codecIDs:
		return decodeIDs(stored, rawLen)
	}
	return "", fmt.Errorf("unknown codec %d", codec)
}

// decompressAppend appends the rawLen bytes of a zstd frame to dst.
func decompressAppend(dst, stored []byte, rawLen uint64) ([]byte, error) {
	if rawLen > maxColumnRawBytes {
		return dst, fmt.Errorf("raw length %d exceeds the limit", rawLen)
	}
	d, err := sharedDecoder()
	if err != nil {
		return dst, err
	}
	start := len(dst)
	out, err := d.DecodeAll(stored, dst)
	if err != nil {
		return dst, fmt.Errorf("zstd: %w", err)
	}
	if uint64(len(out)-start) != rawLen {
		return dst, fmt.Errorf("decompressed %d bytes, expected %d", len(out)-start, rawLen)
	}
	return out, nil
}

// bytesToString views b as a string without copying. Callers hand over b:
// it is never modified afterwards.
func bytesToString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// pieceMinRaw is the raw size from which a column with row marks is stored
// as pieces (codec 2). Below it one zstd frame decompresses in a few
// microseconds, and the per-piece header and frame overhead would cost more
// than partial reads save.
const pieceMinRaw = 32 << 10

// pieceMinBytes is the smallest raw piece cut at a row mark: a piece
// compresses on its own (its own entropy tables, no matches into earlier
// pieces). Prompt text (~40 KiB per 64 rows) pays about 8% of its bytes for
// reading 64 rows instead of a block; ordinary attributes, whose 64 rows
// hold 1-2 KiB, would pay about 5% for little, so there a piece spans
// several marks. Measured with the bench: canonical corpus 35.5 B/span in
// one frame, 37.5 cut at every mark, 36.0 with this floor; content corpus
// (100k spans) 428.8, 467.3 and 462.5.
const pieceMinBytes = 16 << 10

// pieceHeaderEntryMin is the smallest encoded piece entry: three one-byte
// uvarints and the 4-byte checksum. It bounds the piece count by the bytes.
const pieceHeaderEntryMin = 3 + 4

// pieceRef is one piece of a codec-2 column: where its raw bytes go in the
// column and where its stored bytes lie, from the start of the stored column.
type pieceRef struct {
	codec             uint32
	rawOff, rawLen    uint64
	storedOff, stored uint64
	crc               uint32
}

// appendPieces appends raw as a codec-2 column: the piece header, then the
// pieces, cut at the first offset of cuts and then at each offset at least
// pieceMinBytes past the previous cut, inside raw (cuts are increasing;
// others are skipped). Each piece is compressed on its own with
// compressInto. scratch holds the pieces until the header, which needs their
// stored lengths, is written; it is returned for reuse.
func appendPieces(enc *zstd.Encoder, dst, scratch, raw []byte, cuts []uint64, refs []pieceRef) (out, scratchOut []byte, refsOut []pieceRef) {
	scratch, refs = scratch[:0], refs[:0]
	from := uint64(0)
	add := func(to uint64) {
		start := len(scratch)
		var codec uint32
		scratch, codec = compressInto(enc, scratch, raw[from:to])
		refs = append(refs, pieceRef{codec: codec, rawOff: from, rawLen: to - from,
			storedOff: uint64(start), stored: uint64(len(scratch) - start), crc: crc(scratch[start:])})
		from = to
	}
	for _, c := range cuts {
		// The first cut (the dictionary's end) always; a mark only when
		// the piece it ends is worth its own frame.
		if c > from && c < uint64(len(raw)) && (from == 0 || c-from >= pieceMinBytes) {
			add(c)
		}
	}
	add(uint64(len(raw)))
	start := len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(refs)))
	for _, p := range refs {
		dst = appendUvarints(dst, uint64(p.codec), p.rawLen, p.stored)
		dst = le.AppendUint32(dst, p.crc)
	}
	dst = le.AppendUint32(dst, crc(dst[start:]))
	return append(dst, scratch...), scratch, refs
}

// parsePieces reads the header of a codec-2 column and checks it against the
// column: a known codec per piece, raw lengths adding up to rawLen, stored
// lengths to the bytes after the header. storedOff of each piece is then
// from the start of the column. Any inconsistency is an error, never a panic.
func parsePieces(stored []byte, rawLen uint64) ([]pieceRef, error) {
	if rawLen > maxColumnRawBytes {
		return nil, fmt.Errorf("raw length %d exceeds the limit", rawLen)
	}
	d := dec{s: bytesToString(stored)}
	n := d.count(pieceHeaderEntryMin)
	if d.err != nil {
		return nil, fmt.Errorf("piece header: %w", d.err)
	}
	if n == 0 {
		return nil, errors.New("piece header lists no pieces")
	}
	refs := make([]pieceRef, n)
	var rawSum, storedSum uint64
	for k := range refs {
		p := &refs[k]
		p.codec = d.u32()
		p.rawLen = d.uvarint()
		p.stored = d.uvarint()
		p.crc = d.u32le()
		if d.err != nil {
			return nil, fmt.Errorf("piece header: %w", d.err)
		}
		switch {
		case p.codec != codecNone && p.codec != codecZstd:
			return nil, fmt.Errorf("piece %d: unknown codec %d", k, p.codec)
		case p.codec == codecNone && p.rawLen != p.stored:
			return nil, fmt.Errorf("piece %d: raw length %d differs from stored length %d", k, p.rawLen, p.stored)
		case p.rawLen > rawLen-rawSum:
			return nil, fmt.Errorf("piece %d: raw lengths exceed the column's %d bytes", k, rawLen)
		case p.stored > uint64(len(stored)):
			return nil, fmt.Errorf("piece %d: stored length %d exceeds the column", k, p.stored)
		}
		p.rawOff, p.storedOff = rawSum, storedSum
		rawSum += p.rawLen
		storedSum += p.stored // cannot overflow: each term is at most len(stored) and n <= len(stored)
	}
	sum := crc(stored[:d.off])
	if got := d.u32le(); d.err != nil || got != sum {
		return nil, errors.New("piece header checksum mismatch")
	}
	if rawSum != rawLen {
		return nil, fmt.Errorf("pieces hold %d raw bytes, the column %d", rawSum, rawLen)
	}
	if storedSum != uint64(d.remaining()) {
		return nil, fmt.Errorf("pieces hold %d stored bytes, the column %d after the header", storedSum, d.remaining())
	}
	for k := range refs {
		refs[k].storedOff += uint64(d.off)
	}
	return refs, nil
}

// colWindow maps a run of raw column bytes [raw, raw+n) to buffer offsets
// [buf, buf+n) in a partly decompressed column.
type colWindow struct{ raw, buf, n int }

// decodePieces decompresses the selected pieces of a codec-2 column back to
// back, checking each one's checksum first, and returns them with their
// windows: one per run of consecutive selected pieces. A nil want selects
// every piece; the result is then the whole raw column and windows is nil.
func decodePieces(stored []byte, refs []pieceRef, want []bool) (string, []colWindow, error) {
	total := uint64(0)
	for k, p := range refs {
		if want == nil || want[k] {
			total += p.rawLen
		}
	}
	buf := make([]byte, total)
	var wins []colWindow
	pos := 0
	for k, p := range refs {
		if want != nil && !want[k] {
			continue
		}
		b := stored[p.storedOff : p.storedOff+p.stored]
		if crc(b) != p.crc {
			return "", nil, fmt.Errorf("piece %d: checksum mismatch", k)
		}
		if err := decodePiece(buf[pos:pos+int(p.rawLen)], p.codec, b); err != nil {
			return "", nil, fmt.Errorf("piece %d: %w", k, err)
		}
		if w := len(wins) - 1; w >= 0 && wins[w].raw+wins[w].n == int(p.rawOff) {
			wins[w].n += int(p.rawLen)
		} else {
			wins = append(wins, colWindow{raw: int(p.rawOff), buf: pos, n: int(p.rawLen)})
		}
		pos += int(p.rawLen)
	}
	if len(wins) == 1 && wins[0].raw == 0 {
		wins = nil // contiguous from the column start: buffer offsets are raw offsets
	}
	return bytesToString(buf), wins, nil
}

// decodePiece fills dst, exactly, with the raw bytes of one stored piece.
func decodePiece(dst []byte, codec uint32, b []byte) error {
	if codec == codecNone {
		copy(dst, b) // lengths are equal: parsePieces checked
		return nil
	}
	d, err := sharedDecoder()
	if err != nil {
		return err
	}
	// The capacity limit makes a frame longer than announced reallocate
	// instead of writing past dst; the length check then rejects it.
	out, err := d.DecodeAll(b, dst[:0:len(dst)])
	if err != nil {
		return fmt.Errorf("zstd: %w", err)
	}
	if len(out) != len(dst) {
		return fmt.Errorf("decompressed %d bytes, expected %d", len(out), len(dst))
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		copy(dst, out)
	}
	return nil
}
