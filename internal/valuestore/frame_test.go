package valuestore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Values Put one after the other share a frame: they are readable before the
// frame is written, survive a restart, and take fewer bytes on disk than the
// same values in a record each (zstd sees their shared vocabulary, and a
// frame's header is shared).
func TestFramesShareRecordsAndBytes(t *testing.T) {
	var vals [][]byte
	for i := range 64 {
		vals = append(vals, text(uint64(i), 300+i))
	}
	disk := map[int]int64{}
	for _, fb := range []int{1, DefaultFrameBytes} {
		dir := t.TempDir()
		s := mustOpen(t, Options{Dir: dir, FrameBytes: fb})
		for _, v := range vals {
			if _, _, err := s.Put(v); err != nil {
				t.Fatal(err)
			}
			mustGet(t, s, RefOf(v), v) // readable at once, written or not
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		records := map[uint32]bool{}
		for _, v := range vals {
			records[s.index[RefOf(v)].off] = true
		}
		if fb == 1 && len(records) != len(vals) || fb > 1 && len(records) > len(vals)/8 {
			t.Fatalf("FrameBytes %d: %d values in %d records", fb, len(vals), len(records))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = mustOpen(t, Options{Dir: dir, FrameBytes: fb})
		for _, v := range vals {
			mustGet(t, s, RefOf(v), v)
		}
		disk[fb] = s.Stats().DiskBytes
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if disk[DefaultFrameBytes] > disk[1]*2/3 {
		t.Fatalf("frames take %d bytes, a record a value %d: want at most 2/3", disk[DefaultFrameBytes], disk[1])
	}
}

// A pack whose frames no index covers (the process stopped after Sync, before
// Close) is scanned at Open: each value's hash is recomputed from its frame.
func TestUnindexedFramesAreScanned(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	var vals [][]byte
	for i := range 40 {
		vals = append(vals, text(uint64(i), 200+i*10))
		if _, _, err := s.Put(vals[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	// The files as a crash after Sync leaves them: no index yet.
	crashed := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashed, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(crashed, idxName(1))); !os.IsNotExist(err) {
		t.Fatalf("the copy has an index (%v): nothing would be scanned", err)
	}
	s = mustOpen(t, Options{Dir: crashed})
	defer s.Close()
	if st := s.OpenStats(); st.RecordsScanned == 0 || st.RecordsScanned >= len(vals) {
		t.Fatalf("%d records scanned for %d values in frames", st.RecordsScanned, len(vals))
	}
	for _, v := range vals {
		mustGet(t, s, RefOf(v), v)
	}
}

// Erasure: a value that shares its frame with live values leaves the disk when
// Purge runs, including when an earlier Collect dropped it from the index and
// a restart came in between (the pack index counts every value of the pack,
// so the dead one is known to be there).
func TestPurgeRemovesAValueFromItsFrame(t *testing.T) {
	secret := []byte("my card number is 4929 1234 5678 9012 and my address is 12 rue des Lilas, please keep it")
	for _, restart := range []bool{false, true} {
		dir := t.TempDir()
		s := mustOpen(t, Options{Dir: dir})
		var live [][]byte
		for i := range 6 {
			live = append(live, text(uint64(i), 400))
		}
		for _, v := range [][]byte{live[0], live[1], live[2], secret, live[3], live[4], live[5]} {
			if _, _, err := s.Put(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		if s.index[RefOf(secret)].off != s.index[RefOf(live[0])].off {
			t.Fatal("the secret is not in the live values' frame: the test tests nothing")
		}
		yieldLive := func(yield func(Ref) bool) {
			for _, v := range live {
				yield(RefOf(v))
			}
		}
		if restart {
			// Collect drops the secret from the index but keeps the mostly
			// live pack; the index written at Close does not list it.
			if st, err := s.Collect(yieldLive); err != nil || st.Deleted != 1 || st.PacksRewritten != 0 {
				t.Fatalf("collect: %+v, %v", st, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = mustOpen(t, Options{Dir: dir})
		}
		st, err := s.Purge(yieldLive)
		if err != nil || st.PacksRewritten != 1 {
			t.Fatalf("restart %v: purge: %+v, %v", restart, st, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		assertNotOnDisk(t, dir, secret[:40])
		s = mustOpen(t, Options{Dir: dir})
		for _, v := range live {
			mustGet(t, s, RefOf(v), v)
		}
		if _, err := s.Get(RefOf(secret)); err == nil {
			t.Fatal("the purged value is readable")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if dv, err := VerifyDir(dir); err != nil || !dv.Clean() || dv.Values != len(live) {
			t.Fatalf("VerifyDir: %+v, %v", dv, err)
		}
	}
}

// A damaged frame loses only its own values; Open's scan resumes at the next
// frame.
func TestDamagedFrameIsIsolated(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir, FrameBytes: 1 << 10})
	var vals [][]byte
	for i := range 30 {
		vals = append(vals, text(uint64(i), 300))
		if _, _, err := s.Put(vals[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	hit := s.index[RefOf(vals[10])]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, packName(hit.pack))
	if err := os.Remove(filepath.Join(dir, idxName(hit.pack))); err != nil {
		t.Fatal(err)
	}
	flipByte(t, path, int64(hit.off)+int64(hit.size)-5) // in the frame's body
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	if c := s.Corruptions(); len(c) != 1 || c[0].Offset != int64(hit.off) {
		t.Fatalf("corruptions %v, want one at %d", c, hit.off)
	}
	lost := 0
	for _, v := range vals {
		got, err := s.Get(RefOf(v))
		if err != nil {
			lost++
			continue
		}
		if !bytes.Equal(got, v) {
			t.Fatal("a value read back differs")
		}
	}
	if lost == 0 || lost > 4 {
		t.Fatalf("%d values lost, want those of one 1 KiB frame", lost)
	}
}

// Values that compress well only together take more room once the frame is
// written again without its dead values: Purge must still find pack
// sequences for all of them.
func TestPurgeRewritesFramesThatGrow(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir, PackBytes: 1 << 10})
	defer s.Close()
	base := randomBytes(1, 400)
	var keep [][]byte
	for i := range 100 {
		v := bytes.Clone(base)
		v[i] ^= 0xff
		if _, _, err := s.Put(v); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			keep = append(keep, v)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	st, err := s.Purge(func(yield func(Ref) bool) {
		for _, v := range keep {
			yield(RefOf(v))
		}
	})
	// The kept values' shares of their frames add up to less than one pack;
	// written alone they fill four.
	if err != nil || st.Deleted != 90 || st.PacksWritten < 3 {
		t.Fatalf("purge: %+v, %v", st, err)
	}
	for _, v := range keep {
		mustGet(t, s, RefOf(v), v)
	}
}

// A Reader returns what Get returns, for values in frames it has decoded,
// pending values and values moved by a Purge since it decoded their frame.
func TestReaderReusesFrames(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	defer s.Close()
	var vals [][]byte
	for i := range 60 {
		vals = append(vals, text(uint64(i), 150+i))
		if _, _, err := s.Put(vals[i]); err != nil {
			t.Fatal(err)
		}
		if i == 49 {
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := s.NewReader()
	for range 2 {
		for _, v := range vals {
			got, err := r.Get(RefOf(v))
			if err != nil || !bytes.Equal(got, v) {
				t.Fatalf("reader get: %v", err)
			}
		}
	}
	if _, err := s.Purge(func(yield func(Ref) bool) {
		for _, v := range vals[1:] {
			yield(RefOf(v))
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, v := range vals[1:] {
		got, err := r.Get(RefOf(v))
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("reader get after purge: %v", err)
		}
	}
	if _, err := r.Get(RefOf(vals[0])); err == nil {
		t.Fatal("reader returned a purged value")
	}
}
