package valuestore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// corruptFixture is a closed store of 20 values in 4 KiB packs (three values a
// pack), with every value's location.
type corruptFixture struct {
	dir  string
	vals [][]byte
	locs []loc
}

func newCorruptFixture(t *testing.T) *corruptFixture {
	f := &corruptFixture{dir: t.TempDir()}
	s := mustOpen(t, Options{Dir: f.dir, PackBytes: 4 << 10, FrameBytes: 1})
	for i := range 20 {
		v := randomBytes(uint64(i), 1200)
		if _, _, err := s.Put(v); err != nil {
			t.Fatal(err)
		}
		f.vals = append(f.vals, v)
		f.locs = append(f.locs, s.index[RefOf(v)])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *corruptFixture) file(name string) string { return filepath.Join(f.dir, name) }

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptionTable(t *testing.T) {
	// Values 4..7 live in pack 2; value 5 is its second record.
	type damage struct {
		file string
		off  int64
	}
	cases := []struct {
		name   string
		mutate func(t *testing.T, f *corruptFixture)
		open   func(f *corruptFixture) []damage // reported by Open
		lost   []int                            // values that may not be read
		verify func(f *corruptFixture) []damage // reported by Get/Verify
	}{
		{
			name: "bit flip in a record body, indexed pack",
			mutate: func(t *testing.T, f *corruptFixture) {
				flipByte(t, f.file(packName(2)), int64(f.locs[5].off)+recordHeaderSize+100)
			},
			lost:   []int{5},
			verify: func(f *corruptFixture) []damage { return []damage{{packName(2), int64(f.locs[5].off)}} },
		},
		{
			name:   "bit flip in a record header, indexed pack",
			mutate: func(t *testing.T, f *corruptFixture) { flipByte(t, f.file(packName(2)), int64(f.locs[5].off)+33) },
			lost:   []int{5},
			verify: func(f *corruptFixture) []damage { return []damage{{packName(2), int64(f.locs[5].off)}} },
		},
		{
			name: "bit flip in a record, pack without index (scanned)",
			mutate: func(t *testing.T, f *corruptFixture) {
				if err := os.Remove(f.file(idxName(2))); err != nil {
					t.Fatal(err)
				}
				flipByte(t, f.file(packName(2)), int64(f.locs[5].off)+recordHeaderSize+7)
			},
			open: func(f *corruptFixture) []damage { return []damage{{packName(2), int64(f.locs[5].off)}} },
			lost: []int{5},
		},
		{
			name:   "bit flip in a pack index",
			mutate: func(t *testing.T, f *corruptFixture) { flipByte(t, f.file(idxName(2)), idxHeaderSize+idxEntrySize+3) },
			open: func(f *corruptFixture) []damage {
				fi, err := os.Stat(f.file(idxName(2)))
				if err != nil {
					panic(err)
				}
				return []damage{{idxName(2), fi.Size() - 4}} // the checksum field
			},
		},
		{
			name: "truncated pack",
			mutate: func(t *testing.T, f *corruptFixture) {
				if err := os.Truncate(f.file(packName(2)), int64(f.locs[7].off)+100); err != nil {
					t.Fatal(err)
				}
			},
			open: func(f *corruptFixture) []damage {
				return []damage{{packName(2), int64(f.locs[7].off) + 100}, {packName(2), int64(f.locs[7].off)}}
			},
			lost: []int{7},
		},
		{
			name:   "missing pack",
			mutate: func(t *testing.T, f *corruptFixture) { os.Remove(f.file(packName(2))) },
			open:   func(f *corruptFixture) []damage { return []damage{{packName(2), 0}} },
			lost:   []int{4, 5, 6, 7},
		},
		{
			name:   "bit flip in a pack header",
			mutate: func(t *testing.T, f *corruptFixture) { flipByte(t, f.file(packName(2)), 9) },
			open:   func(f *corruptFixture) []damage { return []damage{{packName(2), 12}} },
			lost:   []int{4, 5, 6, 7},
		},
		{
			name:   "bit flip in the manifest",
			mutate: func(t *testing.T, f *corruptFixture) { flipByte(t, f.file(manifestName), manifestHeaderSize+2) },
			open: func(f *corruptFixture) []damage {
				b, _ := os.ReadFile(f.file(manifestName))
				return []damage{{manifestName, int64(len(b) - 4)}}
			},
		},
		{
			name:   "manifest missing",
			mutate: func(t *testing.T, f *corruptFixture) { os.Remove(f.file(manifestName)) },
			open:   func(f *corruptFixture) []damage { return []damage{{manifestName, 0}} },
		},
		{
			name: "manifest truncated",
			mutate: func(t *testing.T, f *corruptFixture) {
				if err := os.Truncate(f.file(manifestName), 10); err != nil {
					t.Fatal(err)
				}
			},
			open: func(f *corruptFixture) []damage { return []damage{{manifestName, 0}} },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newCorruptFixture(t)
			tc.mutate(t, f)
			s, err := Open(Options{Dir: f.dir, PackBytes: 4 << 10})
			if err != nil {
				t.Fatalf("open must isolate damage, not fail: %v", err)
			}
			defer s.Close()
			got := func(ces []*CorruptionError) []damage {
				var out []damage
				for _, ce := range ces {
					rel, _ := filepath.Rel(f.dir, ce.File)
					out = append(out, damage{rel, ce.Offset})
				}
				return out
			}
			var wantOpen []damage
			if tc.open != nil {
				wantOpen = tc.open(f)
			}
			if g := got(s.Corruptions()); !slices.Equal(g, wantOpen) {
				t.Fatalf("Open reported %v (%v), want %v", g, s.Corruptions(), wantOpen)
			}
			for i, v := range f.vals {
				_, err := s.Get(RefOf(v))
				if err == nil || slices.Contains(tc.lost, i) {
					continue
				}
				t.Errorf("value %d unreadable although not damaged: %v", i, err)
			}
			bad, err := s.Verify()
			if err != nil {
				t.Fatal(err)
			}
			var wantVerify []damage
			if tc.verify != nil {
				wantVerify = tc.verify(f)
			}
			if g := got(bad); !slices.Equal(g, wantVerify) {
				t.Fatalf("Verify reported %v, want %v", g, wantVerify)
			}
			for _, i := range tc.lost {
				_, err := s.Get(RefOf(f.vals[i]))
				if tc.verify != nil && !IsCorruption(err) {
					t.Fatalf("Get of damaged value %d: %v, want a CorruptionError", i, err)
				}
				if tc.verify == nil && !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get of lost value %d: %v, want ErrNotFound", i, err)
				}
			}
			// The damaged store still accepts writes, and damage stays isolated
			// across a restart.
			if _, _, err := s.Put([]byte("after damage")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestUnsupportedVersionIsNotCorruption(t *testing.T) {
	f := newCorruptFixture(t)
	b, err := os.ReadFile(f.file(manifestName))
	if err != nil {
		t.Fatal(err)
	}
	b[4] = 2
	end := len(b) - 4
	le.PutUint32(b[end:], crc(b[:end]))
	if err := os.WriteFile(f.file(manifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: f.dir})
	if !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("open of a version-2 manifest: %v, want ErrUnsupportedVersion", err)
	}
	if _, err := os.Stat(f.file(packName(1))); err != nil {
		t.Fatalf("packs must be left alone: %v", err)
	}
}
