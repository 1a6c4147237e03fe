package valuestore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Writers of format version 1, as the code before version 2 wrote it: one
// value per record, 52-byte record headers, 44-byte index entries.

func encodeIndexV1(seq uint32, covered int64, entries []idxEntry) []byte {
	b := make([]byte, 0, idxHeaderSize+len(entries)*idxEntrySize+4)
	b = append(b, idxMagic...)
	b = append(b, 1, 0, 0, 0)
	b = le.AppendUint32(b, seq)
	b = le.AppendUint32(b, uint32(len(entries)))
	b = le.AppendUint64(b, uint64(covered))
	for _, e := range entries {
		b = append(b, e.ref[:]...)
		b = le.AppendUint64(b, e.off)
		b = le.AppendUint32(b, e.size-recordHeaderSize)
	}
	return le.AppendUint32(b, crc(b))
}

func packHeaderV1(seq uint32) []byte {
	b := []byte(packMagic)
	b = append(b, 1, 0, 0, 0)
	b = le.AppendUint32(b, seq)
	return le.AppendUint32(b, crc(b))
}

func seedPackV1() []byte {
	b := packHeaderV1(1)
	for _, v := range [][]byte{nil, []byte("short"), text(1, 500), randomBytes(2, 300)} {
		b = append(b, encodeRecord(mustEncoder(), RefOf(v), v)...)
	}
	return b
}

// writeV1Store writes a version-1 store of vals into dir: packs of perPack
// values; the last pack has no index when tailUnindexed.
func writeV1Store(t *testing.T, dir string, vals [][]byte, perPack int, tailUnindexed bool) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var seqs []uint32
	for i := 0; i < len(vals); i += perPack {
		seq := uint32(len(seqs) + 1)
		seqs = append(seqs, seq)
		b := packHeaderV1(seq)
		var entries []idxEntry
		for _, v := range vals[i:min(i+perPack, len(vals))] {
			rec := encodeRecord(mustEncoder(), RefOf(v), v)
			entries = append(entries, idxEntry{ref: RefOf(v), off: uint64(len(b)), size: uint32(len(rec))})
			b = append(b, rec...)
		}
		if err := os.WriteFile(filepath.Join(dir, packName(seq)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if tailUnindexed && i+perPack >= len(vals) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, idxName(seq)), encodeIndexV1(seq, int64(len(b)), entries), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := encodeManifest(manifest{gen: 1, nextSeq: uint32(len(seqs) + 1), packs: seqs})
	if err := os.WriteFile(filepath.Join(dir, manifestName), m, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A store written in format version 1 opens, reads, verifies, takes new
// values (in version-2 packs), and Purge moves its live values into version-2
// packs with the dead value's bytes gone from disk.
func TestOpenVersion1Store(t *testing.T) {
	for _, tail := range []bool{false, true} {
		dir := t.TempDir()
		var vals [][]byte
		for i := range 9 {
			vals = append(vals, text(uint64(100+i), 600+i))
		}
		secret := []byte("a secret message no live value contains, repeated to be long enough to compress: xyzzy xyzzy xyzzy")
		vals = append(vals, secret)
		writeV1Store(t, dir, vals, 4, tail)

		if dv, err := VerifyDir(dir); err != nil || !dv.Clean() || dv.Values != len(vals) {
			t.Fatalf("tail unindexed %v: VerifyDir of a version-1 store: %+v, %v", tail, dv, err)
		}
		s := mustOpen(t, Options{Dir: dir})
		if n := len(s.Corruptions()); n != 0 {
			t.Fatalf("tail unindexed %v: %d corruptions reported: %v", tail, n, s.Corruptions())
		}
		for i, v := range vals {
			got, err := s.Get(RefOf(v))
			if err != nil || !bytes.Equal(got, v) {
				t.Fatalf("tail unindexed %v: value %d: %v", tail, i, err)
			}
		}
		fresh := text(999, 2000)
		if _, isNew, err := s.Put(fresh); err != nil || !isNew {
			t.Fatalf("put: new %v, %v", isNew, err)
		}
		if _, isNew, _ := s.Put(vals[0]); isNew {
			t.Fatal("a value of the version-1 store was stored again")
		}
		keep := append(vals[:len(vals)-1:len(vals)-1], fresh)
		st, err := s.Purge(func(yield func(Ref) bool) {
			for _, v := range keep {
				yield(RefOf(v))
			}
		})
		if err != nil || st.Deleted != 1 {
			t.Fatalf("purge: %+v, %v", st, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		assertNotOnDisk(t, dir, secret)
		s = mustOpen(t, Options{Dir: dir})
		for i, v := range keep {
			got, err := s.Get(RefOf(v))
			if err != nil || !bytes.Equal(got, v) {
				t.Fatalf("after purge and reopen, value %d: %v", i, err)
			}
		}
		if s.Has(RefOf(secret)) {
			t.Fatal("the purged value is still indexed")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if dv, err := VerifyDir(dir); err != nil || !dv.Clean() || dv.Values != len(keep) {
			t.Fatalf("VerifyDir after purge: %+v, %v", dv, err)
		}
	}
}

// assertNotOnDisk fails if any file of dir holds needle in its raw bytes or
// in a zstd frame's decompressed bytes (every record of a pack is checked by
// a scan).
func assertNotOnDisk(t *testing.T, dir string, needle []byte) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, needle) {
			t.Fatalf("%s holds the erased bytes", e.Name())
		}
		if _, ok := parseSeqName(e.Name(), packSuffix); !ok || len(b) < packHeaderSize {
			continue
		}
		version := b[4]
		_, err = scanPack(bytes.NewReader(b), packHeaderSize, int64(len(b)), version, func(off int64, rec record) {
			var raw []byte
			if version == 1 {
				h, _ := parseRecordHeader(b[off:])
				raw, _ = decodeBody(h, b[off+recordHeaderSize:off+rec.size])
			} else {
				h, _ := parseFrameHeader(b[off:])
				raw, _ = decodeFrame(h, b[off+int64(h.hdrLen):off+rec.size])
			}
			if bytes.Contains(raw, needle) {
				t.Fatalf("a record of %s at %d holds the erased bytes", e.Name(), off)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
