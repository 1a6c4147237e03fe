package valuestore

import (
	"bytes"
	"testing"
)

func seedPack() []byte {
	b := appendPackHeader(nil, 1)
	for _, v := range [][]byte{nil, []byte("short"), text(1, 500), randomBytes(2, 300)} {
		b = append(b, encodeFrame(mustEncoder(), [][]byte{v})...)
	}
	return append(b, encodeFrame(mustEncoder(), [][]byte{text(3, 400), text(4, 300), nil, randomBytes(5, 100)})...)
}

func mustEncoder() *zstdEncoder {
	e, err := encoderFor(DefaultZstdLevel)
	if err != nil {
		panic(err)
	}
	return e
}

// FuzzPack decodes a pack from arbitrary bytes: header check, scan with
// resynchronisation, and decoding of every record the scan accepts. It must
// never panic, and every accepted record must lie inside the input.
func FuzzPack(f *testing.F) {
	p := seedPack()
	f.Add(p)
	f.Add(p[:len(p)-7])
	torn := bytes.Clone(p)
	torn[packHeaderSize+12] ^= 1
	f.Add(torn)
	f.Add([]byte("RVPK"))
	f.Add(seedPackV1())
	f.Fuzz(func(t *testing.T, b []byte) {
		version := uint8(formatVersion)
		if _, err := checkPackHeader(b, 1); err == nil {
			version = b[4]
		}
		res, err := scanPack(bytes.NewReader(b), min(int64(len(b)), packHeaderSize), int64(len(b)), version, func(off int64, rec record) {
			end := off + rec.size
			if end > int64(len(b)) {
				t.Fatalf("record at %d ends at %d, past the %d-byte input", off, end, len(b))
			}
			if version == 1 {
				h, err := parseRecordHeader(b[off:])
				if err != nil {
					t.Fatalf("accepted record at %d: %v", off, err)
				}
				raw, err := decodeBody(h, b[off+recordHeaderSize:end])
				if err == nil && uint32(len(raw)) != h.rawLen {
					t.Fatalf("decoded %d bytes, header says %d", len(raw), h.rawLen)
				}
			}
			var sum int64
			for _, m := range rec.vals {
				sum += int64(m.share)
			}
			if sum != rec.size {
				t.Fatalf("shares of the record at %d sum to %d, not its %d bytes", off, sum, rec.size)
			}
		})
		if err != nil {
			t.Fatalf("scan of in-memory bytes failed: %v", err)
		}
		if res.end > int64(len(b)) || res.tail < 0 {
			t.Fatalf("scan result %+v out of range for %d bytes", res, len(b))
		}
	})
}

// FuzzIndex decodes a pack index and a manifest from arbitrary bytes; it must
// never panic, and accepted entries must lie inside the covered length.
func FuzzIndex(f *testing.F) {
	f.Add(encodeIndex(1, 4096, 3, []idxEntry{{ref: RefOf(nil), off: 16, size: 12}, {ref: RefOf([]byte("x")), off: 68, size: 100, rawLen: 1},
		{ref: RefOf([]byte("y")), off: 68, size: 100, rawOff: 1, rawLen: 1}}))
	f.Add(encodeIndex(1, 16, 0, nil))
	f.Add(encodeIndexV1(1, 4096, []idxEntry{{ref: RefOf(nil), off: 16, size: 52}, {ref: RefOf([]byte("x")), off: 68, size: 152}}))
	f.Add(encodeManifest(manifest{gen: 3, nextSeq: 9, packs: []uint32{1, 4, 8}}))
	f.Add([]byte("RVIX\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cov, _, entries, _, err := decodeIndex(b, 1)
		if err == nil {
			for _, e := range entries {
				if int64(e.off)+int64(e.size) > cov {
					t.Fatalf("entry %+v outside covered %d", e, cov)
				}
			}
		}
		m, _, err := decodeManifest(b)
		if err == nil {
			for _, s := range m.packs {
				if s == 0 || s >= m.nextSeq {
					t.Fatalf("manifest pack %d with next %d accepted", s, m.nextSeq)
				}
			}
			if !bytes.Equal(encodeManifest(m), b) {
				t.Fatal("manifest does not re-encode to the same bytes")
			}
		}
	})
}
