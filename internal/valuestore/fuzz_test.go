package valuestore

import (
	"bytes"
	"testing"
)

func seedPack() []byte {
	b := appendPackHeader(nil, 1)
	for _, v := range [][]byte{nil, []byte("short"), text(1, 500), randomBytes(2, 300)} {
		b = append(b, encodeRecord(mustEncoder(), RefOf(v), v)...)
	}
	return b
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
	torn[packHeaderSize+recordHeaderSize+2] ^= 1
	f.Add(torn)
	f.Add([]byte("RVPK"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = checkPackHeader(b, 1)
		res, err := scanPack(bytes.NewReader(b), min(int64(len(b)), packHeaderSize), int64(len(b)), func(off int64, h recordHeader) {
			end := off + h.size()
			if end > int64(len(b)) {
				t.Fatalf("record at %d ends at %d, past the %d-byte input", off, end, len(b))
			}
			raw, err := decodeBody(h, b[off+recordHeaderSize:end])
			if err == nil && uint32(len(raw)) != h.rawLen {
				t.Fatalf("decoded %d bytes, header says %d", len(raw), h.rawLen)
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
	f.Add(encodeIndex(1, 4096, []idxEntry{{ref: RefOf(nil), off: 16, storedLen: 0}, {ref: RefOf([]byte("x")), off: 68, storedLen: 100}}))
	f.Add(encodeIndex(1, 16, nil))
	f.Add(encodeManifest(manifest{gen: 3, nextSeq: 9, packs: []uint32{1, 4, 8}}))
	f.Add([]byte("RVIX\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cov, entries, _, err := decodeIndex(b, 1)
		if err == nil {
			for _, e := range entries {
				if int64(e.off)+recordHeaderSize+int64(e.storedLen) > cov {
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
